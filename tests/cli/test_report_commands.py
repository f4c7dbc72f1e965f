"""iron config, iron clean and iron update (pip is never run here)."""

import json
import subprocess
import sys

import pytest

from iron import config
from iron.cli import update_cmd
from iron.cli.main import main
from iron.harness import build_marker, measured
from iron.codegen import diskcache


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in config.OPTIONS:
        monkeypatch.delenv(config.OPTIONS[name].env, raising=False)
    config.reload()
    yield tmp_path
    config.reload()


def _table(out):
    """The option rows of ``iron config``'s table, by option name."""
    return {line.split()[0]: line.split() for line in out.splitlines() if line.split()[:1] and
            line.split()[0] in config.OPTIONS}


# ------------------------------------------------------------------ config
def test_config_lists_every_option_with_its_source(project, monkeypatch, capsys):
    (project / "iron.toml").write_text('[iron]\nmodules = ["kernels"]\nbackend = "vulkan"\nbackned = "x"\n')
    monkeypatch.setenv("IRON_UNROLL_MAX", "16")
    config.reload()
    config.set_option("opt_level", 1)
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"iron config · iron.toml: {project / 'iron.toml'}"
    table = _table(out)
    assert set(config.OPTIONS) <= set(table)
    assert table["backend"][1:4] == ["vulkan", "iron.toml", "IRON_BACKEND"]
    assert table["unroll_max"][1:3] == ["16", "IRON_UNROLL_MAX"]
    assert table["opt_level"][1:5] == ["1", "set", "in", "code"]
    assert table["simd_width"][1:3] == ["32", "default"]
    assert "[iron] backned: no such option (ignored)" in out and "modules: no such" not in out


def test_config_one_option_and_json(project, capsys):
    assert main(["config", "cache_dir"]) == 0
    table = _table(capsys.readouterr().out)
    assert list(table) == ["cache_dir"] and table["cache_dir"][1:3] == ["auto", "default"]
    assert main(["config", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [o["name"] for o in doc["options"]] == list(config.OPTIONS)
    assert doc["toml"] is None and doc["cache_dir"] == str(config.cache_dir())
    assert main(["config", "nonsense"]) == 1
    assert "unknown option 'nonsense'" in capsys.readouterr().err


def test_config_reports_a_bad_value_clearly(project, monkeypatch, capsys):
    monkeypatch.setenv("IRON_OPT_LEVEL", "7")
    config.reload()
    assert main(["config"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("iron config: error: IRON_OPT_LEVEL: opt_level must be one of 0, 1, 2")


# ------------------------------------------------------------------ clean
@pytest.fixture
def dirty(project, monkeypatch):
    cache = project / "cache"
    monkeypatch.setenv("IRON_CACHE_DIR", str(cache))
    config.reload()
    for sub in ("spirv", "vulkan", "cuda"):  # as Iron's writers make them: a marked folder, envelopes
        assert diskcache.ensure_folder(cache / sub) is None
        assert diskcache.write(cache / sub / "entry", b"TEST", b"x" * 100, key="k") is None
    measured.save({"device": "Some GPU", "bandwidth_gbps": 1.0})
    (cache / "later").mkdir()   # unmarked, only Iron envelopes: an older Iron's cache folder, removed
    (cache / "later" / "blob").write_bytes(diskcache.wrap(b"TEST", b"...."))
    (cache / "foreign").mkdir()
    (cache / "foreign" / "notes.txt").write_text("mine")      # not Iron's: kept
    files = {"cuda/k.cu": b"// kernel"}
    (project / "build" / "iron" / "cuda").mkdir(parents=True)
    (project / "build" / "iron" / "cuda" / "k.cu").write_bytes(files["cuda/k.cu"])
    (project / "build" / "iron" / ".iron-build").write_bytes(build_marker.updated(project / "build" / "iron", files))
    (project / ".iron" / "snaps").mkdir(parents=True)           # baselines are never cleaned
    return cache


def test_clean_dry_run_lists_and_removes_nothing(dirty, project, capsys):
    assert main(["clean", "--dry-run"]) == 0
    out = capsys.readouterr().out
    for name in ("spirv", "vulkan", "cuda", "probes", "later"):
        assert f"would remove {dirty / name} (" in out
    assert "would remove build/iron (9 B)" in out and f"kept {dirty / 'foreign'}" in out
    assert "would remove 6 items" in out
    assert (dirty / "spirv" / "entry").exists() and (project / "build" / "iron").exists()


def test_clean_removes_iron_files_only(dirty, project, capsys):
    assert main(["clean"]) == 0
    out = capsys.readouterr().out
    assert "removed build/iron" in out and f"removed {dirty / 'cuda'}" in out
    assert sorted(p.name for p in dirty.iterdir()) == [".iron-cache", "foreign"]  # Iron made it; it holds a user file
    assert not (project / "build" / "iron").exists() and (project / ".iron" / "snaps").is_dir()
    assert main(["clean"]) == 0
    assert "nothing to clean" in capsys.readouterr().out


def test_clean_never_removes_a_build_dir_holding_anything_else(dirty, project, capsys):
    """--build-dir is the user's choice: pointing it at the project must not delete the project."""
    (project / "kernels.py").write_text("# the user's work")
    assert main(["clean", "--build-only", "--build-dir", "."]) == 2
    assert "refusing to clean the --build-dir .: . holds the" in capsys.readouterr().err
    assert (project / "kernels.py").is_file() and (project / "build" / "iron" / "cuda" / "k.cu").is_file()
    (project / "mine" / "cuda").mkdir(parents=True)
    (project / "mine" / "cuda" / "k.cu").write_text("// the user's kernel")
    assert main(["clean", "--build-only", "--build-dir", "mine"]) == 0
    assert "kept mine (no .iron-build marker" in capsys.readouterr().out
    assert (project / "mine" / "cuda" / "k.cu").is_file()


def test_clean_build_only_and_cache_only(dirty, project, capsys):
    assert main(["clean", "--build-only"]) == 0
    assert (dirty / "spirv").exists() and not (project / "build" / "iron").exists()
    assert main(["clean", "--cache-only"]) == 0
    assert not (dirty / "spirv").exists()


# ------------------------------------------------------------------ update
@pytest.fixture
def no_pip(monkeypatch):
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, fake_run.code)

    fake_run.code = 0
    monkeypatch.setattr(update_cmd.subprocess, "run", fake_run)
    fake_run.calls = calls
    return fake_run


PIP = f"{sys.executable} -m pip install --upgrade"


@pytest.mark.parametrize("argv, tail", [
    ([], "iron-kernels"),
    (["0.2.0"], "iron-kernels==0.2.0"),
    (["==1.0.0rc1", "--pre"], "--pre iron-kernels==1.0.0rc1"),
    (["git+https://github.com/o/iron@main"], "'iron-kernels @ git+https://github.com/o/iron@main'"),
    (["--ref", "v2", "--repo", "https://github.com/o/iron"], "'iron-kernels @ git+https://github.com/o/iron@v2'"),
])
def test_update_dry_run_prints_the_exact_pip_command(argv, tail, no_pip, capsys):
    assert main(["update", "--dry-run", *argv]) == 0
    assert capsys.readouterr().out == f"would run: {PIP} {tail}\n"
    assert no_pip.calls == []


def test_update_to_a_wheel_and_from_the_install_repository(tmp_path, no_pip, monkeypatch, capsys):
    wheel = tmp_path / "iron_kernels-0.2.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    assert main(["update", "--dry-run", str(wheel)]) == 0
    assert capsys.readouterr().out == f"would run: {PIP} --force-reinstall --no-deps {wheel}\n"
    assert main(["update", "--dry-run", str(tmp_path / "missing.whl")]) == 1
    assert "no wheel at" in capsys.readouterr().err
    monkeypatch.setattr(update_cmd, "installed", lambda: update_cmd.Installed("0.1.0", "https://x/iron.git", "git"))
    assert main(["update", "--dry-run", "--ref", "abc123"]) == 0
    assert "'iron-kernels @ git+https://x/iron.git@abc123'" in capsys.readouterr().out
    assert no_pip.calls == []


def test_update_refuses_unclear_targets(no_pip, monkeypatch, capsys):
    monkeypatch.setattr(update_cmd, "installed", lambda: update_cmd.Installed("0.1.0"))
    for argv, message in ((["latest!"], "not a version, a .whl file or a git+URL"),
                          (["--ref", "main"], "--ref needs --repo URL"),
                          (["--repo", "https://x"], "--repo goes with --ref"),
                          (["0.2.0", "--ref", "main", "--repo", "https://x"], "either a TARGET or --ref")):
        assert main(["update", "--dry-run", *argv]) == 1
        assert message in capsys.readouterr().err
    assert no_pip.calls == []


def test_update_runs_pip_and_reports(no_pip, monkeypatch, capsys):
    monkeypatch.setattr(update_cmd, "installed", lambda: update_cmd.Installed("0.1.0"))
    assert main(["update", "0.2.0"]) == 0
    assert no_pip.calls == [[sys.executable, "-m", "pip", "install", "--upgrade", "iron-kernels==0.2.0"]]
    assert "iron 0.1.0 -> 0.1.0" in capsys.readouterr().out
    no_pip.code = 1
    assert main(["update"]) == 1
    assert "pip failed (exit status 1)" in capsys.readouterr().err


def test_update_will_not_replace_an_editable_checkout(no_pip, monkeypatch, capsys):
    monkeypatch.setattr(update_cmd, "installed",
                        lambda: update_cmd.Installed("0.1.0", "file:///src/iron", None, editable=True))
    assert main(["update"]) == 1
    assert "editable install of /src/iron" in capsys.readouterr().err and no_pip.calls == []
    assert main(["update", "--force"]) == 0 and len(no_pip.calls) == 1

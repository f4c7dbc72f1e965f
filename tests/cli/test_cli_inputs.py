"""Bad input to the CLI gets a clear one-line error, never a traceback (issue 16, items 8, 10 and 18)."""

import sys
import uuid

import pytest

from iron import config
from iron.cli import render
from iron.cli.init_cmd import KERNELS
from iron.cli.main import main
from iron.core.protocol import BenchRow, ProfileInfo
from iron.harness import discovery, project, registry


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A fresh working folder; sys.path and the options as they were afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for opt in config.OPTIONS.values():
        monkeypatch.delenv(opt.env, raising=False)
    monkeypatch.setattr(config, "_warned", set())
    config.reload()
    registry.clear()  # each test's module registers its own kernels
    yield tmp_path
    registry.clear()
    config.reload()


def _module_name():
    return f"user_kernels_{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("argv", [["inspect", "axpy"], ["inspect", "kernels:axpy"], ["build", "-m", "kernels.py"],
                                  ["config"], ["test"], ["bench"], ["clean", "--dry-run"]])
def test_a_malformed_iron_toml_is_reported_cleanly_by_every_command(here, argv, capsys):
    (here / "iron.toml").write_text("[iron\nmodules = ['kernels']\n")
    (here / "kernels.py").write_text(KERNELS)
    config.reload()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"iron {argv[0]}: error: {here / 'iron.toml'}: cannot read the configuration: " in err
    assert "Traceback" not in err


def test_module_name_and_dash_m_find_a_module_in_the_working_folder(here, capsys):
    name = _module_name()
    (here / f"{name}.py").write_text(KERNELS)
    assert main(["inspect", f"{name}:axpy"]) == 0
    assert "// hash " in capsys.readouterr().out
    assert main(["build", "-m", name, "--emit", "manifest", "--out", str(here / "out")]) == 0
    assert (here / "out" / "manifest.json").is_file()


@pytest.mark.parametrize("how", ["module", "file", "project"])
def test_a_syntax_error_is_reported_at_the_users_file_line_and_column(here, how, capsys):
    name = _module_name()
    bad = here / f"{name}.py"
    bad.write_text("import iron\n\ndef broken(:\n    pass\n")
    if how == "project":
        (here / "iron.toml").write_text(f'[iron]\nmodules = ["{name}"]\n')
        config.reload()
        with pytest.raises(discovery.KernelNotFound) as info:
            project.load(name, project.find_project())
        message = str(info.value)
    else:
        assert main(["inspect", f"{name}:broken" if how == "module" else f"{bad}:broken"]) == 1
        message = capsys.readouterr().err
    assert f"{bad}:3:12: SyntaxError: " in message and "def broken(:" in message
    assert "frozen" not in message and "Traceback" not in message


def test_an_exception_in_a_module_body_names_the_users_line(here, capsys):
    name = _module_name()
    (here / f"{name}.py").write_text("x = 1\nraise RuntimeError('boom')\n")
    assert main(["inspect", f"{name}:k"]) == 1
    err = capsys.readouterr().err
    assert f"{here / name}.py:2: RuntimeError: boom" in err and "frozen" not in err


@pytest.mark.parametrize("command", ["test", "bench"])
def test_an_unknown_dtype_is_named_with_the_known_ones(here, command, capsys):
    assert main([command, "--dtype", "f32,f99"]) == 1
    err = capsys.readouterr().err
    assert f"iron {command}: error: --dtype: unknown dtype 'f99'; known: f16, bf16, f32" in err
    assert "no tests matched" not in err and "no benches matched" not in err


def test_config_shows_an_unusable_cache_dir_and_other_commands_still_run(here, monkeypatch, capsys):
    monkeypatch.setenv("IRON_CACHE_DIR", "~no_such_user_iron/cache")
    config.reload()
    assert main(["config"]) == 1
    out = capsys.readouterr().out
    assert "cache directory: error: IRON_CACHE_DIR: cache_dir '~no_such_user_iron/cache' cannot be used" in out
    (here / "k.py").write_text(KERNELS)
    assert main(["inspect", f"{here / 'k.py'}:axpy"]) == 0
    assert main(["clean", "--dry-run"]) == 1
    assert capsys.readouterr().err.startswith("iron clean: error: IRON_CACHE_DIR: ")


def test_config_warns_about_a_misspelt_variable_and_key(here, monkeypatch, capsys):
    (here / "iron.toml").write_text("[iron]\nbackned = \"interp\"\n")
    monkeypatch.setenv("IRON_BAKCEND", "interp")
    config.reload()
    assert main(["config"]) == 0
    captured = capsys.readouterr()
    assert "warning: IRON_BAKCEND: no such variable (ignored); did you mean IRON_BACKEND?" in captured.out
    assert "[iron] backned: no such option (ignored); did you mean backend?" in captured.out
    assert captured.err == "", "iron config shows the warnings once, in its report"


# ---------------------------------------------------------------- iron diff: wrong results are not slowdowns
def _row(shape, us, ok=True, error=None):
    return BenchRow(bench="std/add", kernel="add", shape=shape, dtype="f32", backend="cuda", ok=ok, iron_us=us,
                    iron=ProfileInfo(bytes_moved=1 << 20, gbps=(1 << 20) / us / 1e3 if us else None), error=error)


def _snap(here, rows, name):
    src = here / f"{name}-bench.json"
    src.write_text(render.dumps(render.bench_document(rows, "NVIDIA H200", "cuda")))
    assert main(["snap", "--from", str(src), "--out", str(here / f"{name}.json")]) == 0
    return str(here / f"{name}.json")


def test_diff_heads_correctness_failures_apart_from_slowdowns(here, capsys):
    base = _snap(here, [_row("N=1M", 100.0), _row("N=4M", 400.0)], "base")
    failing = _snap(here, [_row("N=1M", 100.0), _row("N=4M", None, ok=False, error="mismatch")], "failing")
    capsys.readouterr()
    assert main(["diff", base, failing]) == 1
    out = capsys.readouterr().out
    assert "1 correctness failure (rows that passed in the baseline fail now):" in out
    assert "✗ std/add N=4M f32: now failing (mismatch)" in out and "past 5%" not in out
    both = _snap(here, [_row("N=1M", 120.0), _row("N=4M", None, ok=False, error="mismatch")], "both")
    capsys.readouterr()
    assert main(["diff", base, both]) == 1
    out = capsys.readouterr().out
    failures, slowdowns = out.index("1 correctness failure"), out.index("1 regression past 5%:")
    assert out.index("now failing") < slowdowns < out.index("N=1M f32: +20.0% time")
    assert failures < slowdowns

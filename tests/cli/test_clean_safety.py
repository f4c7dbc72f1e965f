"""``iron clean`` deletes only what Iron wrote: never a user's folder that merely has one of Iron's names.

A home-like tree holds the user's own ``cuda/``, ``metal/``, ``hip/``,
``spirv/``, ``vulkan/`` and ``probes/`` folders; Iron's writers fill their own
(marked) cache folders; symlinks point outside.  Cleaning must remove Iron's
files and leave every byte of the user's, refuse a cache or build folder that
is the home folder, a file-system root or holds the project, and never
follow a symlink.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iron import In, Tensor, config, f32, kernel
from iron.cli.main import main
from iron.codegen.toolchains import spirv as spirv_toolchain
from iron.config.safe_paths import unsafe_folder_reason
from iron.harness import build_marker, measured
from iron.lang import program_id
from iron.codegen import diskcache
from iron.codegen import cache as cachekey
from iron.codegen.cache import ArtifactStore, Entry

@kernel
def double(x: In[f32], y: Tensor[f32]):
    i = program_id(0)
    y[i] = 2.0 * x[i]


NAMES = ("cuda", "metal", "hip", "spirv", "vulkan", "probes")


def _snapshot(root: Path) -> dict[str, bytes | str]:
    """Every path under ``root`` (symlinks not followed) with its content or link target."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            out[rel] = f"-> {os.readlink(p)}" if p.is_symlink() else ("<dir>" if p.is_dir() else p.read_bytes())
    return out


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home folder (HOME) with the user's own folders named as Iron's caches, and a project in it."""
    home = tmp_path / "home"
    for name in NAMES:
        (home / name / "sub").mkdir(parents=True)
        (home / name / "notes.txt").write_text(f"the user's {name} notes")
        (home / name / "sub" / "data.bin").write_bytes(os.urandom(64))
    (home / "cuda" / "k.cu").write_text("__global__ void k() {}")
    (home / "probes" / "gpu.json").write_text('{"mine": true}')
    project = home / "proj"
    project.mkdir()
    (project / "iron.toml").write_text("[iron]\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for name in config.OPTIONS:
        monkeypatch.delenv(config.OPTIONS[name].env, raising=False)
    monkeypatch.chdir(project)
    config.reload()
    yield home
    config.reload()


def _use_cache(monkeypatch, cache: Path | str) -> None:
    monkeypatch.setenv("IRON_CACHE_DIR", str(cache))
    config.reload()


def _fill_iron_caches(cache: Path) -> None:
    """Iron's writers at work: a CUDA module entry, a probe record, and (when glslc is here) SPIR-V."""
    parts = cachekey.components(target="cuda", ir_hash="a" * 64, source="// k", toolchain="nvrtc 13.0",
                                arch="sm_90", kind="cubin", options=[], profile="cuda:sm_90")
    store = ArtifactStore(cache / "cuda")
    assert store.write(cachekey.digest(parts), Entry(parts, "k", b"\x7fELF" + bytes(124), {}), ".cubin") is None
    assert measured.save({"device": "Some GPU", "bandwidth_gbps": 100.0}) == cache / "probes" / "some-gpu.json"
    assert diskcache.ensure_folder(cache / "vulkan") is None
    assert diskcache.write(cache / "vulkan" / "pipelines-x.bin", b"VKPC", b"driver data", "pipelines-x") is None
    if spirv_toolchain.available():
        from iron.codegen.cache import ArtifactCache
        from iron.codegen.compiler import CompileOptions, compile

        compile(double.ir(), "spirv", CompileOptions(binary="spirv"), cache=ArtifactCache(cache))
        assert list((cache / "spirv").glob("*.spv"))


# ------------------------------------------------------------ refusals
@pytest.mark.parametrize("dry", [False, True])
def test_a_cache_folder_that_is_home_is_refused_and_nothing_is_touched(home, monkeypatch, capsys, dry):
    _use_cache(monkeypatch, home)
    before = _snapshot(home)
    assert main(["clean", "--cache-only", *(["--dry-run"] if dry else [])]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("iron clean: error: IRON_CACHE_DIR: cache_dir ")
    assert "cannot be used" in err[0] and "your home folder" in err[0]
    assert _snapshot(home) == before


@pytest.mark.parametrize("where", [".", "..", "home-link"])
def test_a_cache_folder_holding_the_project_is_refused(home, monkeypatch, capsys, where):
    if where == "home-link":
        os.symlink(home, home.parent / "home-link")
        where = str(home.parent / "home-link")
    _use_cache(monkeypatch, where)
    before = _snapshot(home)
    assert main(["clean"]) == 1
    err = capsys.readouterr().err
    assert "cache_dir" in err and "cannot be used" in err and ("holds the project" in err or "home folder" in err)
    assert _snapshot(home) == before


def test_dry_run_with_a_cache_folder_of_root_refuses_without_walking(home, monkeypatch, capsys):
    _use_cache(monkeypatch, "/")

    def no_walk(*args, **kwargs):
        raise AssertionError("iron clean walked the file system")

    monkeypatch.setattr(os, "scandir", no_walk)
    monkeypatch.setattr(os, "walk", no_walk)
    monkeypatch.setattr(Path, "iterdir", no_walk)
    monkeypatch.setattr(Path, "rglob", no_walk)
    assert main(["clean", "--dry-run"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cache_dir '/' cannot be used: / is a file-system root" in err[0]
    assert "~/.cache/iron" in err[0]


def test_a_build_dir_that_is_home_or_the_project_is_refused(home, capsys):
    before = _snapshot(home)
    for build_dir in (str(home), ".", "/"):
        assert main(["clean", "--build-only", "--build-dir", build_dir]) == 2
        assert "refusing to clean the --build-dir" in capsys.readouterr().err
    assert _snapshot(home) == before


def test_unsafe_folder_reason(home, tmp_path):
    project = home / "proj"
    assert "file-system root" in unsafe_folder_reason(Path("/"), project)
    assert "is your home folder" in unsafe_folder_reason(home, project)
    assert "holds your home folder" in unsafe_folder_reason(home.parent, project)
    assert "holds the project" in unsafe_folder_reason(project, project)
    (tmp_path / "elsewhere" / "proj2").mkdir(parents=True)
    assert "holds the project" in unsafe_folder_reason(tmp_path / "elsewhere", tmp_path / "elsewhere" / "proj2")
    assert unsafe_folder_reason(home / ".cache" / "iron", project) is None
    assert unsafe_folder_reason(project / "build" / "iron", project) is None


# ------------------------------------------------------------ only Iron's files go
def test_the_default_cache_in_a_home_tree_removes_only_irons_caches(home, capsys):
    cache = config.cache_dir()
    assert cache == home / ".cache" / "iron"
    _fill_iron_caches(cache)
    (cache / "cuda" / "my-notes.txt").write_text("kept: the user's, though in Iron's folder")
    user = {k: v for k, v in _snapshot(home).items() if not k.startswith(".cache")}
    assert main(["clean", "--dry-run"]) == 0
    assert (cache / "probes" / "some-gpu.json").is_file()
    assert main(["clean"]) == 0
    out = capsys.readouterr().out
    assert f"removed {cache / 'probes'}" in out and f"removed {cache / 'vulkan'}" in out
    assert "kept 1 that are not Iron's" in out
    assert sorted(p.name for p in cache.iterdir()) == [".iron-cache", "cuda"]
    assert sorted(p.name for p in (cache / "cuda").iterdir()) == [".iron-cache", "my-notes.txt"]
    assert {k: v for k, v in _snapshot(home).items() if not k.startswith(".cache")} == user
    (cache / "cuda" / "my-notes.txt").unlink()
    assert main(["clean"]) == 0
    assert not cache.exists(), "a cache folder Iron made, empty of all but its markers, goes"


def test_a_user_folder_as_cache_keeps_the_users_same_named_folders(home, monkeypatch, capsys):
    cache = home / "shared"
    for name in ("cuda", "metal", "hip", "probes"):  # the user's, made before Iron ran
        (cache / name).mkdir(parents=True)
        (cache / name / "k.txt").write_text(name)
    _use_cache(monkeypatch, cache)
    _fill_iron_caches(cache)  # writes into the user's cuda/ and probes/, and makes spirv/ and vulkan/
    assert not diskcache.is_marked(cache) and not diskcache.is_marked(cache / "cuda")
    assert main(["clean"]) == 0
    out = capsys.readouterr().out
    assert f"removed {cache / 'vulkan'}" in out and f"kept {cache / 'cuda'} (no .iron-cache marker" in out
    for name in ("cuda", "metal", "hip", "probes"):
        assert (cache / name / "k.txt").read_text() == name
    assert not (cache / "vulkan").exists() and not (cache / "spirv").exists()


def test_symlinks_out_of_a_cache_are_not_followed(home, monkeypatch, tmp_path, capsys):
    cache = home / ".cache" / "iron"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "blob").write_bytes(diskcache.wrap(b"TEST", b"looks like Iron's"))
    (outside / "sub").mkdir()
    (outside / "sub" / "blob").write_bytes(diskcache.wrap(b"TEST", b"looks like Iron's"))
    assert diskcache.ensure_folder(cache / "spirv") is None
    assert diskcache.write(cache / "spirv" / "a.spv", b"SPV1", b"x", "a") is None
    os.symlink(outside, cache / "spirv" / "link")         # a link inside Iron's folder
    os.symlink(outside / "blob", cache / "spirv" / "file-link")
    os.symlink(outside, cache / "cuda")                    # a link in place of one of Iron's folders
    before = _snapshot(outside)
    assert main(["clean", "--cache-only"]) == 0
    out = capsys.readouterr().out
    assert f"kept {cache / 'cuda'} (a symlink: not followed)" in out
    assert _snapshot(outside) == before
    assert not (cache / "spirv" / "a.spv").exists()
    assert (cache / "spirv" / "link").is_symlink() and (cache / "spirv" / "file-link").is_symlink()


# ------------------------------------------------------------ build folders
def test_a_build_dir_of_the_users_is_kept(home, capsys):
    mine = home / "proj" / "mine"
    (mine / "cuda").mkdir(parents=True)
    (mine / "hip").mkdir()
    (mine / "cuda" / "k.cu").write_text("// the user's CUDA")
    (mine / "hip" / "k.hip").write_text("// the user's HIP")
    before = _snapshot(mine)
    assert main(["clean", "--build-only", "--build-dir", str(mine)]) == 0
    assert f"kept {mine} (no .iron-build marker" in capsys.readouterr().out
    assert _snapshot(mine) == before


KERNELS = '''
from iron import kernel, Tensor, In, f32
from iron.lang import program_id

@kernel
def scale(a: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = a[i] * 2.0
'''


def test_iron_build_output_is_removed_file_by_file(home, capsys, tmp_path):
    project = home / "proj"
    (project / "kernels.py").write_text(KERNELS)
    out = project / "out"
    (out / "cuda").mkdir(parents=True)
    (out / "cuda" / "mine.cu").write_text("// the user's, in the build folder")
    (out / "README").write_text("the user's")
    assert main(["build", "-m", str(project / "kernels.py"), "--out", str(out), "--emit", "cuda,hip,ir"]) == 0
    listed = build_marker.read(out)
    assert set(listed) == {"cuda/scale.cu", "hip/scale.hip", "ir/scale.ir"}
    (out / "hip" / "scale.hip").write_text("// edited by the user after the build")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "scale.ir").write_bytes((out / "ir" / "scale.ir").read_bytes())
    (out / "ir" / "scale.ir").unlink()
    (out / "ir").rmdir()
    os.symlink(outside, out / "ir")  # the listed ir/scale.ir now lies behind a symlink: not followed
    capsys.readouterr()
    assert main(["clean", "--build-only", "--build-dir", str(out)]) == 0
    assert "removed 1 files of Iron's from" in capsys.readouterr().out
    assert not (out / "cuda" / "scale.cu").exists()
    assert (out / "cuda" / "mine.cu").is_file() and (out / "README").is_file()
    assert (out / "hip" / "scale.hip").read_text() == "// edited by the user after the build"
    assert (outside / "scale.ir").is_file()
    (out / "cuda" / "mine.cu").unlink()
    (out / "README").unlink()
    (out / "hip" / "scale.hip").unlink()
    (out / "ir").unlink()
    assert main(["clean", "--build-only", "--build-dir", str(out)]) == 0
    assert not out.exists()

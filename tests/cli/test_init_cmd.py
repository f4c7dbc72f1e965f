"""``iron init``: a new project whose test passes at once; nothing existing is ever overwritten."""

import errno
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from runner_testing import quick_runs, require_vulkan  # noqa: E402,F401

from iron import config  # noqa: E402
from iron.cli.main import main  # noqa: E402
from iron.harness.project import find_project  # noqa: E402


@pytest.mark.parametrize("backend", ["interp", "vulkan", None])
def test_init_then_test_passes(tmp_path, monkeypatch, quick_runs, backend, capsys):  # noqa: F811
    """None: no --backend at all, as a new user types it (auto: the best device here)."""
    if backend == "vulkan":
        require_vulkan()
    monkeypatch.chdir(tmp_path)
    assert main(["init", "fresh"]) == 0
    assert "cd fresh && iron test" in capsys.readouterr().out
    root = tmp_path / "fresh"
    assert find_project(root).modules == ("kernels",)
    monkeypatch.chdir(root)
    config.reload()
    assert main(["test"] + (["--backend", backend] if backend else [])) == 0
    out = capsys.readouterr().out
    assert "axpy_setup" in out and "15/15" in out and "15 passed, 0 failed" in out


def test_init_bench_passes_on_the_interpreter(tmp_path, monkeypatch, quick_runs, capsys):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0
    config.reload()
    assert main(["bench", "--backend", "interp"]) == 0
    out = capsys.readouterr().out
    assert "N=64K f32" in out and "3 rows: 3 ok" in out


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path, monkeypatch, capsys):
    (tmp_path / "kernels.py").write_text("# mine\n")
    assert main(["init", str(tmp_path)]) == 1
    assert "already exist" in capsys.readouterr().err
    assert (tmp_path / "kernels.py").read_text() == "# mine\n" and not (tmp_path / "iron.toml").exists()


def test_init_onto_a_dangling_symlink_writes_nothing(tmp_path, capsys):
    (tmp_path / "kernels.py").symlink_to(tmp_path / "nowhere.py")
    assert main(["init", str(tmp_path)]) == 1
    assert "already exist" in capsys.readouterr().err
    assert not (tmp_path / "iron.toml").exists() and not (tmp_path / "nowhere.py").exists()
    (tmp_path / "kernels.py").unlink()
    (tmp_path / "iron.toml").symlink_to(tmp_path / "elsewhere.toml")  # never written through
    assert main(["init", str(tmp_path)]) == 1
    assert not (tmp_path / "elsewhere.toml").exists() and not (tmp_path / "kernels.py").exists()


def test_init_onto_a_file_or_a_dangling_folder_link_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "f").write_text("mine\n")
    (tmp_path / "d").symlink_to(tmp_path / "gone")
    for target, message in [("f", "exists and is not a folder"), ("f/sub", "cannot create the folder"),
                            ("d", "symbolic link to nothing")]:
        assert main(["init", str(tmp_path / target)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("iron init: error: ") and message in err and "nothing was written" in err
    assert (tmp_path / "f").read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["d", "f"]


def test_init_that_cannot_write_leaves_nothing_half_written(tmp_path, monkeypatch, capsys):
    """The second file fails (an unwritable folder, a full disk): the first is removed, and the new folders."""
    real_open = os.open

    def refuse_kernels(path, flags, mode=0o777, **kw):
        if str(path).endswith("kernels.py"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(os, "open", refuse_kernels)
    assert main(["init", str(tmp_path / "new" / "proj")]) == 1
    err = capsys.readouterr().err
    assert "cannot write" in err and "Permission denied" in err and "nothing was written" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder")
def test_init_into_an_unwritable_folder_is_a_clear_error(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    assert main(["init", str(locked)]) == 1
    assert "Permission denied" in capsys.readouterr().err and list(locked.iterdir()) == []

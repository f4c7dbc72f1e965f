"""``iron init``: a new project whose test passes at once; nothing existing is ever overwritten."""

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

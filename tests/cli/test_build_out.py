"""``iron build --out`` where it cannot write: one clear line, exit code 2, nothing written or half-written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iron.cli import build_cmd
from iron.cli.main import main

KERNELS = '''
from iron import kernel, Tensor, In, f32
from iron.lang import program_id

@kernel
def scale(a: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = a[i] * 2.0
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "kernels.py").write_text(KERNELS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _build(project: Path, out: Path | str) -> int:
    return main(["build", "-m", str(project / "kernels.py"), "--out", str(out), "--emit", "cuda,hip,manifest"])


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def _one_error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("  building")]
    assert len(err) == 1, err
    assert err[0].startswith("iron build: error: --out") and "Traceback" not in err[0]
    return err[0]


def test_out_onto_an_existing_file(project, capsys):
    (project / "out").write_text("the user's file")
    before = _tree(project)
    assert _build(project, project / "out") == 2
    assert "is a file, not a folder" in _one_error_line(capsys)
    assert _tree(project) == before


def test_out_below_a_file(project, capsys):
    (project / "afile").write_text("x")
    before = _tree(project)
    assert _build(project, project / "afile" / "out") == 2
    assert "afile is a file, not a folder" in _one_error_line(capsys)
    assert _tree(project) == before


def test_out_in_an_unwritable_folder(project, capsys, monkeypatch):
    locked = project / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == locked else real_access(p, mode, **kw))
    if os.geteuid() != 0:  # a real read-only folder where permissions bind (not for root)
        monkeypatch.undo()
        locked.chmod(0o555)
    try:
        assert _build(project, locked / "out") == 2
        assert "cannot write in" in _one_error_line(capsys)
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


def test_a_folder_where_a_file_goes_stops_the_build_before_writing(project, capsys):
    out = project / "out"
    (out / "cuda" / "scale.cu").mkdir(parents=True)  # a folder where iron build writes a file
    before = _tree(project)
    assert _build(project, out) == 2
    assert "is a folder where iron build writes a file" in _one_error_line(capsys)
    assert _tree(project) == before, "part of the output was written"


def test_a_failing_write_is_one_clear_line(project, capsys, monkeypatch):
    def fail(result, out_dir):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(build_cmd, "write_atomically", fail)
    assert _build(project, project / "out") == 2
    assert "cannot write there (No space left on device)" in _one_error_line(capsys)

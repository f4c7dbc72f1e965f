"""``iron bench``: the table on interp and vulkan, every row checked against oracle and reference."""

import json
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from runner_testing import GOOD, quick_runs, require_vulkan, write_project  # noqa: E402,F401

from iron import config  # noqa: E402
from iron.cli.main import main  # noqa: E402

SLOW_REFERENCE_WRONG = textwrap.dedent('''
    import numpy as np
    from iron import In, Setup, Tensor, bench, f32, kernel
    from iron.lang import program_id

    @kernel
    def double(a: In[f32], out: Tensor[f32], n: int):
        i = program_id(0)
        if i < n:
            out[i] = a[i] * 2.0

    @bench(double, shapes=[1024], reference={"*": lambda a, out, n: a * 3})
    def double_setup(case):
        return Setup(args=[case.randn(1024), case.empty(1024), 1024], grid=1024, oracle=lambda a, out, n: 2 * a)
''')


@pytest.fixture
def project(tmp_path, monkeypatch, quick_runs):  # noqa: F811
    root = write_project(tmp_path / "proj", {"kernels": GOOD})
    monkeypatch.chdir(root)
    config.reload()
    return root


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_the_table_has_a_checked_row_per_shape_and_dtype(project, backend, capsys):
    if backend == "vulkan":
        require_vulkan()
    assert main(["bench", "--backend", backend]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("iron bench · ")
    header = next(ln for ln in lines if ln.startswith("Shape"))
    assert [c.strip() for c in header.split("│")] == ["Shape", "Iron(µs)", "Ref(GB/s)", "Iron(GB/s)", "Iron %",
                                                      "GFLOP/s", "ok"]
    rows = [ln for ln in lines if ln.startswith("N=4K")]
    assert [r.split("│")[0].strip() for r in rows] == ["N=4K f32", "N=4K f16"]
    assert all(r.rstrip().endswith("✓") for r in rows)
    for r in rows:
        cells = [c.strip() for c in r.split("│")]
        assert all(cells[1:6]), f"every figure measured: {r}"
    assert "2 rows: 2 ok" in out


def test_verbose_levels_add_columns_and_json_keeps_every_figure(project, capsys):
    assert main(["bench", "--backend", "interp", "-vv", "--dtype", "f32"]) == 0
    header = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("Shape"))
    assert "%BW" in header and "Bound" in header and "Min(µs)" in header and "Compile(ms)" in header
    assert main(["bench", "--backend", "interp", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "iron-bench" and doc["backend"] == "interp" and len(doc["rows"]) == 2
    for row in doc["rows"]:
        assert row["ok"] and row["samples"] == 5 and row["iron_us"] > 0 and row["ref_us"] > 0
        assert row["iron"]["gbps"] > 0 and row["iron"]["flops"] == 4096


def test_a_wrong_reference_fails_its_row_and_the_command(project, capsys):
    (project / "wrong.py").write_text(SLOW_REFERENCE_WRONG)
    assert main(["bench", "--backend", "interp", "-m", "wrong"]) == 1
    out = capsys.readouterr().out
    assert "✗" in out and "reference numpy" in out and "1 failed" in out


def test_save_writes_the_json_rows_while_the_table_prints(project, tmp_path, capsys):
    saved = tmp_path / "out" / "bench.json"
    saved.parent.mkdir()
    assert main(["bench", "--backend", "interp", "--save", str(saved)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("iron bench · ") and f"saved 2 rows to {saved}" in captured.err
    doc = json.loads(saved.read_text())
    assert doc["format"] == "iron-bench" and [r["dtype"] for r in doc["rows"]] == ["f32", "f16"]
    assert main(["snap", "--from", str(saved), "--out", str(tmp_path / "snap.json")]) == 0


def test_save_keeps_every_finished_row_while_the_run_goes_on(project, tmp_path, monkeypatch, capsys):
    """Each row is in the file as soon as it arrives: a bench killed half way keeps what it measured."""
    from iron.cli import bench_cmd

    saved = tmp_path / "bench.json"
    seen = []
    original = bench_cmd.RowSaver.row

    def row(self, r, result):
        original(self, r, result)
        doc = json.loads(saved.read_text())
        seen.append((len(doc["rows"]), doc["device"], doc["rows"][-1]["dtype"]))

    monkeypatch.setattr(bench_cmd.RowSaver, "row", row)
    assert main(["bench", "--backend", "interp", "--save", str(saved)]) == 0
    assert [(n, dtype) for n, _, dtype in seen] == [(1, "f32"), (2, "f16")]
    assert all(device != "unknown device" for _, device, _ in seen), "the device is known from the first row on"
    assert "saved 2 rows" in capsys.readouterr().err
    assert not list(tmp_path.glob(".bench.json.*")), "no temporary file is left behind"


def test_save_to_a_place_that_cannot_be_written_still_prints_the_table(project, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert main(["bench", "--backend", "interp", "--save", str(blocker / "bench.json")]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("iron bench · ") and "2 rows: 2 ok" in captured.out
    assert f"cannot write {blocker / 'bench.json'}" in captured.err and "the table below is all there is" in captured.err


def test_progress_goes_to_a_log_as_plain_lines(project, capfd):
    """Off a terminal (a log, CI) ``iron bench`` and ``iron snap`` say how far they are on stderr, plainly."""
    assert main(["bench", "--backend", "interp"]) == 0
    err = capfd.readouterr().err
    assert "[0/2] 0:0" in err and "elapsed · scale_setup" in err and "[2/2] done in " in err
    assert "\r" not in err and "\x1b" not in err
    assert main(["snap", "--backend", "interp", "--out", str(project / "snap.json")]) == 0
    captured = capfd.readouterr()
    assert "[0/2] 0:0" in captured.err and "[2/2] done in " in captured.err
    assert "saved 2 rows" in captured.out
    assert main(["bench", "--backend", "interp", "--json"]) == 0
    assert "elapsed" not in capfd.readouterr().err  # --json stays quiet

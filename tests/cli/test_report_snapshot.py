"""iron snap / iron diff: versioned baselines, per-row deltas, regressions exit 1, foreign files refused."""

import json
from dataclasses import replace

import pytest

from iron.cli import render, snap_cmd, snapshot
from iron.cli.main import main
from iron.core import protocol
from iron.core.protocol import BenchRow, ProfileInfo


def row(shape, us, dtype="f32", bench="std/add", ok=True, error=None):
    nbytes = 12 * 2**20
    return BenchRow(bench=bench, kernel="add", shape=shape, dtype=dtype, backend="cuda", ok=ok, iron_us=us,
                    iron=ProfileInfo(bytes_moved=nbytes, gbps=nbytes / us / 1e3 if us else None), error=error)


BASE = [row("N=1M", 100.0), row("N=4M", 400.0), row("N=16M", 1600.0), row("N=16M", 900.0, dtype="f16")]


def write_bench(path, rows, device="NVIDIA H200"):
    path.write_text(render.dumps(render.bench_document(rows, device, "cuda")))
    return path


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def snap(tmp, rows, name):
    src = write_bench(tmp / f"{name}-bench.json", rows)
    out = tmp / f"{name}.json"
    assert main(["snap", "--from", str(src), "--out", str(out)]) == 0
    return out


def test_snap_writes_a_versioned_snapshot_at_the_default_path(in_tmp, capsys):
    src = write_bench(in_tmp / "bench.json", BASE)
    assert main(["snap", "--from", str(src)]) == 0
    (path,) = (in_tmp / ".iron" / "snaps").glob("*.json")
    assert path.name.startswith("nvidia-h200-") and len(path.stem) == len("nvidia-h200-2025-01-01")
    data = json.loads(path.read_text())
    assert (data["format"], data["version"], data["device"], data["backend"]) == ("iron-snap", 1, "NVIDIA H200", "cuda")
    assert data["created"] and data["iron_version"]
    assert [snapshot.row_from_dict(r, "t") for r in data["rows"]] == BASE
    assert f"saved 4 rows (NVIDIA H200, cuda) to {path.relative_to(in_tmp)}" in capsys.readouterr().out
    assert not list(path.parent.glob(".*.tmp"))  # the atomic write left no temporary behind
    # A second snapshot the same day does not overwrite the first.
    assert main(["snap", "--from", str(src)]) == 0
    assert len(list(path.parent.glob("*.json"))) == 2


def test_diff_flags_an_injected_regression_and_exits_1(in_tmp, capsys):
    base = snap(in_tmp, BASE, "base")
    slower = [row("N=1M", 108.0)] + BASE[1:]  # +8% past the 5% threshold
    new = snap(in_tmp, slower, "new")
    capsys.readouterr()
    assert main(["diff", str(base), str(new)]) == 1
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("N=1M f32"))
    assert "+8.0%" in line and "slower ✗" in line and "-7.4%" in line  # time and GB/s deltas
    assert "1 regression past 5%:" in out and "✗ std/add N=1M f32: +8.0% time" in out
    # Within the threshold, or a raised threshold: no regression, exit 0.
    assert main(["diff", str(base), str(new), "--threshold", "10%"]) == 0
    within = snap(in_tmp, [row("N=1M", 104.0)] + BASE[1:], "within")
    capsys.readouterr()
    assert main(["diff", str(base), str(within)]) == 0
    out = capsys.readouterr().out
    assert "+4.0%" in out and "4 rows: 4 same" in out  # a 4% move is within 5%: shown, not flagged


def test_diff_reports_new_missing_failing_and_faster_rows(in_tmp, capsys):
    base = snap(in_tmp, BASE, "base")
    changed = [row("N=1M", 50.0), replace(BASE[1], ok=False, iron_us=None, error="mismatch"),
               BASE[3], row("N=64M", 6400.0)]
    new = snap(in_tmp, changed, "new")
    capsys.readouterr()
    assert main(["diff", str(base), str(new)]) == 1  # the failing row is a regression
    out = capsys.readouterr().out
    assert "faster" in next(line for line in out.splitlines() if line.startswith("N=1M f32"))
    assert "now failing (mismatch)" in out
    assert "1 failing, 1 faster, 1 same, 1 new, 1 missing" in out


def test_diff_json(in_tmp, capsys):
    base = snap(in_tmp, BASE, "base")
    new = snap(in_tmp, [row("N=16M", 2000.0)], "new")
    capsys.readouterr()
    assert main(["diff", str(base), str(new), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "iron-diff" and doc["regressions"] == 1 and doc["threshold"] == 0.05
    changed = next(r for r in doc["rows"] if r["shape"] == "N=16M" and r["dtype"] == "f32")
    assert changed["status"] == "slower" and changed["time_change"] == pytest.approx(0.25)
    assert sum(r["status"] == "missing" for r in doc["rows"]) == 3


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"format": "something-else", "version": 1}', "not an Iron snapshot (format 'something-else'"),
    ('[1, 2]', "not an Iron snapshot"),
    ('{"format": "iron-snap", "version": 2, "rows": []}', "snapshot format version 2"),
    ('{"format": "iron-snap", "version": 1, "rows": [{"bench": "x"}]}', "row 1: not a bench row"),
    ('{"format": "iron-bench", "version": 1, "rows": []}', "iron snap --from FILE"),
])
def test_corrupt_or_foreign_snapshots_are_refused(in_tmp, capsys, content, message):
    good = snap(in_tmp, BASE, "good")
    bad = in_tmp / "bad.json"
    bad.write_text(content)
    capsys.readouterr()
    assert main(["diff", str(bad), str(good)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("iron diff: error: ") and message in err and "Traceback" not in err
    assert main(["diff", str(in_tmp / "absent.json"), str(good)]) == 1
    assert "no such snapshot" in capsys.readouterr().err


def test_snap_reads_runner_protocol_lines(in_tmp):
    lines = [protocol.encode("hello", {"command": "bench", "backend": "vulkan", "device": "llvmpipe", "pid": 1}, "0"),
             protocol.encode("bench_row", BASE[0], "0"), protocol.encode("done", {"items": 1}, "0")]
    rows, device, backend = snapshot.read_bench_output("\n".join(lines), "lines")
    assert rows == [BASE[0]] and (device, backend) == ("llvmpipe", "vulkan")
    with pytest.raises(snapshot.SnapshotError, match="not the output of iron bench"):
        snapshot.read_bench_output('{"hello": 1}', "x")


def test_snap_without_from_runs_the_benches(in_tmp, monkeypatch, capsys):
    seen = []

    def fake_bench(argv):
        seen.append(argv)
        return render.dumps(render.bench_document(BASE[:2], "NVIDIA H200", "cuda"))

    monkeypatch.setattr(snap_cmd, "run_bench", fake_bench)
    out = in_tmp / "s.json"
    assert main(["snap", "--out", str(out), "--filter", "add", "--dtype", "f32", "--backend", "cuda"]) == 0
    assert seen == [["--filter", "add", "--dtype", "f32", "--backend", "cuda"]]
    assert len(snapshot.load(out).rows) == 2
    # diff BASELINE with no NEW compares against a fresh run.
    base = snap(in_tmp, [row("N=1M", 50.0), BASE[1]], "fast-base")
    assert main(["diff", str(base)]) == 1


def test_snap_refuses_empty_results(in_tmp, capsys):
    src = write_bench(in_tmp / "empty.json", [])
    assert main(["snap", "--from", str(src)]) == 1
    assert "no bench rows to save" in capsys.readouterr().err

"""render: the bench table in the seed's layout (-v / -vv columns), the test summary, progress, JSON."""

import io
import json

from iron.cli import render
from iron.core import protocol
from iron.core.protocol import BenchRow
from iron.harness.metrics import profile

HEADER = "Shape │ Iron(µs) │ Ref(GB/s) │ Iron(GB/s) │ Iron % │ GFLOP/s │ ok"
N = 16 * 2**20


def bench_row(dtype, iron_us, ref_us, itemsize, device="NVIDIA H200", ok=True, bench="mlx/gemv", error=None):
    nbytes = 2 * N * itemsize
    iron = profile(iron_us, nbytes, 2 * N, device, dtype, registers=38, occupancy=0.75, measured_peaks={})
    return BenchRow(bench=bench, kernel="gemv", shape="N=16M", dtype=dtype, backend="cuda", ok=ok, iron_us=iron_us,
                    iron_min_us=iron_us and iron_us * 0.97, iron_max_us=iron_us and iron_us * 1.2, ref_name="torch",
                    ref_us=ref_us, ref_gbps=nbytes / ref_us / 1e3, iron=iron,
                    compile_ms=41.5, samples=100, error=error)


ROWS = [bench_row("f32", 192.8, 191.0, 4), bench_row("f16", 62.1, 57.5, 2), bench_row("bf16", 136.8, 54.5, 2)]


def _squeeze(line):
    return " ".join(line.split())


def test_default_table_matches_the_seed_layout():
    text = render.bench_table(ROWS, "NVIDIA H200", 0)
    lines = text.splitlines()
    assert lines[0] == "iron bench · NVIDIA H200"
    assert lines[2] == "mlx/gemv · vs torch"
    assert _squeeze(lines[3]) == HEADER
    assert set(lines[4]) == {"─"} and len(lines[4]) == len(lines[3])
    body = [_squeeze(line) for line in lines[5:8]]
    # One row per shape and dtype; Iron % = reference time / Iron time, rounded.
    assert body[0] == "N=16M f32 │ 192.8 │ 702.7 │ 696.2 │ 99% │ 174.0 │ ✓"
    assert body[1].startswith("N=16M f16 │ 62.1 │") and "│ 93% │" in body[1]
    assert body[2].startswith("N=16M bf16 │ 136.8 │") and "│ 40% │" in body[2]
    # The columns line up: every separator sits where the header's does.
    cols = [i for i, ch in enumerate(lines[3]) if ch == "│"]
    for line in lines[5:8]:
        assert [i for i, ch in enumerate(line) if ch == "│"] == cols
    assert "%BW" not in text and "Min(µs)" not in text


def test_rows_are_grouped_by_bench_in_first_seen_order():
    rows = [bench_row("f32", 10.0, 10.0, 4, bench="b"), bench_row("f32", 10.0, 10.0, 4, bench="a"),
            bench_row("f16", 10.0, 10.0, 2, bench="b")]
    lines = render.bench_table(rows, "NVIDIA H200").splitlines()
    names = [lines[i - 1] for i, line in enumerate(lines) if line.startswith("Shape")]
    assert [n.split(" · ")[0] for n in names] == ["b", "a"]
    assert sum(line.startswith("N=16M") for line in lines) == 3


def test_verbose_adds_the_roofline_and_very_verbose_the_spread():
    v = render.bench_table(ROWS, "NVIDIA H200", 1).splitlines()
    assert _squeeze(v[3]) == HEADER.replace(" │ ok", " │ %BW │ %FLOP │ AI │ Regs │ Occ │ Bound │ ok")
    f32 = _squeeze(v[5]).split(" │ ")
    assert f32[6:12] == ["15%", "0.3%", "0.25", "38", "75%", "memory"]
    vv = render.bench_table(ROWS, "NVIDIA H200", 2).splitlines()
    assert _squeeze(vv[3]).endswith("│ Bound │ Min(µs) │ Max(µs) │ Runs │ Compile(ms) │ ok")
    assert _squeeze(vv[5]).split(" │ ")[12:16] == ["187.0", "231.4", "100", "41.5"]


def test_unknown_device_leaves_roofline_columns_blank():
    rows = [bench_row("f32", 192.8, 191.0, 4, device="llvmpipe (LLVM 15.0.6, 256 bits)")]
    text = render.bench_table(rows, "llvmpipe (LLVM 15.0.6, 256 bits)", 1)
    cells = [c.strip() for c in text.splitlines()[5].split("│")]
    assert cells[6] == "" and cells[7] == "" and cells[11] == ""  # %BW, %FLOP, Bound
    assert cells[3] == "696.2" and cells[8] == "0.25"  # throughput and intensity need no datasheet
    assert "no datasheet ceilings" in text


def test_failed_rows_say_why():
    rows = [bench_row("f32", 192.8, 191.0, 4), bench_row("f16", None, 57.5, 2, ok=False, error="mismatch at [3]")]
    text = render.bench_table(rows, "NVIDIA H200")
    assert "✗ N=16M f16: mismatch at [3]" in text and "2 rows: 1 ok, 1 failed" in text
    assert _squeeze(text.splitlines()[6]).startswith("N=16M f16 │ │ 1167.1 │")


def test_test_summary_counts_and_explains_failures():
    rows = [protocol.TestRow("std/exp", "exp", "n=1", "f32", "vulkan", True, seconds=0.5),
            protocol.TestRow("std/exp", "exp", "n=7", "f16", "vulkan", False, worst=3.2, tolerance="rtol 1e-3"),
            protocol.TestRow("std/add", "add", "n=1", "f32", "vulkan", False, error="crashed: SIGSEGV")]
    text = render.test_summary(rows)
    lines = text.splitlines()
    assert lines[0] == "iron test · vulkan"
    assert _squeeze(lines[1]) == "std/exp 1/2 ✗"
    assert "✗ n=7 f16: worst error 3.2x the tolerance (rtol 1e-3)" in text
    assert "✗ n=1 f32: crashed: SIGSEGV" in text
    assert lines[-1] == "1 passed, 2 failed · 0.5 s"
    assert render.test_summary([]).endswith("no tests ran\n")
    # the run's wall time, when known, is the time said (a hung item's wait and the restarts are in no row's time)
    assert render.test_summary(rows, seconds=312.25).splitlines()[-1] == "1 passed, 2 failed · 312.2 s"


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_draws_one_line_on_a_terminal():
    tty = _Tty()
    with render.Progress(total=2, stream=tty) as p:
        p.start("mlx/gemv N=16M f32")
        p.advance()
        p.log("a note")
    out = tty.getvalue()
    assert "\r\x1b[2K[0/2] mlx/gemv N=16M f32" in out and "[1/2]" in out and "a note\n" in out
    assert "\n" not in out.replace("a note\n", "")  # progress never scrolls the terminal
    for quiet in (render.Progress(total=2, stream=io.StringIO(), enabled=False),
                  render.Progress(total=2, stream=_Tty(), enabled=False)):  # --json
        quiet.start("x")
        quiet.advance("y")
        quiet.log("z")
        quiet.close()
        assert quiet.stream.getvalue() == ""


def test_progress_off_a_terminal_prints_plain_lines_now_and_then():
    """In a log (CI, ``> run.log 2>&1``) a long run says how far it is: the first line, the last, and at most
    one line every ``interval`` seconds between, with the time elapsed and an estimate of the time left."""
    now = [0.0]
    log = io.StringIO()
    p = render.Progress(stream=log, interval=15.0, clock=lambda: now[0])
    p.set_total(100)
    for i in range(100):  # 100 items of 2 s each: 200 s
        p.start(f"item {i}")
        now[0] += 2.0
        p.advance()
    p.log("a note")
    p.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and "\x1b" not in log.getvalue()
    assert lines[0] == "[0/100] 0:00 elapsed · item 0"
    assert lines[1] == "[8/100] 0:16 elapsed, about 3:04 left · item 8"
    assert lines[-2:] == ["[100/100] done in 3:20", "a note"]
    assert len(lines) == 1 + 200 // 16 + 2  # throttled: a 30-minute bench writes about 120 lines, not thousands
    times = [int(ln.split()[1].split(":")[0]) * 60 + int(ln.split()[1].split(":")[1]) for ln in lines[:-2]]
    assert all(b - a >= 15 for a, b in zip(times, times[1:]))


def test_json_documents_round_trip():
    doc = json.loads(render.dumps(render.bench_document(ROWS, "NVIDIA H200", "cuda")))
    assert doc["format"] == "iron-bench" and doc["version"] == 1 and doc["device"] == "NVIDIA H200"
    assert doc["rows"][0]["iron"]["gbps"] == ROWS[0].iron.gbps
    bad = bench_row("f32", float("nan"), 1.0, 4)
    assert json.loads(render.dumps([bad]))[0]["iron_us"] is None  # JSON has no NaN
    t = render.test_document([protocol.TestRow("t", "k", "c", "f32", "interp", False)], "interp")
    assert (t["passed"], t["failed"]) == (0, 1)


def test_rows_with_call_times_add_the_call_columns():
    """GPU rows carry each side's host time per call (back to back): the table shows both and their ratio."""
    from dataclasses import replace

    rows = [replace(ROWS[0], iron_call_us=24.5, ref_call_us=6.0), replace(ROWS[1], iron_call_us=None)]
    lines = render.bench_table(rows, "NVIDIA H200", 0).splitlines()
    assert _squeeze(lines[3]) == HEADER.replace(" │ ok", " │ Call(µs) │ RefCall(µs) │ Call % │ ok")
    cells = [c.strip() for c in lines[5].split("│")]
    assert cells[6:9] == ["24.5", "6.00", "24%"] and cells[9] == "✓"
    assert [c.strip() for c in lines[6].split("│")][6:9] == ["", "", ""]
    assert "Call(µs)" not in render.bench_table(ROWS, "NVIDIA H200", 0), "rows without call times: the seed layout"

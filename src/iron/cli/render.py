"""What ``iron bench`` and ``iron test`` print: the bench table, the test summary, a progress line, JSON.

The bench table follows the original Iron's layout: a title line, then per bench its name, a header
``Shape │ Iron(µs) │ Ref(GB/s) │ Iron(GB/s) │ Iron % │ GFLOP/s │ ok``, a rule and one row per shape
and dtype.  ``Iron %`` is Iron's speed relative to the reference measured in the same run (reference
time / Iron time), so 100% means parity.  ``-v`` adds the roofline (%BW, %FLOP, arithmetic
intensity), registers, occupancy and the bottleneck verdict; ``-vv`` adds min/max time, the number of
timed runs and the compile time.  A value nobody measured or no datasheet gives is left blank.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import time
from dataclasses import asdict, is_dataclass
from typing import Any, Callable, Sequence, TextIO

from ..core.protocol import BenchRow, TestRow

SEP = " │ "
RULE = "─"
OK, FAIL = "✓", "✗"

Column = tuple[str, Callable[[BenchRow], str]]


def fmt_num(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return ""
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def _pct(fraction: float | None) -> str:
    if fraction is None or not math.isfinite(fraction):
        return ""
    p = fraction * 100
    return f"{p:.1f}%" if p < 10 else f"{round(p)}%"


def _int(v: int | None) -> str:
    return "" if v is None else str(v)


def relative_speed(row: BenchRow) -> float | None:
    """Iron's speed as a fraction of the reference's (reference time / Iron time), or None."""
    if row.iron_us and row.ref_us:
        return row.ref_us / row.iron_us
    if row.iron.gbps and row.ref_gbps:
        return row.iron.gbps / row.ref_gbps
    return None


def relative_call(row: BenchRow) -> float | None:
    """Iron's call time as a fraction of the reference's speed (reference call / Iron call), or None."""
    return row.ref_call_us / row.iron_call_us if row.iron_call_us and row.ref_call_us else None


BASE_COLUMNS: list[Column] = [
    ("Shape", lambda r: f"{r.shape} {r.dtype}"),
    ("Iron(µs)", lambda r: fmt_num(r.iron_us)),
    ("Ref(GB/s)", lambda r: fmt_num(r.ref_gbps)),
    ("Iron(GB/s)", lambda r: fmt_num(r.iron.gbps)),
    ("Iron %", lambda r: _pct(relative_speed(r))),
    ("GFLOP/s", lambda r: fmt_num(r.iron.gflops)),
]
#: Host time per call, back to back: what a program pays per call beside the kernel's time.  GPU rows have it
#: (the runner measures it there); the table shows these columns when any row does.
CALL_COLUMNS: list[Column] = [
    ("Call(µs)", lambda r: fmt_num(r.iron_call_us)),
    ("RefCall(µs)", lambda r: fmt_num(r.ref_call_us)),
    ("Call %", lambda r: _pct(relative_call(r))),
]
VERBOSE_COLUMNS: list[Column] = [
    ("%BW", lambda r: _pct(r.iron.bw_fraction)),
    ("%FLOP", lambda r: _pct(r.iron.flop_fraction)),
    ("AI", lambda r: "" if r.iron.intensity is None else f"{r.iron.intensity:.2f}"),
    ("Regs", lambda r: _int(r.iron.registers)),
    ("Occ", lambda r: _pct(r.iron.occupancy)),
    ("Bound", lambda r: r.iron.bottleneck or ""),
]
VERY_VERBOSE_COLUMNS: list[Column] = [
    ("Min(µs)", lambda r: fmt_num(r.iron_min_us)),
    ("Max(µs)", lambda r: fmt_num(r.iron_max_us)),
    ("Runs", lambda r: str(r.samples) if r.samples else ""),
    ("Compile(ms)", lambda r: fmt_num(r.compile_ms)),
]
OK_COLUMN: Column = ("ok", lambda r: OK if r.ok else FAIL)


def bench_columns(verbosity: int, rows: Sequence[BenchRow] = ()) -> list[Column]:
    cols = list(BASE_COLUMNS)
    if any(r.iron_call_us is not None for r in rows):
        cols += CALL_COLUMNS
    if verbosity >= 1:
        cols += VERBOSE_COLUMNS
    if verbosity >= 2:
        cols += VERY_VERBOSE_COLUMNS
    return cols + [OK_COLUMN]


def table_line(cells: Sequence[str], widths: Sequence[int], left: frozenset[int] = frozenset({0})) -> str:
    """Cells joined by ``│``: columns in ``left`` (names, words) read left to right, numbers align right."""
    parts = [c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))]
    return SEP.join(parts).rstrip()


def bench_table(rows: Sequence[BenchRow], device: str | None, verbosity: int = 0) -> str:
    """The bench table for ``rows`` measured on ``device``, grouped by bench in first-seen order."""
    device = device or "unknown device"
    title = f"iron bench · {device}"
    if not rows:
        return f"{title}\nno benches ran\n"
    cols = bench_columns(verbosity, rows)
    cells = {id(r): [fn(r) for _, fn in cols] for r in rows}
    widths = [max(len(h), *(len(cells[id(r)][i]) for r in rows)) for i, (h, _) in enumerate(cols)]
    left = frozenset({0} | {i for i, (h, _) in enumerate(cols) if h == "Bound"})
    header = table_line([h for h, _ in cols], widths, left)
    rule = RULE * len(header)
    out = [title]
    for bench, group in grouped(rows, lambda r: r.bench):
        refs = {r.ref_name for r in group if r.ref_name}
        out += ["", bench + (f" · vs {refs.pop()}" if len(refs) == 1 else ""), header, rule]
        out += [table_line(cells[id(r)], widths, left) for r in group]
        out += [f"  {FAIL} {r.shape} {r.dtype}: {r.error}" for r in group if not r.ok and r.error]
    failed = sum(not r.ok for r in rows)
    out += ["", f"{len(rows)} row{'s' if len(rows) != 1 else ''}: {len(rows) - failed} ok"
            + (f", {failed} failed" if failed else "")]
    if verbosity >= 1:
        from ..harness import device_specs

        if device_specs.lookup(device) is None and not any(r.iron.peak_source for r in rows):
            out.append(f"no datasheet ceilings for '{device}': the roofline columns stay blank "
                       "(iron device --probe measures them)")
        else:
            sources = sorted({r.iron.peak_source for r in rows if r.iron.peak_source})
            out += [f"peaks: {s}" for s in sources]
    return "\n".join(out) + "\n"


def grouped(items: Sequence[Any], key: Callable[[Any], str]) -> list[tuple[str, list[Any]]]:
    groups: dict[str, list[Any]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return list(groups.items())


def test_summary(rows: Sequence[TestRow], seconds: float | None = None) -> str:
    """One line per test (cases passed of cases run), each failure with its reason, then the totals and the
    run's wall time ``seconds`` (restarted runners included; without it, the rows' own times added up)."""
    backends = ", ".join(dict.fromkeys(r.backend for r in rows)) or "no backend"
    out = [f"iron test · {backends}"]
    if not rows:
        return out[0] + "\nno tests ran\n"
    groups = grouped(rows, lambda r: r.test)
    width = max(len(name) for name, _ in groups)
    for name, group in groups:
        passed = sum(r.ok for r in group)
        out.append(f"{name.ljust(width)}  {passed:>3}/{len(group):<3} {OK if passed == len(group) else FAIL}")
        out += [f"  {FAIL} {r.case} {r.dtype}: {_why(r)}" for r in group if not r.ok]
    failed = sum(not r.ok for r in rows)
    if seconds is None:
        seconds = sum(r.seconds or 0.0 for r in rows)
    out.append(f"{len(rows) - failed} passed, {failed} failed" + (f" · {seconds:.1f} s" if seconds else ""))
    return "\n".join(out) + "\n"


def _why(row: TestRow) -> str:
    if row.error:
        return row.error
    if row.worst is not None:
        return f"worst error {row.worst:.3g}x the tolerance" + (f" ({row.tolerance})" if row.tolerance else "")
    return "failed"


#: Seconds between two plain progress lines (a log, CI); the first and the last are always printed.
PLAIN_INTERVAL = 15.0


class Progress:
    """What runs now, on stderr, so that a long run never looks hung.

    On a terminal: one line (``[3/12] mlx/gemv N=16M f16``) redrawn in place.  Elsewhere (a log, CI): plain lines
    (``[3/12] 0:45 elapsed, about 2:15 left · mlx/gemv N=16M f16``), the first, the last, and between them at most
    one every ``interval`` seconds, so the log stays short.  ``enabled=False`` (``--json``) silences it.
    :meth:`log` prints a line without garbling the progress line.
    """

    def __init__(self, total: int | None = None, stream: TextIO | None = None, enabled: bool | None = None,
                 interval: float = PLAIN_INTERVAL, clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        #: On a terminal: one line redrawn in place; elsewhere: plain, throttled lines.
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = True if enabled is None else bool(enabled)
        self.total = total
        self.done = 0
        self.interval = interval
        self._clock = clock
        self._began = clock()
        self._printed_at: float | None = None  # when the last plain line was printed
        self._shown = False

    def set_total(self, total: int | None) -> None:
        self.total = total

    def start(self, item: str) -> None:
        """Show that ``item`` is running."""
        self._draw(item)

    def advance(self, item: str | None = None) -> None:
        """Count one item as finished (and show ``item`` if given)."""
        self.done += 1
        self._draw(item or "", last=self.total is not None and self.done >= self.total)

    def log(self, text: str) -> None:
        if not self.enabled:
            return
        if self.live:
            self._clear()
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.live and self._shown:
            self._clear()
            self.stream.flush()

    def _draw(self, item: str, last: bool = False) -> None:
        if not self.enabled:
            return
        count = f"[{self.done}/{self.total}]" if self.total else f"[{self.done}]"
        if not self.live:
            if item or last:  # each plain line names the item that runs now, the last one the total time
                self._plain(count, item, last)
            return
        text = f"{count} {item}".rstrip()
        width = shutil.get_terminal_size((80, 24)).columns - 1
        if len(text) > width:
            text = text[:max(width - 1, 0)] + "…"
        self.stream.write("\r\x1b[2K" + text)
        self.stream.flush()
        self._shown = True

    def _plain(self, count: str, item: str, last: bool) -> None:
        now = self._clock()
        if not last and self._printed_at is not None and now - self._printed_at < self.interval:
            return
        elapsed = now - self._began
        text = f"{count} {_clock_time(elapsed)} elapsed"
        if last:
            text = f"{count} done in {_clock_time(elapsed)}"
        elif self.total and self.done:
            text += f", about {_clock_time(elapsed / self.done * max(self.total - self.done, 0))} left"
        self.stream.write(text + (f" · {item}" if item and not last else "") + "\n")
        self.stream.flush()
        self._printed_at = now

    def _clear(self) -> None:
        self.stream.write("\r\x1b[2K")
        self._shown = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _clock_time(seconds: float) -> str:
    """``0:45``, ``12:03``, ``1:02:03``."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


# ------------------------------------------------------------------ JSON
BENCH_FORMAT = "iron-bench"
TEST_FORMAT = "iron-test"
JSON_VERSION = 1


def jsonable(value: Any) -> Any:
    """Dataclasses as dicts, non-finite floats as None (JSON has no NaN), containers recursively."""
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        return jsonable(value.item())
    return value


def bench_document(rows: Sequence[BenchRow], device: str, backend: str) -> dict[str, Any]:
    """What ``iron bench --json`` prints (and ``iron snap --from`` reads)."""
    from .._version import __version__

    return {"format": BENCH_FORMAT, "version": JSON_VERSION, "device": device, "backend": backend,
            "iron_version": __version__, "rows": jsonable(list(rows))}


def test_document(rows: Sequence[TestRow], backend: str) -> dict[str, Any]:
    """What ``iron test --json`` prints."""
    from .._version import __version__

    failed = sum(not r.ok for r in rows)
    return {"format": TEST_FORMAT, "version": JSON_VERSION, "backend": backend, "iron_version": __version__,
            "passed": len(rows) - failed, "failed": failed, "rows": jsonable(list(rows))}


def dumps(document: Any) -> str:
    return json.dumps(jsonable(document), indent=2, ensure_ascii=False, allow_nan=False)


def print_json(document: Any, stream: TextIO | None = None) -> None:
    (stream if stream is not None else sys.stdout).write(dumps(document) + "\n")


__all__ = ["BENCH_FORMAT", "JSON_VERSION", "PLAIN_INTERVAL", "Progress", "TEST_FORMAT", "bench_columns",
           "bench_document", "bench_table", "dumps", "fmt_num", "grouped", "jsonable", "print_json", "relative_speed",
           "table_line", "test_document", "test_summary"]

# Named test_* by the contract with the bench/test commands; not pytest tests if a test module imports them.
test_summary.__test__ = False  # type: ignore[attr-defined]
test_document.__test__ = False  # type: ignore[attr-defined]

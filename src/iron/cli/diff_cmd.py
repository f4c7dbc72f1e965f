"""``iron diff``: compare bench results with a saved baseline; exit 1 on a regression."""

from __future__ import annotations

import argparse
import sys

from . import render, snapshot
from .snap_cmd import add_bench_arguments, current_results
from .snapshot import Comparison, RowDelta, SnapshotError

HELP = "compare bench results with a baseline from iron snap; per-row deltas, exit 1 on a regression"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("baseline", metavar="BASELINE", help="a snapshot written by iron snap")
    p.add_argument("new", metavar="NEW", nargs="?",
                   help="a second snapshot (default: run the benches now, or read --from)")
    p.add_argument("--from", dest="source", metavar="FILE.json",
                   help="compare against this output of 'iron bench --json' instead of running the benches")
    p.add_argument("--threshold", type=_percent, default=snapshot.DEFAULT_THRESHOLD, metavar="PCT",
                   help="a row whose median time grew by more than this is a regression (default: 5%%)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    add_bench_arguments(p)


def _percent(text: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 5 or 2.5%, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("the threshold cannot be negative")
    return value / 100


def _signed(change: float | None) -> str:
    return "" if change is None else f"{change * 100:+.1f}%"


def _meta(snap: snapshot.Snapshot) -> str:
    return f"{snap.device} ({snap.backend}, {snap.created or 'undated'})"


def diff_table(cmp: Comparison) -> str:
    """The per-row comparison, grouped by bench, then the correctness failures, the slowdowns past the
    threshold and the counts."""
    out = [f"iron diff · {_meta(cmp.base)} → {_meta(cmp.new)} · threshold {cmp.threshold * 100:g}%"]
    if cmp.base.device != cmp.new.device:
        out.append(f"note: the snapshots come from different devices ({cmp.base.device} vs {cmp.new.device}); "
                   "their times are not comparable")
    many_backends = len({d.key[3] for d in cmp.deltas}) > 1
    headers = ["Shape", "Base(µs)", "New(µs)", "Δ time", "Base(GB/s)", "New(GB/s)", "Δ GB/s", "status"]
    table = [[_label(d, many_backends), render.fmt_num(d.base.iron_us) if d.base else "",
              render.fmt_num(d.new.iron_us) if d.new else "", _signed(d.time_change),
              render.fmt_num(d.base.iron.gbps) if d.base else "", render.fmt_num(d.new.iron.gbps) if d.new else "",
              _signed(d.gbps_change), d.status + (f" {render.FAIL}" if d.regression else "")] for d in cmp.deltas]
    widths = [max(len(h), *(len(r[i]) for r in table)) if table else len(h) for i, h in enumerate(headers)]
    left = frozenset({0, len(headers) - 1})
    header = render.table_line(headers, widths, left)
    for bench, group in render.grouped(list(zip(cmp.deltas, table)), lambda item: item[0].key[0]):
        out += ["", bench, header, render.RULE * len(header)]
        out += [render.table_line(cells, widths, left) for _, cells in group]
    failing = [d for d in cmp.regressions if d.status == "failing"]
    slower = [d for d in cmp.regressions if d.status != "failing"]
    out.append("")
    if failing:  # wrong results, not slowdowns: their own heading, whatever the threshold
        out.append(f"{len(failing)} correctness failure{'s' if len(failing) != 1 else ''} (rows that passed in the "
                   "baseline fail now):")
        out += [f"  {render.FAIL} {d.key[0]} {_label(d, many_backends)}: now failing"
                + (f" ({d.new.error})" if d.new and d.new.error else "") for d in failing]
    if slower:
        out.append(f"{len(slower)} regression{'s' if len(slower) != 1 else ''} past {cmp.threshold * 100:g}%:")
        out += [f"  {render.FAIL} {d.key[0]} {_label(d, many_backends)}: {_signed(d.time_change)} time"
                for d in slower]
    counts = ", ".join(f"{cmp.count(s)} {s}" for s in ("slower", "failing", "faster", "same", "fixed",
                                                       "still failing", "no time", "new", "missing") if cmp.count(s))
    out.append(f"{len(cmp.deltas)} rows: {counts or 'none'}")
    return "\n".join(out) + "\n"


def _label(d: RowDelta, with_backend: bool) -> str:
    _, shape, dtype, backend = d.key
    return f"{shape} {dtype}" + (f" ({backend})" if with_backend else "")


def diff_document(cmp: Comparison) -> dict:
    def side(s: snapshot.Snapshot) -> dict:
        return {"device": s.device, "backend": s.backend, "created": s.created, "iron_version": s.iron_version}

    rows = [{"bench": d.key[0], "shape": d.key[1], "dtype": d.key[2], "backend": d.key[3],
             "base_us": d.base.iron_us if d.base else None, "new_us": d.new.iron_us if d.new else None,
             "time_change": d.time_change, "base_gbps": d.base.iron.gbps if d.base else None,
             "new_gbps": d.new.iron.gbps if d.new else None, "gbps_change": d.gbps_change, "status": d.status,
             "regression": d.regression} for d in cmp.deltas]
    return {"format": "iron-diff", "version": 1, "threshold": cmp.threshold, "base": side(cmp.base),
            "new": side(cmp.new), "regressions": len(cmp.regressions), "rows": rows}


def run(args: argparse.Namespace) -> int:
    base = snapshot.load(args.baseline)
    if args.new and args.source:
        raise SnapshotError("give either a NEW snapshot or --from FILE.json, not both")
    new = snapshot.load(args.new) if args.new else current_results(args, args.source)
    cmp = snapshot.compare(base, new, args.threshold)
    if args.json:
        render.print_json(diff_document(cmp))
    else:
        sys.stdout.write(diff_table(cmp))
    return 1 if cmp.regressions else 0

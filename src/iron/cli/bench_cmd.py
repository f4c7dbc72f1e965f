"""``iron bench``: every registered ``@bench`` item timed beside its reference, in the runner process."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.protocol import BenchRow
from . import render
from .project_runner import RunResult, add_run_arguments
from .test_cmd import execute, report_errors

HELP = "time the project's registered benches (@bench) against their references and print the table"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p)
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="-v: roofline, registers, occupancy, bottleneck; -vv: min/max, runs, compile time "
                        "(and what the runner prints)")
    p.add_argument("--save", metavar="FILE.json",
                   help="also write the rows as 'iron bench --json' would print them (for iron snap --from, "
                        "iron diff --from) while the table prints")


def run(args: argparse.Namespace) -> int:
    saver = RowSaver(Path(args.save)) if args.save else None
    result, _ = execute("bench", args, verbose=args.verbose >= 2, after_row=saver.row if saver else None)
    report_errors("bench", result)
    if saver is not None and result.rows:
        saver.finish(result)
    if args.json:
        render.print_json(render.bench_document(result.rows, result.device, result.backend))
    elif result.rows or not result.errors:
        sys.stdout.write(render.bench_table(result.rows, result.device, args.verbose))
    if not result.rows and not result.errors:
        print("iron bench: no benches matched: register them with @iron.bench in the modules iron.toml lists "
              "(or pass -m FILE.py)", file=sys.stderr)
        return 1
    return 1 if result.failed else 0


class RowSaver:
    """``--save``: the rows so far, rewritten atomically as each one arrives, so a bench stopped half way
    (a killed process, a machine taken back) leaves every finished row in the file for ``iron snap``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[BenchRow] = []
        self.failed: str | None = None

    def row(self, row: BenchRow, result: RunResult) -> None:
        self.rows.append(row)
        if self.failed is None:
            self._write(result)

    def finish(self, result: RunResult) -> None:
        self.rows = list(result.rows)
        self._write(result)
        if self.failed is not None:
            print(f"iron bench: cannot write {self.path}: {self.failed}; the table below is all there is",
                  file=sys.stderr)
        else:
            print(f"iron bench: saved {len(self.rows)} rows to {self.path}", file=sys.stderr)

    def _write(self, result: RunResult) -> None:
        from ..harness.measured import write_json_atomically

        try:
            write_json_atomically(self.path, render.bench_document(self.rows, result.device, result.backend))
            self.failed = None
        except (OSError, ValueError) as e:  # ValueError: a figure JSON cannot hold
            self.failed = str(getattr(e, "strerror", None) or e)

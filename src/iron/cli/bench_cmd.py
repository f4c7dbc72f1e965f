"""``iron bench``: every registered ``@bench`` item timed beside its reference, in the runner process."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import render
from .project_runner import add_run_arguments
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
    result, _ = execute("bench", args, verbose=args.verbose >= 2)
    report_errors("bench", result)
    if args.save and result.rows:
        _save(Path(args.save), render.bench_document(result.rows, result.device, result.backend))
    if args.json:
        render.print_json(render.bench_document(result.rows, result.device, result.backend))
    elif result.rows or not result.errors:
        sys.stdout.write(render.bench_table(result.rows, result.device, args.verbose))
    if not result.rows and not result.errors:
        print("iron bench: no benches matched: register them with @iron.bench in the modules iron.toml lists "
              "(or pass -m FILE.py)", file=sys.stderr)
        return 1
    return 1 if result.failed else 0


def _save(path: Path, document: dict) -> None:
    from ..harness.measured import write_json_atomically

    try:
        write_json_atomically(path, document)
    except OSError as e:
        print(f"iron bench: cannot write {path}: {e.strerror or e}; the table below is all there is", file=sys.stderr)
        return
    print(f"iron bench: saved {len(document['rows'])} rows to {path}", file=sys.stderr)

"""``iron bench``: every registered ``@bench`` item timed beside its reference, in the runner process."""

from __future__ import annotations

import argparse
import sys

from . import render
from .project_runner import add_run_arguments
from .test_cmd import execute, report_errors

HELP = "time the project's registered benches (@bench) against their references and print the table"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p)
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="-v: roofline, registers, occupancy, bottleneck; -vv: min/max, runs, compile time "
                        "(and what the runner prints)")


def run(args: argparse.Namespace) -> int:
    result, _ = execute("bench", args, verbose=args.verbose >= 2)
    report_errors("bench", result)
    if args.json:
        render.print_json(render.bench_document(result.rows, result.device, result.backend))
    elif result.rows or not result.errors:
        sys.stdout.write(render.bench_table(result.rows, result.device, args.verbose))
    if not result.rows and not result.errors:
        print("iron bench: no benches matched: register them with @iron.bench in the modules iron.toml lists "
              "(or pass -m FILE.py)", file=sys.stderr)
        return 1
    return 1 if result.failed else 0

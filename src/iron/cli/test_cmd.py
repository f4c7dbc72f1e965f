"""``iron test``: every registered ``@test_kernel`` item against its float64 oracle, in the runner process."""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Callable

from ..core import dtypes
from ..core.errors import IronError
from . import render
from .project_runner import ProjectRunner, Row, RunResult, add_run_arguments, runner_arguments

HELP = "run the project's registered tests (@test_kernel) against their oracles on a backend"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p)
    p.add_argument("-v", "--verbose", action="count", default=0, help="show what the runner prints (stderr)")


def check_dtypes(given: list[str]) -> None:
    """Refuse a ``--dtype`` that names no dtype (it would match nothing, and say only "no tests matched")."""
    names = [d.strip() for item in given for d in item.split(",") if d.strip()]
    unknown = [d for d in names if d not in dtypes.BY_NAME and d != "-"]
    if unknown:
        raise IronError(f"--dtype: unknown dtype{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                        f"known: {', '.join(dtypes.BY_NAME)} (and - for items without one)")


def execute(command: str, args: argparse.Namespace, verbose: bool,
            after_row: Callable[[Row, RunResult], None] | None = None) -> tuple[RunResult, int]:
    """Run ``command`` through the runner with a progress line; the result and the seed used.

    ``after_row(row, result_so_far)`` runs as each row arrives (``iron bench --save`` writes them as they come).
    """
    check_dtypes(args.dtype)
    seed = args.seed if args.seed is not None else secrets.randbits(31)
    progress = render.Progress(enabled=not args.json)

    def log(text: str) -> None:
        if verbose:
            if progress.enabled:
                progress.log(text)
            else:
                print(text, file=sys.stderr)

    def on_row(row: Row) -> None:
        progress.advance()
        if after_row is not None:
            after_row(row, runner.result)

    runner = ProjectRunner(command, runner_arguments(args, seed), on_plan=lambda items: progress.set_total(len(items)),
                           on_start=progress.start, on_row=on_row, on_log=log, timeout=args.timeout)
    try:
        return runner.run(), seed
    finally:
        progress.close()


def report_errors(command: str, result: RunResult) -> None:
    for message in result.errors:
        print(f"iron {command}: error: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    result, seed = execute("test", args, verbose=args.verbose > 0)
    report_errors("test", result)
    if args.json:
        render.print_json(render.test_document(result.rows, result.backend))
    elif result.rows or not result.errors:
        sys.stdout.write(render.test_summary(result.rows, result.seconds))
    if not result.rows and not result.errors:
        print("iron test: no tests matched: register them with @iron.test_kernel in the modules iron.toml lists "
              "(or pass -m FILE.py)", file=sys.stderr)
        return 1
    if result.failed:
        if any(not r.ok for r in result.rows):
            print(f"inputs drawn from seed {seed}: rerun with --seed {seed} to replay them", file=sys.stderr)
        return 1
    return 0

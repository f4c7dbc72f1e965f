"""``iron snap``: save bench results as a baseline for ``iron diff``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import render, snapshot
from .project_runner import add_run_arguments
from .snapshot import SnapshotError
from .test_cmd import execute, report_errors

HELP = "save bench results as a regression baseline (a versioned JSON snapshot) for iron diff"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="source", metavar="FILE.json",
                   help="use this output of 'iron bench --json' (or '-' for stdin) instead of running the benches")
    p.add_argument("--out", metavar="PATH", help="where to write it (default: .iron/snaps/<device>-<date>.json)")
    add_bench_arguments(p)


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    """The flags passed on to ``iron bench`` when this command runs the benches itself."""
    p.add_argument("--filter", action="append", default=[], metavar="TEXT",
                   help="only benches whose name contains TEXT (repeatable; passed to iron bench)")
    p.add_argument("--backend", help="backend to bench on (passed to iron bench)")
    p.add_argument("--dtype", action="append", default=[], metavar="DTYPE",
                   help="only these dtypes (repeatable; passed to iron bench)")
    p.add_argument("-m", "--module", action="append", default=[], metavar="SOURCE",
                   help="a FILE.py or MODULE with benches (repeatable; passed to iron bench)")


def bench_argv(args: argparse.Namespace) -> list[str]:
    argv: list[str] = []
    for flag in ("filter", "dtype", "module"):
        for value in getattr(args, flag, None) or []:
            argv += [f"--{flag}", str(value)]
    if getattr(args, "backend", None):
        argv += ["--backend", str(args.backend)]
    return argv


def run_bench(argv: list[str]) -> str:
    """Run the benches as ``iron bench`` does (in the runner process), with the same progress on stderr, and
    return what ``iron bench --json`` would print."""
    parser = argparse.ArgumentParser(prog="iron bench", add_help=False)
    add_run_arguments(parser)
    ns = parser.parse_args(argv)
    result, _ = execute("bench", ns, verbose=False)
    report_errors("bench", result)
    if not result.rows:
        raise SnapshotError("no benches ran" + ("; see the errors above" if result.errors else
                                                ": register them with @iron.bench in the modules iron.toml lists "
                                                "(or pass -m FILE.py)"))
    return render.dumps(render.bench_document(result.rows, result.device, result.backend))


def current_results(args: argparse.Namespace, source: str | None) -> snapshot.Snapshot:
    """A snapshot of ``source`` (bench JSON, '-' for stdin) or, without one, of a bench run now."""
    if source == "-":
        text, where = sys.stdin.read(), "<stdin>"
    elif source:
        try:
            text, where = Path(source).read_text(encoding="utf-8"), source
        except OSError as e:
            raise SnapshotError(f"cannot read {source}: {e.strerror or e}") from None
    else:
        text, where = run_bench(bench_argv(args)), "iron bench --json"
    rows, device, backend = snapshot.read_bench_output(text, where)
    if not rows:
        raise SnapshotError(f"{where}: no bench rows to save")
    return snapshot.from_rows(rows, device, backend)


def run(args: argparse.Namespace) -> int:
    snap = current_results(args, args.source)
    path = Path(args.out) if args.out else snapshot.default_path(snap)
    snapshot.save(snap, path)
    failed = sum(not r.ok for r in snap.rows)
    print(f"saved {len(snap.rows)} rows ({snap.device}, {snap.backend}"
          + (f", {failed} failed" if failed else "") + f") to {path}")
    return 0

"""``iron snap``: save bench results as a baseline for ``iron diff``."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

from .. import config
from . import snapshot
from .snapshot import SnapshotError

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
    """Run ``iron bench --json`` (in a child process, as the CLI runs everything that touches a device)
    and return what it printed; its progress and errors go straight to this terminal."""
    if importlib.util.find_spec("iron.cli.bench_cmd") is None:
        raise SnapshotError("this Iron has no 'iron bench' command to run; pass the output of a bench run "
                            "with --from FILE.json")
    cmd = [sys.executable, "-m", "iron", "bench", "--json", *argv]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=config.child_environment({}))
    if not proc.stdout.strip():
        raise SnapshotError(f"iron bench printed no results (exit status {proc.returncode}); see its errors above")
    if proc.returncode != 0:
        print(f"iron snap: note: iron bench exited with status {proc.returncode}; failed rows are kept as failed",
              file=sys.stderr)
    return proc.stdout


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

"""``iron build``: per-kernel, per-variant sources and artifacts, a manifest and Swift bindings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..harness.build import EMIT_KINDS, build, write_atomically


HELP = "write every kernel variant's sources and compiled artifacts, a manifest and Swift bindings"

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--emit", action="append", metavar="KIND",
                   help=f"what to write (repeatable, comma-separated): {', '.join(EMIT_KINDS)}, all "
                        "(default: all)")
    p.add_argument("--out", default="build/iron", metavar="DIR", help="output folder (default: build/iron)")
    p.add_argument("--filter", default=None, help="only kernels whose name contains this text")
    p.add_argument("--module", "-m", action="append", metavar="SOURCE",
                   help="a FILE.py or MODULE with kernels (repeatable; default: the modules in iron.toml)")


def _kinds(args: argparse.Namespace) -> tuple[list[str], bool]:
    raw = [k.strip() for item in (args.emit or ["all"]) for k in item.split(",") if k.strip()]
    if "all" in raw:
        return list(EMIT_KINDS), False
    return raw, True


def run(args: argparse.Namespace) -> int:
    from ..harness.discovery import kernels_in

    kinds, strict = _kinds(args)
    kernels = kernels_in(args.module, args.filter)
    if not kernels:
        print("iron build: no kernels matched" + (f" '{args.filter}'" if args.filter else ""), file=sys.stderr)
        return 1
    result = build(kernels, kinds, strict=strict, progress=lambda s: print(f"  building {s}", file=sys.stderr))
    written = write_atomically(result, Path(args.out))
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote {len(written)} files to {args.out}")
    return 0

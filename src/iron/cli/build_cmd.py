"""``iron build``: per-kernel, per-variant sources and artifacts, a manifest and Swift bindings."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Iterable

from ..harness import build_marker
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


def _existing_ancestor(path: Path) -> Path:
    while not os.path.lexists(path) and path.parent != path:
        path = path.parent
    return path


def _writable_folder(path: Path, out: str) -> str | None:
    """Why files cannot be created in ``path`` (which exists), or None."""
    if not path.is_dir():
        return f"--out {out}: {path} is a file, not a folder; choose a folder"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"--out {out}: cannot write in {path} (permission denied); choose a folder you can write to"
    return None


def out_problem(out: Path, files: Iterable[str] = ()) -> str | None:
    """Why ``iron build`` cannot write ``files`` (relative paths) under ``out``, or None.

    Checked before anything is written, so a bad ``--out`` leaves no half-written output.
    """
    where = str(out)
    if os.path.lexists(out) and not out.is_dir():
        return f"--out {where} is a file, not a folder; choose a folder"
    resolved = out.resolve()
    staging = _existing_ancestor(resolved.parent)  # write_atomically stages its files next to the output
    problem = _writable_folder(staging, where)
    if problem or not resolved.is_dir():
        return problem or _writable_folder(_existing_ancestor(resolved), where)
    for rel in files:
        path = resolved
        for part in rel.split("/")[:-1]:
            path = path / part
            if not os.path.lexists(path):
                break
            if not path.is_dir():
                return f"--out {where}: {path} is a file where iron build writes a folder; move it away"
        else:
            if path.is_dir() and (problem := _writable_folder(path, where)):
                return problem
            if (resolved / rel).is_dir():
                return f"--out {where}: {resolved / rel} is a folder where iron build writes a file; move it away"
    return None


def run(args: argparse.Namespace) -> int:
    from ..harness.discovery import kernels_in

    out = Path(args.out).expanduser()
    if problem := out_problem(out):  # before the (long) build
        print(f"iron build: error: {problem}", file=sys.stderr)
        return 2
    kinds, strict = _kinds(args)
    kernels = kernels_in(args.module, args.filter)
    if not kernels:
        print("iron build: no kernels matched" + (f" '{args.filter}'" if args.filter else ""), file=sys.stderr)
        return 1
    result = build(kernels, kinds, strict=strict, progress=lambda s: print(f"  building {s}", file=sys.stderr))
    count = len(result.files)
    # The marker goes last, so it lists only files already in place.
    result.files[build_marker.MARKER] = build_marker.updated(out.resolve(), result.files)
    if problem := out_problem(out, result.files):
        print(f"iron build: error: {problem}", file=sys.stderr)
        return 2
    try:
        write_atomically(result, out)
    except OSError as e:
        print(f"iron build: error: --out {args.out}: cannot write there ({e.strerror or e}); "
              "each file already there is the old one or the new one, whole", file=sys.stderr)
        return 2
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote {count} files to {args.out}")
    return 0

"""``python -m iron.runner test|bench``: run a project's registered tests or benches, streaming
protocol messages (:mod:`iron.core.protocol`) on stdout, one JSON object per line.

The CLI (``iron test`` / ``iron bench``, through ``ProjectRunner``) spawns this process so that a
kernel that crashes, hangs or faults the device takes down only the child.  Stdout carries the
protocol and nothing else: anything the user's code prints goes to stderr.  No argument is read
as a file of arguments (a filter may begin with ``@``); long ``--skip`` lists come in a JSON file
(``--skip-from``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import IO, Any, Sequence

from .. import config
from .._version import __version__
from ..core.errors import IronError
from ..core.protocol import encode
from ..harness import project, registry, timing
from ..runtime import best_backend, get_device
from .benches import run_benches
from .execute import describe
from .tests import run_tests


class Emitter:
    """Writes protocol lines to the protocol stream, flushed one by one (the CLI reads them live)."""

    def __init__(self, stream: IO[str]):
        self.stream = stream

    def __call__(self, kind: str, data: Any) -> None:
        self.stream.write(encode(kind, data, __version__) + "\n")
        self.stream.flush()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m iron.runner",
                                description="Run registered tests or benches; protocol messages on stdout.")
    p.add_argument("command", choices=("test", "bench"))
    p.add_argument("-m", "--module", action="append", default=[], metavar="SOURCE",
                   help="a FILE.py or MODULE to load (repeatable; default: the modules in iron.toml)")
    p.add_argument("--filter", action="append", default=[], help="only items whose id or kernel contains this")
    p.add_argument("--backend", default=None,
                   help="interp, vulkan, cuda, ... or auto: cuda, else vulkan, else interp (default: the backend "
                        "option)")
    p.add_argument("--dtype", action="append", default=[], help="only these dtypes (repeatable, comma-separated)")
    p.add_argument("--skip", action="append", default=[], metavar="ID", help="leave out this item")
    p.add_argument("--skip-from", metavar="FILE.json", help="leave out the items this JSON list of ids names")
    p.add_argument("--only", action="append", default=[], metavar="ID", help="run only these items")
    p.add_argument("--seed", type=int, default=0, help="base seed of the random inputs")
    p.add_argument("--lookahead", type=int, default=None,
                   help="tests: items whose setups and oracles run ahead on worker threads (0: none)")
    p.add_argument("--list", action="store_true", help="send the plan and stop")
    return p


def device_name(device: Any) -> str:
    """The device's own name ("NVIDIA H200", "llvmpipe (...)"), else its backend's."""
    info = getattr(device, "info", None)
    if isinstance(info, dict) and info.get("name"):
        return str(info["name"])
    return str(getattr(device, "device_name", None) or device.name)


def run(argv: Sequence[str], out: IO[str]) -> int:
    """Run the command ``argv`` describes, writing the protocol to ``out``; the exit status."""
    args = build_parser().parse_args(list(argv))
    emit = Emitter(out)
    backend = args.backend or str(config.get("backend"))
    try:
        if backend == "auto":
            backend = best_backend()  # cuda, else vulkan, else interp
        device = get_device(backend)
    except Exception as e:  # no driver, no such backend: nothing can run
        emit("hello", {"command": args.command, "backend": backend, "device": None, "pid": os.getpid()})
        return _fatal(emit, f"backend '{backend}' is unavailable: {describe(e)}")
    lookahead = (os.cpu_count() or 1) if args.lookahead is None else max(0, args.lookahead)
    if args.command == "bench":
        lookahead = 0
    name = device_name(device)
    emit("hello", {"command": args.command, "backend": backend, "device": name, "pid": os.getpid(),
                   "seed": args.seed, "lookahead": lookahead})
    try:
        sources, proj = project.sources(args.module or None)
    except IronError as e:
        return _fatal(emit, str(e))
    for source in sources:
        try:
            project.load(source, proj)
        except Exception as e:  # one module failing to import: report it, run the others
            emit("error", {"item": None, "message": f"cannot load {source}: {describe(e)}"})
    dtypes = [d.strip() for item in args.dtype for d in item.split(",") if d.strip()]
    items = registry.select(args.command, backend, args.filter, dtypes)
    if args.only:
        only = set(args.only)
        items = [i for i in items if i.id in only]
    skip = set(args.skip) | set(_ids(args.skip_from) if args.skip_from else ())
    items = [i for i in items if i.id not in skip]
    emit("plan", {"items": [i.id for i in items],
                  "meta": [{"name": i.entry.name, "kernel": i.entry.kernel_name, "case": i.case_label,
                            "dtype": i.dtype_label} for i in items]})
    failed = 0
    if not args.list:
        if args.command == "test":
            failed = run_tests(items, device, backend, args.seed, emit, lookahead)
        else:
            failed = run_benches(items, device, backend, name, args.seed, emit, timing.Policy.from_config())
    emit("done", {"items": len(items), "failed": failed})
    return 0


def _ids(path: str) -> list[str]:
    """The item ids in ``path``, a JSON list the CLI wrote (``--skip-from``)."""
    with open(path, encoding="utf-8") as f:
        ids = json.load(f)
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"{path}: expected a JSON list of item ids")
    return ids


def _fatal(emit: Emitter, message: str) -> int:
    emit("error", {"item": None, "message": message})
    emit("done", {"items": 0, "failed": 0})
    return 2


def protocol_stream() -> IO[str]:
    """The real stdout, for protocol lines only; file descriptor 1 (and ``sys.stdout``) become stderr,
    so prints from user code, C extensions and drivers cannot corrupt the stream."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    out = protocol_stream()
    try:
        return run(sys.argv[1:] if argv is None else argv, out)
    except Exception as e:  # a bug of the runner itself: say so on the stream, details on stderr
        traceback.print_exc()
        Emitter(out)("error", {"item": None, "message": f"the runner failed: {describe(e)}"})
        return 3
    finally:
        out.flush()


__all__ = ["Emitter", "build_parser", "device_name", "main", "run"]

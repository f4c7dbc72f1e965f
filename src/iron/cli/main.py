"""The ``iron`` command line: argument parsing and dispatch to one module per command."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from ..core.errors import IronCompileError, IronError
from . import build_cmd, inspect_cmd

#: command name -> (add its arguments, run it)
COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "inspect": (inspect_cmd.add_arguments, inspect_cmd.run),
    "build": (build_cmd.add_arguments, build_cmd.run),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iron", description="Write GPU kernels once; run them everywhere.")
    from .._version import __version__

    parser.add_argument("--version", action="version", version=f"iron {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (add_args, _) in COMMANDS.items():
        p = sub.add_parser(name, help=(COMMAND_HELP.get(name, "")), description=COMMAND_HELP.get(name))
        add_args(p)
    return parser


COMMAND_HELP = {
    "inspect": "show a kernel's IR as written and after each optimisation pass",
    "build": "write every kernel variant's sources and compiled artifacts, a manifest and Swift bindings",
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    _, run = COMMANDS[args.command]
    try:
        return run(args)
    except IronCompileError as e:
        print(str(e), file=sys.stderr)
        return 1
    except IronError as e:
        print(f"iron {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

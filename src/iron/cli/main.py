"""The ``iron`` command line: argument parsing and dispatch to one module per command."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import tomllib
from typing import Any, Sequence

from ..core.errors import IronCompileError, IronError

#: Every command is a module ``iron.cli.<name>_cmd`` with ``HELP``, ``add_arguments(parser)`` and
#: ``run(args) -> exit code``; they are found by name, so adding a command touches no other file.
CommandModule = Any


def commands() -> dict[str, CommandModule]:
    """Each command's module by command name, in alphabetical order."""
    from .. import cli

    found = {}
    for info in sorted(pkgutil.iter_modules(cli.__path__), key=lambda m: m.name):
        if info.name.endswith("_cmd"):
            found[info.name.removesuffix("_cmd")] = importlib.import_module(f"{cli.__name__}.{info.name}")
    return found


def build_parser(found: dict[str, CommandModule] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iron", description="Write GPU kernels once; run them everywhere.")
    from .._version import __version__

    parser.add_argument("--version", action="version", version=f"iron {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in (found or commands()).items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    found = commands()
    parser = build_parser(found)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return found[args.command].run(args)
    except IronCompileError as e:
        print(str(e), file=sys.stderr)
        return 1
    except IronError as e:
        print(f"iron {args.command}: error: {e}", file=sys.stderr)
        return 1
    except tomllib.TOMLDecodeError as e:  # iron.toml is read through iron.config, which names the file; a stray
        print(f"iron {args.command}: error: a TOML file is malformed: {e}", file=sys.stderr)  # reader gets this
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

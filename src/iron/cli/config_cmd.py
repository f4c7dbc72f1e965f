"""``iron config``: every option's resolved value and where it came from."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .. import config
from . import render

HELP = "show every option's value and where it came from (default, iron.toml, IRON_* environment, code)"

#: Keys of iron.toml's [iron] table that are project settings rather than options.
PROJECT_KEYS = config.PROJECT_KEYS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", metavar="OPTION", help="show only this option")
    p.add_argument("--json", action="store_true", help="print the options as JSON")


def _toml_path() -> Path | None:
    return config.find_toml()


def unknown_keys(path: Path | None) -> list[str]:
    """Keys of the [iron] table that name no option (likely typos: they are ignored)."""
    return config.unknown_keys(path)


def _shown(name: str, value: Any) -> str:
    if value is None:
        return "auto" if "auto" in config.OPTIONS[name].doc else "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def entries(names: list[str]) -> list[dict[str, Any]]:
    resolved = config.resolve()
    return [{"name": n, "value": resolved[n][0], "shown": _shown(n, resolved[n][0]), "source": resolved[n][1],
             "env": config.OPTIONS[n].env, "default": config.OPTIONS[n].default, "doc": config.OPTIONS[n].doc}
            for n in names]


def run(args: argparse.Namespace) -> int:
    if args.name and args.name not in config.OPTIONS:
        raise config.ConfigError(f"unknown option {args.name!r}; options: {', '.join(config.OPTIONS)}")
    toml = _toml_path()
    warnings = config.warnings(toml)  # shown here, so resolving does not print them again
    names = [args.name] if args.name else list(config.OPTIONS)
    try:
        rows = entries(names)
    except config.ConfigError:  # a bad value: the likely typos may be why, so they come first
        for w in warnings:
            print(f"iron: warning: {w}", file=sys.stderr)
        raise
    try:
        cache, cache_problem = config.cache_dir(), None
    except config.ConfigError as e:  # commands that need no cache still run; this one says what is wrong
        cache, cache_problem = None, str(e)
    strays = unknown_keys(toml)
    if args.json:
        render.print_json({"toml": str(toml) if toml else None, "cache_dir": str(cache) if cache else None,
                           "cache_dir_error": cache_problem, "unknown_toml_keys": strays, "warnings": warnings,
                           "options": [{k: r[k] for k in ("name", "value", "source", "env", "default", "doc")}
                                       for r in rows]})
        return 1 if cache_problem else 0
    headers = ["option", "value", "source", "environment"]
    table = [[r["name"], r["shown"], _source(r["source"], toml), r["env"]] for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(headers)]
    out = [f"iron config · iron.toml: {toml or 'none found (here or above, up to the project root)'}", ""]
    out.append("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    out += ["  ".join(c.ljust(w) for c, w in zip(t, widths)).rstrip() for t in table]
    out.append("")
    if cache_problem:
        out.append(f"cache directory: error: {cache_problem}")
    elif not args.name:
        out.append(f"cache directory: {cache or 'off'}")
    out += [f"warning: {w}" for w in warnings]
    out.append("precedence: default < iron.toml < IRON_* < set in code < a command's own flags "
               "(e.g. iron bench --backend)")
    sys.stdout.write("\n".join(out) + "\n")
    return 1 if cache_problem else 0


def _source(source: str, toml: Path | None) -> str:
    return "iron.toml" if toml is not None and source == str(toml) else source

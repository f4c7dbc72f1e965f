"""``iron update``: upgrade Iron through pip, to the newest release, a version, a local wheel or a git ref."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import config
from ..core.errors import IronError

HELP = "upgrade Iron through pip: the newest release, a version, a local wheel or a git ref (--dry-run: show it)"

DIST = "iron-kernels"
_VERSION = re.compile(r"^(==)?\d+(\.\d+)*([a-z]+\d*)?(\.post\d+)?(\.dev\d+)?$", re.IGNORECASE)


class UpdateError(IronError):
    pass


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", nargs="?", metavar="VERSION|WHEEL|git+URL@REF",
                   help="a version (0.2.0), a local .whl file, or a pip git URL (default: the newest release)")
    p.add_argument("--ref", metavar="REF", help="a git branch, tag or commit of --repo (or of the repository "
                                               "Iron was installed from)")
    p.add_argument("--repo", metavar="URL", help="the git repository for --ref (https://... or git@...)")
    p.add_argument("--pre", action="store_true", help="allow pre-releases")
    p.add_argument("--dry-run", action="store_true", help="print the pip command and run nothing")
    p.add_argument("--force", action="store_true", help="update even an editable (development) install")


@dataclass(frozen=True)
class Installed:
    version: str | None
    #: PEP 610 direct_url.json of the installed distribution, if pip recorded one.
    url: str | None = None
    vcs: str | None = None
    editable: bool = False


def installed() -> Installed:
    from importlib import metadata

    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        return Installed(None)
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        direct = {}
    return Installed(dist.version, direct.get("url"), (direct.get("vcs_info") or {}).get("vcs"),
                     bool((direct.get("dir_info") or {}).get("editable")))


def requirement(args: argparse.Namespace, have: Installed) -> tuple[str, list[str]]:
    """(the pip requirement to install, extra pip flags) for the command line."""
    if args.ref:
        repo = args.repo or (have.url if have.vcs == "git" else None)
        if not repo:
            raise UpdateError("--ref needs --repo URL (Iron was not installed from a git repository)")
        if args.target:
            raise UpdateError("give either a TARGET or --ref, not both")
        return f"{DIST} @ git+{repo.removeprefix('git+')}@{args.ref}", []
    if args.repo:
        raise UpdateError("--repo goes with --ref REF")
    target = (args.target or "").strip()
    if not target:
        return DIST, []
    if target.endswith(".whl"):
        wheel = Path(target).expanduser()
        if not wheel.is_file():
            raise UpdateError(f"no wheel at {wheel}")
        # The same version number as the installed one would be skipped without --force-reinstall.
        return str(wheel.resolve()), ["--force-reinstall", "--no-deps"]
    if target.startswith("git+"):
        return f"{DIST} @ {target}", []
    if _VERSION.match(target):
        return f"{DIST}=={target.removeprefix('==')}", []
    raise UpdateError(f"not a version, a .whl file or a git+URL: {target!r} (e.g. iron update 0.2.0, "
                      "iron update dist/iron_kernels-0.2.0-py3-none-any.whl, iron update --ref main)")


def pip_command(args: argparse.Namespace, have: Installed) -> list[str]:
    req, extra = requirement(args, have)
    return [sys.executable, "-m", "pip", "install", "--upgrade", *(["--pre"] if args.pre else []), *extra, req]


def run(args: argparse.Namespace) -> int:
    have = installed()
    cmd = pip_command(args, have)
    shown = shlex.join(cmd)
    if args.dry_run:
        print(f"would run: {shown}")
        return 0
    if have.editable and not args.force:
        where = (have.url or "").removeprefix("file://")
        raise UpdateError(f"Iron is an editable install of {where or 'a source tree'}: update that checkout with git "
                          "instead (or pass --force to replace it with a pip install)")
    print(f"running: {shown}", flush=True)
    code = subprocess.run(cmd, env=config.child_environment({})).returncode
    if code != 0:
        raise UpdateError(f"pip failed (exit status {code}); nothing else was changed")
    after = installed()
    print(f"iron {have.version or '(not installed)'} -> {after.version or '?'}")
    return 0

"""``iron clean``: remove what Iron wrote (build outputs and on-disk caches), and nothing else.

Iron marks what it owns: each cache folder it creates holds ``.iron-cache``
(:func:`iron.codegen.diskcache.ensure_folder`), and ``iron build`` leaves
``.iron-build`` listing the files it wrote (:mod:`iron.harness.build_marker`).
Only files Iron recognises as its own are removed: cache envelopes and probe
records in marked cache folders, and build outputs the marker lists whose
content is unchanged.  Walks never follow a symlink, and a folder whose
cleaning could reach the user's files (the home folder, a file-system root, a
folder holding the project) is refused before anything is read.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from .. import config
from ..config.safe_paths import unsafe_folder_reason
from ..harness import build_marker, measured
from ..codegen import diskcache

HELP = "remove build/iron and Iron's caches (compiled SPIR-V, CUDA modules, pipeline caches, probe results)"

#: At most this many "kept" lines are printed; the rest are counted.
MAX_KEPT_LINES = 10


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    p.add_argument("--build-dir", default="build/iron", metavar="DIR",
                   help="the build output folder to clean (default: build/iron, as iron build writes)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--build-only", action="store_true", help="leave the caches alone")
    which.add_argument("--cache-only", action="store_true", help="leave the build folder alone")


@dataclass
class Target:
    """One folder to clean: the files and (then empty) folders to remove, and how much of it stays."""

    path: Path
    files: list[Path] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)  # deepest first, removed only if empty by then
    marker: Path | None = None  # removed (last) only when nothing of anyone else's stays
    size: int = 0
    kept: int = 0  # entries inside that are not Iron's (or changed since Iron wrote them)

    def add(self, path: Path, size: int) -> None:
        self.files.append(path)
        self.size += size


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _walk(folder: Path) -> Iterator[tuple[Path, os.stat_result | None]]:
    """Everything below ``folder``, folders after their contents; symlinks are yielded, never followed."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        st = _lstat(path)
        if st is not None and stat.S_ISDIR(st.st_mode):
            yield from _walk(path)
        yield path, st


def _is_iron_cache_file(path: Path, st: os.stat_result | None) -> bool:
    return st is not None and stat.S_ISREG(st.st_mode) and \
        (diskcache.is_envelope_file(path) or measured.is_probe_file(path))


def _cache_target(folder: Path) -> tuple[Target | None, str]:
    """How to clean one entry of the cache directory, or (None, why it is kept whole)."""
    st = _lstat(folder)
    if st is None or stat.S_ISLNK(st.st_mode):
        return None, "a symlink: not followed"
    if not stat.S_ISDIR(st.st_mode):
        return None, "not one of Iron's caches"
    marked = diskcache.is_marked(folder)
    target = Target(folder)
    for path, pst in _walk(folder):
        if pst is not None and stat.S_ISDIR(pst.st_mode):
            target.folders.append(path)
        elif marked and path.parent == folder and path.name == diskcache.MARKER:
            continue  # removed with the folder, last
        elif _is_iron_cache_file(path, pst):
            target.add(path, pst.st_size if pst else 0)
        elif marked:
            target.kept += 1
        else:  # a folder Iron did not mark: only one holding nothing but Iron's files (an older Iron's) goes
            return None, "no .iron-cache marker, and not only Iron's files"
    if not marked and not target.files:
        return None, "no .iron-cache marker"
    if marked:
        target.marker = folder / diskcache.MARKER
    target.folders.append(folder)
    return target, ""


def _build_target(build_dir: Path) -> tuple[Target | None, str]:
    """The files ``iron build`` wrote in ``build_dir`` and that are unchanged, or (None, why none)."""
    st = _lstat(build_dir)
    if st is not None and stat.S_ISLNK(st.st_mode):
        return None, "a symlink: not followed"
    listed = build_marker.read(build_dir)
    if listed is None:
        return None, f"no {build_marker.MARKER} marker: not written by iron build"
    target = Target(build_dir)
    folders: set[Path] = set()
    for rel, digest in sorted(listed.items()):
        path = build_dir
        for part in rel.split("/")[:-1]:  # through real folders only: never out through a symlink
            path = path / part
            pst = _lstat(path)
            if pst is None or not stat.S_ISDIR(pst.st_mode):
                break
            folders.add(path)
        else:
            path = build_dir / rel
            pst = _lstat(path)
            if pst is None:
                continue
            if stat.S_ISREG(pst.st_mode) and _unchanged(path, digest):
                target.add(path, pst.st_size)
    target.marker = build_dir / build_marker.MARKER
    target.folders.extend(sorted(folders, key=lambda p: len(p.parts), reverse=True))
    target.folders.append(build_dir)
    removed = {*target.files, target.marker}
    target.kept = sum(1 for path, pst in _walk(build_dir)
                      if path not in removed and not (pst is not None and stat.S_ISDIR(pst.st_mode)))
    return target, ""


def _unchanged(path: Path, digest: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            return build_marker.sha256(f.read()) == digest
    except OSError:
        return False


def _human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _remove(target: Target) -> None:
    for path in target.files + ([target.marker] if target.marker and not target.kept else []):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    for folder in target.folders:
        try:
            os.rmdir(folder)  # only an empty folder: whatever was kept keeps its folders
        except OSError:
            pass


def _refusal(label: str, folder: Path) -> str | None:
    from ..harness.project import ProjectError, find_project

    try:
        project = find_project()
    except ProjectError:
        project = None
    why = unsafe_folder_reason(folder, project.root if project else None)
    if why is None:
        return None
    advice = ("set cache_dir to a folder of its own (the default is ~/.cache/iron)" if label == "cache folder"
              else "point --build-dir at iron build's output folder")
    return f"refusing to clean the {label} {folder}: {why}; {advice}"


def run(args: argparse.Namespace) -> int:
    build_dir = None if args.cache_only else Path(args.build_dir).expanduser()
    # An explicit cache_dir holding the user's files is refused by the option itself (a ConfigError, as in every
    # command); the check below also covers the default place.
    cache = None if args.build_only else config.cache_dir()
    for label, folder in (("--build-dir", build_dir), ("cache folder", cache)):
        refusal = _refusal(label, folder) if folder is not None else None
        if refusal:
            print(f"iron clean: error: {refusal}", file=sys.stderr)
            return 2
    targets: list[Target] = []
    kept: list[str] = []
    if build_dir is not None and os.path.lexists(build_dir):
        target, why = _build_target(build_dir)
        if target is None:
            kept.append(f"kept {build_dir} ({why})")
        else:
            targets.append(target)
    if cache is not None and cache.is_dir():
        for entry in sorted(cache.iterdir()):
            if entry.name == diskcache.MARKER:
                continue
            target, why = _cache_target(entry)
            if target is None:
                kept.append(f"kept {entry} ({why})")
            else:
                targets.append(target)
    verb = "would remove" if args.dry_run else "removed"
    total = 0
    for target in targets:
        total += target.size
        if not args.dry_run:
            _remove(target)
        if target.kept:
            print(f"{verb} {len(target.files)} files of Iron's from {target.path} ({_human(target.size)}); "
                  f"kept {target.kept} that are not Iron's or changed since Iron wrote them")
        else:
            print(f"{verb} {target.path} ({_human(target.size)})")
    for line in kept[:MAX_KEPT_LINES]:
        print(line)
    if len(kept) > MAX_KEPT_LINES:
        print(f"kept {len(kept) - MAX_KEPT_LINES} more entries that are not Iron's")
    if cache is not None and not args.dry_run and diskcache.is_marked(cache) and \
            [p.name for p in cache.iterdir()] == [diskcache.MARKER]:
        _remove(Target(cache, [], [cache], marker=cache / diskcache.MARKER))
    if not targets:
        where = [str(p) for p in (build_dir, cache) if p is not None]
        print(f"nothing to clean ({', '.join(where) or 'caches are off'})")
    else:
        print(f"{verb} {len(targets)} item{'s' if len(targets) != 1 else ''}, {_human(total)}")
    return 0

"""``iron clean``: remove build outputs and Iron's on-disk caches, saying what went."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from .. import config

HELP = "remove build/iron and Iron's caches (compiled SPIR-V, CUDA modules, pipeline caches, probe results)"

#: Sub-folders of the cache directory that Iron itself creates.
CACHE_FOLDERS = ("spirv", "vulkan", "cuda", "hip", "metal", "probes")
#: How Iron's own cache files start (the envelope of iron.runtime.diskcache), for folders not listed above.
BLOB_MAGIC = b"IRONBLOB"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    p.add_argument("--build-dir", default="build/iron", metavar="DIR",
                   help="the build output folder to remove (default: build/iron, as iron build writes)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--build-only", action="store_true", help="leave the caches alone")
    which.add_argument("--cache-only", action="store_true", help="leave the build folder alone")


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _is_iron_folder(folder: Path) -> bool:
    """A folder Iron did not name but that holds only Iron cache files (and is not empty)."""
    files = [f for f in folder.rglob("*") if f.is_file()]
    if not files:
        return False
    for f in files:
        try:
            with f.open("rb") as fh:
                if fh.read(len(BLOB_MAGIC)) != BLOB_MAGIC:
                    return False
        except OSError:
            return False
    return True


def is_build_output(folder: Path) -> bool:
    """Whether ``folder`` holds only what ``iron build`` writes (its kind folders and manifest.json).

    ``--build-dir`` is the user's to choose; a folder with anything else in it (a project, a home
    directory) is never removed.
    """
    from ..harness.build import EMIT_KINDS

    names = {folder_name for _, folder_name, _, _ in EMIT_KINDS.values() if folder_name} | {"manifest.json"}
    return folder.is_dir() and not folder.is_symlink() and all(e.name in names for e in folder.iterdir())


def targets(build_dir: Path | None, cache: Path | None) -> tuple[list[Path], list[Path]]:
    """(paths to remove, paths in the cache directory left alone because they are not Iron's)."""
    remove: list[Path] = []
    kept: list[Path] = []
    if build_dir is not None and build_dir.exists():
        (remove if is_build_output(build_dir) else kept).append(build_dir)
    if cache is not None and cache.is_dir():
        for entry in sorted(cache.iterdir()):
            if entry.is_dir() and not entry.is_symlink() and (entry.name in CACHE_FOLDERS or _is_iron_folder(entry)):
                remove.append(entry)
            else:
                kept.append(entry)
    return remove, kept


def run(args: argparse.Namespace) -> int:
    build_dir = None if args.cache_only else Path(args.build_dir)
    cache = None if args.build_only else config.cache_dir()
    remove, kept = targets(build_dir, cache)
    verb = "would remove" if args.dry_run else "removed"
    total = 0
    for path in remove:
        size = _size(path)
        total += size
        if not args.dry_run:
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        print(f"{verb} {path} ({_human(size)})")
    for path in kept:
        what = "not only iron build's output" if path == build_dir else "not one of Iron's caches"
        print(f"kept {path} ({what})")
    if cache is not None and cache.is_dir() and not args.dry_run and not any(cache.iterdir()):
        cache.rmdir()
    if not remove:
        where = [str(p) for p in (build_dir, cache) if p is not None]
        print(f"nothing to clean ({', '.join(where) or 'caches are off'})")
    else:
        print(f"{verb} {len(remove)} item{'s' if len(remove) != 1 else ''}, {_human(total)}")
    return 0

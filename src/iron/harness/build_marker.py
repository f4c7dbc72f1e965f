"""The marker ``iron build`` leaves in its output folder: which files it wrote, and their contents' hashes.

``iron clean --build-dir DIR`` removes only files this marker lists whose
content is still what Iron wrote, so a folder that merely looks like build
output (a ``cuda/k.cu`` of the user's) is never touched, and neither is a
file of Iron's the user has since edited.  Successive builds into one
folder add to the list.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Mapping

MARKER = ".iron-build"
FORMAT = "iron-build"
VERSION = 1


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def safe_relative(rel: str) -> bool:
    """Whether ``rel`` names a path inside the output folder (relative, no ``..``, no empty part)."""
    p = PurePosixPath(rel)
    return bool(rel) and not p.is_absolute() and "\\" not in rel and \
        all(part not in ("", ".", "..") for part in rel.split("/"))


def read(out_dir: Path) -> dict[str, str] | None:
    """{relative path: SHA-256} of the files Iron wrote in ``out_dir``, or None when it is not marked.

    The marker is read only from a real folder and a regular file, never through a symlink.
    """
    marker = out_dir / MARKER
    try:
        if not stat.S_ISDIR(os.lstat(out_dir).st_mode) or not stat.S_ISREG(os.lstat(marker).st_mode):
            return None
        if os.lstat(marker).st_size > 64 << 20:
            return None
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("version"), int) \
            or not 1 <= data["version"] <= VERSION or not isinstance(data.get("files"), dict):
        return None
    return {rel: digest for rel, digest in data["files"].items()
            if isinstance(rel, str) and isinstance(digest, str) and safe_relative(rel)}


def updated(out_dir: Path, files: Mapping[str, bytes]) -> bytes:
    """The marker's new content once ``files`` (relative path -> content) are written to ``out_dir``."""
    listed = dict(read(out_dir) or {})
    listed.update({rel: sha256(data) for rel, data in files.items() if rel != MARKER})
    doc = {"format": FORMAT, "version": VERSION,
           "note": "written by `iron build`; `iron clean` removes the files listed here, if unchanged",
           "files": dict(sorted(listed.items()))}
    return (json.dumps(doc, indent=1) + "\n").encode()


__all__ = ["FORMAT", "MARKER", "VERSION", "read", "safe_relative", "sha256", "updated"]

"""Small files in Iron's cache directory (option ``cache_dir``), written atomically and checked when read.

Each file is an envelope: a magic string, a four-byte kind, a SHA-256, then
the body: the length of the entry's key, the key, the payload.  The checksum
covers the kind and the whole body, and a read names the key it wants, so a
file is data only for the very key it was written for: one moved or copied
to another entry's name, or written by anything but Iron, reads as a miss
with the reason and is replaced by the next write.  A file another process
is writing is never seen half-written (temporary file + ``os.replace``), and
one that is truncated, corrupt or of another kind reads as a miss too.  Disk
trouble (a read-only directory, a full disk) turns a cache off for that
file; it never fails a launch.

Each folder of the cache directory that Iron creates holds a marker file,
``.iron-cache`` (:func:`ensure_folder`), so ``iron clean`` removes only
folders Iron made and, in them, only files that start with :data:`MAGIC`.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import tempfile
from pathlib import Path

MAGIC = b"IRONBLOB"
_DIGEST = 32
_HEADER = len(MAGIC) + 4 + _DIGEST
_KEYLEN = struct.Struct("<I")

#: The marker file in each folder Iron creates under the cache directory, and what it holds.
MARKER = ".iron-cache"
MARKER_FORMAT = "iron-cache"
MARKER_VERSION = 1


def _key_bytes(key: bytes | str) -> bytes:
    return key.encode() if isinstance(key, str) else bytes(key)


def wrap(kind: bytes, payload: bytes, key: bytes | str = b"") -> bytes:
    """``payload`` in an envelope of ``kind`` (four bytes), bound to ``key``."""
    assert len(kind) == 4
    k = _key_bytes(key)
    body = _KEYLEN.pack(len(k)) + k + payload
    return MAGIC + kind + hashlib.sha256(kind + body).digest() + body


def unwrap(kind: bytes, data: bytes, key: bytes | str = b"") -> tuple[bytes | None, str]:
    """(payload, "ok") or (None, why the data is not a sound envelope of ``kind`` written for ``key``)."""
    if len(data) < _HEADER + _KEYLEN.size or not data.startswith(MAGIC):
        return None, "not an Iron cache file (bad magic or truncated header)"
    found = data[len(MAGIC):len(MAGIC) + 4]
    if found != kind:
        return None, f"holds {found!r} data, not {kind!r}"
    body = data[_HEADER:]
    if hashlib.sha256(kind + body).digest() != data[len(MAGIC) + 4:_HEADER]:
        return None, "checksum mismatch (corrupt or truncated)"
    (size,) = _KEYLEN.unpack_from(body)
    stored = body[_KEYLEN.size:_KEYLEN.size + size]
    if len(stored) != size or stored != _key_bytes(key):
        return None, "stored under another key (written for another entry, moved, or foreign)"
    return body[_KEYLEN.size + size:], "ok"


def read(path: Path, kind: bytes, key: bytes | str = b"") -> tuple[bytes | None, str]:
    """The payload stored at ``path`` for ``key``, or (None, why not)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, "no file yet"
    except OSError as e:
        return None, f"unreadable ({e.strerror or e})"
    return unwrap(kind, data, key)


def write(path: Path, kind: bytes, payload: bytes, key: bytes | str = b"") -> str | None:
    """Store ``payload`` for ``key`` at ``path`` atomically; None on success, else why it was not stored.

    The folder holding ``path`` is expected to exist (:func:`ensure_folder`); sub-folders are made.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(path, wrap(kind, payload, key))
        return None
    except OSError as e:
        return f"cannot write {path} ({e.strerror or e})"


def marker_text() -> str:
    return json.dumps({"format": MARKER_FORMAT, "version": MARKER_VERSION,
                       "note": "a folder of Iron's caches: `iron clean` removes Iron's files in it"}) + "\n"


def replace_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in its folder and ``os.replace``: readers see the old
    file or the new one, never half of one.  OSError when it cannot (the temporary file is removed)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_marker(folder: Path) -> None:
    replace_atomically(folder / MARKER, marker_text().encode())


def ensure_folder(folder: Path) -> str | None:
    """Create the cache folder ``folder`` (``<cache_dir>/<name>``) if missing, marked as Iron's.

    Only a folder made here is marked, and the cache directory itself when it
    was made here too: a folder that already existed is someone's, whoever
    wrote into it, and ``iron clean`` leaves it.  None on success, else why
    the folder cannot be used (never raises).
    """
    if folder.is_dir():
        return None
    try:
        parent_existed = folder.parent.is_dir()
        folder.mkdir(parents=True)
    except FileExistsError:
        return None if folder.is_dir() else f"cannot create {folder} (a file is in the way)"
    except OSError as e:
        return f"cannot create {folder} ({e.strerror or e})"
    try:
        _write_marker(folder)
        if not parent_existed:
            _write_marker(folder.parent)
    except OSError as e:
        return f"cannot mark {folder} as Iron's ({e.strerror or e})"
    return None


def is_marked(folder: Path) -> bool:
    """Whether ``folder`` (a real folder, not a symlink) carries Iron's cache marker of a known format."""
    marker = folder / MARKER
    try:
        if folder.is_symlink() or not folder.is_dir() or marker.is_symlink() or not marker.is_file():
            return False
        if marker.stat().st_size > 4096:
            return False
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and data.get("format") == MARKER_FORMAT and \
        isinstance(data.get("version"), int) and 1 <= data["version"] <= MARKER_VERSION


def is_envelope_file(path: Path) -> bool:
    """Whether the regular file ``path`` (not followed if a symlink) starts like one of Iron's envelopes."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        with os.fdopen(fd, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False

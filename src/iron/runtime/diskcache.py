"""Small files in Iron's cache directory (option ``cache_dir``), written atomically and checked when read.

Each file is an envelope: a magic string, a four-byte kind, the SHA-256 of
the payload, then the payload.  A file another process is writing is never
seen half-written (temporary file + ``os.replace``), and one that is
truncated, corrupt or of another kind reads as a miss with the reason,
never as data.  Disk trouble (a read-only directory, a full disk) turns a
cache off for that file; it never fails a launch.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

MAGIC = b"IRONBLOB"
_DIGEST = 32
_HEADER = len(MAGIC) + 4 + _DIGEST


def wrap(kind: bytes, payload: bytes) -> bytes:
    """``payload`` in an envelope of ``kind`` (four bytes)."""
    assert len(kind) == 4
    return MAGIC + kind + hashlib.sha256(payload).digest() + payload


def unwrap(kind: bytes, data: bytes) -> tuple[bytes | None, str]:
    """(payload, "ok") or (None, why the data is not a sound envelope of ``kind``)."""
    if len(data) < _HEADER or not data.startswith(MAGIC):
        return None, "not an Iron cache file (bad magic or truncated header)"
    found = data[len(MAGIC):len(MAGIC) + 4]
    if found != kind:
        return None, f"holds {found!r} data, not {kind!r}"
    payload = data[_HEADER:]
    if hashlib.sha256(payload).digest() != data[len(MAGIC) + 4:_HEADER]:
        return None, "checksum mismatch (corrupt or truncated)"
    return payload, "ok"


def read(path: Path, kind: bytes) -> tuple[bytes | None, str]:
    """The payload stored at ``path``, or (None, why not)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, "no file yet"
    except OSError as e:
        return None, f"unreadable ({e.strerror or e})"
    return unwrap(kind, data)


def write(path: Path, kind: bytes, payload: bytes) -> str | None:
    """Store ``payload`` at ``path`` atomically; None on success, else why it was not stored."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(wrap(kind, payload))
        os.replace(tmp, path)
        return None
    except OSError as e:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return f"cannot write {path} ({e.strerror or e})"

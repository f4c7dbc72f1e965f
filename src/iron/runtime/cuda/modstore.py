"""CUDA modules on disk: one entry per key under ``<cache_dir>/cuda/``, plus an index for miss reasons.

An entry is a :mod:`iron.runtime.diskcache` envelope (magic, kind, SHA-256
of the payload) around a small JSON header (the key's components, the entry
point, ptxas's report) and the CUBIN or PTX.  Reading checks the envelope,
the header, that the key stored is the key asked for, and the binary's own
magic, so a corrupt, partial or foreign file reads as a miss with the
reason, and is rebuilt and replaced.  Writes are atomic (a temporary file
renamed into place), so two processes filling the cache at once each see
either nothing or a whole entry; the last writer wins with identical
content.  ``index/<entry>.json`` keeps the key of each entry point's last
build, which is what :func:`.cachekey.explain_miss` compares against.  The
``cuda`` folder is marked as Iron's when the store creates it
(:func:`iron.runtime.diskcache.ensure_folder`), for ``iron clean``.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import diskcache

KIND = b"CUMD"
INDEX_KIND = b"CIDX"
_LEN = struct.Struct("<I")


@dataclass(frozen=True)
class Entry:
    components: dict[str, Any]
    entry: str
    binary: bytes
    report: dict[str, Any]


def encode(entry: Entry) -> bytes:
    header = json.dumps({"components": entry.components, "entry": entry.entry, "report": entry.report},
                        sort_keys=True, default=str).encode()
    return _LEN.pack(len(header)) + header + entry.binary


def decode(payload: bytes, expected: dict[str, Any]) -> tuple[Entry | None, str]:
    """The entry in ``payload`` if it is sound and keyed by ``expected``; else (None, why not)."""
    if len(payload) < _LEN.size:
        return None, "truncated header"
    (size,) = _LEN.unpack_from(payload)
    if _LEN.size + size > len(payload):
        return None, "truncated header"
    try:
        header = json.loads(payload[_LEN.size:_LEN.size + size])
        comps, name, report = header["components"], header["entry"], header["report"]
    except (ValueError, KeyError, TypeError):
        return None, "unreadable header"
    if comps != expected:
        return None, "stored under another key (a hash collision or a foreign file)"
    binary = payload[_LEN.size + size:]
    problem = binary_problem(binary, comps.get("format", "cubin"))
    if problem:
        return None, problem
    return Entry(comps, name, binary, report), "ok"


def binary_problem(binary: bytes, fmt: str) -> str | None:
    """Why ``binary`` is not a CUBIN (an ELF file) or PTX text; None when it looks like one."""
    if fmt == "cubin":
        return None if binary[:4] == b"\x7fELF" and len(binary) > 64 else "not a CUBIN (no ELF header)"
    return None if b".version" in binary[:4096] and b".target" in binary[:8192] else "not PTX text"


class ModuleStore:
    """Entries under ``directory`` (None: no disk cache, every read misses with that reason)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    def path(self, digest: str, fmt: str) -> Path | None:
        return None if self.directory is None else self.directory / f"{digest}.{fmt}"

    def read(self, digest: str, expected: dict[str, Any]) -> tuple[Entry | None, str]:
        path = self.path(digest, expected["format"])
        if path is None:
            return None, "the disk cache is off (cache_dir = off)"
        payload, why = diskcache.read(path, KIND)
        if payload is None:
            return None, why
        return decode(payload, expected)

    def write(self, digest: str, entry: Entry) -> str | None:
        """Store ``entry``; None on success, else why it was not stored (never raises)."""
        path = self.path(digest, entry.components["format"])
        if path is None:
            return None
        diskcache.ensure_folder(path.parent)  # if it cannot be made, the write below says why
        failed = diskcache.write(path, KIND, encode(entry))
        if failed is None:
            failed = diskcache.write(self._index_path(entry.entry), INDEX_KIND,
                                     json.dumps(entry.components, sort_keys=True).encode())
        return failed

    def last_build(self, entry: str) -> dict[str, Any] | None:
        """The key of ``entry``'s last build recorded here, or None."""
        if self.directory is None:
            return None
        payload, _ = diskcache.read(self._index_path(entry), INDEX_KIND)
        if payload is None:
            return None
        try:
            value = json.loads(payload)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def _index_path(self, entry: str) -> Path:
        assert self.directory is not None
        name = entry if len(entry) <= 160 else entry[:100] + "-" + hashlib.sha256(entry.encode()).hexdigest()[:16]
        return self.directory / "index" / f"{name}.json"

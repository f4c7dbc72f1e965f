"""The one content-addressed cache of compiled artifacts: in memory, and on disk for binaries.

Every stage of :func:`iron.codegen.compiler.compile` is remembered in
memory by what it was made from (the input IR's hash, the target, the
profile, the options), so asking twice costs a dictionary lookup.  Binaries
are also kept on disk, under ``<cache_dir>/<backend's cache folder>/``, one
file per key: the key is a small dict of *components*, each one thing that
changes the machine code (the optimised IR's hash, the emitted source, the
toolchain's version, the architecture, the kind, the options, the profile,
the emitter variant and Iron's own version), and its SHA-256 names the file.

A file is a :mod:`.diskcache` envelope (magic, kind, SHA-256 of the payload)
around a JSON header (the key's components, the entry point, the
toolchain's report) and the binary.  Reading checks the envelope, that the
key stored is the key asked for and the binary's own signature
(:meth:`iron.codegen.backends.BinaryKind.problem`), so a corrupt, partial or
foreign file reads as a miss with the reason, and is rebuilt and replaced.
Writes are atomic.  ``index/<entry>.json`` keeps the key of each entry
point's last build, which :func:`explain_miss` compares against, so "why did
this recompile?" has an answer (:attr:`ArtifactCache.last_miss`).
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Hashable, Sequence

from .. import _version, config
from . import diskcache

#: Bump when the entry format or the meaning of a component changes.
KEY_VERSION = 2
#: The envelope kind of a binary entry, and of an index file.
KIND = b"IRBN"
INDEX_KIND = b"IRIX"
_LEN = struct.Struct("<I")

#: Each component's name in explanations, in the order they are named.
LABELS = {
    "key_version": "cache format",
    "iron": "Iron version",
    "target": "target",
    "ir": "kernel IR hash",
    "source": "emitted source",
    "toolchain": "toolchain version",
    "arch": "architecture",
    "kind": "output kind",
    "options": "compile options",
    "profile": "target profile",
    "variant": "emitter variant",
}


def components(*, target: str, ir_hash: str, source: str, toolchain: str, arch: str, kind: str,
               options: Sequence[str], profile: str, variant: str = "") -> dict[str, Any]:
    """The key of one binary (the source enters as its SHA-256)."""
    return {
        "key_version": KEY_VERSION,
        "iron": _version.__version__,
        "target": target,
        "ir": ir_hash,
        "source": hashlib.sha256(source.encode()).hexdigest(),
        "toolchain": toolchain,
        "arch": arch,
        "kind": kind,
        "options": list(options),
        "profile": profile,
        "variant": variant,
    }


def digest(parts: dict[str, Any]) -> str:
    """The hex SHA-256 of ``parts`` (key order does not matter)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def explain_miss(entry: str, previous: dict[str, Any] | None, current: dict[str, Any]) -> str:
    """Why the build of ``entry`` keyed by ``current`` is not in the cache, given the last one's key."""
    if previous is None:
        return f"'{entry}' was never compiled with this cache (no earlier build recorded)"
    changed = [name for name in LABELS if previous.get(name) != current.get(name)]
    if not changed:
        return f"'{entry}': the cached binary for this very key is gone (removed, or the cache was cleaned)"
    return f"'{entry}' changed since its last cached build: " + "; ".join(
        f"{LABELS[name]} {_short(previous.get(name))} -> {_short(current.get(name))}" for name in changed)


def _short(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12]
    if isinstance(value, list):
        return "[" + " ".join(map(str, value)) + "]" if value else "[] (defaults)"
    return str(value) if value != "" else "(none)"


# ---------------------------------------------------------------- entries on disk
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


def decode(payload: bytes, expected: dict[str, Any],
           problem: Callable[[bytes], str | None] | None = None) -> tuple[Entry | None, str]:
    """The entry in ``payload`` if it is sound and keyed by ``expected``; else (None, why not).
    ``problem(binary)`` says why a binary is not of its kind (None: it looks like one)."""
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
    why = problem(binary) if problem is not None else None
    if why:
        return None, why
    return Entry(comps, name, binary, report), "ok"


class ArtifactStore:
    """Binary entries in one folder (None: no disk cache, every read misses with that reason)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    def path(self, key: str, suffix: str) -> Path | None:
        return None if self.directory is None else self.directory / f"{key}{suffix}"

    def read(self, key: str, expected: dict[str, Any], suffix: str,
             problem: Callable[[bytes], str | None] | None = None) -> tuple[Entry | None, str]:
        path = self.path(key, suffix)
        if path is None:
            return None, "the disk cache is off (cache_dir = off)"
        payload, why = diskcache.read(path, KIND)
        if payload is None:
            return None, why
        return decode(payload, expected, problem)

    def write(self, key: str, entry: Entry, suffix: str) -> str | None:
        """Store ``entry``; None on success, else why it was not stored (never raises)."""
        path = self.path(key, suffix)
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


# ---------------------------------------------------------------- the cache
class ArtifactCache:
    """Memory for every stage, plus the disk stores of binaries under ``directory`` (None: memory only).

    The counters say where artifacts came from (``memory_hits``, ``disk_hits``, ``compiles``: toolchain
    runs, ``rebuilt``: damaged files replaced, ``write_failures``) and :attr:`last_miss` why the last disk
    lookup missed.  Thread-safe: builds run on several threads at once (a runner's build pool).
    """

    def __init__(self, directory: Path | None | object = None) -> None:
        self._directory = directory
        self._memory: dict[Hashable, Any] = {}
        self._stores: dict[tuple[Path | None, str], ArtifactStore] = {}
        self._lock = threading.Lock()
        self.memory_hits = 0
        self.disk_hits = 0
        self.compiles = 0
        self.rebuilt = 0
        self.write_failures = 0
        #: Why the last disk lookup missed ("" until one has).
        self.last_miss = ""

    def __len__(self) -> int:
        return len(self._memory)

    @property
    def directory(self) -> Path | None:
        """The cache directory: as given, or the ``cache_dir`` option's now (:func:`default_cache`)."""
        return cache_directory() if self._directory is FROM_CONFIG else self._directory  # type: ignore[return-value]

    def recall(self, key: Hashable, count: bool = True) -> Any:
        """What was remembered under ``key`` (counted as a memory hit unless ``count`` is off), or None."""
        with self._lock:
            hit = self._memory.get(key)
            if hit is not None and count:
                self.memory_hits += 1
            return hit

    def remember(self, key: Hashable, value: Any) -> Any:
        """Keep ``value`` under ``key``; what is kept (the first value, when two threads raced)."""
        with self._lock:
            return self._memory.setdefault(key, value)

    def count(self, counter: str, miss: str | None = None) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)
            if miss is not None:
                self.last_miss = miss

    def store(self, folder: str) -> ArtifactStore:
        """The disk store of one backend's binaries (``<directory>/<folder>``)."""
        directory = self.directory
        with self._lock:
            store = self._stores.get((directory, folder))
            if store is None:
                store = self._stores[(directory, folder)] = ArtifactStore(
                    directory / folder if directory is not None else None)
            return store

    @property
    def stats(self) -> dict[str, Any]:
        """Where artifacts came from so far, the cache directory and the last miss's reason."""
        return {"memory_hits": self.memory_hits, "disk_hits": self.disk_hits, "compiles": self.compiles,
                "rebuilt": self.rebuilt, "write_failures": self.write_failures, "last_miss": self.last_miss,
                "directory": _directory_text(self._directory)}


def _directory_text(directory: Path | None | object) -> str | None:
    if directory is FROM_CONFIG:
        return "the cache_dir option's"
    return None if directory is None else str(directory)


def cache_directory(override: str | Path | None = None) -> Path | None:
    """The ``cache_dir`` option, or ``override`` ("off": no disk cache)."""
    if override is None:
        return config.cache_dir()
    return None if str(override).strip().lower() == config.CACHE_OFF else Path(override).expanduser()


#: An ArtifactCache directory that follows the ``cache_dir`` option (read when a binary is stored or looked up).
FROM_CONFIG = object()

_default = ArtifactCache(FROM_CONFIG)


def default_cache() -> ArtifactCache:
    """The process's cache (what ``compile`` uses unless given one); its disk part is the ``cache_dir`` option's
    folder at the time a binary is looked up."""
    return _default

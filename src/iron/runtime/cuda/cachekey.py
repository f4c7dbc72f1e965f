"""What a compiled CUDA module depends on, as a cache key, and why a lookup missed.

The key is a small dict of *components*, each one thing that changes the
machine code: the kernel's IR hash, the emitted source, NVRTC's version (with
the binding and header versions), the architecture and output format, the
compile options (``fmad``), the emitter's profile and Iron's own version.
Its SHA-256 names the disk entry.  When a lookup misses, comparing the
components with those of the last build of the same entry point says what
changed (:func:`explain_miss`), so "why did this recompile?" has an answer.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

from ... import _version

#: Bump when the entry format or the meaning of a component changes.
KEY_VERSION = 1

#: Each component's name in explanations.
LABELS = {
    "key_version": "cache format",
    "iron": "Iron version",
    "ir": "kernel IR hash",
    "source": "emitted CUDA source",
    "nvrtc": "NVRTC version",
    "arch": "architecture",
    "format": "output format",
    "options": "compile options",
    "profile": "target profile",
}


def components(ir_hash: str, source: str, nvrtc_version: str, arch: str, fmt: str, options: Sequence[str],
               profile_key: str) -> dict[str, Any]:
    """The key of one module build (the source enters as its SHA-256)."""
    return {
        "key_version": KEY_VERSION,
        "iron": _version.__version__,
        "ir": ir_hash,
        "source": hashlib.sha256(source.encode()).hexdigest(),
        "nvrtc": nvrtc_version,
        "arch": arch,
        "format": fmt,
        "options": list(options),
        "profile": profile_key,
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
        return f"'{entry}': the cached module for this very key is gone (removed, or the cache was cleaned)"
    return f"'{entry}' changed since its last cached build: " + "; ".join(
        f"{LABELS[name]} {_short(previous.get(name))} -> {_short(current.get(name))}" for name in changed)


def _short(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12]
    if isinstance(value, list):
        return "[" + " ".join(map(str, value)) + "]" if value else "[] (defaults)"
    return str(value)

"""Content hashes of kernels, for cache keys.

The hash covers the printed IR (which is stable and names nothing by memory
address) and every metadata entry that changes generated code, plus the IR
format version, so a change to the printer or the op set invalidates old keys.
"""

from __future__ import annotations

import hashlib

from .ir import Kernel
from .printer import format_attr, print_kernel

#: Bump when the IR's meaning changes without its text changing.
IR_VERSION = 1

#: Metadata that does not change generated code (source position, docstrings).
_NOT_HASHED = frozenset({"source_file", "source_line", "doc"})


def kernel_hash(k: Kernel) -> str:
    h = hashlib.sha256()
    h.update(f"iron-ir-v{IR_VERSION}\n".encode())
    h.update(print_kernel(k).encode())
    for key in sorted(k.meta):
        if key in _NOT_HASHED:
            continue
        val = k.meta[key]
        if isinstance(val, dict):
            val = sorted(val.items())
        h.update(f"{key}={format_attr(val)}\n".encode())
    return h.hexdigest()

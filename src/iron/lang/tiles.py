"""Tile layouts kernels write for the matrix units: ``sw128`` (16-bit elements) and ``sw128_8`` (8-bit
floats), the swizzled layout ``mma_wg`` reads."""

from __future__ import annotations

from .helpers import func


@func
def sw128(row, col):
    """Offset of element (row, col) in a swizzled tile (docs/ir.md, "Warpgroup multiplies").

    Each row holds 64 consecutive 16-bit elements (128 bytes); chunk ``c`` (8 elements) of row ``r``
    is stored as chunk ``c ^ (r % 8)``, so the eight rows of an atom spread each column over all
    banks.  A tile starts on a 1024-byte boundary: its offset is a multiple of 512 elements.
    """
    return row * 64 + (((col >> 3) ^ (row & 7)) << 3) + (col & 7)


@func
def sw128_8(row, col):
    """``sw128`` for 8-bit elements: each row holds 128 consecutive bytes; chunk ``c`` (16 elements) of row
    ``r`` is stored as chunk ``c ^ (r % 8)``.  A tile starts on a 1024-byte boundary."""
    return row * 128 + (((col >> 4) ^ (row & 7)) << 4) + (col & 15)

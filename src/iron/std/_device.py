"""Device helpers (``@iron.func``) that several std kernels use."""

from __future__ import annotations

from iron import func
from iron.lang import vec


@func
def splat(s, width):
    """``s`` in every element of a ``width``-wide vector (4 or 8, compile-time)."""
    if width == 4:
        v = vec(s, s, s, s)
    else:
        v = vec(s, s, s, s, s, s, s, s)
    return v

"""The aliasing rule every backend enforces at launch.

Two tensor arguments of one launch are either the *same* buffer (same start,
same size: an in-place ``k(x, x)``) or do not overlap at all, whenever the
kernel writes either of them.  Partial overlap (``k(x[1:], x[:-1])``) is
rejected.  The rule is what lets the passes reason about memory the way a C
compiler with ``__restrict__``-like knowledge does: accesses of two tensors
at provably different indices never touch one element, whether the tensors
are one buffer or two (see ``iron.codegen.passes.vectorize``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..core.errors import LaunchError
from ..core.ir import Kernel


def _span(a: np.ndarray) -> tuple[int, int]:
    start = a.__array_interface__["data"][0]
    return start, a.nbytes


def check_tensor_aliasing(kernel: Kernel, args: Sequence[Any]) -> None:
    """Raise LaunchError when a written tensor partially overlaps another tensor argument."""
    tensors = [(p, a) for p, a in zip(kernel.params, args) if p.is_tensor and isinstance(a, np.ndarray)]
    if len(tensors) < 2:
        return
    for i, (p, a) in enumerate(tensors):
        for q, b in tensors[i + 1:]:
            if not (_written(p) or _written(q)) or a.nbytes == 0 or b.nbytes == 0:
                continue
            if not np.may_share_memory(a, b):
                continue
            if _span(a) == _span(b):
                continue
            raise LaunchError(
                f"kernel '{kernel.name}': arguments '{p.name}' and '{q.name}' overlap without being the same "
                f"buffer; a kernel that writes a tensor needs every other tensor argument to be that very "
                f"buffer or to not overlap it (pass a copy, e.g. np.array(x[1:]))")


def _written(p: Any) -> bool:
    if p.access is not None:
        return p.access != "read"
    return not p.type.readonly

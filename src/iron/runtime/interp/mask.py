"""Active-thread masks: which threads execute the current op.

A mask is immutable; the summaries every op asks for (all / any / the
active indices) are computed once per mask rather than once per op.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np


class Mask:
    def __init__(self, bits: np.ndarray):
        self.bits = bits

    @cached_property
    def all(self) -> bool:
        return bool(self.bits.all())

    @cached_property
    def any(self) -> bool:
        return bool(self.bits.any())

    @cached_property
    def indices(self) -> np.ndarray:
        """The active threads' indices, ascending."""
        return np.flatnonzero(self.bits)

    def __and__(self, other: "Mask | np.ndarray") -> "Mask":
        return Mask(self.bits & (other.bits if isinstance(other, Mask) else other))

    def __or__(self, other: "Mask | np.ndarray") -> "Mask":
        return Mask(self.bits | (other.bits if isinstance(other, Mask) else other))

    def without(self, other: "Mask | np.ndarray") -> "Mask":
        return Mask(self.bits & ~(other.bits if isinstance(other, Mask) else other))

    @staticmethod
    def none(size: int) -> "Mask":
        return Mask(np.zeros(size, dtype=bool))

    def scatter(self, active_values: np.ndarray) -> np.ndarray:
        """A per-thread array holding ``active_values`` at the active threads, zero elsewhere."""
        if self.all:
            return active_values
        out = np.zeros((self.bits.shape[0], *active_values.shape[1:]), dtype=active_values.dtype)
        out[self.indices] = active_values
        return out

"""Atomics applied in order of the threads' linear grid index, vectorised.

The accesses of one atomic op are sorted by (address, thread order); each
run of equal addresses is a *segment* that must be applied in sequence.
Exact associative updates (integer add, min, max, exchange) use scans over
all segments at once; a float add (whose rounding depends on the order) and
a compare-and-swap are applied either round by round (the k-th access of
every segment together) or segment by segment, whichever needs fewer steps.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ...core.dtypes import DType
from ...core.eval import eval_pure
from ...core.types import ScalarType

Array = np.ndarray


class _Segments:
    """Accesses sorted by (address, order), split into runs of one address."""

    def __init__(self, flat: Array, order_key: Array):
        self.order = np.lexsort((order_key, flat))
        addr = flat[self.order]
        start = np.r_[True, addr[1:] != addr[:-1]]
        self.starts = np.flatnonzero(start)
        self.ends = np.r_[self.starts[1:], len(addr)]
        self.seg = np.cumsum(start) - 1
        self.addresses = addr[self.starts]
        self.is_start = start
        self.rank = np.arange(len(addr)) - self.starts[self.seg]
        self.count = len(self.starts)
        #: Accesses to the busiest address.
        self.max_multiplicity = int((self.ends - self.starts).max())

    def unsort(self, sorted_values: Array) -> Array:
        out = np.empty_like(sorted_values)
        out[self.order] = sorted_values
        return out


def apply(opcode: str, data: Array, dtype: DType, flat: Array, order_key: Array, operands: list[Array]) -> Array:
    """Apply an atomic op at ``data[flat]``; return the old value each access saw.

    ``operands`` are the value (and, for ``atomic_cas``, the compare value
    first) of each access, parallel to ``flat``; ``order_key`` orders
    accesses to one address (the global linear thread index).
    """
    if flat.size == 0:
        return np.zeros(0, dtype=data.dtype)
    segs = _Segments(flat, order_key)
    sorted_ops = [v[segs.order] for v in operands]
    base = data[segs.addresses]
    t = ScalarType(dtype)
    if opcode == "atomic_xchg":
        old, final = _exchange(segs, base, sorted_ops[0])
    elif opcode == "atomic_add" and not dtype.is_float:
        old, final = _int_add(segs, base, sorted_ops[0])
    elif opcode in ("atomic_max", "atomic_min"):
        combine = _combiner("max" if opcode == "atomic_max" else "min", t)
        old, final = _scan(segs, base, sorted_ops[0], combine)
    elif opcode == "atomic_add":
        old, final = _sequential(segs, base, sorted_ops, _combiner("add", t), _add_run)
    elif opcode == "atomic_cas":
        old, final = _sequential(segs, base, sorted_ops, _compare_and_swap, _cas_run)
    else:
        raise ValueError(f"unknown atomic op {opcode}")
    data[segs.addresses] = final
    return segs.unsort(old)


def _combiner(opcode: str, t: ScalarType) -> Callable[..., Array]:
    def combine(a: Array, b: Array) -> Array:
        return eval_pure(opcode, {}, [a, b], t)
    return combine


def _exchange(segs: _Segments, base: Array, v: Array) -> tuple[Array, Array]:
    old = np.empty_like(v)
    old[1:] = v[:-1]
    old[segs.is_start] = base
    return old, v[segs.ends - 1]


def _int_add(segs: _Segments, base: Array, v: Array) -> tuple[Array, Array]:
    """Exclusive segmented sums from one global cumulative sum (wrapping arithmetic is exact)."""
    with np.errstate(over="ignore"):
        inclusive = np.cumsum(v, dtype=v.dtype)
        exclusive = inclusive - v
        seg_base = exclusive[segs.starts]
        old = base[segs.seg] + (exclusive - seg_base[segs.seg])
        final = base + (inclusive[segs.ends - 1] - seg_base)
    return old.astype(v.dtype), final.astype(v.dtype)


def _scan(segs: _Segments, base: Array, v: Array, combine: Callable[[Array, Array], Array]) -> tuple[Array, Array]:
    """Segmented inclusive scan by doubling (for exact, associative combines)."""
    acc = v.copy()
    offset = 1
    n = len(acc)
    while offset < n and offset < segs.max_multiplicity:
        same = segs.seg[offset:] == segs.seg[:-offset]
        idx = np.flatnonzero(same) + offset
        acc[idx] = combine(acc[idx - offset], acc[idx])
        offset *= 2
    prior = np.empty_like(acc)
    prior[1:] = acc[:-1]
    first = base[segs.seg]
    old = np.where(segs.is_start, first, combine(first, prior))
    final = combine(base, acc[segs.ends - 1])
    return old, final


def _compare_and_swap(current: Array, compare: Array, value: Array) -> Array:
    """New value of a CAS: ``value`` where the old bits equal ``compare``'s bits."""
    bits = _bits_dtype(current)
    same = current.view(bits) == compare.view(bits)
    return np.where(same, value, current)


def _bits_dtype(a: Array) -> np.dtype:
    return np.dtype(f"u{a.dtype.itemsize}")


def _add_run(start: Array, values: Array) -> tuple[Array, Array]:
    """One address's float adds in order: ``accumulate`` in the storage dtype rounds each step once."""
    acc = np.add.accumulate(np.concatenate([start, values]))
    return acc[:-1], acc[-1:]


def _cas_run(start: Array, compare: Array, values: Array) -> tuple[Array, Array]:
    """One address's compare-and-swaps in order, on bit patterns in plain Python."""
    bits = _bits_dtype(start)
    current = int(start.view(bits)[0])
    olds = []
    for c, v in zip(compare.view(bits).tolist(), values.view(bits).tolist()):
        olds.append(current)
        if current == c:
            current = v
    return (np.array(olds, dtype=bits).view(start.dtype),
            np.array([current], dtype=bits).view(start.dtype))


def _sequential(segs: _Segments, base: Array, operands: list[Array], update: Callable[..., Array],
                run: Callable[..., tuple[Array, Array]]) -> tuple[Array, Array]:
    """Apply accesses in order within each segment.

    ``update(current, *operands)`` applies one access to many segments at once
    (used round by round when segments are many and short); ``run(start,
    *operands)`` applies all accesses of one segment (used when few segments
    are long).  The loop count is min(segments, longest segment).
    """
    old = np.empty_like(operands[-1])
    current = base.copy()
    if segs.max_multiplicity <= segs.count:
        by_rank = np.argsort(segs.rank, kind="stable")
        bounds = np.searchsorted(segs.rank[by_rank], np.arange(segs.max_multiplicity + 1))
        for r in range(segs.max_multiplicity):
            pick = by_rank[bounds[r]:bounds[r + 1]]
            which = segs.seg[pick]
            old[pick] = current[which]
            current[which] = update(current[which], *(o[pick] for o in operands))
    else:
        for s in range(segs.count):
            a, b = segs.starts[s], segs.ends[s]
            old[a:b], current[s:s + 1] = run(current[s:s + 1], *(o[a:b] for o in operands))
    return old, current

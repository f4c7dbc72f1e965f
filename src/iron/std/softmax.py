"""Softmax and log-softmax along the rows of a (rows, n) tensor, in f32 for f16/bf16 inputs.

Two kernels, picked by row length in the host functions:

* :data:`softmax_rows` holds a whole row in registers (``VEC * ITEMS`` f32 values per thread, a group
  of :data:`GROUP` threads per row): HBM is read once and written once; max, then the sum of exps,
  then the write, all from registers.
* :data:`softmax_rows_online` serves rows longer than a group holds (``n > GROUP * MAX_REGS``):
  one read pass keeps each thread's running max and sum (the sum rescaled by ``exp(m_old - m_new)``
  when the max grows), the group combines the pairs, a second read pass writes: 2 reads + 1 write.

Reductions run per thread (a tree over the registers), then across the subgroup (``simd_max`` /
``simd_sum``), then across subgroups through shared memory.  See docs/std/softmax.md.
"""

from __future__ import annotations

import math
from typing import Any

from iron import In, T, Tensor, bf16, f16, f32, func, kernel, variants
from iron.core.errors import LaunchError
from iron.jit.device import device_traits
from iron.lang import (barrier, exp, group_id, lane_id, local, log, num_groups, num_simd_groups, shared,
                       simd_group_id, simd_max, simd_size, simd_sum, static_range, thread_id, vec)

from . import _host
from ._plans import planned

#: Threads per group: one group per row.
GROUP = 256
#: The register kernel's group sizes: GROUP, and SHORT_GROUP for rows it holds at that size.
SHORT_GROUP = 32
GROUPS = (SHORT_GROUP, GROUP)
#: The register path holds at most this many f32 row values per thread (VEC * ITEMS).
MAX_REGS = 64
#: ITEMS (vectors per thread) the register kernel is stamped for.
ITEMS_CHOICES = (1, 2, 4, 8, 16)
#: The most vectors per thread the short-row groups take (ITEMS): rows up to 32 * 4 * 4 = 512 elements (f32)
#: or 32 * 8 * 4 = 1024 (f16, bf16).
SHORT_ITEMS = 4
#: Lavapipe allows at most 65535 groups per axis; a group loops over rows beyond it.
MAX_GROUPS = 65535

NEG_INF = float("-inf")


@func
def group_max(v: f32, red, at: int) -> f32:
    """The maximum of ``v`` over the group: subgroup first, then the subgroups' maxima through
    ``red[at:at + subgroups]`` (shared), which every subgroup reduces again: no second barrier.

    A kernel that reduces again must not write the same slots before every thread has read them:
    the kernels here alternate two slot ranges, so the other reduction's barrier separates them.
    """
    v = simd_max(v)
    if lane_id() == 0:
        red[at + simd_group_id()] = v
    barrier()
    p = NEG_INF
    for i in range(lane_id(), num_simd_groups(), simd_size()):
        p = max(p, red[at + i])
    return simd_max(p)


@func
def group_sum(v: f32, red, at: int) -> f32:
    """The sum of ``v`` over the group, as :func:`group_max`: simd_sum, then the subgroups' sums."""
    v = simd_sum(v)
    if lane_id() == 0:
        red[at + simd_group_id()] = v
    barrier()
    p = 0.0
    for i in range(lane_id(), num_simd_groups(), simd_size()):
        p += red[at + i]
    return simd_sum(p)


@func
def finite_or_zero(m: f32) -> f32:
    """The running max to subtract: 0 while it is still -inf, so that ``exp(-inf - m)`` is 0, not NaN."""
    return 0.0 if m == NEG_INF else m


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8], ITEMS=list(ITEMS_CHOICES), LOG=[False, True], G=list(GROUPS)))
def softmax_rows(x: In[T], out: Tensor[T], rows: int, n: int, aligned: bool):
    """out[r, :] = softmax(x[r, :]) (LOG: log_softmax), one row in registers per group.

    x, out: (rows, n) row-major, contiguous, dtype T (f32/f16/bf16); math in f32, one rounding to T.
    Domain: 1 <= n <= G * VEC * ITEMS; launch G-thread groups (any count: a group loops over rows).
    G: 256, or 32 for short rows (one subgroup per row on a 32-wide device: no idle threads, and the
    cross-subgroup step of the reductions has one partial). ``aligned`` (allowed only when n % VEC == 0
    and x, out start on 16 bytes): each thread moves ITEMS 16-byte vectors; otherwise scalar coalesced
    accesses (the tail case: any n).
    Reduction order: a tree over the thread's VEC*ITEMS registers, simd_max/simd_sum across the
    subgroup, then the subgroups' partials (shared memory) combined by one more subgroup reduction.
    softmax = exp(x - max) * (1 / sum); log_softmax = (x - max) - log(sum).
    Non-finite: a NaN anywhere in a row makes the whole row NaN; a row of only -inf gives NaN (as
    torch); a +inf in a row gives a NaN row (inf - inf); -inf elements of a finite row give 0 (-inf).
    """
    t = thread_id(0)
    red = shared(f32, 2 * G)
    K = VEC * ITEMS
    LEVELS = int(math.log2(K))
    r = local(f32, K)
    acc = local(f32, K)
    for row in range(group_id(0), rows, num_groups(0)):
        base = row * n
        if aligned:
            for j in static_range(ITEMS):
                c = (j * G + t) * VEC
                if c < n:
                    v = f32(x.load(base + c, width=VEC))
                    for k in static_range(VEC):
                        r[j * VEC + k] = v[k]
                else:
                    for k in static_range(VEC):
                        r[j * VEC + k] = NEG_INF
        else:
            for j in static_range(ITEMS):
                for k in static_range(VEC):
                    c = (j * VEC + k) * G + t
                    if c < n:
                        r[j * VEC + k] = f32(x[base + c])
                    else:
                        r[j * VEC + k] = NEG_INF
        for i in static_range(K):
            acc[i] = r[i]
        for lvl in static_range(LEVELS):
            for i in static_range(K >> (lvl + 1)):
                acc[i] = max(acc[i], acc[i + (K >> (lvl + 1))])
        m = group_max(acc[0], red, 0)
        for i in static_range(K):
            if LOG:
                r[i] = r[i] - m
                acc[i] = exp(r[i])
            else:
                r[i] = exp(r[i] - m)
                acc[i] = r[i]
        for lvl in static_range(LEVELS):
            for i in static_range(K >> (lvl + 1)):
                acc[i] = acc[i] + acc[i + (K >> (lvl + 1))]
        s = group_sum(acc[0], red, G)
        if LOG:
            shift = log(s)
            for i in static_range(K):
                r[i] = r[i] - shift
        else:
            inv = 1.0 / s
            for i in static_range(K):
                r[i] = r[i] * inv
        if aligned:
            for j in static_range(ITEMS):
                c = (j * G + t) * VEC
                if c < n:
                    b = j * VEC
                    if VEC == 4:
                        out.store(base + c, T(vec(r[b], r[b + 1], r[b + 2], r[b + 3])))
                    else:
                        out.store(base + c, T(vec(r[b], r[b + 1], r[b + 2], r[b + 3],
                                                  r[b + 4], r[b + 5], r[b + 6], r[b + 7])))
        else:
            for j in static_range(ITEMS):
                for k in static_range(VEC):
                    c = (j * VEC + k) * G + t
                    if c < n:
                        out[base + c] = T(r[j * VEC + k])


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8], LOG=[False, True]))
def softmax_rows_online(x: In[T], out: Tensor[T], rows: int, n: int, aligned: bool):
    """out[r, :] = softmax(x[r, :]) (LOG: log_softmax) for rows of any length: 2 reads + 1 write.

    x, out: (rows, n) row-major, contiguous, dtype T (f32/f16/bf16); math in f32, one rounding to T.
    Domain: n >= 1; GROUP-thread groups, any count (a group loops over rows); ``aligned`` as in
    softmax_rows. Pass 1: each thread walks its VEC-wide chunks (stride GROUP * VEC; scalar, stride
    GROUP, unless aligned) keeping a running max m and sum s (s *= exp(m_old - m_new) when the max
    grows); the group then takes the row max M (simd_max, shared) and S = sum s * exp(m - M)
    (simd_sum, shared). Pass 2 re-reads x and writes exp(x - M) * (1 / S) (LOG: (x - M) - log(S)).
    Non-finite: as softmax_rows (NaN row for a NaN, a +inf, or a row of only -inf); a running max
    still at -inf rescales by 0, so leading -inf elements do not poison the row.
    """
    t = thread_id(0)
    red = shared(f32, 2 * GROUP)
    for row in range(group_id(0), rows, num_groups(0)):
        base = row * n
        m = NEG_INF
        s = 0.0
        if aligned:
            for c in range(t * VEC, n, GROUP * VEC, unroll=4):
                v = f32(x.load(base + c, width=VEC))
                vm = v[0]
                for k in static_range(1, VEC):
                    vm = max(vm, v[k])
                mn = max(m, vm)
                ref = finite_or_zero(mn)
                e = exp(v - ref)
                part = e[0]
                for k in static_range(1, VEC):
                    part += e[k]
                s = s * exp(m - ref) + part
                m = mn
        else:
            for c in range(t, n, GROUP, unroll=4):
                xv = f32(x[base + c])
                mn = max(m, xv)
                ref = finite_or_zero(mn)
                s = s * exp(m - ref) + exp(xv - ref)
                m = mn
        big = group_max(m, red, 0)
        ref = finite_or_zero(big)
        total = group_sum(s * exp(m - ref), red, GROUP)
        if LOG:
            shift = log(total)
            if aligned:
                for c in range(t * VEC, n, GROUP * VEC, unroll=4):
                    out.store(base + c, T((f32(x.load(base + c, width=VEC)) - big) - shift))
            else:
                for c in range(t, n, GROUP, unroll=4):
                    out[base + c] = T((f32(x[base + c]) - big) - shift)
        else:
            inv = 1.0 / total
            if aligned:
                for c in range(t * VEC, n, GROUP * VEC, unroll=4):
                    out.store(base + c, T(exp(f32(x.load(base + c, width=VEC)) - big) * inv))
            else:
                for c in range(t, n, GROUP, unroll=4):
                    out[base + c] = T(exp(f32(x[base + c]) - big) * inv)


# ---------------------------------------------------------------- host functions

def data_address(a: Any) -> int | None:
    """The address of ``a``'s first element (numpy, torch, CUDA-array-interface objects); None if unknown."""
    if hasattr(a, "data_ptr"):
        return int(a.data_ptr())
    for attr in ("__array_interface__", "__cuda_array_interface__"):
        iface = getattr(a, attr, None)
        if iface is not None:
            return int(iface["data"][0])
    return None


def vector_ok(n: int, vec: int, *arrays: Any) -> bool:
    """Rows of ``n`` elements may move as ``vec``-wide 16-byte vectors: n % vec == 0, every array aligned."""
    if n % vec:
        return False
    addresses = [data_address(a) for a in arrays]
    return all(p is None or p % _host.VECTOR_BYTES == 0 for p in addresses)


def register_items(n: int, vec: int, group: int = GROUP) -> int | None:
    """The fewest vectors per thread (ITEMS) that hold an ``n``-element row in registers in ``group``-thread
    groups; None: too long."""
    for items in ITEMS_CHOICES:
        if vec * items <= MAX_REGS and n <= group * vec * items:
            return items
    return None


def register_plan(n: int, vec: int, lane_width: int = SHORT_GROUP) -> tuple[int, int] | None:
    """(group size, ITEMS) of the register kernel for rows of ``n``: SHORT_GROUP threads when they hold the row
    in at most SHORT_ITEMS vectors each (short rows: a 256-thread group would leave threads idle and meet
    at barriers for nothing) and the device's subgroups are no wider (``lane_width``: a group is never part
    of a subgroup), else GROUP; None: the row takes the online kernel."""
    items = register_items(n, vec, SHORT_GROUP)
    if items is not None and items <= SHORT_ITEMS and lane_width <= SHORT_GROUP:
        return SHORT_GROUP, items
    items = register_items(n, vec)
    return None if items is None else (GROUP, items)


def rows_of(x: Any, what: str) -> tuple[int, int]:
    """(rows, n) of an array whose last axis is the row; a LaunchError when it has no axis or is too big."""
    shape = _host.shape_of(x)
    if not shape:
        raise LaunchError(f"{what}: expected an array with at least one axis (rows run along the last), got a "
                          f"scalar")
    n = shape[-1]
    rows = _host.size_of(x) // n if n else 0
    if rows * n >= 2 ** 31:
        raise LaunchError(f"{what}: {rows * n} elements; the row kernels index with 32-bit integers (< 2**31)")
    return rows, n


def checked_out(x: Any, out: Any, dtype: Any, what: str, reads: dict[str, Any] | None = None,
                name: str = "out") -> Any:
    """``out`` checked against ``x``'s shape and ``dtype`` (:func:`_host.output`; ``out=x`` runs in place:
    a row is read whole before any of it is written), or a fresh array like ``x``."""
    return _host.output(what, out, x, _host.shape_of(x), dtype, {"x": x} if reads is None else reads,
                        in_place=("x", "residual"), name=name)


def _run(x: Any, out: Any, log_space: bool, backend: str | None) -> Any:
    what = "log_softmax" if log_space else "softmax"
    dt = _host.check_float(x, f"{what}: x")
    rows, n = rows_of(x, f"{what}: x")
    out = checked_out(x, out, dt, what)
    if rows == 0 or n == 0:
        return out
    vec = _host.vector_width(dt)
    aligned = vector_ok(n, vec, x, out)
    chosen = register_plan(n, vec, device_traits(backend, (x,)).lane_width)
    if chosen is None:
        group, k = GROUP, softmax_rows_online.variant(T=dt, VEC=vec, LOG=log_space)
    else:
        group, items = chosen
        k = softmax_rows.variant(T=dt, VEC=vec, ITEMS=items, LOG=log_space, G=group)
    k.launch(x, out, rows, n, aligned, grid=(min(rows, MAX_GROUPS) * group,), group=(group,), backend=backend)
    return out


@planned
def softmax(x: Any, out: Any = None, backend: str | None = None) -> Any:
    """softmax along the last axis of ``x`` (f32/f16/bf16, C-contiguous), in f32; returns ``out``.

    Rows up to GROUP * MAX_REGS (16384) elements run in registers (one read, one write); longer
    rows take the online kernel (two reads, one write).
    """
    return _run(x, out, False, backend)


@planned
def log_softmax(x: Any, out: Any = None, backend: str | None = None) -> Any:
    """log_softmax along the last axis of ``x``: (x - max) - log(sum exp(x - max)), in f32."""
    return _run(x, out, True, backend)


__all__ = ["GROUP", "GROUPS", "MAX_REGS", "SHORT_GROUP", "group_max", "group_sum", "log_softmax", "register_plan",
           "softmax", "softmax_rows", "softmax_rows_online"]

"""``y = W x`` with W stored in a GGUF block format (Q8_0, Q4_0, Q4_K, Q6_K): the decode-time matvec.

W is never expanded: a team of ``split`` subgroups takes two rows at a time, every lane whole pieces of
blocks (its x slice loaded once for both rows), the block's scales applied once per piece to an f32 dot
product of the small integers with x, then a xor-butterfly across the lanes and, with split > 1, the
team's subgroups added in shared memory.  The kernels are bound by the quantised
bytes they stream (0.56 to 1.06 bytes per weight against 2 for f16), so bandwidth is counted on
those bytes.  ``quant_gemv(data, "Q4_K", x, M, K)`` launches the matching kernel (docs/std/quant_gemv.md).
"""

from __future__ import annotations

from typing import Any

from iron import In, LaunchError, T, Tensor, bf16, f16, f32, func, kernel, u8, u16, variants
from iron.lang import (barrier, bitcast, cast, group_id, lane_id, num_groups, shared, simd_group_id, simd_shuffle_xor,
                       simd_size, static_range, vec)

from . import _host
from .gguf import bytes8, check_data, format_of, half_at, int_f32
from ._plans import planned

#: Threads per group.
GROUP = 256
#: Rows one subgroup computes together: x is loaded once per piece for both (halves x's cache traffic).
ROWS = 2
#: Vulkan caps a grid axis at 65535 groups; the kernels loop over row pairs past that.
MAX_GROUPS = 65535
#: Subgroups a row pair's team may have (the host's choice; the kernels take any split >= 1).
SPLITS = (1, 2, 4, 8)
#: The host splits a row pair over more subgroups until the grid has this many: at M = 4096, one subgroup a
#: pair leaves the H200 with too few loads in flight (Q8_0 at K = 11008: 33.6 us at split 1, 26.0 at 4).
TARGET_SUBGROUPS = 8192
#: ... but not so far that a lane gets fewer pieces than this (Q4_K at K = 4096, 128 pieces a row: split 8
#: left half of every subgroup's lanes idle, 17.0 us against 12.3 at split 1).
MIN_LANE_PIECES = 4


# ---------------------------------------------------------------- pieces shared by the kernels

@func
def load_x8(x, i):
    """x[i .. i + 8] (``i`` a multiple of 8) as an f32 8-vector, in 16-byte loads."""
    if x.dtype is f32:
        a = x.load(i, width=4)
        b = x.load(i + 4, width=4)
        v = vec(a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3])
    else:
        v = f32(x.load(i, width=8))
    return v


@func
def dot8(a, b, s):
    """``s + a[0] b[0] + ... + a[7] b[7]``, added in that order (f32)."""
    for k in static_range(8):
        s = s + a[k] * b[k]
    return s


@func
def lane_sum(v):
    """The sum of ``v`` over the subgroup's W lanes, every lane active: a xor butterfly of log2 W levels,
    the same order on every backend.  (Not simd_sum: NVRTC 13.5's ptxas fails, "Register allocation
    failed", on its partial-mask fallback loop inside a run-time loop; see docs/std/quant_gemv.md.)"""
    o = simd_size() // 2
    while o > 0:
        v = v + simd_shuffle_xor(v, o)
        o = o // 2
    return v


@func
def team_shape(split):
    """(P, E): subgroups a team (``split`` capped at the group's subgroups) and teams a group."""
    sp = min(split, GROUP // simd_size())
    return sp, GROUP // simd_size() // sp


@func
def finish_pair(y, sums, acc_a, acc_b, r, limit, team, piece_slice, split):
    """Store rows ``r`` and ``r + 1`` (each only below ``limit``) from this subgroup's two sums: a butterfly
    over its lanes, then with ``split`` > 1 the team's ``split`` subgroups meet in ``sums`` (shared, 2 per
    subgroup) and its first subgroup's lane 0 adds them in slice order.  One rounding to y's dtype."""
    lane = lane_id()
    acc_a = lane_sum(acc_a)
    acc_b = lane_sum(acc_b)
    if split > 1:
        at = 2 * (team * split + piece_slice)
        if lane == 0:
            sums[at] = acc_a
            sums[at + 1] = acc_b
        barrier()
        if lane == 0 and piece_slice == 0:
            for q in range(1, split):
                acc_a = acc_a + sums[at + 2 * q]
                acc_b = acc_b + sums[at + 2 * q + 1]
        barrier()  # every sum is read before the next pair writes its partials
    if lane == 0 and piece_slice == 0 and r < limit:
        y[r] = cast(acc_a, y.dtype)
        if r + 1 < limit:
            y[r + 1] = cast(acc_b, y.dtype)


@func
def sum8(a, s):
    """``s + a[0] + ... + a[7]``, in that order (f32)."""
    for k in static_range(8):
        s = s + a[k]
    return s


@func
def q8_0_piece(data, base, part, xv):
    """Row part of one lane's piece: weights 8 part .. + 8 of the Q8_0 block at byte ``base``."""
    d = half_at(data, base)
    q = bytes8(data, base + 2 + 8 * part)
    return d * dot8(int_f32(q ^ 128, 128), xv, 0.0)


@func
def q4_0_piece(data, base, part, xl, xh):
    """Weights 8 part .. + 8 (low nibbles, x in ``xl``) and 16 + 8 part .. + 8 (high, ``xh``) of the Q4_0
    block at ``base``: one 16-term dot product, then d."""
    d = half_at(data, base)
    q = bytes8(data, base + 2 + 8 * part)
    s = dot8(int_f32(q & 15, 8), xl, 0.0)
    s = dot8(int_f32(q >> 4, 8), xh, s)
    return d * s


@func
def q4_k_piece(data, base, j, h, xl0, xl1, xh0, xh1, sxl, sxh):
    """16 bytes of nibble chunk ``j`` (bytes 16 h .. + 16) of the Q4_K super-block at ``base``: weights
    64 j + 16 h .. + 16 of sub-block 2 j (low nibbles) and the same 16 of sub-block 2 j + 1 (high).
    ``sxl``/``sxh`` are the sums of their x: the mins apply once, ``dmin m (sum x)``."""
    head = data.load(base, width=4)
    d = f32(bitcast(u16(head[0]) | (u16(head[1]) << 8), f16))
    dmin = f32(bitcast(u16(head[2]) | (u16(head[3]) << 8), f16))
    v0 = data.load(base + 4, width=4)
    v1 = data.load(base + 8, width=4)
    v2 = data.load(base + 12, width=4)
    # sub-blocks 2j, 2j+1 read bytes t, t+1 of each scale word (t = 2 (j % 2)); j >= 2 takes the split form
    odd = (j & 1) == 1
    a0 = v0[2] if odd else v0[0]
    a1 = v0[3] if odd else v0[1]
    b0 = v1[2] if odd else v1[0]
    b1 = v1[3] if odd else v1[1]
    c0 = v2[2] if odd else v2[0]
    c1 = v2[3] if odd else v2[1]
    split = j >= 2
    sc0 = ((c0 & 15) | ((a0 >> 6) << 4)) if split else (a0 & 63)
    m0 = ((c0 >> 4) | ((b0 >> 6) << 4)) if split else (b0 & 63)
    sc1 = ((c1 & 15) | ((a1 >> 6) << 4)) if split else (a1 & 63)
    m1 = ((c1 >> 4) | ((b1 >> 6) << 4)) if split else (b1 & 63)
    q0 = data.load(base + 16 + 32 * j + 16 * h, width=8)
    q1 = data.load(base + 24 + 32 * j + 16 * h, width=8)
    s_lo = dot8(int_f32(q1 & 15, 0), xl1, dot8(int_f32(q0 & 15, 0), xl0, 0.0))
    s_hi = dot8(int_f32(q1 >> 4, 0), xh1, dot8(int_f32(q0 >> 4, 0), xh0, 0.0))
    return ((d * int_f32(sc0, 0)) * s_lo - (dmin * int_f32(m0, 0)) * sxl
            + (d * int_f32(sc1, 0)) * s_hi - (dmin * int_f32(m1, 0)) * sxh)


@func
def q6_k_piece(data, base, half, col, x0, x1, x2, x3):
    """Weights 128 half + 32 t + col .. + 8 (t < 4) of the Q6_K super-block at ``base``: four 8-term dot
    products of q - 32 with x, each times its i8 scale, summed, then times d."""
    d = half_at(data, base + 208)
    qa = bytes8(data, base + 64 * half + col)
    qb = bytes8(data, base + 64 * half + 32 + col)
    qh = bytes8(data, base + 128 + 32 * half + col)
    first = base + 192 + 8 * half + col // 16
    s = 0.0
    for t in static_range(4):
        if t == 0:
            q = (qa & 15) | ((qh & 3) << 4)
            xt = x0
        elif t == 1:
            q = (qb & 15) | (((qh >> 2) & 3) << 4)
            xt = x1
        elif t == 2:
            q = (qa >> 4) | (((qh >> 4) & 3) << 4)
            xt = x2
        else:
            q = (qb >> 4) | ((qh >> 6) << 4)
            xt = x3
        s = s + int_f32(data[first + 2 * t] ^ 128, 128) * dot8(int_f32(q, 32), xt, 0.0)
    return d * s


# ---------------------------------------------------------------- kernels
# Each kernel's docstring is its whole contract; the four share the row/lane scheme and the policies.

@kernel(variants(T=[f32, f16, bf16]))
def gemv_q8_0(data: In[u8], x: In[T], y: Tensor[T], m: int, k: int, split: int):
    """y = W x, W (m, k) in Q8_0 (34-byte blocks of 32: f16 d, 32 x i8 q; weight d q).

    data: m rows of k weights, each row k / 32 blocks back to back (gguf.py), the buffer 2-byte aligned;
    x: (k,), y: (m,), T in f32/f16/bf16; k a positive multiple of 32, m >= 1, bytes < 2**31.
    Rows: a group's subgroups (W lanes, GROUP a multiple of W) form teams of P = min(split, GROUP / W)
    (split >= 1); team t of group g takes rows 2 (g E + t) and + 1 (E = GROUP / W / P teams a group), then
    the same + 2 E G (G groups); an odd last row is computed on a clamped row and not stored.
    Order: lane l of the team's subgroup j adds its pieces l + W j, + W P, ... in order (f32), a xor
    butterfly over the W lanes (log2 W levels), then the P subgroups' sums in j order; one rounding to T.
    No atomics: deterministic.
    Non-finite: a NaN/Inf in x or in a scale of a row's blocks makes that y non-finite (NaN or +-Inf,
    unspecified); finite inputs give finite y unless the sum overflows.
    A piece is a quarter block: an 8-term dot product of q with x, then times d.
    """
    sums = shared(f32, 2 * GROUP)
    w = simd_size()
    lane = lane_id()
    sp, teams = team_shape(split)
    team = simd_group_id() // sp
    piece_slice = simd_group_id() % sp
    nb = k // 32
    stride = nb * 34
    base = group_id(0) * teams * ROWS
    while base < m:
        r = base + team * ROWS
        ra = min(r, m - 1) * stride
        rb = min(r + 1, m - 1) * stride
        acc_a = 0.0
        acc_b = 0.0
        for p in range(lane + w * piece_slice, nb * 4, w * sp, unroll=2):
            blk = p // 4
            part = p % 4
            xv = load_x8(x, blk * 32 + 8 * part)
            acc_a += q8_0_piece(data, ra + blk * 34, part, xv)
            acc_b += q8_0_piece(data, rb + blk * 34, part, xv)
        finish_pair(y, sums, acc_a, acc_b, r, min(m, base + teams * ROWS), team, piece_slice, sp)
        base += num_groups(0) * teams * ROWS


@kernel(variants(T=[f32, f16, bf16]))
def gemv_q4_0(data: In[u8], x: In[T], y: Tensor[T], m: int, k: int, split: int):
    """y = W x, W (m, k) in Q4_0 (18-byte blocks of 32: f16 d, 16 bytes of nibbles; weight d (q - 8)).

    data: m rows of k weights, each row k / 32 blocks back to back (gguf.py), the buffer 2-byte aligned;
    x: (k,), y: (m,), T in f32/f16/bf16; k a positive multiple of 32, m >= 1, bytes < 2**31.
    Rows: a group's subgroups (W lanes, GROUP a multiple of W) form teams of P = min(split, GROUP / W)
    (split >= 1); team t of group g takes rows 2 (g E + t) and + 1 (E = GROUP / W / P teams a group), then
    the same + 2 E G (G groups); an odd last row is computed on a clamped row and not stored.
    Order: lane l of the team's subgroup j adds its pieces l + W j, + W P, ... in order (f32), a xor
    butterfly over the W lanes (log2 W levels), then the P subgroups' sums in j order; one rounding to T.
    No atomics: deterministic.
    Non-finite: a NaN/Inf in x or in a scale of a row's blocks makes that y non-finite (NaN or +-Inf,
    unspecified); finite inputs give finite y unless the sum overflows.
    A piece is half a block, 8 bytes: weights 8 h .. + 8 (low nibbles) and 16 + 8 h .. + 8 (high), one
    16-term dot product then times d.
    """
    sums = shared(f32, 2 * GROUP)
    w = simd_size()
    lane = lane_id()
    sp, teams = team_shape(split)
    team = simd_group_id() // sp
    piece_slice = simd_group_id() % sp
    nb = k // 32
    stride = nb * 18
    base = group_id(0) * teams * ROWS
    while base < m:
        r = base + team * ROWS
        ra = min(r, m - 1) * stride
        rb = min(r + 1, m - 1) * stride
        acc_a = 0.0
        acc_b = 0.0
        for p in range(lane + w * piece_slice, nb * 2, w * sp, unroll=2):
            blk = p // 2
            part = p % 2
            xl = load_x8(x, blk * 32 + 8 * part)
            xh = load_x8(x, blk * 32 + 16 + 8 * part)
            acc_a += q4_0_piece(data, ra + blk * 18, part, xl, xh)
            acc_b += q4_0_piece(data, rb + blk * 18, part, xl, xh)
        finish_pair(y, sums, acc_a, acc_b, r, min(m, base + teams * ROWS), team, piece_slice, sp)
        base += num_groups(0) * teams * ROWS


@kernel(variants(T=[f32, f16, bf16]))
def gemv_q4_k(data: In[u8], x: In[T], y: Tensor[T], m: int, k: int, split: int):
    """y = W x, W (m, k) in Q4_K (144-byte super-blocks of 256; weight (d sc_s) q - dmin m_s).

    data: m rows of k weights, each row k / 256 blocks back to back (gguf.py), the buffer 8-byte aligned;
    x: (k,), y: (m,), T in f32/f16/bf16; k a positive multiple of 256, m >= 1, bytes < 2**31.
    Rows: a group's subgroups (W lanes, GROUP a multiple of W) form teams of P = min(split, GROUP / W)
    (split >= 1); team t of group g takes rows 2 (g E + t) and + 1 (E = GROUP / W / P teams a group), then
    the same + 2 E G (G groups); an odd last row is computed on a clamped row and not stored.
    Order: lane l of the team's subgroup j adds its pieces l + W j, + W P, ... in order (f32), a xor
    butterfly over the W lanes (log2 W levels), then the P subgroups' sums in j order; one rounding to T.
    No atomics: deterministic.
    Non-finite: a NaN/Inf in x or in a scale of a row's blocks makes that y non-finite (NaN or +-Inf,
    unspecified); finite inputs give finite y unless the sum overflows.
    A piece is 16 bytes of one 32-byte nibble chunk: 16 weights of each of two sub-blocks, each a 16-term
    dot product times d sc, minus dmin m times the sum of its x; the four terms added in that order.
    Nibbles load 8 bytes at a time, the header and scales 4.
    """
    sums = shared(f32, 2 * GROUP)
    w = simd_size()
    lane = lane_id()
    sp, teams = team_shape(split)
    team = simd_group_id() // sp
    piece_slice = simd_group_id() % sp
    nb = k // 256
    stride = nb * 144
    base = group_id(0) * teams * ROWS
    while base < m:
        r = base + team * ROWS
        ra = min(r, m - 1) * stride
        rb = min(r + 1, m - 1) * stride
        acc_a = 0.0
        acc_b = 0.0
        for p in range(lane + w * piece_slice, nb * 8, w * sp, unroll=2):
            sb = p // 8
            j = (p % 8) // 2
            h = p % 2
            lo = sb * 256 + 64 * j + 16 * h
            xl0 = load_x8(x, lo)
            xl1 = load_x8(x, lo + 8)
            xh0 = load_x8(x, lo + 32)
            xh1 = load_x8(x, lo + 40)
            sxl = sum8(xl1, sum8(xl0, 0.0))
            sxh = sum8(xh1, sum8(xh0, 0.0))
            acc_a += q4_k_piece(data, ra + sb * 144, j, h, xl0, xl1, xh0, xh1, sxl, sxh)
            acc_b += q4_k_piece(data, rb + sb * 144, j, h, xl0, xl1, xh0, xh1, sxl, sxh)
        finish_pair(y, sums, acc_a, acc_b, r, min(m, base + teams * ROWS), team, piece_slice, sp)
        base += num_groups(0) * teams * ROWS


@kernel(variants(T=[f32, f16, bf16]))
def gemv_q6_k(data: In[u8], x: In[T], y: Tensor[T], m: int, k: int, split: int):
    """y = W x, W (m, k) in Q6_K (210-byte super-blocks of 256; weight d sc_{i // 16} (q - 32)).

    data: m rows of k weights, each row k / 256 blocks back to back (gguf.py), the buffer 2-byte aligned;
    x: (k,), y: (m,), T in f32/f16/bf16; k a positive multiple of 256, m >= 1, bytes < 2**31.
    Rows: a group's subgroups (W lanes, GROUP a multiple of W) form teams of P = min(split, GROUP / W)
    (split >= 1); team t of group g takes rows 2 (g E + t) and + 1 (E = GROUP / W / P teams a group), then
    the same + 2 E G (G groups); an odd last row is computed on a clamped row and not stored.
    Order: lane l of the team's subgroup j adds its pieces l + W j, + W P, ... in order (f32), a xor
    butterfly over the W lanes (log2 W levels), then the P subgroups' sums in j order; one rounding to T.
    No atomics: deterministic.
    Non-finite: a NaN/Inf in x or in a scale of a row's blocks makes that y non-finite (NaN or +-Inf,
    unspecified); finite inputs give finite y unless the sum overflows.
    A piece is (half n, columns c .. c + 8): weights 128 n + 32 t + c .. + 8 for t < 4, four 8-term dot
    products each times its i8 scale, added in t order, then times d.
    """
    sums = shared(f32, 2 * GROUP)
    w = simd_size()
    lane = lane_id()
    sp, teams = team_shape(split)
    team = simd_group_id() // sp
    piece_slice = simd_group_id() % sp
    nb = k // 256
    stride = nb * 210
    base = group_id(0) * teams * ROWS
    while base < m:
        r = base + team * ROWS
        ra = min(r, m - 1) * stride
        rb = min(r + 1, m - 1) * stride
        acc_a = 0.0
        acc_b = 0.0
        for p in range(lane + w * piece_slice, nb * 8, w * sp, unroll=2):
            sb = p // 8
            half = (p % 8) // 4
            col = 8 * (p % 4)
            first = sb * 256 + 128 * half + col
            x0 = load_x8(x, first)
            x1 = load_x8(x, first + 32)
            x2 = load_x8(x, first + 64)
            x3 = load_x8(x, first + 96)
            acc_a += q6_k_piece(data, ra + sb * 210, half, col, x0, x1, x2, x3)
            acc_b += q6_k_piece(data, rb + sb * 210, half, col, x0, x1, x2, x3)
        finish_pair(y, sums, acc_a, acc_b, r, min(m, base + teams * ROWS), team, piece_slice, sp)
        base += num_groups(0) * teams * ROWS


KERNELS = {"Q8_0": gemv_q8_0, "Q4_0": gemv_q4_0, "Q4_K": gemv_q4_k, "Q6_K": gemv_q6_k}
#: Pieces per block (the lanes' unit of work), per format.
PIECES = {"Q8_0": 4, "Q4_0": 2, "Q4_K": 8, "Q6_K": 8}


def split_for(m: int, k: int, qtype: str) -> int:
    """Subgroups per row pair: the fewest of SPLITS that give the grid TARGET_SUBGROUPS (32-lane) subgroups,
    capped where each lane would get fewer than MIN_LANE_PIECES pieces of a row (bench
    ``std/quant_gemv/*_splits``)."""
    pairs = _host.ceil_div(m, ROWS)
    pieces = k // format_of(qtype).block * PIECES[format_of(qtype).name]
    most = max(1, pieces // (32 * MIN_LANE_PIECES))
    want = next((s for s in SPLITS if pairs * s >= TARGET_SUBGROUPS), SPLITS[-1])
    return max(s for s in SPLITS if s <= max(1, min(want, most)))


def grid_for(m: int, split: int = 1) -> int:
    """Threads for m rows: a team of ``split`` 32-lane subgroups per row pair (a subgroup on NVIDIA is 32
    lanes; wider subgroups make smaller teams and loop over more pairs, narrower ones leave spare
    subgroups idle), capped at MAX_GROUPS groups."""
    teams = max(1, GROUP // 32 // split)
    return min(_host.ceil_div(_host.ceil_div(m, ROWS), teams), MAX_GROUPS) * GROUP


@planned
def quant_gemv(data: Any, qtype: str, x: Any, M: int, K: int, out: Any = None, backend: str | None = None) -> Any:
    """``W @ x`` for W (M, K) stored as ``qtype`` ("Q8_0", "Q4_0", "Q4_K", "Q6_K") in the uint8 ``data``.

    x: (K,) f32/f16/bf16; returns (or writes ``out``) y (M,) of x's dtype, accumulated in f32.
    K must be a positive multiple of the format's block (32 or 256).
    """
    fmt = format_of(qtype)
    M, K = int(M), int(K)
    if M < 0:
        raise LaunchError(f"quant_gemv: M must be at least 0, got {M}")
    if K < 1 or K % fmt.block:
        raise LaunchError(f"quant_gemv: {qtype} rows hold whole blocks of {fmt.block} weights; K = {K} is not a "
                          f"positive multiple of {fmt.block}")
    check_data(data, fmt, M, K, "quant_gemv")
    dt = _host.check_float(x, "quant_gemv: x")
    _host.check_shape(x, (K,), "quant_gemv: x")
    out = _host.output("quant_gemv", out, x, (M,), dt, {"data": data, "x": x})
    if M == 0:
        return out
    split = split_for(M, K, fmt.name)
    kern = KERNELS[fmt.name].variant(T=dt)
    kern.launch(data, x, out, M, K, split, grid=(grid_for(M, split),), group=(GROUP,), backend=backend)
    return out


__all__ = ["GROUP", "KERNELS", "MIN_LANE_PIECES", "PIECES", "ROWS", "SPLITS", "TARGET_SUBGROUPS", "dot8",
           "finish_pair", "gemv_q4_0", "gemv_q4_k", "gemv_q6_k", "gemv_q8_0", "grid_for", "lane_sum", "load_x8",
           "q4_0_piece", "q4_k_piece", "q6_k_piece", "q8_0_piece", "quant_gemv", "split_for", "sum8", "team_shape"]

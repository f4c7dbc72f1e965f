"""``y = W x`` with W stored in a GGUF block format (Q8_0, Q4_0, Q4_K, Q6_K): the decode-time matvec.

W is never expanded: a team of ``split`` subgroups takes two rows at a time (four in the word kernels), every
lane whole pieces of blocks (its x slice loaded once for the team's rows), the block's scales applied once per
piece to an f32 dot product of the small integers with x, then a xor-butterfly across the lanes and, with
split > 1, the team's subgroups added in shared memory.  The word kernels (Q4_K, and Q8_0 / Q4_0 beside their
byte kernels) read the bytes as 32-bit words and each field where it sits (:func:`in_place`).  Bandwidth is
counted on the quantised bytes (0.56 to 1.06 bytes per weight against 2 for f16).
``quant_gemv(data, "Q4_K", x, M, K)`` launches the host's kernel (:func:`scheme_for`; docs/std/quant_gemv.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iron import In, LaunchError, T, Tensor, bf16, f16, f32, func, kernel, u8, u16, u32, variants
from iron.lang import (barrier, bitcast, cast, group_id, lane_id, num_groups, shared, simd_group_id, simd_shuffle_xor,
                       simd_size, static_range, vec)

from . import _host
from .gguf import bytes8, check_data, format_of, half_at, int_f32, row_bytes
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
#: ... but not so far that a lane gets fewer pieces than this (Q4_K's first kernel at K = 4096, 128 pieces a row:
#: split 8 left half of every subgroup's lanes idle, 17.0 us against 12.3 at split 1).
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
def four_rows(r, m, stride):
    """Where rows r .. r + 3 start (``stride`` apart), each clamped to the last row: a team of four rows past m
    computes on the last one and stores nothing there (finish_four)."""
    return (min(r, m - 1) * stride, min(r + 1, m - 1) * stride, min(r + 2, m - 1) * stride,
            min(r + 3, m - 1) * stride)


@func
def finish_four(y, sums, acc_a, acc_b, acc_c, acc_d, r, limit, team, piece_slice, split):
    """finish_pair for rows r, r + 1 and then r + 2, r + 3 (each stored only below ``limit``)."""
    finish_pair(y, sums, acc_a, acc_b, r, limit, team, piece_slice, split)
    finish_pair(y, sums, acc_c, acc_d, r + 2, limit, team, piece_slice, split)


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


#: Where each of the eight nibbles of a little-endian 32-bit word sits, read without moving it to bit 0: (shift of
#: the word, mask, c) for byte 0's low and high nibble, then byte 1's, 2's and 3's.  The masked bits, ORed into a
#: float of exponent 2**(23 - c) (whose ulp is 2**-c), make the float 2**(23 - c) + q exactly (q 2**c < 2**23):
#: one logic instruction and one subtraction a nibble, where taking a byte apart first costs four.
NIBBLE_PLACES = ((0, 0xF, 0), (0, 0xF0, 4), (0, 0xF00, 8), (0, 0xF000, 12),
                 (0, 0xF0000, 16), (8, 0xF000, 12), (16, 0xF00, 8), (16, 0xF000, 12))
#: The bits of the float 2**(23 - c), by c.
PLACE_FLOATS = {0: 0x4B000000, 4: 0x49000000, 8: 0x47000000, 12: 0x45000000, 16: 0x43000000}


#: Each byte of a little-endian 32-bit word, read in place as NIBBLE_PLACES reads nibbles: bytes 0 and 1 where they
#: sit, 2 and 3 from the word shifted by 16 ((a byte) 2**c < 2**23 needs c <= 8).
BYTE_PLACES = ((0, 0xFF, 0), (0, 0xFF00, 8), (16, 0xFF, 0), (16, 0xFF00, 8))


@func
def in_place(bits, mask, c, bias, opaque):
    """``(bits & mask) / 2**c - bias`` exactly (f32), for ``mask``'s field at bits c .. (field 2**c < 2**23):
    the field ORed into the float 2**(23 - c), whose ulp is 2**-c, is 2**(23 - c) + field.  ``opaque`` is a zero
    the compiler cannot see through: ORed into the float's bits, it keeps them in a register, so the mask is the
    logic instruction's immediate (else ptxas reloads a mask before most fields)."""
    return bitcast((bits & mask) | (PLACE_FLOATS[c] | opaque), f32) - (2.0 ** (23 - c) + bias)


@func
def nibble_word_dot(word, xl, xh, o, s_lo, s_hi, bias, opaque):
    """``s_lo`` plus (the low nibble of each of ``word``'s four bytes - ``bias``) times ``xl[o .. o + 4]``, and
    ``s_hi`` plus the high nibbles' times ``xh[o ..]``, each added in byte order (f32; each q - bias exactly,
    each product rounded once)."""
    w8 = word >> 8
    w16 = word >> 16
    for n in static_range(8):
        shift, mask, c = NIBBLE_PLACES[n]
        q = in_place(word if shift == 0 else (w8 if shift == 8 else w16), mask, c, bias, opaque)
        if n % 2 == 0:
            s_lo = s_lo + q * xl[o + n // 2]
        else:
            s_hi = s_hi + q * xh[o + n // 2]
    return s_lo, s_hi


@func
def q4_k_words(data, base, j):
    """The words a Q4_K piece reads (q4_k_piece's): the block's head and scale words and chunk ``j``'s eight
    nibble words, as six 2-word vectors."""
    return (data.load(base, width=2), data.load(base + 2, width=2), data.load(base + 4 + 8 * j, width=2),
            data.load(base + 6 + 8 * j, width=2), data.load(base + 8 + 8 * j, width=2),
            data.load(base + 10 + 8 * j, width=2))


@func
def q4_k_half(q0, q1, q2, q3, x0, x1, x2, x3, high, opaque):
    """The 32-term dot product of the chunk's low (``high`` False) or high nibbles with x0..3, in byte order:
    q4_k_piece's ``s_lo`` or ``s_hi``, the same roundings."""
    s = 0.0
    for v in static_range(8):
        word = (q0 if v < 2 else (q1 if v < 4 else (q2 if v < 6 else q3)))[v % 2]
        xv = x0 if v < 2 else (x1 if v < 4 else (x2 if v < 6 else x3))
        w8 = word >> 8
        w16 = word >> 16
        for n in static_range(4):
            shift, mask, c = NIBBLE_PLACES[2 * n + (1 if high else 0)]
            bits = word if shift == 0 else (w8 if shift == 8 else w16)
            s = s + in_place(bits, mask, c, 0, opaque) * xv[4 * (v % 2) + n]
    return s


@func
def q4_k_scales(head, scales, j):
    """(d sc, dmin m) of sub-blocks 2 j and 2 j + 1 from a block's head and scale words.  Sub-blocks 2j, 2j+1 read
    bytes t, t+1 of each scale word (t = 2 (j % 2)); j >= 2 takes the split form."""
    d = f32(bitcast(u16(head[0] & 65535), f16))
    dmin = f32(bitcast(u16(head[0] >> 16), f16))
    at = (j & 1) << 4
    a = head[1] >> at
    b = scales[0] >> at
    c = scales[1] >> at
    split = j >= 2
    sc0 = ((c & 15) | ((a >> 2) & 48)) if split else (a & 63)
    m0 = (((c >> 4) & 15) | ((b >> 2) & 48)) if split else (b & 63)
    sc1 = (((c >> 8) & 15) | ((a >> 10) & 48)) if split else ((a >> 8) & 63)
    m1 = (((c >> 12) & 15) | ((b >> 10) & 48)) if split else ((b >> 8) & 63)
    return d * int_f32(sc0, 0), dmin * int_f32(m0, 0), d * int_f32(sc1, 0), dmin * int_f32(m1, 0)


@func
def q4_k_piece(data, base, j, xl0, xl1, xl2, xl3, xh0, xh1, xh2, xh3, sxl, sxh, opaque):
    """Nibble chunk ``j`` (bytes 32 j .. + 32 of the 128) of the Q4_K super-block at word ``base`` of ``data``:
    weights 64 j .. + 32 of sub-block 2 j (low nibbles, x in ``xl0..3``) and the same 32 of sub-block 2 j + 1
    (high, ``xh0..3``).  ``sxl``/``sxh`` are the sums of their x: the mins apply once, ``dmin m (sum x)``.
    Words: 0 holds d and dmin, 1-3 the twelve scale bytes, 4 + 8 j .. the chunk; all read 8 bytes at a time."""
    head, scales, q0, q1, q2, q3 = q4_k_words(data, base, j)
    return q4_k_value(head, scales, q0, q1, q2, q3, j, xl0, xl1, xl2, xl3, xh0, xh1, xh2, xh3, sxl, sxh, opaque)


@func
def q4_k_value(head, scales, q0, q1, q2, q3, j, xl0, xl1, xl2, xl3, xh0, xh1, xh2, xh3, sxl, sxh, opaque):
    """q4_k_piece's value from the piece's words (q4_k_words)."""
    s_lo, s_hi = nibble_word_dot(q0[0], xl0, xh0, 0, 0.0, 0.0, 0, opaque)
    s_lo, s_hi = nibble_word_dot(q0[1], xl0, xh0, 4, s_lo, s_hi, 0, opaque)
    s_lo, s_hi = nibble_word_dot(q1[0], xl1, xh1, 0, s_lo, s_hi, 0, opaque)
    s_lo, s_hi = nibble_word_dot(q1[1], xl1, xh1, 4, s_lo, s_hi, 0, opaque)
    s_lo, s_hi = nibble_word_dot(q2[0], xl2, xh2, 0, s_lo, s_hi, 0, opaque)
    s_lo, s_hi = nibble_word_dot(q2[1], xl2, xh2, 4, s_lo, s_hi, 0, opaque)
    s_lo, s_hi = nibble_word_dot(q3[0], xl3, xh3, 0, s_lo, s_hi, 0, opaque)
    s_lo, s_hi = nibble_word_dot(q3[1], xl3, xh3, 4, s_lo, s_hi, 0, opaque)
    f0, g0, f1, g1 = q4_k_scales(head, scales, j)
    return f0 * s_lo - g0 * sxl + f1 * s_hi - g1 * sxh


@func
def load_x32(x, lo):
    """x[lo .. lo + 32] as four 8-vectors, and their sum (f32, in order)."""
    x0 = load_x8(x, lo)
    x1 = load_x8(x, lo + 8)
    x2 = load_x8(x, lo + 16)
    x3 = load_x8(x, lo + 24)
    return x0, x1, x2, x3, sum8(x3, sum8(x2, sum8(x1, sum8(x0, 0.0))))


@func
def q4_k_x(x, lo):
    """The 64 x a Q4_K piece at weight ``lo`` multiplies, as eight 8-vectors, and the sums of its two halves."""
    xl0, xl1, xl2, xl3, sxl = load_x32(x, lo)
    xh0, xh1, xh2, xh3, sxh = load_x32(x, lo + 32)
    return xl0, xl1, xl2, xl3, xh0, xh1, xh2, xh3, sxl, sxh


@func
def q4_k_halves(data, ra, rb, rc, rd, j, x, lo, opaque):
    """The four rows' pieces of chunk ``j`` (x from ``lo``) as q4_k_piece gives them, bit for bit, in another
    order: every row's words first, then the low nibbles of the four rows against the first 32 x, then the high
    ones against the next 32, so only 32 x are live at a time (80 registers where q4_k_piece's order takes 128).
    Returns the four rows' piece values."""
    ha, sa, a0, a1, a2, a3 = q4_k_words(data, ra, j)
    hb, sb_, b0, b1, b2, b3 = q4_k_words(data, rb, j)
    hc, sc, c0, c1, c2, c3 = q4_k_words(data, rc, j)
    hd, sd, d0, d1, d2, d3 = q4_k_words(data, rd, j)
    x0, x1, x2, x3, sxl = load_x32(x, lo)
    la = q4_k_half(a0, a1, a2, a3, x0, x1, x2, x3, False, opaque)
    lb = q4_k_half(b0, b1, b2, b3, x0, x1, x2, x3, False, opaque)
    lc = q4_k_half(c0, c1, c2, c3, x0, x1, x2, x3, False, opaque)
    ld = q4_k_half(d0, d1, d2, d3, x0, x1, x2, x3, False, opaque)
    x0, x1, x2, x3, sxh = load_x32(x, lo + 32)
    ua = q4_k_half(a0, a1, a2, a3, x0, x1, x2, x3, True, opaque)
    ub = q4_k_half(b0, b1, b2, b3, x0, x1, x2, x3, True, opaque)
    uc = q4_k_half(c0, c1, c2, c3, x0, x1, x2, x3, True, opaque)
    ud = q4_k_half(d0, d1, d2, d3, x0, x1, x2, x3, True, opaque)
    f0, g0, f1, g1 = q4_k_scales(ha, sa, j)
    pa = f0 * la - g0 * sxl + f1 * ua - g1 * sxh
    f0, g0, f1, g1 = q4_k_scales(hb, sb_, j)
    pb = f0 * lb - g0 * sxl + f1 * ub - g1 * sxh
    f0, g0, f1, g1 = q4_k_scales(hc, sc, j)
    pc = f0 * lc - g0 * sxl + f1 * uc - g1 * sxh
    f0, g0, f1, g1 = q4_k_scales(hd, sd, j)
    pd = f0 * ld - g0 * sxl + f1 * ud - g1 * sxh
    return pa, pb, pc, pd


@func
def byte_word_dot(word, xv, o, s, opaque):
    """``s`` plus ``word``'s four bytes read as i8 times ``xv[o .. o + 4]``, added in byte order (f32)."""
    u = word ^ 0x80808080  # i8 + 128, unsigned
    u16_ = u >> 16
    for n in static_range(4):
        shift, mask, c = BYTE_PLACES[n]
        s = s + in_place(u if shift == 0 else u16_, mask, c, 128, opaque) * xv[o + n]
    return s


@func
def from_half(lo, hi, odd):
    """The four bytes of a block's data that start 2 bytes into word ``lo`` (``hi`` the next), or ``hi`` itself where
    the block starts in ``lo``'s upper half (``odd``): 34- and 18-byte blocks alternate between the two."""
    return hi if odd else ((lo >> 16) | (hi << 16))


@func
def block_head(data, g, nbytes):
    """(first word, odd, d) of block ``g`` of ``nbytes`` (2 mod 4) bytes in ``data`` (u32 words): an even block
    starts at a word, an odd one 2 bytes into it; d, its f16 scale, is that word's lower or upper half."""
    at = (g * nbytes) >> 2
    odd = (g & 1) == 1
    w0 = data[at]
    return at, odd, f32(bitcast(u16((w0 >> 16) if odd else (w0 & 65535)), f16))


@func
def q8_0_block(data, g, x0, x1, x2, x3, opaque):
    """Q8_0 block ``g`` (34 bytes: f16 d, 32 x i8) of ``data`` (u32 words) against x0..x3: the 32-term dot
    product in order, then times d.  It spans nine words (the next block's d or the previous block's last bytes
    fill the rest)."""
    at, odd, d = block_head(data, g, 34)
    w0 = data[at]
    w1 = data[at + 1]
    w2 = data[at + 2]
    w3 = data[at + 3]
    w4 = data[at + 4]
    w5 = data[at + 5]
    w6 = data[at + 6]
    w7 = data[at + 7]
    w8 = data[at + 8]
    s = byte_word_dot(from_half(w0, w1, odd), x0, 0, 0.0, opaque)
    s = byte_word_dot(from_half(w1, w2, odd), x0, 4, s, opaque)
    s = byte_word_dot(from_half(w2, w3, odd), x1, 0, s, opaque)
    s = byte_word_dot(from_half(w3, w4, odd), x1, 4, s, opaque)
    s = byte_word_dot(from_half(w4, w5, odd), x2, 0, s, opaque)
    s = byte_word_dot(from_half(w5, w6, odd), x2, 4, s, opaque)
    s = byte_word_dot(from_half(w6, w7, odd), x3, 0, s, opaque)
    s = byte_word_dot(from_half(w7, w8, odd), x3, 4, s, opaque)
    return d * s


@func
def q4_0_block(data, g, xl0, xl1, xh0, xh1, opaque):
    """Q4_0 block ``g`` (18 bytes: f16 d, 16 bytes of nibbles, weight d (q - 8)) of ``data`` (u32 words): the
    16-term dot product of the low nibbles with xl0..1 and of the high ones with xh0..1 (byte order, each q - 8
    exact), added, times d.  It spans five words."""
    at, odd, d = block_head(data, g, 18)
    w0 = data[at]
    w1 = data[at + 1]
    w2 = data[at + 2]
    w3 = data[at + 3]
    w4 = data[at + 4]
    s_lo, s_hi = nibble_word_dot(from_half(w0, w1, odd), xl0, xh0, 0, 0.0, 0.0, 8, opaque)
    s_lo, s_hi = nibble_word_dot(from_half(w1, w2, odd), xl0, xh0, 4, s_lo, s_hi, 8, opaque)
    s_lo, s_hi = nibble_word_dot(from_half(w2, w3, odd), xl1, xh1, 0, s_lo, s_hi, 8, opaque)
    s_lo, s_hi = nibble_word_dot(from_half(w3, w4, odd), xl1, xh1, 4, s_lo, s_hi, 8, opaque)
    return d * (s_lo + s_hi)


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


@kernel(variants(T=[f32, f16, bf16], ORDER=["halves", "pieces"]))
def gemv_q4_k(data: In[u32], x: In[T], y: Tensor[T], m: int, k: int, split: int):
    """y = W x, W (m, k) in Q4_K (144-byte super-blocks of 256; weight (d sc_s) q - dmin m_s).

    data: m rows of k weights, each row k / 256 blocks back to back (gguf.py), its bytes read as little-endian
    u32 words (36 a block; the host's ``kernel_data``), the buffer 8-byte aligned; x: (k,), y: (m,), T in
    f32/f16/bf16; k a positive multiple of 256, m >= 1, bytes < 2**31.
    Rows: a group's subgroups (W lanes, GROUP a multiple of W) form teams of P = min(split, GROUP / W)
    (split >= 1); team t of group g takes rows 4 (g E + t) .. + 3 (E = GROUP / W / P teams a group), then
    the same + 4 E G (G groups); rows past the last are computed on a clamped row and not stored.
    Order: lane l of the team's subgroup j adds its pieces l + W j, + W P, ... in order (f32), a xor
    butterfly over the W lanes (log2 W levels), then the P subgroups' sums in j order; one rounding to T.
    No atomics: deterministic.
    Non-finite: a NaN/Inf in x or in a scale of a row's blocks makes that y non-finite (NaN or +-Inf,
    unspecified); finite inputs give finite y unless the sum overflows.
    A piece is one 32-byte nibble chunk: 32 weights of each of two sub-blocks, each a 32-term dot product (in
    byte order) times d sc, minus dmin m times the sum of its x (32 terms in order); the four terms added in
    that order.  Nibbles and scales load 8 bytes at a time.  ORDER "halves" (the host's) loads the four rows'
    words of a piece, then takes the low nibbles of all four against the first 32 x and the high ones against the
    next 32 (q4_k_halves: 80 registers); "pieces" the same values a row's piece at a time (q4_k_piece: 128).
    """
    sums = shared(f32, 2 * GROUP)
    w = simd_size()
    lane = lane_id()
    sp, teams = team_shape(split)
    team = simd_group_id() // sp
    piece_slice = simd_group_id() % sp
    nb = k // 256
    stride = nb * 36
    opaque = u32(k) >> 31  # 0 (k < 2**31), unknown to the compiler: see in_place
    base = group_id(0) * teams * 4
    while base < m:
        r = base + team * 4
        ra, rb, rc, rd = four_rows(r, m, stride)
        acc_a = 0.0
        acc_b = 0.0
        acc_c = 0.0
        acc_d = 0.0
        for p in range(lane + w * piece_slice, nb * 4, w * sp):
            sb = p // 4
            j = p % 4
            lo = sb * 256 + 64 * j
            at = sb * 36
            if ORDER == "halves":
                pa, pb, pc, pd = q4_k_halves(data, ra + at, rb + at, rc + at, rd + at, j, x, lo, opaque)
                acc_a += pa
                acc_b += pb
                acc_c += pc
                acc_d += pd
            else:
                xl0, xl1, xl2, xl3, xh0, xh1, xh2, xh3, sxl, sxh = q4_k_x(x, lo)
                acc_a += q4_k_piece(data, ra + at, j, xl0, xl1, xl2, xl3, xh0, xh1, xh2, xh3, sxl, sxh, opaque)
                acc_b += q4_k_piece(data, rb + at, j, xl0, xl1, xl2, xl3, xh0, xh1, xh2, xh3, sxl, sxh, opaque)
                acc_c += q4_k_piece(data, rc + at, j, xl0, xl1, xl2, xl3, xh0, xh1, xh2, xh3, sxl, sxh, opaque)
                acc_d += q4_k_piece(data, rd + at, j, xl0, xl1, xl2, xl3, xh0, xh1, xh2, xh3, sxl, sxh, opaque)
        finish_four(y, sums, acc_a, acc_b, acc_c, acc_d, r, min(m, base + teams * 4), team, piece_slice, sp)
        base += num_groups(0) * teams * 4


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



@func
def words_gemv(data, x, y, m, k, split, nbytes, sums):
    """The body of gemv_q8_0_words (``nbytes`` 34) and gemv_q4_0_words (18): teams of four rows, a block a
    piece (their contracts); ``sums`` the group's shared f32 (2 GROUP) for the split's partial sums."""
    w = simd_size()
    lane = lane_id()
    sp, teams = team_shape(split)
    team = simd_group_id() // sp
    piece_slice = simd_group_id() % sp
    nb = k // 32
    opaque = u32(k) >> 31  # 0 (k < 2**31), unknown to the compiler: see in_place
    base = group_id(0) * teams * 4
    while base < m:
        r = base + team * 4
        ga, gb, gc, gd = four_rows(r, m, nb)
        acc_a = 0.0
        acc_b = 0.0
        acc_c = 0.0
        acc_d = 0.0
        for blk in range(lane + w * piece_slice, nb, w * sp):
            x0 = load_x8(x, blk * 32)
            x1 = load_x8(x, blk * 32 + 8)
            x2 = load_x8(x, blk * 32 + 16)
            x3 = load_x8(x, blk * 32 + 24)
            if nbytes == 34:
                acc_a += q8_0_block(data, ga + blk, x0, x1, x2, x3, opaque)
                acc_b += q8_0_block(data, gb + blk, x0, x1, x2, x3, opaque)
                acc_c += q8_0_block(data, gc + blk, x0, x1, x2, x3, opaque)
                acc_d += q8_0_block(data, gd + blk, x0, x1, x2, x3, opaque)
            else:
                acc_a += q4_0_block(data, ga + blk, x0, x1, x2, x3, opaque)
                acc_b += q4_0_block(data, gb + blk, x0, x1, x2, x3, opaque)
                acc_c += q4_0_block(data, gc + blk, x0, x1, x2, x3, opaque)
                acc_d += q4_0_block(data, gd + blk, x0, x1, x2, x3, opaque)
        finish_four(y, sums, acc_a, acc_b, acc_c, acc_d, r, min(m, base + teams * 4), team, piece_slice, sp)
        base += num_groups(0) * teams * 4


@kernel(variants(T=[f32, f16, bf16]))
def gemv_q8_0_words(data: In[u32], x: In[T], y: Tensor[T], m: int, k: int, split: int):
    """y = W x, W (m, k) in Q8_0 (34-byte blocks of 32: f16 d, 32 x i8 q; weight d q), read as u32 words.

    data: m rows of k weights, each row k / 32 blocks back to back (gguf.py), m k / 32 even (whole words), its
    bytes read as little-endian u32 words (the host's ``kernel_data``), the buffer 4-byte aligned; x: (k,),
    y: (m,), T in f32/f16/bf16; k a positive multiple of 32, m >= 1, bytes < 2**31.
    Rows: as gemv_q4_k's, four rows a team.
    Order: lane l of the team's subgroup j adds its blocks l + W j, + W P, ... in order (f32), a xor
    butterfly over the W lanes (log2 W levels), then the P subgroups' sums in j order; one rounding to T.
    No atomics: deterministic.
    Non-finite: a NaN/Inf in x or in a scale of a row's blocks makes that y non-finite (NaN or +-Inf,
    unspecified); finite inputs give finite y unless the sum overflows.
    A piece is a block: a 32-term dot product of q with x in order, then times d.  Its nine words are read
    one at a time (a block starts at a word or 2 bytes into one).
    """
    words_gemv(data, x, y, m, k, split, 34, shared(f32, 2 * GROUP))


@kernel(variants(T=[f32, f16, bf16]))
def gemv_q4_0_words(data: In[u32], x: In[T], y: Tensor[T], m: int, k: int, split: int):
    """y = W x, W (m, k) in Q4_0 (18-byte blocks of 32: f16 d, 16 bytes of nibbles; weight d (q - 8)), read as
    u32 words.

    data: m rows of k weights, each row k / 32 blocks back to back (gguf.py), m k / 32 even (whole words), its
    bytes read as little-endian u32 words (the host's ``kernel_data``), the buffer 4-byte aligned; x: (k,),
    y: (m,), T in f32/f16/bf16; k a positive multiple of 32, m >= 1, bytes < 2**31.
    Rows, order (a block a piece), no atomics and non-finite policy: as gemv_q8_0_words's.
    A piece is a block: a 16-term dot product of the low nibbles (q - 8, weights 0 .. 15) with x and one of the
    high nibbles (weights 16 .. 31), each in byte order, added, then times d.  Its five words are read one at a
    time (a block starts at a word or 2 bytes into one).
    """
    words_gemv(data, x, y, m, k, split, 18, shared(f32, 2 * GROUP))


@dataclass(frozen=True)
class Scheme:
    """How one kernel reads a format: ``word`` the element type of its ``data`` (u32: the bytes as little-endian
    words, :func:`kernel_data`), ``rows`` a team takes, ``pieces`` a block, the fewest pieces of a row a lane
    keeps when the host splits a team (``lane_pieces``), the subgroups the split aims at (``target``), and the
    kernel's variant values beside T (``binding``)."""

    kernel: Any
    word: Any
    rows: int
    pieces: int
    lane_pieces: int
    target: int = 8192
    binding: tuple[tuple[str, Any], ...] = ()


#: The byte kernels of the 2-byte-aligned formats.
BYTE_SCHEMES = {"Q8_0": Scheme(gemv_q8_0, u8, ROWS, 4, MIN_LANE_PIECES),
                "Q4_0": Scheme(gemv_q4_0, u8, ROWS, 2, MIN_LANE_PIECES)}
#: The word kernels: fields masked in place (5.1 (Q8_0) and 4.6 (Q4_0) SASS instructions per weight and row,
#: against 10.0 and 6.4 for the byte kernels; Q4_K 4.8 against 8.7), four rows a team, and about 2048 subgroups
#: (the splits that won on an H100 at the Llama shapes, std/quant_gemv/*_splits).
WORD_SCHEMES = {"Q8_0": Scheme(gemv_q8_0_words, u32, 4, 1, 1, 2048),
                "Q4_0": Scheme(gemv_q4_0_words, u32, 4, 1, 1, 2048),
                "Q4_K": Scheme(gemv_q4_k, u32, 4, 4, 1, 2048, (("ORDER", "halves"),))}
#: The kernel the host runs per format: Q8_0 reads words wherever its rows' bytes are whole words on a word
#: boundary (else BYTE_SCHEMES's), Q4_K always (144-byte blocks).  Q4_0 stays on bytes: its word kernel lost on
#: two of the three Llama shapes on an H100 (docs/std/quant_gemv.md).
SCHEMES = {"Q8_0": WORD_SCHEMES["Q8_0"], "Q4_0": BYTE_SCHEMES["Q4_0"], "Q4_K": WORD_SCHEMES["Q4_K"],
           "Q6_K": Scheme(gemv_q6_k, u8, ROWS, 8, MIN_LANE_PIECES)}
#: Every kernel's scheme, by kernel name (the suite registers each).
ALL_SCHEMES = {sc.kernel.name: sc for sc in (*SCHEMES.values(), *BYTE_SCHEMES.values(), *WORD_SCHEMES.values())}
KERNELS = {q: sc.kernel for q, sc in SCHEMES.items()}


def split_for(m: int, k: int, qtype: str, scheme: Scheme | None = None) -> int:
    """Subgroups per team: the fewest of SPLITS that give the grid the scheme's target of (32-lane) subgroups
    (TARGET_SUBGROUPS for the byte kernels), capped where each lane would get fewer than the scheme's
    ``lane_pieces`` pieces of a row (bench ``std/quant_gemv/*_splits``).  ``scheme``: the kernel's (default the
    host's, SCHEMES)."""
    fmt = format_of(qtype)
    sc = scheme or SCHEMES[fmt.name]
    teams = _host.ceil_div(m, sc.rows)
    pieces = k // fmt.block * sc.pieces
    most = max(1, pieces // (32 * sc.lane_pieces))
    want = next((s for s in SPLITS if teams * s >= sc.target), SPLITS[-1])
    return max(s for s in SPLITS if s <= max(1, min(want, most)))


def grid_for(m: int, split: int = 1, rows: int = ROWS) -> int:
    """Threads for m rows: a team of ``split`` 32-lane subgroups per ``rows`` rows (a subgroup on NVIDIA is 32
    lanes; wider subgroups make smaller teams and loop over more rows, narrower ones leave spare subgroups
    idle), capped at MAX_GROUPS groups."""
    teams = max(1, GROUP // 32 // split)
    return min(_host.ceil_div(_host.ceil_div(m, rows), teams), MAX_GROUPS) * GROUP


def scheme_for(data: Any, qtype: str, m: int, k: int) -> Scheme:
    """The host's kernel for ``data``: SCHEMES's, or the byte kernel where ``data`` cannot be read as words (its
    bytes not whole words, or a device array 2 bytes off a word boundary)."""
    fmt = format_of(qtype)
    sc = SCHEMES[fmt.name]
    if sc.word != u8 and fmt.name in BYTE_SCHEMES:
        total = m * row_bytes(fmt.name, k)
        if total % 4 or _host.device_starts_off(data, 4):
            return BYTE_SCHEMES[fmt.name]
    return sc


def kernel_data(data: Any, scheme: Scheme) -> Any:
    """``data`` (uint8) as ``scheme``'s kernel reads it: itself, or a view of its bytes as u32 words."""
    return data if scheme.word == u8 else _host.bytes_as(data, scheme.word)


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
    sc = scheme_for(data, fmt.name, M, K)
    split = split_for(M, K, fmt.name, sc)
    grid = grid_for(M, split, sc.rows)
    sc.kernel.variant(T=dt, **dict(sc.binding)).launch(kernel_data(data, sc), x, out, M, K, split, grid=(grid,),
                                                       group=(GROUP,), backend=backend)
    return out


__all__ = ["ALL_SCHEMES", "BYTE_PLACES", "BYTE_SCHEMES", "GROUP", "KERNELS", "MIN_LANE_PIECES", "NIBBLE_PLACES",
           "PLACE_FLOATS", "ROWS", "SCHEMES", "SPLITS", "Scheme", "TARGET_SUBGROUPS", "WORD_SCHEMES", "block_head",
           "byte_word_dot", "dot8", "finish_four", "finish_pair", "four_rows", "from_half", "gemv_q4_0",
           "gemv_q4_0_words", "gemv_q4_k", "gemv_q6_k", "gemv_q8_0", "gemv_q8_0_words", "grid_for", "in_place",
           "kernel_data", "lane_sum", "load_x32", "load_x8", "nibble_word_dot", "q4_0_block", "q4_0_piece",
           "q4_k_half", "q4_k_halves", "q4_k_piece", "q4_k_scales", "q4_k_value", "q4_k_words", "q4_k_x", "q6_k_piece", "q8_0_block", "q8_0_piece", "quant_gemv", "scheme_for", "split_for", "sum8", "team_shape",
           "words_gemv"]

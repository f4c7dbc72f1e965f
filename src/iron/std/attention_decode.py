"""The KV-cache decode's kernels (flash-decoding): a split pass over chunks of keys (dense or paged caches), a
combine pass, and the append of a new token's key and value into a paged cache.  iron.std.attention's host
functions (``decode_attention[_paged]``, ``append_paged_kv``) launch them; docs/std/attention.md explains the
design and the measured bounds.
"""

from __future__ import annotations

from typing import Any

from iron import In, T, Tensor, bf16, f16, f32, func, i32, kernel, variants
from iron.lang import (barrier, exp2, fma, group_id, lane_id, local, log2, num_simd_groups, program_id, select, shared,
                       simd_group_id, simd_shuffle_xor, simd_size, static_range, thread_id)
from iron.std.attention_ws import LOG2E, NEG

# ---------------------------------------------------------------- split pass

@func
def group_chunk(seq_lens, H, H_kv, S_max, NCH, CH, heads):
    """The split group (c, b * H/heads + hg)'s work: its sequence b, first query head h0 = hg * heads, KV head,
    keys [start, end) (chunk c of sequence b's seq_lens[b], clamped into [0, S_max]) and the partials' index of
    its first head's chunk."""
    c = group_id(0)
    hg = group_id(1)
    b = hg // (H // heads)
    h0 = (hg % (H // heads)) * heads
    seq = min(max(seq_lens[b], 0), S_max)
    start = c * CH
    return b, h0, h0 // (H // H_kv), start, min(start + CH, seq), (b * H + h0) * NCH + c


@func
def empty_chunk(part_o, part_lse, obase, NCH, D, heads, t, threads):
    """A chunk with no keys: output 0 and LSE -inf for each of the group's heads (``threads`` threads, t of them)."""
    for i in range(t, heads * D, threads):
        part_o[(obase + (i // D) * NCH) * D + i % D] = 0.0
    if t < heads:
        part_lse[obase + t * NCH] = NEG


#: Threads of one decode group; lanes of a team, which reads one K/V row at a time (8 lanes fit every
#: subgroup width Iron runs: 8 on lavapipe, 32, 64; the TM = 16 variant needs subgroups of 16 or more).
DECODE_THREADS = 128
TEAM = 8


def team_spans_head(v: dict[str, Any]) -> bool:
    """a team's TM lanes read whole VEC-wide vectors of a head: D a multiple of TM * VEC"""
    return v["D"] % (v["TM"] * v["VEC"]) == 0


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8], D=[64, 128], GQ=[1, 2, 4], U=[1, 2, 4], TM=[TEAM, 16],
                 PAGED=[False, True], where=team_spans_head))
def attention_decode_split(q: In[T], k: In[T], v: In[T], seq_lens: In[i32], part_o: Tensor[f32],
                           part_lse: Tensor[f32], H: int, H_kv: int, S_max: int, NCH: int, CH: int, scale: f32,
                           table: In[i32], P: int, pages: int):
    """One chunk of keys for GQ query heads sharing one KV head: the chunk's softmax-weighted V and its LSE.

    q (B, H, D), k/v (B, H_kv, S_max, D) row-major in T; seq_lens (B,) i32, clamped to [0, S_max]; ``table``,
    P and ``pages`` unread.  PAGED: a cache of pages, k/v (pages, P, H_kv, D) (P keys a page, FlashInfer's
    and flash-attn's NHD layout), key s of sequence b in row s % P of page table[b, s // P] (``table`` (B,
    S_max / P) i32, entries clamped to [0, pages)).
    Grid (NCH * 128, B * H / GQ), group (128,): group (c, b * H/GQ + hg) owns keys
    [c*CH, min((c+1)*CH, L_b)) of heads hg*GQ .. hg*GQ+GQ-1, KV head (hg*GQ) // (H / H_kv).
    Out (f32): part_o (B, H, NCH, D) = sum_j softmax_j v_j over the chunk (normalised), part_lse
    (B, H, NCH) = log2 sum_j 2^(s_j), s_j = scale * log2(e) * q.k_j; an empty chunk gives 0 and -inf.
    Order: a team of TM lanes (8 or 16) owns U keys at a time, j0, j0 + 128/TM, ... (j0 = start + team,
    + U 128/TM, ...): each score a lane's sequential FMA chain over D/TM elements (VEC-wide loads), then a
    log2 TM-step xor butterfly; the U keys fold into the team's running (m, l, acc) at once (one rescale
    by 2^(m - m'), then the U weighted rows in order); teams combine by an xor butterfly inside a
    subgroup, then subgroups in id order.
    D in {64, 128}, a multiple of TM VEC; TM at most the subgroup width; H a multiple of H_kv, H / H_kv a
    multiple of GQ.  NaN/Inf in q or k give NaN for the head's chunk (and output); NaN/Inf in v propagate
    to the outputs that weight them.
    """
    NV = D // (TM * VEC)
    E = NV * VEC
    TEAMS = DECODE_THREADS // TM
    LEVELS = 3 if TM == 8 else 4
    ml_s = shared(f32, TEAMS * GQ * 2)
    acc_s = shared(f32, GQ * D)
    t = thread_id(0)
    team = t // TM
    lt = t % TM
    b, h0, kvh, start, end, obase = group_chunk(seq_lens, H, H_kv, S_max, NCH, CH, GQ)
    if start >= end:
        empty_chunk(part_o, part_lse, obase, NCH, D, GQ, t, DECODE_THREADS)
        return
    qv = local(f32, GQ * E)
    for g in static_range(GQ):
        for jv in static_range(NV):
            x = f32(q.load((b * H + h0 + g) * D + (lt + jv * TM) * VEC, width=VEC))
            for i in static_range(VEC):
                qv[g * E + jv * VEC + i] = x[i] * (scale * LOG2E)
    m = local(f32, GQ)
    l = local(f32, GQ)
    acc = local(f32, GQ * E)
    for g in static_range(GQ):
        m[g] = NEG
    row0 = (b * H_kv + kvh) * S_max
    pg = local(i32, U)  # PAGED: the pages of an iteration's U keys, read one iteration ahead of their loads
    if PAGED:
        for u in static_range(U):
            pg[u] = table[b * (S_max // P) + min(start + team + u * TEAMS, end - 1) // P]
    for j0 in range(start + team, end, U * TEAMS):
        kf = local(f32, U * E)
        vf = local(f32, U * E)
        for u in static_range(U):
            key = min(j0 + u * TEAMS, end - 1)
            if PAGED:
                base = ((min(max(pg[u], 0), pages - 1) * P + key % P) * H_kv + kvh) * D
            else:
                base = (row0 + key) * D
            for jv in static_range(NV):
                kx = f32(k.load(base + (lt + jv * TM) * VEC, width=VEC))
                vx = f32(v.load(base + (lt + jv * TM) * VEC, width=VEC))
                for i in static_range(VEC):
                    kf[u * E + jv * VEC + i] = kx[i]
                    vf[u * E + jv * VEC + i] = vx[i]
        if PAGED:  # the next iteration's pages, in flight while this one's keys are scored
            for u in static_range(U):
                pg[u] = table[b * (S_max // P) + min(j0 + (U + u) * TEAMS, end - 1) // P]
        # The U keys' scores (a key past the chunk, clamped above, scores -inf: weight 0), then one
        # rescale of (m, l, acc) per head for all U: m' = max(m, s_u), acc' = acc 2^(m-m') + sum_u
        # 2^(s_u-m') v_u in u order.
        sc = local(f32, U * GQ)
        for u in static_range(U):
            for g in static_range(GQ):
                s = 0.0
                for e in static_range(E):
                    s = fma(qv[g * E + e], kf[u * E + e], s)
                sc[u * GQ + g] = s
        for u in static_range(U):
            for g in static_range(GQ):
                s = sc[u * GQ + g]
                for lv in static_range(LEVELS):
                    s += simd_shuffle_xor(s, TM >> (lv + 1))
                sc[u * GQ + g] = select(j0 + u * TEAMS < end, s, NEG)
        for g in static_range(GQ):
            mx = m[g]
            for u in static_range(U):
                mx = max(mx, sc[u * GQ + g])
            alpha = exp2(m[g] - mx)
            m[g] = mx
            tot = l[g] * alpha
            for e in static_range(E):
                acc[g * E + e] = acc[g * E + e] * alpha
            for u in static_range(U):
                p = exp2(sc[u * GQ + g] - mx)
                tot += p
                for e in static_range(E):
                    acc[g * E + e] = fma(p, vf[u * E + e], acc[g * E + e])
            l[g] = tot
    # Teams of one subgroup: an xor butterfly over the team index.
    mask = TM
    while mask < simd_size():
        for g in static_range(GQ):
            mo = simd_shuffle_xor(m[g], mask)
            lo = simd_shuffle_xor(l[g], mask)
            mn = max(m[g], mo)
            mu = select(mn == NEG, 0.0, mn)
            a0 = exp2(m[g] - mu)
            a1 = exp2(mo - mu)
            l[g] = l[g] * a0 + lo * a1
            m[g] = mn
            for e in static_range(E):
                acc[g * E + e] = acc[g * E + e] * a0 + simd_shuffle_xor(acc[g * E + e], mask) * a1
        mask = mask * 2
    # Subgroups, in id order: (m, l) first, then each subgroup's lead team adds its rescaled, normalised acc.
    sg = simd_group_id()
    nsg = num_simd_groups()
    lead = lane_id() < TM
    if lane_id() == 0:
        for g in static_range(GQ):
            ml_s[(sg * GQ + g) * 2] = m[g]
            ml_s[(sg * GQ + g) * 2 + 1] = l[g]
    barrier()
    f = local(f32, GQ)
    big_m = local(f32, GQ)
    big_l = local(f32, GQ)
    for g in static_range(GQ):
        mx = NEG
        for r in range(nsg):
            mx = max(mx, ml_s[(r * GQ + g) * 2])
        mu = select(mx == NEG, 0.0, mx)
        tot = 0.0
        for r in range(nsg):
            tot += ml_s[(r * GQ + g) * 2 + 1] * exp2(ml_s[(r * GQ + g) * 2] - mu)
        f[g] = exp2(m[g] - mu) / tot
        big_m[g] = mx
        big_l[g] = tot
    for r in range(nsg):
        if sg == r and lead:
            for g in static_range(GQ):
                for jv in static_range(NV):
                    for i in static_range(VEC):
                        idx = g * D + (lt + jv * TM) * VEC + i
                        if r == 0:
                            acc_s[idx] = acc[g * E + jv * VEC + i] * f[g]
                        else:
                            acc_s[idx] = fma(acc[g * E + jv * VEC + i], f[g], acc_s[idx])
        barrier()
    for i in range(t, GQ * D, DECODE_THREADS):
        part_o[(obase + (i // D) * NCH) * D + i % D] = acc_s[i]
    for g in static_range(GQ):
        if t == g:
            part_lse[obase + g * NCH] = big_m[g] + log2(big_l[g])


# ---------------------------------------------------------------- combine pass

#: Threads of a combine group.  TILED: one group per (sequence, head), each thread owning output element d
#: (D at most COMBINE_GROUP); the chunks' LSEs and weights pass through shared memory COMBINE_GROUP at a time.
COMBINE_GROUP = 128
#: TILED: chunks whose outputs a thread loads at once (their loads issued together, then their FMAs in order).
COMBINE_UNROLL = 8


@kernel(variants(T=[f32, f16, bf16], TILED=[False, True]))
def attention_decode_combine(part_o: In[f32], part_lse: In[f32], o: Tensor[T], H: int, D: int, NCH: int):
    """o (B, H, D) in T from the chunks' normalised outputs and base-2 LSEs (decode_split's layout).

    Grid (H * D, B) (TILED: (H * COMBINE_GROUP, B), D <= COMBINE_GROUP), group (COMBINE_GROUP,).
    o = sum_c 2^(lse_c - M) o_c / sum_c 2^(lse_c - M), M = max_c lse_c (NaN ignored), the sums over c = 0 ..
    NCH-1 in order, in f32, one rounding to T.  Every chunk -inf (no keys): o = 0.  A NaN or +Inf LSE gives NaN;
    NaN/Inf in o_c propagate.
    Not TILED: one thread per output element, each reading every LSE twice (a chain of NCH / unroll dependent
    loads per pass).  TILED: the same operations in the same order, so the same bits; a group's threads read a
    tile of LSEs at once, every thread takes M from shared memory, one thread a chunk makes its weight, and
    each thread's output loads go COMBINE_UNROLL at a time.
    """
    if TILED:
        h = group_id(0)
        b = group_id(1)
        t = thread_id(0)
        bh = b * H + h
        ls = shared(f32, COMBINE_GROUP)  # a tile of LSEs
        ws = shared(f32, COMBINE_GROUP)  # their weights
        mx = NEG
        for c0 in range(0, NCH, COMBINE_GROUP):
            n = min(COMBINE_GROUP, NCH - c0)
            barrier()  # everyone read the last tile
            if t < n:
                ls[t] = part_lse[bh * NCH + c0 + t]
            barrier()
            for c in range(n):
                mx = max(mx, ls[c])
        mu = select(mx == NEG, 0.0, mx)
        num = 0.0
        den = 0.0
        for c0 in range(0, NCH, COMBINE_GROUP):
            n = min(COMBINE_GROUP, NCH - c0)
            barrier()  # everyone read the last tile's weights
            if t < n:
                lse = ls[t]  # one tile: still there
                if NCH > COMBINE_GROUP:
                    lse = part_lse[bh * NCH + c0 + t]
                ws[t] = exp2(lse - mu)
            barrier()
            if t < D:
                at = (bh * NCH + c0) * D + t
                c = 0
                while c + COMBINE_UNROLL <= n:
                    po = local(f32, COMBINE_UNROLL)  # the loads first, all in flight, then the sums in order
                    for u in static_range(COMBINE_UNROLL):
                        po[u] = part_o[at + (c + u) * D]
                    for u in static_range(COMBINE_UNROLL):
                        w = ws[c + u]
                        den += w
                        num = fma(w, po[u], num)
                    c += COMBINE_UNROLL
                while c < n:
                    w = ws[c]
                    den += w
                    num = fma(w, part_o[at + c * D], num)
                    c += 1
        if t < D:
            o[bh * D + t] = T(select(den == 0.0, 0.0, num / den))
    else:
        i = program_id(0)
        b = program_id(1)
        if i < H * D:
            bh = b * H + i // D
            mx = NEG
            for c in range(NCH):
                mx = max(mx, part_lse[bh * NCH + c])
            mu = select(mx == NEG, 0.0, mx)
            num = 0.0
            den = 0.0
            for c in range(NCH):
                w = exp2(part_lse[bh * NCH + c] - mu)
                den += w
                num = fma(w, part_o[(bh * NCH + c) * D + i % D], num)
            o[bh * D + i % D] = T(select(den == 0.0, 0.0, num / den))


def combine_grid(h: int, d: int, b: int, tiled: bool) -> tuple[int, int]:
    """attention_decode_combine's grid (its group: (COMBINE_GROUP,))."""
    return (h * COMBINE_GROUP, b) if tiled else (-(-h * d // COMBINE_GROUP) * COMBINE_GROUP, b)


@kernel(variants(T=[f32, f16, bf16]))
def paged_kv_append(k_new: In[T], v_new: In[T], k_pages: Tensor[T], v_pages: Tensor[T], table: In[i32],
                    positions: In[i32], HD: int, P: int, width: int, pages: int, n: int):
    """Row positions[b] of sequence b's pages takes its new key and value: k_pages, v_pages (pages, P, H_kv, D)
    at page table[b, pos // P], row pos % P, from k_new, v_new (B, H_kv, D) (HD = H_kv * D elements a row).
    A position outside [0, width * P) (``table`` (B, width)) or a page outside [0, pages) writes nothing.
    Grid (n,) for n = B * HD, one element a thread."""
    i = program_id(0)
    if i < n:
        b = i // HD
        pos = positions[b]
        if pos >= 0 and pos < width * P:
            page = table[b * width + pos // P]
            if page >= 0 and page < pages:
                at = (page * P + pos % P) * HD + i % HD
                k_pages[at] = k_new[i]
                v_pages[at] = v_new[i]


#: Threads of one group of the append.
APPEND_GROUP = 256


__all__ = ["APPEND_GROUP", "COMBINE_GROUP", "COMBINE_UNROLL", "DECODE_THREADS", "TEAM", "attention_decode_combine",
           "attention_decode_split", "combine_grid", "empty_chunk", "group_chunk", "paged_kv_append", "team_spans_head"]

"""Scaled-dot-product attention: a KV-cache decode (flash-decoding: a split pass, then a combine pass) and
a tiled flash-attention prefill whose two products run on the matrix units through the fragment API.

Scores are ``scale * q . k`` (``scale`` defaults to ``1/sqrt(D)``); the kernels work in base 2 (scores
times ``log2(e)``, ``exp2``), accumulate in f32 and keep f32 softmax statistics (running max ``m`` and
sum ``l``); an output is rounded to its dtype once.  No float atomics: every sum runs in a fixed order,
so results are deterministic.

Three prefill kernels: on Hopper ``attention_ws.attention_prefill_ws`` (128 queries per group, warp roles,
tile copies, warpgroup multiplies, the softmax on the accumulator's registers); ``attention_prefill`` (64
queries per group, 16x8x16 fragments, the output accumulator in registers: CUDA's ``mma.sync``) and
``attention_prefill_small`` (16 queries, 8x8x8 f32 fragments, the accumulator in shared memory: 32 KB
devices, lavapipe, Metal).  The last two predate the fragment row operations: they stage ``S = Q K^T``
through shared memory, run the per-row softmax there and write ``P`` back (rounded to T) as the ``a``
operand of ``P V``.  Each also runs packed sequences (its ``VARLEN`` variant, ``prefill_attention_varlen``):
q (T, H, D) with ``cu_seqlens`` marking where each sequence starts.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from iron import LaunchError, bf16, f16, f32, func, i32, In, T, Tensor, kernel, variants
from iron.lang import (barrier, exp2, fma, frag_a, frag_acc, frag_b, frag_load_acc, frag_store, group_id, lane_id,
                       local, log2, mma, num_simd_groups, program_id, select, shared, simd_group_id, simd_shuffle_xor,
                       simd_size, static_range, thread_id, vec)
from iron.std._plans import planned
from iron.std.attention_ws import (FA_BQ, FA_THREADS, PAGE_PIECE, attention_prefill_ws, fa_config, fa_shared_bytes,
                                   sequence_keys)
from iron.std.gemm_ws import runs_roles
from iron.std._host import (ceil_div, check_float, check_shape, device_traits, dtype_of, empty_like, output,
                            shape_of, starts_aligned, tuned_for_cuda_mma, vector_width, view)

NEG = -math.inf
LOG2E = 1.4426950408889634

# ---------------------------------------------------------------- decode: split pass

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
    c = group_id(0)
    hg = group_id(1)
    b = hg // (H // GQ)
    h0 = (hg % (H // GQ)) * GQ
    kvh = h0 // (H // H_kv)
    seq = min(max(seq_lens[b], 0), S_max)
    start = c * CH
    end = min(start + CH, seq)
    obase = (b * H + h0) * NCH + c
    if start >= end:
        for i in range(t, GQ * D, DECODE_THREADS):
            part_o[(obase + (i // D) * NCH) * D + i % D] = 0.0
        if t < GQ:
            part_lse[obase + t * NCH] = NEG
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


# ---------------------------------------------------------------- decode: combine pass

@kernel(variants(T=[f32, f16, bf16]))
def attention_decode_combine(part_o: In[f32], part_lse: In[f32], o: Tensor[T], H: int, D: int, NCH: int):
    """o (B, H, D) in T from the chunks' normalised outputs and base-2 LSEs (decode_split's layout).

    Grid (H * D, B): one thread per output element.  o = sum_c 2^(lse_c - M) o_c / sum_c 2^(lse_c - M),
    M = max_c lse_c (NaN ignored), the sums over c = 0 .. NCH-1 in order, in f32, one rounding to T.
    Every chunk -inf (no keys): o = 0.  A NaN or +Inf LSE gives NaN; NaN/Inf in o_c propagate.
    """
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


COMBINE_GROUP = 128

# ---------------------------------------------------------------- prefill

@func
def sequence_rows(cu, bh, H, H_kv, S, D, packed):
    """Where (batch, head) ``bh``'s rows lie: the first element of its query (and output) rows and of its KV head's
    key (and value) rows (grouped-query: H / H_kv query heads share one), the elements from one row to the next of
    each, and the sequence's length.  Dense (B, heads, S, D) tensors: rows D apart, S of them.  ``packed`` (S,
    heads, D) tensors of B sequences' tokens: sequence bh // H holds rows cu[b] .. cu[b + 1] - 1, clamped into
    [0, S]."""
    h = bh % H
    kvh = h // (H // H_kv)
    if packed:
        start = min(max(cu[bh // H], 0), S)
        n = min(max(cu[bh // H + 1], start), S) - start
        qbase, kbase, q_row, kv_row = (start * H + h) * D, (start * H_kv + kvh) * D, H * D, H_kv * D
    else:
        n = S
        qbase, kbase, q_row, kv_row = bh * S * D, ((bh // H) * H_kv + kvh) * S * D, D, D
    return qbase, kbase, q_row, kv_row, n


@func
def key_row(kbase, kv_row, j, table, bh, H, H_kv, W, P, N, D, paged):
    """The first element of key ``j``'s row: ``kbase + j * kv_row``, or ``paged`` through sequence bh // H's row of
    the block table (W pages of P keys a sequence, entries clamped into the pool's N pages (N, P, H_kv, D))."""
    at = kbase + j * kv_row
    if paged:
        page = min(max(table[(bh // H) * W + j // P], 0), N - 1)
        at = ((page * P + j % P) * H_kv + (bh % H) // (H // H_kv)) * D
    return at


#: Keys per block; output columns per P V pass (both one 16 x 32 strip of four 16x8 accumulators).
BK = 32
DC = 32
PVEC = 8  # 16-byte vectors of f16/bf16


@kernel(variants(T=[f16, bf16], D=[64, 128], BQ=[64], VARLEN=[False, True], PAGED=[False, True]))
def attention_prefill(q: In[T], k: In[T], v: In[T], o: Tensor[T], cu: In[i32], S: int, H: int, H_kv: int, causal: int,
                      scale: f32, kv_lens: In[i32], table: In[i32], P: int, W: int, N: int):
    """Flash attention forward: o = softmax(scale * Q K^T + mask) V per (batch, head), for matrix units.

    q, o (B, H, S, D); k, v (B, H_kv, S, D); row-major T in {f16, bf16}; D in {64, 128}; H a multiple of
    H_kv (query head h reads KV head h // (H / H_kv)); causal != 0 masks key j > query i; ``cu`` unread (any
    one element).  VARLEN: B packed sequences in q, o (S, H, D) and k, v (S, H_kv, D), sequence b in rows cu[b] ..
    cu[b + 1] - 1 (attention_ws.attention_prefill_ws's VARLEN contract), the grid's first extent sized for the
    longest sequence in place of S.  PAGED (q packed or not): k, v are page pools (N, P, H_kv, D); sequence b's keys
    are its first kv_lens[b] positions, position j in page table[b * W + j // P] at row j % P (``table`` (B, W)
    i32, entries clamped into [0, N), entries past kv_lens[b]'s pages unread); its queries are its last tokens
    (causal: query i sees key j <= i + kv_lens[b] - n_b, n_b its rows of q; a query that sees no key gives NaN).
    Otherwise kv_lens and table are unread (any one element) and P, W, N any.
    Grid (ceil(S / BQ) * 2*BQ, B * H), group (2*BQ,): a group owns BQ queries (rows past S computed on
    zeros, never stored) and walks key blocks of 32 (causal: only up to its last query); tails masked.
    Per block: S = Q K^T on 16x8x16 fragments (f32 accumulators; one 16 x 32 strip of four per subgroup
    turn) staged to shared; two threads per row take the block's max (f32), rescale their running (m, l)
    and write P = 2^(s - m) rounded to T; P V on fragments in 32-column passes, added into per-thread
    f32 registers after scaling them by 2^(m_old - m_new); l sums the rounded P (the applied weights sum
    to 1).  Output rounded once to T.  Shared arrays: 48 KB at BQ 64, D 128 (CUDA's static limit).
    NaN/Inf in q or k give NaN rows; NaN/Inf in v reach the rows that weight them, and the rows of the
    same query tile that share its key block of 32 (P V multiplies their zero weights by it).
    """
    NT = 2 * BQ
    LD = D + 8
    FLD = DC + 1
    PLD = BK + 2
    NVR = D // PVEC
    qs = shared(T, BQ * LD)
    ks = shared(T, BK * LD)
    vs = shared(T, BK * LD)
    fs = shared(f32, BQ * FLD)
    ps = shared(T, BQ * PLD)
    alpha_s = shared(f32, BQ)
    l_s = shared(f32, BQ)
    t = thread_id(0)
    q0 = group_id(0) * BQ
    bh = group_id(1)
    qbase, kbase, q_row, kv_row, n = sequence_rows(cu, bh, H, H_kv, S, D, VARLEN)
    nk, shift = sequence_keys(kv_lens, bh, H, n, W, P, PAGED)
    sg = simd_group_id()
    nsg = num_simd_groups()
    zero = T(vec(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0))
    for i in static_range(BQ * NVR // NT):
        e = t + i * NT
        r = e // NVR
        cc = (e % NVR) * PVEC
        if q0 + r < n:
            qs.store(r * LD + cc, q.load(qbase + (q0 + r) * q_row + cc, width=PVEC))
        else:
            qs.store(r * LD + cc, zero)
    row = t // 2
    half = t % 2
    qi = q0 + row
    sv = local(f32, BK // 2)
    m_i = NEG
    l_i = 0.0
    PER = BQ * DC // NT
    acc = local(f32, PER * (D // DC))
    sl2 = scale * LOG2E
    kend = nk
    if causal != 0:
        kend = max(min(nk, q0 + BQ + shift), 0)
    if VARLEN:
        kend = select(q0 < n, kend, 0)  # a tile past its sequence reads no keys (and stores nothing)
    for k0 in range(0, kend, BK):
        for i in static_range(BK * NVR // NT):
            e = t + i * NT
            r = e // NVR
            cc = (e % NVR) * PVEC
            if k0 + r < nk:
                at = key_row(kbase, kv_row, k0 + r, table, bh, H, H_kv, W, P, N, D, PAGED) + cc
                ks.store(r * LD + cc, k.load(at, width=PVEC))
                vs.store(r * LD + cc, v.load(at, width=PVEC))
            else:
                ks.store(r * LD + cc, zero)
                vs.store(r * LD + cc, zero)
        barrier()
        # S = Q K^T: one 16 x 32 strip per 16 query rows, four 16x8 accumulators sharing each Q fragment.
        for strip in range(sg, BQ // 16, nsg):
            s0 = frag_acc(f32, 16, 8)
            s1 = frag_acc(f32, 16, 8)
            s2 = frag_acc(f32, 16, 8)
            s3 = frag_acc(f32, 16, 8)
            for kk in range(D // 16):
                fa = frag_a(qs, strip * 16 * LD + kk * 16, LD, 16, 16)
                s0 = mma(fa, frag_b(ks, kk * 16, LD, 16, 8, layout="col"), s0)
                s1 = mma(fa, frag_b(ks, 8 * LD + kk * 16, LD, 16, 8, layout="col"), s1)
                s2 = mma(fa, frag_b(ks, 16 * LD + kk * 16, LD, 16, 8, layout="col"), s2)
                s3 = mma(fa, frag_b(ks, 24 * LD + kk * 16, LD, 16, 8, layout="col"), s3)
            frag_store(fs, strip * 16 * FLD, FLD, s0)
            frag_store(fs, strip * 16 * FLD + 8, FLD, s1)
            frag_store(fs, strip * 16 * FLD + 16, FLD, s2)
            frag_store(fs, strip * 16 * FLD + 24, FLD, s3)
        barrier()
        # Online softmax: threads 2r and 2r+1 own row r, 16 columns each, combined by one xor shuffle.
        mx = NEG
        for j in static_range(BK // 2):
            kj = k0 + half * (BK // 2) + j
            ok = kj < nk and (causal == 0 or kj <= qi + shift)
            sv[j] = select(ok, fs[row * FLD + half * (BK // 2) + j] * sl2, NEG)
            mx = max(mx, sv[j])
        mx = max(mx, simd_shuffle_xor(mx, 1))
        m_new = max(m_i, mx)
        m_use = select(m_new == NEG, 0.0, m_new)
        alpha = exp2(m_i - m_use)
        psum = 0.0
        for j in static_range(BK // 2):
            p = T(exp2(sv[j] - m_use))
            ps[row * PLD + half * (BK // 2) + j] = p
            psum += f32(p)
        psum += simd_shuffle_xor(psum, 1)
        l_i = l_i * alpha + psum
        m_i = m_new
        if half == 0:
            alpha_s[row] = alpha
        barrier()
        # O = O * alpha + P V, 32 output columns per pass.
        for ch in static_range(D // DC):
            for strip in range(sg, BQ // 16, nsg):
                o0 = frag_acc(f32, 16, 8)
                o1 = frag_acc(f32, 16, 8)
                o2 = frag_acc(f32, 16, 8)
                o3 = frag_acc(f32, 16, 8)
                for kk in range(BK // 16):
                    fp = frag_a(ps, strip * 16 * PLD + kk * 16, PLD, 16, 16)
                    o0 = mma(fp, frag_b(vs, kk * 16 * LD + ch * DC, LD, 16, 8), o0)
                    o1 = mma(fp, frag_b(vs, kk * 16 * LD + ch * DC + 8, LD, 16, 8), o1)
                    o2 = mma(fp, frag_b(vs, kk * 16 * LD + ch * DC + 16, LD, 16, 8), o2)
                    o3 = mma(fp, frag_b(vs, kk * 16 * LD + ch * DC + 24, LD, 16, 8), o3)
                frag_store(fs, strip * 16 * FLD, FLD, o0)
                frag_store(fs, strip * 16 * FLD + 8, FLD, o1)
                frag_store(fs, strip * 16 * FLD + 16, FLD, o2)
                frag_store(fs, strip * 16 * FLD + 24, FLD, o3)
            barrier()
            for i in static_range(PER):
                e = t + i * NT
                r = e // DC
                acc[ch * PER + i] = fma(acc[ch * PER + i], alpha_s[r], fs[r * FLD + e % DC])
            barrier()
    if half == 0:
        l_s[row] = l_i
    barrier()
    for ch in static_range(D // DC):
        for i in static_range(PER):
            e = t + i * NT
            r = e // DC
            if q0 + r < n:
                o[qbase + (q0 + r) * q_row + ch * DC + e % DC] = T(acc[ch * PER + i] / l_s[r])


#: The portable prefill's tile: 16 queries, 8 keys per block, 64 threads (any subgroup width up to 64).
SBQ = 16
SBK = 8
SNT = 64


@kernel(variants(T=[f16, bf16], D=[64, 128], VARLEN=[False, True], PAGED=[False, True]))
def attention_prefill_small(q: In[T], k: In[T], v: In[T], o: Tensor[T], cu: In[i32], S: int, H: int, H_kv: int,
                            causal: int, scale: f32, kv_lens: In[i32], table: In[i32], P: int, W: int, N: int):
    """attention_prefill's contract (VARLEN and PAGED too) with 16-query tiles, f32 staging and the accumulator in
    shared memory.

    Grid (ceil(S / 16) * 64, B * H), group (64,).  For devices without a matrix unit and with 32 KB of
    shared memory (31 KB with the portable mma scratch of 8 subgroups of 8), and small enough for
    lavapipe's LLVM to compile in seconds (its coroutine split of barriers grows fast with code size):
    runtime loops, unroll=1 on the D loop, one 8x8x8 mma site per product.  Tiles are staged as f32 (T values are
    exact in f32 and so are their products, so an f32 mma computes what a T one would; SPIR-V and HIP
    cannot load bf16 fragments from shared memory).  Per key block of 8: S = Q K^T (two 8x8 tiles) to
    shared; the online softmax, one thread per row, P rounded to T; the accumulator rows scaled by
    2^(m_old - m_new) in shared; then O += P V (frag_load_acc / mma / frag_store on the same rows).
    A NaN/Inf in v also reaches the rows of its query tile that share its key block of 8.
    """
    LD = D + 8
    FLD = SBK + 1
    NVR = D // PVEC
    qs = shared(f32, SBQ * LD)
    ks = shared(f32, SBK * LD)
    vs = shared(f32, SBK * LD)
    fs = shared(f32, SBQ * FLD)
    ps = shared(f32, SBQ * FLD)
    os_ = shared(f32, SBQ * D)
    alpha_s = shared(f32, SBQ)
    l_s = shared(f32, SBQ)
    t = thread_id(0)
    q0 = group_id(0) * SBQ
    bh = group_id(1)
    qbase, kbase, q_row, kv_row, n = sequence_rows(cu, bh, H, H_kv, S, D, VARLEN)
    nk, shift = sequence_keys(kv_lens, bh, H, n, W, P, PAGED)
    sg = simd_group_id()
    nsg = num_simd_groups()
    zero = vec(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    for e in range(t, SBQ * NVR, SNT):
        cc = (e % NVR) * PVEC
        if q0 + e // NVR < n:
            qs.store((e // NVR) * LD + cc, f32(q.load(qbase + (q0 + e // NVR) * q_row + cc, width=PVEC)))
        else:
            qs.store((e // NVR) * LD + cc, zero)
    for e in range(t, SBQ * D, SNT):
        os_[e] = 0.0
    qi = q0 + t
    m_i = NEG
    l_i = 0.0
    sl2 = scale * LOG2E
    kend = nk
    if causal != 0:
        kend = max(min(nk, q0 + SBQ + shift), 0)
    if VARLEN:
        kend = select(q0 < n, kend, 0)  # a tile past its sequence reads no keys (and stores nothing)
    for k0 in range(0, kend, SBK):
        for e in range(t, SBK * NVR, SNT):
            cc = (e % NVR) * PVEC
            if k0 + e // NVR < nk:
                at = key_row(kbase, kv_row, k0 + e // NVR, table, bh, H, H_kv, W, P, N, D, PAGED) + cc
                ks.store((e // NVR) * LD + cc, f32(k.load(at, width=PVEC)))
                vs.store((e // NVR) * LD + cc, f32(v.load(at, width=PVEC)))
            else:
                ks.store((e // NVR) * LD + cc, zero)
                vs.store((e // NVR) * LD + cc, zero)
        barrier()
        for tr in range(sg, SBQ // 8, nsg):
            sc = frag_acc(f32, 8, 8)
            for kk in range(D // 8, unroll=1):
                sc = mma(frag_a(qs, tr * 8 * LD + kk * 8, LD, 8, 8), frag_b(ks, kk * 8, LD, 8, 8, layout="col"), sc)
            frag_store(fs, tr * 8 * FLD, FLD, sc)
        barrier()
        if t < SBQ:
            mx = NEG
            for col in range(SBK):
                kj = k0 + col
                ok = kj < nk and (causal == 0 or kj <= qi + shift)
                mx = max(mx, select(ok, fs[t * FLD + col] * sl2, NEG))
            m_new = max(m_i, mx)
            m_use = select(m_new == NEG, 0.0, m_new)
            alpha = exp2(m_i - m_use)
            psum = 0.0
            for col in range(SBK):
                kj = k0 + col
                ok = kj < nk and (causal == 0 or kj <= qi + shift)
                p = f32(T(exp2(select(ok, fs[t * FLD + col] * sl2, NEG) - m_use)))
                ps[t * FLD + col] = p
                psum += p
            l_i = l_i * alpha + psum
            m_i = m_new
            alpha_s[t] = alpha
        barrier()
        for e in range(t, SBQ * D, SNT):
            os_[e] = os_[e] * alpha_s[e // D]
        barrier()
        for tile in range(sg, (SBQ // 8) * (D // 8), nsg):
            tr = tile // (D // 8)
            tc = tile % (D // 8)
            oc = frag_load_acc(os_, tr * 8 * D + tc * 8, D, 8, 8)
            oc = mma(frag_a(ps, tr * 8 * FLD, FLD, 8, 8), frag_b(vs, tc * 8, LD, 8, 8), oc)
            frag_store(os_, tr * 8 * D + tc * 8, D, oc)
        barrier()
    if t < SBQ:
        l_s[t] = l_i
    barrier()
    for e in range(t, SBQ * D, SNT):
        if q0 + e // D < n:
            o[qbase + (q0 + e // D) * q_row + e % D] = T(os_[e] / l_s[e // D])


# ---------------------------------------------------------------- host side

#: Decode groups the split pass aims for: a few waves over a 132-SM GPU.
TARGET_GROUPS = 1024


def decode_chunk(batch: int, head_groups: int, s_max: int) -> int:
    """Keys per chunk: enough chunks for about TARGET_GROUPS groups, at least 64 keys each (a multiple of 16)."""
    want = max(1, ceil_div(TARGET_GROUPS, batch * head_groups))
    ch = max(64, ceil_div(ceil_div(s_max, want), 16) * 16)
    return min(ch, max(16, ceil_div(s_max, 16) * 16))


def heads_per_group(h: int, h_kv: int) -> int:
    """GQ: query heads one decode group serves from one KV head: 2 when H/H_kv is even, else 1.

    Two keep the split kernel near 100 registers per thread on sm_90 (four need 195: half the groups
    per SM); heads of one KV head that land in different groups meet its rows in L2 instead.
    """
    return 2 if (h // h_kv) % 2 == 0 else 1


def keys_in_flight(gq: int, tm: int = TEAM) -> int:
    """U: keys a decode team loads and folds at once.  On the H200 (B=16, 32 heads of 128, a 4K cache,
    f16, 2026-11-30): with teams of 8, four when a group serves one head (32 KV heads: 307 us one key at a
    time -> 250; SDPA 248), two when it serves two (8 KV heads: 123 -> 102 us; four keys 115; SDPA 66).
    Teams of 16 (short chunks, batch 1): two for one head (22.2 us; four 24.8), one for two (16.5; two
    20.3)."""
    if tm == 16:
        return 2 if gq == 1 else 1
    return 4 if gq == 1 else 2


#: Chunks of at most this many keys (decode_chunk's plans at batch 1) go to teams of 16 lanes on CUDA.
SHORT_CHUNK = 128


def team_lanes(ch: int, d: int, vec: int, backend: str | None, like: Any = ()) -> int:
    """TM: lanes that share a key's row.  On the H200, 16 for short chunks (B=1, 32 heads of 128, a 4K
    cache, f16: 8 KV heads 20.7 -> 16.5 us, 32 KV heads 24.3 -> 22.2) but not long ones (B=16, 8 KV heads,
    1024-key chunks: 102.6 -> 124.9 us at two heads a group, 127.3 at four); CUDA only (its subgroups hold
    16 lanes; lavapipe's 8 do not), and only where D is a multiple of 16 vectors."""
    if ch <= SHORT_CHUNK and d % (16 * vec) == 0 and tuned_for_cuda_mma(backend, like):
        return 16
    return TEAM


def _check_heads(h: int, h_kv: int, d: int, dims: tuple[int, ...] = (64, 128)) -> None:
    if d not in dims:
        raise LaunchError(f"attention: head dimension D must be {' or '.join(map(str, dims))}, got {d}")
    if h_kv < 1 or h % h_kv:
        raise LaunchError(f"attention: H={h} query heads must be a multiple of H_kv={h_kv} KV heads")


def _not_hopper_ready(fn: str, aligned: bool, scale: float) -> str:
    """Why the Hopper prefill (block 128) cannot take these arguments."""
    if not aligned:
        return f"{fn}: block 128 copies tiles of q, k, v and out, which must start on 16-byte boundaries"
    return (f"{fn}: block 128 takes each row's max before scaling, which needs 0 < scale < inf; got "
            f"{float(scale)} (block 64 or 16 take any scale, for heads of 64 or 128)")


def _scale(scale: float | None, d: int) -> f32:
    import numpy as np

    return np.float32(1.0 / math.sqrt(d) if scale is None else scale)


@planned
def decode_attention(q: Any, k_cache: Any, v_cache: Any, seq_lens: Any, scale: float | None = None,
                     out: Any = None, backend: str | None = None, chunk: int | None = None) -> Any:
    """o (B, H, D) = softmax(scale q k^T) v over each sequence's first seq_lens[b] cached keys.

    q (B, H, D); k_cache, v_cache (B, H_kv, S_max, D), same float dtype; seq_lens (B,) int32.  Two
    launches (split over key chunks of ``chunk`` keys, then the combine); f32 partials are allocated here.
    """
    fn = "decode_attention"
    dt = check_float(q, f"{fn}: q")
    if len(shape_of(q)) != 3 or len(shape_of(k_cache)) != 4:
        raise LaunchError(f"{fn}: q must be (B, H, D) and k_cache (B, H_kv, S_max, D); got {shape_of(q)} and "
                          f"{shape_of(k_cache)}")
    b, h, d = shape_of(q)
    _, h_kv, s_max, _ = shape_of(k_cache)
    check_shape(k_cache, (b, h_kv, s_max, d), f"{fn}: k_cache")
    check_shape(v_cache, (b, h_kv, s_max, d), f"{fn}: v_cache")
    _check_decode(fn, q, {"k_cache": k_cache, "v_cache": v_cache}, seq_lens, h_kv, s_max)
    out = output(fn, out, q, (b, h, d), dt, {"q": q, "k_cache": k_cache, "v_cache": v_cache, "seq_lens": seq_lens})
    return _decode(fn, q, k_cache, v_cache, seq_lens, out, h_kv, s_max, (seq_lens, 1, 1), scale, backend, chunk)


@planned
def decode_attention_paged(q: Any, k_pages: Any, v_pages: Any, block_table: Any, seq_lens: Any,
                           scale: float | None = None, out: Any = None, backend: str | None = None,
                           chunk: int | None = None) -> Any:
    """:func:`decode_attention` over a paged cache, as vLLM and FlashInfer keep it: k_pages, v_pages (pages, P,
    H_kv, D) hold P keys a page (the NHD layout), and sequence b's key s is row s % P of page block_table[b, s //
    P]; block_table (B, max_pages) int32 (entries outside [0, pages) read the nearest page: keep them valid up
    to seq_lens[b]), seq_lens (B,) int32, clamped to [0, max_pages * P]."""
    fn = "decode_attention_paged"
    dt = check_float(q, f"{fn}: q")
    pages, page, h_kv, width = _page_pool(fn, "q (B, H, D)", q, k_pages, v_pages, block_table)
    b, h, d = shape_of(q)
    if pages < 1 or page < 1:
        raise LaunchError(f"{fn}: the cache holds no pages ({pages} pages of {page} keys)")
    _check_decode(fn, q, {"k_pages": k_pages, "v_pages": v_pages}, seq_lens, h_kv, width * page)
    out = output(fn, out, q, (b, h, d), dt, {"q": q, "k_pages": k_pages, "v_pages": v_pages,
                                             "block_table": block_table, "seq_lens": seq_lens})
    return _decode(fn, q, k_pages, v_pages, seq_lens, out, h_kv, width * page, (block_table, page, pages), scale,
                   backend, chunk)


def _page_pool(fn: str, what: str, x: Any, k_pages: Any, v_pages: Any, block_table: Any) -> tuple[int, ...]:
    """The checks of a cache of pages and its table against ``x`` (``what``: its name and shape, B rows of D):
    the number of pages, keys a page, KV heads and table columns."""
    if len(shape_of(x)) != 3 or len(shape_of(k_pages)) != 4 or len(shape_of(block_table)) != 2:
        raise LaunchError(f"{fn}: {what}, k_pages (pages, P, H_kv, D) and block_table (B, max_pages) expected; "
                          f"got {shape_of(x)}, {shape_of(k_pages)} and {shape_of(block_table)}")
    b, _, d = shape_of(x)
    pages, page, h_kv, _ = shape_of(k_pages)
    width = shape_of(block_table)[1]
    check_shape(k_pages, (pages, page, h_kv, d), f"{fn}: k_pages")
    check_shape(v_pages, (pages, page, h_kv, d), f"{fn}: v_pages")
    check_shape(block_table, (b, width), f"{fn}: block_table")
    if dtype_of(block_table, "block_table").name != "i32":
        raise LaunchError(f"{fn}: block_table must be int32, got {dtype_of(block_table).name}")
    return pages, page, h_kv, width


def _check_decode(fn: str, q: Any, caches: dict[str, Any], seq_lens: Any, h_kv: int, s_max: int) -> None:
    """What both decodes check of their arguments beyond the caches' shapes."""
    b, h, d = shape_of(q)
    _check_heads(h, h_kv, d)
    check_shape(seq_lens, (b,), f"{fn}: seq_lens")
    for name, x in caches.items():
        if dtype_of(x, name) != dtype_of(q):
            raise LaunchError(f"{fn}: {name} is {dtype_of(x).name}, q is {dtype_of(q).name}")
    if dtype_of(seq_lens, "seq_lens").name != "i32":
        raise LaunchError(f"{fn}: seq_lens must be int32, got {dtype_of(seq_lens).name}")
    if s_max < 1:
        raise LaunchError(f"{fn}: the cache holds no positions (S_max = 0)")


def _decode(fn: str, q: Any, k: Any, v: Any, seq_lens: Any, out: Any, h_kv: int, s_max: int, paging: tuple,
            scale: float | None, backend: str | None, chunk: int | None) -> Any:
    """The split pass over chunks of the cache (dense, or pages where ``paging`` = (table, P, pages) names a
    table; dense passes seq_lens for the unread table), then the combine."""
    b, h, d = shape_of(q)
    if b == 0 or h == 0:
        return out
    gq = heads_per_group(h, h_kv)
    ch = decode_chunk(b, h // gq, s_max) if chunk is None else int(chunk)
    if ch < 1:
        raise LaunchError(f"{fn}: chunk must be positive, got {ch}")
    nch = ceil_div(s_max, ch)
    if b * h // gq > 65535 or nch > 65535:
        raise LaunchError(f"{fn}: B*H/{gq} = {b * h // gq} groups or {nch} chunks exceed 65535")
    dt = dtype_of(q)
    part_o = empty_like(q, (b, h, nch, d), f32)
    part_lse = empty_like(q, (b, h, nch), f32)
    vec = vector_width(dt)
    tm = team_lanes(ch, d, vec, backend, (q,))
    split = attention_decode_split.variant(T=dt, VEC=vec, D=d, GQ=gq, U=keys_in_flight(gq, tm), TM=tm,
                                           PAGED=paging[0] is not seq_lens)
    split.launch(q, k, v, seq_lens, part_o, part_lse, h, h_kv, s_max, nch, ch, _scale(scale, d), *paging,
                 grid=(nch * DECODE_THREADS, b * h // gq), group=(DECODE_THREADS,), backend=backend)
    attention_decode_combine.variant(T=dt).launch(
        part_o, part_lse, out, h, d, nch, grid=(ceil_div(h * d, COMBINE_GROUP) * COMBINE_GROUP, b),
        group=(COMBINE_GROUP,), backend=backend)
    return out


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


def append_paged_kv(k_new: Any, v_new: Any, k_pages: Any, v_pages: Any, block_table: Any, positions: Any,
                    backend: str | None = None) -> tuple[Any, Any]:
    """Writes each sequence's new key and value into its pages, in place, for :func:`decode_attention_paged`:
    k_new, v_new (B, H_kv, D) at position positions[b] (int32 (B,)) of sequence b, i.e. row pos % P of page
    block_table[b, pos // P] of k_pages, v_pages (pages, P, H_kv, D).  A position outside the table's reach or a
    page outside [0, pages) is skipped.  Returns (k_pages, v_pages)."""
    fn = "append_paged_kv"
    dt = check_float(k_new, f"{fn}: k_new")
    pages, page, h_kv, width = _page_pool(fn, "k_new (B, H_kv, D)", k_new, k_pages, v_pages, block_table)
    b, _, d = shape_of(k_new)
    check_shape(k_new, (b, h_kv, d), f"{fn}: k_new")
    check_shape(v_new, (b, h_kv, d), f"{fn}: v_new")
    check_shape(positions, (b,), f"{fn}: positions")
    for name, x in (("v_new", v_new), ("k_pages", k_pages), ("v_pages", v_pages)):
        if dtype_of(x, name) != dt:
            raise LaunchError(f"{fn}: {name} is {dtype_of(x).name}, k_new is {dt.name}")
    if dtype_of(positions, "positions").name != "i32":
        raise LaunchError(f"{fn}: positions must be int32, got {dtype_of(positions).name}")
    n = b * h_kv * d
    if n:
        paged_kv_append.variant(T=dt).launch(
            k_new, v_new, k_pages, v_pages, block_table, positions, h_kv * d, page, width, pages, n,
            grid=(ceil_div(n, APPEND_GROUP) * APPEND_GROUP,), group=(APPEND_GROUP,), backend=backend)
    return k_pages, v_pages


def prefill_block(backend: str | None, like: Any = (), d: int = 128) -> int:
    """Queries per group: 128 where warp roles, tile copies and warpgroup multiplies run (attention_ws.py, on
    Hopper), 64 on other CUDA devices (attention_prefill, 48 KB of shared arrays, 128 threads), else 16
    (attention_prefill_small, which fits 32 KB with the portable mma scratch)."""
    traits = device_traits(backend, like)
    if runs_roles(traits.profile) and fa_shared_bytes({"D": d, **fa_config(d)}) <= (traits.shared_limit or 0):
        return 128
    return 64 if tuned_for_cuda_mma(backend, like) else 16


@planned
def prefill_attention(q: Any, k: Any, v: Any, causal: bool = True, scale: float | None = None, out: Any = None,
                      backend: str | None = None, block: int | None = None) -> Any:
    """o (B, H, S, D) = softmax(scale Q K^T + causal mask) V; q (B, H, S, D), k/v (B, H_kv, S, D) in f16/bf16.

    ``block``: queries per group, which picks the kernel: 128 (attention_ws.py: warp roles on Hopper; the
    interpreter runs it too), 64 (mma.sync) or 16 (the portable one); by default :func:`prefill_block`'s."""
    dt, (b, h, s, d), h_kv = _prefill_inputs("prefill_attention", q, k, v, "(B, H, S, D)")
    out = output("prefill_attention", out, q, (b, h, s, d), dt, {"q": q, "k": k, "v": v})
    if s == 0 or b * h == 0:
        return out
    sl = _scale(scale, d)
    bq = _prefill_kernel_block("prefill_attention", backend, (q, k, v, out), d, sl, block)
    _launch_prefill("prefill_attention", bq, (q, k, v, out, view(q, _unread_cu)), dt, d, s, s, b, h, h_kv, causal,
                    sl, False, backend)
    return out


@planned
def prefill_attention_varlen(q: Any, k: Any, v: Any, cu_seqlens: Any, max_seqlen: int | None = None,
                             causal: bool = True, scale: float | None = None, out: Any = None,
                             backend: str | None = None, block: int | None = None) -> Any:
    """o (T, H, D): :func:`prefill_attention` within each of B packed sequences, as serving engines batch prompts
    (flash-attn's varlen forward): sequence b is rows cu_seqlens[b] .. cu_seqlens[b + 1] - 1 of q (T, H, D) and of
    k, v (T, H_kv, D), in f16/bf16; cu_seqlens (B + 1,) int32, non-decreasing from 0 to T.

    ``max_seqlen``, the longest sequence, sizes the grid.  By default it is read from cu_seqlens, which is then
    checked (for a device tensor that is one copy to the host and a wait for it); a given one is trusted, as
    flash-attn's is: rows of a longer sequence past it are not computed.  ``block`` as in prefill_attention."""
    dt, (t, h, d), h_kv = _prefill_inputs("prefill_attention_varlen", q, k, v, "(T, H, D)")
    if len(shape_of(cu_seqlens)) != 1 or shape_of(cu_seqlens)[0] < 1:
        raise LaunchError(f"prefill_attention_varlen: cu_seqlens must be (B + 1,); got {shape_of(cu_seqlens)}")
    if dtype_of(cu_seqlens, "cu_seqlens").name != "i32":
        raise LaunchError(f"prefill_attention_varlen: cu_seqlens must be int32, got {dtype_of(cu_seqlens).name}")
    b = shape_of(cu_seqlens)[0] - 1
    longest = _longest_sequence(cu_seqlens, t) if max_seqlen is None else int(max_seqlen)
    out = output("prefill_attention_varlen", out, q, (t, h, d), dt,
                 {"q": q, "k": k, "v": v, "cu_seqlens": cu_seqlens})
    if longest <= 0 or b * h == 0:
        return out
    sl = _scale(scale, d)
    bq = _prefill_kernel_block("prefill_attention_varlen", backend, (q, k, v, out), d, sl, block)
    _launch_prefill("prefill_attention_varlen", bq, (q, k, v, out, cu_seqlens), dt, d, t, longest, b, h, h_kv,
                    causal, sl, True, backend)
    return out


@planned
def prefill_attention_paged(q: Any, k_pages: Any, v_pages: Any, block_table: Any, cu_seqlens: Any, seq_lens: Any,
                            max_seqlen: int | None = None, causal: bool = True, scale: float | None = None,
                            out: Any = None, backend: str | None = None, block: int | None = None) -> Any:
    """o (T, H, D): the prefill of B packed sequences' newest tokens over a paged cache that holds their keys and
    values already (:func:`append_paged_kv`), as serving engines run a chunked prefill or a prompt after a cached
    prefix (flash-attn's varlen forward with a block table).

    Sequence b's queries are rows cu_seqlens[b] .. cu_seqlens[b + 1] - 1 of q (T, H, D) (cu_seqlens (B + 1,)
    int32, non-decreasing from 0 to T); its keys are the first seq_lens[b] positions of its pages, read as
    :func:`decode_attention_paged` reads them (k_pages, v_pages (pages, P, H_kv, D), block_table (B, max_pages)
    int32, seq_lens (B,) int32, clamped to [0, max_pages * P]).  The queries are the sequence's last tokens: under
    ``causal`` query i of its n sees key j <= i + seq_lens[b] - n (the bottom-right aligned mask; a query that sees
    no key, seq_lens[b] < n, gives NaN).  f16/bf16, heads of 64 or 128 (256 on the Hopper kernel).
    ``max_seqlen``: the most queries of a sequence, as in :func:`prefill_attention_varlen`.  ``block`` as in
    :func:`prefill_attention`; block 128 (Hopper) copies keys 16 rows at a time, so it needs pages of a multiple of
    16 keys (others run on block 64 there) and reads the rows of a sequence's last 16-row piece past seq_lens[b]:
    keep them finite (a zeroed pool, or older keys), as 0 * Inf is NaN."""
    fn = "prefill_attention_paged"
    dt = check_float(q, f"{fn}: q")
    if dt == f32:
        raise LaunchError(f"{fn}: the matrix-unit kernel takes f16 or bf16 (cast f32 inputs)")
    if len(shape_of(q)) != 3 or len(shape_of(k_pages)) != 4 or len(shape_of(block_table)) != 2:
        raise LaunchError(f"{fn}: q (T, H, D), k_pages (pages, P, H_kv, D) and block_table (B, max_pages) expected; "
                          f"got {shape_of(q)}, {shape_of(k_pages)} and {shape_of(block_table)}")
    t, h, d = shape_of(q)
    pages, page, h_kv, _ = shape_of(k_pages)
    _check_heads(h, h_kv, d, (64, 128, 256))
    check_shape(k_pages, (pages, page, h_kv, d), f"{fn}: k_pages")
    check_shape(v_pages, (pages, page, h_kv, d), f"{fn}: v_pages")
    if len(shape_of(cu_seqlens)) != 1 or shape_of(cu_seqlens)[0] < 1:
        raise LaunchError(f"{fn}: cu_seqlens must be (B + 1,); got {shape_of(cu_seqlens)}")
    b = shape_of(cu_seqlens)[0] - 1
    width = shape_of(block_table)[1]
    check_shape(block_table, (b, width), f"{fn}: block_table")
    check_shape(seq_lens, (b,), f"{fn}: seq_lens")
    for name, x, want in (("k_pages", k_pages, dt), ("v_pages", v_pages, dt), ("cu_seqlens", cu_seqlens, i32),
                          ("block_table", block_table, i32), ("seq_lens", seq_lens, i32)):
        if dtype_of(x, name) != want:
            raise LaunchError(f"{fn}: {name} must be {want.name}, got {dtype_of(x).name}")
    if pages < 1 or page < 1:
        raise LaunchError(f"{fn}: the cache holds no pages ({pages} pages of {page} keys)")
    longest = _longest_sequence(cu_seqlens, t, fn) if max_seqlen is None else int(max_seqlen)
    out = output(fn, out, q, (t, h, d), dt, {"q": q, "k_pages": k_pages, "v_pages": v_pages,
                                             "block_table": block_table, "cu_seqlens": cu_seqlens,
                                             "seq_lens": seq_lens})
    if longest <= 0 or b * h == 0:
        return out
    sl = _scale(scale, d)
    bq = _prefill_kernel_block(fn, backend, (q, k_pages, v_pages, out), d, sl, block)
    if bq == 128 and page % PAGE_PIECE:
        if block is not None or d == 256:
            raise LaunchError(f"{fn}: block 128 copies keys {PAGE_PIECE} rows at a time, so pages must hold a "
                              f"multiple of {PAGE_PIECE} keys; got {page}")
        bq = 64 if tuned_for_cuda_mma(backend, (q,)) else 16
    _launch_prefill(fn, bq, (q, k_pages, v_pages, out, cu_seqlens), dt, d, t, longest, b, h, h_kv, causal, sl,
                    True, backend, (seq_lens, block_table, page, width, pages))
    return out


def _prefill_inputs(fn: str, q: Any, k: Any, v: Any, layout: str) -> tuple[Any, tuple[int, ...], int]:
    """What both prefills check of q, k and v (``layout``: q's, "(B, H, S, D)" or "(T, H, D)"; k and v have H_kv
    heads in its place): f16/bf16, the ranks, the heads, k's and v's shapes and dtypes.  Returns q's dtype and
    shape and H_kv."""
    dt = check_float(q, f"{fn}: q")
    if dt == f32:
        raise LaunchError(f"{fn}: the matrix-unit kernel takes f16 or bf16 (cast f32 inputs)")
    rank = layout.count(",") + 1
    if len(shape_of(q)) != rank or len(shape_of(k)) != rank:
        raise LaunchError(f"{fn}: q must be {layout} and k {layout.replace('H,', 'H_kv,')}; got {shape_of(q)} and "
                          f"{shape_of(k)}")
    shape, h_kv = shape_of(q), shape_of(k)[1]
    _check_heads(shape[1], h_kv, shape[-1], (64, 128, 256))
    for name, x in (("k", k), ("v", v)):
        check_shape(x, (shape[0], h_kv, *shape[2:]), f"{fn}: {name}")
        if dtype_of(x, name) != dt:
            raise LaunchError(f"{fn}: {name} is {dtype_of(x).name}, q is {dt.name}")
    return dt, shape, h_kv


def _unread_cu(q: Any) -> Any:
    """q seen as int32: the kernels' ``cu`` for dense tensors, which they never read, so a dense call allocates
    nothing for it.  A torch tensor: one dtype view of the whole tensor (1.2 us of host time here; slicing it down
    first took 6.4), or a zero where q is strided (the launch then rejects q with its own message).  A numpy array:
    its first four bytes (a device launch copies numpy arguments over, so not the whole of q)."""
    import numpy as np

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(q, torch.Tensor):
        try:
            return q.view(torch.int32)
        except RuntimeError:  # the last dimension is not contiguous
            return torch.zeros(1, dtype=torch.int32, device=q.device)
    return q.reshape(-1)[:2].view(np.int32)


def _longest_sequence(cu_seqlens: Any, t: int, fn: str = "prefill_attention_varlen") -> int:
    """The longest sequence of ``cu_seqlens``, read to the host, after checking that it runs from 0 to ``t``
    without stepping back."""
    import numpy as np

    cu = np.asarray(cu_seqlens.cpu() if hasattr(cu_seqlens, "cpu") else cu_seqlens, dtype=np.int64)
    if cu[0] != 0 or cu[-1] != t or (np.diff(cu) < 0).any():
        raise LaunchError(f"{fn}: cu_seqlens must run from 0 to T = {t} without decreasing; "
                          f"got {cu.tolist()[:8]}{' ...' if cu.size > 8 else ''}")
    return int(np.diff(cu).max(initial=0))


def _prefill_kernel_block(fn: str, backend: str | None, tensors: tuple, d: int, scale: float,
                          block: int | None) -> int:
    """Queries per group (which picks the kernel) for these arguments: ``block`` if given, else
    :func:`prefill_block`'s, falling back from the Hopper kernel where it cannot take them."""
    aligned = all(starts_aligned(x, 16) for x in tensors)
    bq = prefill_block(backend, tensors[:1], d) if block is None else int(block)
    if bq == 128 and not (aligned and 0 < scale < math.inf):
        if block is not None or d == 256:
            raise LaunchError(_not_hopper_ready(fn, aligned, scale))
        bq = 64 if tuned_for_cuda_mma(backend, tensors[:1]) else 16
    if bq not in (16, 64, 128):
        raise LaunchError(f"{fn}: block must be 16, 64 or 128, got {bq}")
    if d == 256 and bq != 128:
        raise LaunchError(f"{fn}: heads of 256 run on the Hopper kernel alone (block 128: an sm_90 GPU, or the "
                          "interpreter with block=128); this device takes D = 64 or 128")
    return bq


def _launch_prefill(fn: str, bq: int, tensors: tuple, dt: Any, d: int, rows: int, longest: int, b: int, h: int,
                    h_kv: int, causal: bool, scale: Any, varlen: bool, backend: str | None,
                    paging: tuple | None = None) -> None:
    """One launch of the prefill kernel for ``bq`` on (q, k, v, out, cu): ``rows`` per head (dense) or in all
    (packed), the grid sized for the ``longest`` sequence; ``paging`` (kv_lens, table, P, W, N) for a paged
    cache (the portable kernels' PAGED variant)."""
    if b * h > 65535:
        raise LaunchError(f"{fn}: B*H = {b * h} exceeds 65535 groups")
    flags = (int(bool(causal)), scale)
    pages = (tensors[4], tensors[4], PAGE_PIECE, 1, 1) if paging is None else paging
    if bq == 128:
        kv_outer = b * h_kv if paging is None else paging[2] * paging[4]  # k's copy extent: B * H_kv or N * P rows
        attention_prefill_ws.variant(T=dt, D=d, VARLEN=varlen, PAGED=paging is not None, **fa_config(d)).launch(
            *tensors, rows, h, h_kv, b * h, kv_outer, *flags, *pages,
            grid=(ceil_div(longest, FA_BQ) * FA_THREADS, b * h), group=(FA_THREADS,), backend=backend)
    elif bq == 64:
        attention_prefill.variant(T=dt, D=d, BQ=64, VARLEN=varlen, PAGED=paging is not None).launch(
            *tensors, rows, h, h_kv, *flags, *pages, grid=(ceil_div(longest, 64) * 128, b * h), group=(128,),
            backend=backend)
    else:
        attention_prefill_small.variant(T=dt, D=d, VARLEN=varlen, PAGED=paging is not None).launch(
            *tensors, rows, h, h_kv, *flags, *pages, grid=(ceil_div(longest, SBQ) * SNT, b * h), group=(SNT,),
            backend=backend)


__all__ = ["append_paged_kv", "attention_decode_combine", "attention_decode_split", "attention_prefill",
           "attention_prefill_small", "decode_attention", "decode_attention_paged", "decode_chunk", "heads_per_group",
           "keys_in_flight", "paged_kv_append", "prefill_attention", "prefill_attention_paged",
           "prefill_attention_varlen", "prefill_block", "sequence_rows", "team_lanes"]

"""The portable flash-attention prefill kernels, whose two products run on the matrix units through the fragment
API: ``attention_prefill`` (64 queries per group, 16x8x16 fragments, the output accumulator in registers: CUDA's
``mma.sync``) and ``attention_prefill_small`` (16 queries, 8x8x8 f32 fragments, the accumulator in shared memory:
32 KB devices, lavapipe, Metal).  Both predate the fragment row operations: they stage ``S = Q K^T`` through shared
memory, run the per-row softmax there and write ``P`` back (rounded to T) as the ``a`` operand of ``P V``.  Each
runs packed sequences (``VARLEN``: q (T, H, D) with ``cu`` marking where each sequence starts) and paged caches
(``PAGED``).  Hopper's kernel is attention_ws.py's; iron.std.attention's host functions pick among them.
"""

from __future__ import annotations

from iron import In, T, Tensor, bf16, f16, f32, func, i32, kernel, variants
from iron.lang import (barrier, exp2, fma, frag_a, frag_acc, frag_b, frag_load_acc, frag_store, group_id, local, mma,
                       num_simd_groups, select, shared, simd_group_id, simd_shuffle_xor, static_range, thread_id, vec)
from iron.std.attention_ws import LOG2E, NEG, sequence_keys

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


__all__ = ["SBK", "SBQ", "SNT", "attention_prefill", "attention_prefill_small", "key_row", "sequence_rows"]

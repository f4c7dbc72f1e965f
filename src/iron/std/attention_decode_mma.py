"""The KV-cache decode's split pass on the matrix units: the query heads that share a KV head as the 16 rows of one
fragment, so grouped-query attention reads each K and V row once and multiplies it on the tensor cores.

attention_decode.attention_decode_split scores a key on the FMA units (a team of lanes per row, a dot product per
query head): at four query heads a KV head that is 8 FMAs per K/V element pair, more issue slots than an SM has for
the cache's bytes at full bandwidth.  Here a subgroup's ``S = Q K^T`` is 16 x 16 (16 query rows, GQ of them real,
16 keys) by ``mma``, the online softmax runs on the accumulator's registers (``frag_row_max`` / ``frag_row_sum``),
and ``O += P V`` takes P straight from them (``frag_acc_to_a``): the padding rows cost tensor-core time, which the
cache's bytes leave idle anyway.  K and V reach shared memory through a ring of ``STAGES`` buffers of asynchronous
16-byte copies (``copy_async``), blocks of 16 keys per subgroup (``SUBS`` of them), so ``STAGES - 1`` blocks are in
flight while one is multiplied; each subgroup takes 16 keys of a block.  A paged cache finds each key's row
through the block table; TABLE_AHEAD reads those entries a block early, so their round trip runs under a block's
multiplies instead of in front of its copies.  The subgroups' partial softmaxes merge at
the end through shared memory.  Its output is attention_decode_split's (normalised chunk outputs and base-2 LSEs,
f32), so the same combine pass finishes it.  Runs where 16x16x16 fragments of T run from shared memory: CUDA
(``mma.sync``, two m16n8k16 a multiply) and the interpreter.
"""

from __future__ import annotations

from typing import Any

from iron import In, T, Tensor, bf16, f16, f32, func, i32, kernel, variants
from iron.lang import (barrier, copy_async, copy_async_commit, copy_async_wait, exp2, frag_a, frag_acc, frag_acc_to_a,
                       frag_b, frag_load_acc, frag_mask, frag_scale_rows, frag_store, log2, mma, recip,
                       shared, simd_group_id, static_range, thread_id)
from iron.std.attention_decode import empty_chunk, group_chunk
from iron.std.attention_ws import LOG2E, NEG, online_softmax
from iron.std.gemm_wg import WG_SHARED_LIMIT

#: Query rows of a fragment, keys a subgroup multiplies at a time, and lanes of a subgroup (a group of SUBS
#: subgroups has 32 SUBS threads and fills ring buffers of 16 SUBS keys).
DM_ROWS = 16
DM_KEYS = 16
DM_LANES = 32
#: A running max below every score (so a subgroup that saw no key yet rescales by 2^0, never by NaN).
FLOOR = -1.0e30


@func
def stage_block(kp, vp, k, v, ring, j0, end, tid, row0, kvh, H_kv, D, LD, table, b, W, P, pages, paged, subs):
    """Asynchronous copies of the 16 ``subs`` keys from j0 on (K and V rows) into ring buffer ``ring``, D / 16 16-byte
    pieces of each a thread; keys at or past ``end`` are zero-filled (never read).  A dense cache's key j is row
    row0 + j; a paged one's is row j % P of page table[b * W + j // P] (clamped into [0, pages)), KV head ``kvh`` of
    H_kv."""
    pieces = D // 8
    for i in static_range(pieces // 2):
        e = tid + i * subs * DM_LANES
        r = e // pieces
        col = (e % pieces) * 8
        key = j0 + r
        ok = key < end
        if paged:
            page = min(max(table[b * W + min(key, end - 1) // P], 0), pages - 1)
            at = ((page * P + min(key, end - 1) % P) * H_kv + kvh) * D + col
        else:
            at = (row0 + min(key, end - 1)) * D + col
        dst = (ring * subs * DM_KEYS + r) * LD + col
        copy_async(kp, dst, k, at, 8, ok)
        copy_async(vp, dst, v, at, 8, ok)


@func
def page_entry(table, b, W, P, key, end):
    """The block table's entry for key ``key`` of sequence ``b`` (clamped to end - 1, so a key past the chunk reads
    the table in bounds) as loaded, and the key's row within its page."""
    kk = min(key, end - 1)
    page = kk // P
    return table[b * W + page], kk - page * P


@func
def page_rows(table, b, W, P, j0, end, tid, subs, D):
    """This thread's keys of the block from ``j0`` on, in stage_rows' order (D / 16 of them; the rest 0): the table
    entries as loaded (e0 .. e7) and the rows within their pages (f0 .. f7).  Nothing here uses a loaded entry, so
    TABLE_AHEAD's reads a block early leave their round trip to run under the block's multiplies."""
    pieces = D // 8
    step = subs * DM_LANES
    e0, f0 = page_entry(table, b, W, P, j0 + tid // pieces, end)
    e1, f1 = page_entry(table, b, W, P, j0 + (tid + step) // pieces, end)
    e2, f2 = page_entry(table, b, W, P, j0 + (tid + 2 * step) // pieces, end)
    e3, f3 = page_entry(table, b, W, P, j0 + (tid + 3 * step) // pieces, end)
    e4, f4, e5, f5, e6, f6, e7, f7 = 0, 0, 0, 0, 0, 0, 0, 0
    if D > 64:
        e4, f4 = page_entry(table, b, W, P, j0 + (tid + 4 * step) // pieces, end)
        e5, f5 = page_entry(table, b, W, P, j0 + (tid + 5 * step) // pieces, end)
        e6, f6 = page_entry(table, b, W, P, j0 + (tid + 6 * step) // pieces, end)
        e7, f7 = page_entry(table, b, W, P, j0 + (tid + 7 * step) // pieces, end)
    return e0, e1, e2, e3, e4, e5, e6, e7, f0, f1, f2, f3, f4, f5, f6, f7


@func
def pick(i, r0, r1, r2, r3, r4, r5, r6, r7):
    """``r<i>`` for a compile-time ``i``."""
    rows = [r0, r1, r2, r3, r4, r5, r6, r7]
    return rows[i]


@func
def stage_rows(kp, vp, k, v, ring, j0, end, tid, kvh, H_kv, D, LD, subs, P, pages, e0, e1, e2, e3, e4, e5, e6, e7,
               f0, f1, f2, f3, f4, f5, f6, f7):
    """stage_block for a paged cache whose table entries page_rows read already: the same copies, no table read
    (each entry clamped into [0, pages) here, where it is first used)."""
    pieces = D // 8
    for i in static_range(pieces // 2):
        e = tid + i * subs * DM_LANES
        r = e // pieces
        col = (e % pieces) * 8
        page = min(max(pick(i, e0, e1, e2, e3, e4, e5, e6, e7), 0), pages - 1)
        at = ((page * P + pick(i, f0, f1, f2, f3, f4, f5, f6, f7)) * H_kv + kvh) * D + col
        dst = (ring * subs * DM_KEYS + r) * LD + col
        copy_async(kp, dst, k, at, 8, j0 + r < end)
        copy_async(vp, dst, v, at, 8, j0 + r < end)


@func
def scores(qa0, qa1, qa2, qa3, qa4, qa5, qa6, qa7, kp, base, LD, D):
    """S = Q K^T for 16 keys, K's rows ``LD`` apart from ``kp[base]``, Q as its D / 16 A fragments: two chains of
    multiplies (even and odd 16-column slices of D), added at the end, so each waits on half as many."""
    se = frag_acc(f32, DM_ROWS, DM_KEYS)
    so = frag_acc(f32, DM_ROWS, DM_KEYS)
    se = mma(qa0, frag_b(kp, base, LD, 16, DM_KEYS, layout="col"), se)
    so = mma(qa1, frag_b(kp, base + 16, LD, 16, DM_KEYS, layout="col"), so)
    se = mma(qa2, frag_b(kp, base + 32, LD, 16, DM_KEYS, layout="col"), se)
    so = mma(qa3, frag_b(kp, base + 48, LD, 16, DM_KEYS, layout="col"), so)
    if D > 64:
        se = mma(qa4, frag_b(kp, base + 64, LD, 16, DM_KEYS, layout="col"), se)
        so = mma(qa5, frag_b(kp, base + 80, LD, 16, DM_KEYS, layout="col"), so)
        se = mma(qa6, frag_b(kp, base + 96, LD, 16, DM_KEYS, layout="col"), se)
        so = mma(qa7, frag_b(kp, base + 112, LD, 16, DM_KEYS, layout="col"), so)
    return se + so


@func
def add_pv(pa, vp, base, LD, alpha, o0, o1, o2, o3, o4, o5, o6, o7, D):
    """The output's 16-column blocks rescaled by ``alpha`` plus P V for 16 keys (V's rows from ``vp[base]``)."""
    o0 = mma(pa, frag_b(vp, base, LD, 16, 16), frag_scale_rows(o0, alpha))
    o1 = mma(pa, frag_b(vp, base + 16, LD, 16, 16), frag_scale_rows(o1, alpha))
    o2 = mma(pa, frag_b(vp, base + 32, LD, 16, 16), frag_scale_rows(o2, alpha))
    o3 = mma(pa, frag_b(vp, base + 48, LD, 16, 16), frag_scale_rows(o3, alpha))
    if D > 64:
        o4 = mma(pa, frag_b(vp, base + 64, LD, 16, 16), frag_scale_rows(o4, alpha))
        o5 = mma(pa, frag_b(vp, base + 80, LD, 16, 16), frag_scale_rows(o5, alpha))
        o6 = mma(pa, frag_b(vp, base + 96, LD, 16, 16), frag_scale_rows(o6, alpha))
        o7 = mma(pa, frag_b(vp, base + 112, LD, 16, 16), frag_scale_rows(o7, alpha))
    return o0, o1, o2, o3, o4, o5, o6, o7


@func
def merge_block(out_s, c0, o, f, first, D):
    """Round of one subgroup: its output block ``o`` (columns c0 .. c0 + 15) times the row factors ``f``, stored
    (the first subgroup) or added to what the subgroups before it left in ``out_s`` (16 x D, f32)."""
    part = frag_scale_rows(o, f)
    if first:
        frag_store(out_s, c0, D, part)
    else:
        frag_store(out_s, c0, D, frag_load_acc(out_s, c0, D, DM_ROWS, 16) + part)


def decode_mma_threads(subs: int) -> int:
    """Threads of one attention_decode_mma group of ``subs`` subgroups (its launch's group size)."""
    return subs * DM_LANES


def decode_mma_shared_bytes(v: dict[str, Any]) -> int:
    """Shared memory of one attention_decode_mma group of variant ``v`` (the K and V rings, Q, the merged output and
    the subgroups' statistics)."""
    ld, block, par = v["D"] + 8, v["SUBS"] * DM_KEYS, v.get("PAR", True)
    return (2 * v["STAGES"] * block * ld + DM_ROWS * ld) * 2 + ((v["SUBS"] if par else 1) * DM_ROWS * v["D"]
                                                                 + (v["SUBS"] * 2 + par) * DM_ROWS * DM_KEYS) * 4


def decode_mma_fits(v: dict[str, Any]) -> bool:
    """The group's shared memory fits the most an H100 or H200 gives one (sm_90's opt-in limit)."""
    return decode_mma_shared_bytes(v) <= WG_SHARED_LIMIT


def table_ahead_is_paged(v: dict[str, Any]) -> bool:
    """TABLE_AHEAD (the table read a block early) is a form of the paged cache's copies only."""
    return v["PAGED"] or not v["TABLE_AHEAD"]


@kernel(variants(T=[f16, bf16], D=[128, 64], SUBS=[4, 2], STAGES=[2, 3, 4, 6], PAGED=[False, True], PAR=[False, True],
                 DIRECT=[False, True], TABLE_AHEAD=[False, True],
                 where=[table_ahead_is_paged, decode_mma_fits]))
def attention_decode_mma(q: In[T], k: In[T], v: In[T], seq_lens: In[i32], part_o: Tensor[f32], part_lse: Tensor[f32],
                         o: Tensor[T], H: int, H_kv: int, S_max: int, NCH: int, CH: int, GR: int, scale: f32,
                         table: In[i32], P: int, pages: int):
    """One chunk of keys for GR query heads sharing one KV head, on the matrix units: attention_decode_split's
    contract and outputs (its combine pass finishes them); ``o`` unwritten.  DIRECT (a launch of one chunk, NCH
    = 1): what the combine would make of it instead, o (B, H, D) in T = the chunk's output rounded once (0 for a
    sequence of no keys, NaN where NaN or Inf in q or k made the chunk NaN), part_o and part_lse unwritten.

    q (B, H, D), k/v (B, H_kv, S_max, D) row-major in T; seq_lens (B,) i32, clamped to [0, S_max].  PAGED: k/v
    (pages, P, H_kv, D), key s of sequence b in row s % P of page table[b, s // P] (``table`` (B, S_max / P) i32,
    entries clamped to [0, pages)); otherwise ``table``, P and ``pages`` unread.  TABLE_AHEAD (PAGED only): the same
    copies, their table entries read one ring block before them (the same bits).  GR = min(H / H_kv, 16) heads a
    group (H / H_kv a multiple of GR).
    Grid (NCH * 32 SUBS, B * H / GR), group (32 SUBS,): group (c, b * H/GR + hg) owns keys [c*CH, min((c+1)*CH,
    L_b)) of heads hg*GR .. hg*GR+GR-1, KV head (hg*GR) // (H / H_kv).
    Out (f32): part_o (B, H, NCH, D) = sum_j softmax_j v_j over the chunk (normalised), part_lse (B, H, NCH) =
    log2 sum_j 2^(s_j), s_j = scale * log2(e) * q.k_j; an empty chunk gives 0 and -inf.
    Order: keys in blocks of 16 SUBS, subgroup w taking keys 16 w .. 16 w + 15 of each: S by the unit (exact
    products, f32 sums in its order, the even and odd 16-column slices of D apart, then added), the running max m
    of raw scores and sum l of the unrounded weights 2^(scale log2(e) (s - m)) in f32, the weights rounded to T for
    P V (f32 sums), the output rescaled by 2^(scale log2(e) (m_old - m_new)) before each; then the subgroups' (m, l,
    O) merge in id order.  PAR: the subgroups' weighted outputs go to a slice each and are added as they are
    stored, in id order (the same sums as the merge's rounds, one barrier instead of SUBS; SUBS - 1 more 16 x D f32
    slices of shared memory).  NaN/Inf in q or k give NaN for the head's chunk; NaN/Inf in v reach the outputs
    that weight them, and the other query heads of the group, whose zero weights multiply them in the same 16 keys.
    """
    assert PAGED or not TABLE_AHEAD, "TABLE_AHEAD reads a paged cache's block table: it needs PAGED"
    LD = D + 8  # rows 16 bytes longer than D: ldmatrix's eight rows start in different banks
    NT = SUBS * DM_LANES  # threads
    BLOCK = SUBS * DM_KEYS  # keys of a ring buffer
    kp = shared(T, STAGES * BLOCK * LD)
    vp = shared(T, STAGES * BLOCK * LD)
    qs = shared(T, DM_ROWS * LD)
    out_s = shared(f32, (SUBS if PAR else 1) * DM_ROWS * D)  # the merged output (PAR: a slice a subgroup)
    # each subgroup's m and l, as fragments (PAR: then the LSE, written while the others may still read them)
    stat_s = shared(f32, (SUBS * 2 + (1 if PAR else 0)) * DM_ROWS * DM_KEYS)
    lse_at = SUBS * 2 * DM_ROWS * DM_KEYS if PAR else 0
    tid = thread_id(0)
    sg = simd_group_id()
    b, h0, kvh, start, end, obase = group_chunk(seq_lens, H, H_kv, S_max, NCH, CH, GR)
    if start >= end:
        if DIRECT:
            for i in range(tid, GR * D, NT):
                o[(b * H + h0) * D + i] = T(0.0)
        else:
            empty_chunk(part_o, part_lse, obase, NCH, D, GR, tid, NT)
        return
    W = S_max // P
    row0 = (b * H_kv + kvh) * S_max
    blocks = (end - start + BLOCK - 1) // BLOCK
    # Q's rows travel with the first block's copies, 16 bytes at a time (rows past the group's heads are zeros):
    # element by element its loads were a chain of round trips before the first multiply.
    for i in static_range(DM_ROWS * D // 8 // NT):
        e = tid + i * NT
        r = e // (D // 8)
        col = (e % (D // 8)) * 8
        copy_async(qs, r * LD + col, q, (b * H + h0 + min(r, GR - 1)) * D + col, 8, r < GR)
    for st in static_range(STAGES - 1):
        if st < blocks:
            if TABLE_AHEAD:
                e0, e1, e2, e3, e4, e5, e6, e7, f0, f1, f2, f3, f4, f5, f6, f7 = page_rows(
                    table, b, W, P, start + st * BLOCK, end, tid, SUBS, D)
                stage_rows(kp, vp, k, v, st, start + st * BLOCK, end, tid, kvh, H_kv, D, LD, SUBS, P, pages, e0, e1,
                           e2, e3, e4, e5, e6, e7, f0, f1, f2, f3, f4, f5, f6, f7)
            else:
                stage_block(kp, vp, k, v, st, start + st * BLOCK, end, tid, row0, kvh, H_kv, D, LD, table, b, W, P,
                            pages, PAGED, SUBS)
        copy_async_commit()
    # TABLE_AHEAD: the table entries (n) and rows within pages (g) of the next block to stage, read a block early
    n0, n1, n2, n3, n4, n5, n6, n7, g0, g1, g2, g3, g4, g5, g6, g7 = 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
    if TABLE_AHEAD and STAGES - 1 < blocks:
        n0, n1, n2, n3, n4, n5, n6, n7, g0, g1, g2, g3, g4, g5, g6, g7 = page_rows(
            table, b, W, P, start + (STAGES - 1) * BLOCK, end, tid, SUBS, D)
    copy_async_wait(STAGES - 2)  # Q and the first block landed (this thread's); after the barrier everyone's
    barrier()
    qa0 = frag_a(qs, 0, LD, 16, 16)
    qa1 = frag_a(qs, 16, LD, 16, 16)
    qa2 = frag_a(qs, 32, LD, 16, 16)
    qa3 = frag_a(qs, 48, LD, 16, 16)
    qa4 = frag_a(qs, 64 % D, LD, 16, 16)
    qa5 = frag_a(qs, 80 % D, LD, 16, 16)
    qa6 = frag_a(qs, 96 % D, LD, 16, 16)
    qa7 = frag_a(qs, 112 % D, LD, 16, 16)
    sl2 = scale * LOG2E
    m = frag_acc(f32, DM_ROWS, DM_KEYS, value=FLOOR)
    l = frag_acc(f32, DM_ROWS, DM_KEYS)
    o0 = frag_acc(f32, DM_ROWS, 16)
    o1 = frag_acc(f32, DM_ROWS, 16)
    o2 = frag_acc(f32, DM_ROWS, 16)
    o3 = frag_acc(f32, DM_ROWS, 16)
    o4 = frag_acc(f32, DM_ROWS, 16)
    o5 = frag_acc(f32, DM_ROWS, 16)
    o6 = frag_acc(f32, DM_ROWS, 16)
    o7 = frag_acc(f32, DM_ROWS, 16)
    for j in range(blocks):
        # This thread's copies of block j landed; after the barrier everyone's have, and every subgroup is done
        # with block j - 1's buffer, which block j + STAGES - 1 now refills.
        copy_async_wait(STAGES - 2)
        barrier()
        ahead = j + STAGES - 1
        if ahead < blocks:
            if TABLE_AHEAD:
                stage_rows(kp, vp, k, v, ahead % STAGES, start + ahead * BLOCK, end, tid, kvh, H_kv, D, LD, SUBS, P,
                           pages, n0, n1, n2, n3, n4, n5, n6, n7, g0, g1, g2, g3, g4, g5, g6, g7)
            else:
                stage_block(kp, vp, k, v, ahead % STAGES, start + ahead * BLOCK, end, tid, row0, kvh, H_kv, D, LD,
                            table, b, W, P, pages, PAGED, SUBS)
        copy_async_commit()  # one group per iteration (maybe empty): the wait above counts on it
        if TABLE_AHEAD and ahead + 1 < blocks:  # the next copies' table round trip runs under this block's math
            n0, n1, n2, n3, n4, n5, n6, n7, g0, g1, g2, g3, g4, g5, g6, g7 = page_rows(
                table, b, W, P, start + (ahead + 1) * BLOCK, end, tid, SUBS, D)
        base = ((j % STAGES) * BLOCK + sg * DM_KEYS) * LD
        k0 = start + j * BLOCK + sg * DM_KEYS  # this subgroup's first key
        sc = scores(qa0, qa1, qa2, qa3, qa4, qa5, qa6, qa7, kp, base, LD, D)
        if k0 + DM_KEYS > end:
            sc = frag_mask(sc, NEG, cols=end - k0)
        m, p, l, alpha = online_softmax(sc, m, l, sl2)
        o0, o1, o2, o3, o4, o5, o6, o7 = add_pv(frag_acc_to_a(p, 0, T), vp, base, LD, alpha, o0, o1, o2, o3, o4,
                                                o5, o6, o7, D)
    copy_async_wait()  # only empty groups remain; leave none in flight
    # The subgroups' softmaxes: M = max m_w, L = sum l_w 2^(sl2 (m_w - M)); subgroup w's rows weigh
    # 2^(sl2 (m_w - M)) / L.  Every running max is finite (FLOOR), so an idle subgroup weighs 0.
    frag_store(stat_s, sg * 2 * DM_ROWS * DM_KEYS, DM_KEYS, m)
    frag_store(stat_s, (sg * 2 + 1) * DM_ROWS * DM_KEYS, DM_KEYS, l)
    barrier()
    big_m = m
    for w in static_range(SUBS):
        big_m = max(big_m, frag_load_acc(stat_s, w * 2 * DM_ROWS * DM_KEYS, DM_KEYS, DM_ROWS, DM_KEYS))
    big_l = frag_acc(f32, DM_ROWS, DM_KEYS)
    for w in static_range(SUBS):
        mw = frag_load_acc(stat_s, w * 2 * DM_ROWS * DM_KEYS, DM_KEYS, DM_ROWS, DM_KEYS)
        lw = frag_load_acc(stat_s, (w * 2 + 1) * DM_ROWS * DM_KEYS, DM_KEYS, DM_ROWS, DM_KEYS)
        big_l = big_l + lw * exp2((mw - big_m) * sl2)
    f = exp2((m - big_m) * sl2) * recip(big_l)
    if PAR:  # each subgroup's weighted output into its own slice; the stores below add the slices
        at = sg * DM_ROWS * D
        merge_block(out_s, at, o0, f, True, D)
        merge_block(out_s, at + 16, o1, f, True, D)
        merge_block(out_s, at + 32, o2, f, True, D)
        merge_block(out_s, at + 48, o3, f, True, D)
        if D > 64:
            merge_block(out_s, at + 64, o4, f, True, D)
            merge_block(out_s, at + 80, o5, f, True, D)
            merge_block(out_s, at + 96, o6, f, True, D)
            merge_block(out_s, at + 112, o7, f, True, D)
    else:  # the subgroups in turn, each adding its share to what the ones before left
        for w in static_range(SUBS):
            if sg == w:
                merge_block(out_s, 0, o0, f, w == 0, D)
                merge_block(out_s, 16, o1, f, w == 0, D)
                merge_block(out_s, 32, o2, f, w == 0, D)
                merge_block(out_s, 48, o3, f, w == 0, D)
                if D > 64:
                    merge_block(out_s, 64, o4, f, w == 0, D)
                    merge_block(out_s, 80, o5, f, w == 0, D)
                    merge_block(out_s, 96, o6, f, w == 0, D)
                    merge_block(out_s, 112, o7, f, w == 0, D)
            barrier()
    if sg == 0:  # the LSE of each row (without PAR where subgroup 0's m was: every subgroup has read it by now)
        frag_store(stat_s, lse_at, DM_KEYS, big_m * sl2 + log2(big_l))
    barrier()
    for i in range(tid, GR * D, NT):
        acc = out_s[i]
        if PAR:
            for w in static_range(1, SUBS):
                acc = acc + out_s[w * DM_ROWS * D + i]
        if DIRECT:  # the combine of one chunk: its weight 2^(lse - lse) = 1, so o = T(acc)
            o[(b * H + h0) * D + i] = T(acc)
        else:
            part_o[(obase + (i // D) * NCH) * D + i % D] = acc
    if tid < GR and not DIRECT:
        part_lse[obase + tid * NCH] = stat_s[lse_at + tid * DM_KEYS]


__all__ = ["DM_KEYS", "DM_LANES", "DM_ROWS", "attention_decode_mma", "decode_mma_threads"]

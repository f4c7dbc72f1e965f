"""Flash-attention prefill with warp roles on Hopper: attention.py's contract, FlashAttention-3's structure.

One group of 384 threads owns 128 queries of one (batch, head).  Role 0, one warpgroup at a 24-register budget, is
the producer: one thread copies the group's Q tile once and then, block by block, the BK keys' K and V tiles into
two rings of shared buffers (tile copies: TMA on sm_90), each slot completing on its ``full`` barrier.  Role 1, two
warpgroups at 240 registers, are the consumers, each owning 64 query rows: per key block, S = Q K^T by warpgroup
multiplies from shared memory, the online softmax on the accumulator's registers (row max, exp2, row sum, the
output rows rescaled), P fed back as the A operand of O += P V straight from registers, and the K and V slots
released on their ``empty`` barriers.  S, P and O never touch shared memory; no block barrier runs in the loop.
PINGPONG (FlashAttention-3's inter-warpgroup overlap, the host's choice): the two consumer warpgroups take turns at
the multipliers, each issuing P_{j-1} V_{j-1} and S_j together, so one's softmax runs while the other's multiplies
do.  OVERLAP (FlashAttention-3's intra-warpgroup overlap): block j's softmax runs while P_{j-1} V_{j-1} multiplies.

Causal attention visits only the key blocks up to the group's last query and masks (a select per score) the
blocks that reach past the sequence or a warpgroup's first query (with OVERLAP every block); groups take their
query tiles last first, so the longest rows start first.  The output is staged through shared memory (where Q
was, for heads of 256) and stored by the consumers in 16-byte pieces.
Only CUDA sm_90 runs it (``mma_wg``, tile copies, register budgets); the interpreter runs it too (tests).
"""

from __future__ import annotations

import math
from typing import Any

from iron import In, T, Tensor, bf16, f16, f32, func, i32, kernel, variants
from iron.lang import (async_barriers, barrier_arrive, barrier_wait, copy_tile, fast_exp2, frag_acc, frag_acc_to_a,
                       frag_mask, frag_row_max, frag_row_sum, frag_scale_rows, frag_store, group_id, lane_id, local,
                       mma_wg, mma_wg_wait, num_groups, recip, role_barrier, select, shared, simd_group_id,
                       static_range, thread_id, warp_roles)

from .gemm_ws import free_slot, full_slot

#: Queries per group (two consumer warpgroups of 64), and the roles' threads and register budgets (FlashAttention-3's
#: split of 384 threads: 128 x 24 + 256 x 240, all a multiprocessor's registers).
FA_BQ = 128
FA_ROLES = (128, 256)
FA_REGISTERS = (24, 240)
FA_THREADS = sum(FA_ROLES)
#: Consumer subgroups release a slot (one lane each).
FA_RELEASES = FA_ROLES[1] // 32
#: Columns of one swizzled block (64 16-bit values: 128 bytes a row).
COLS = 64
#: The fewest rows of one tile copy from a page of a paged cache (the PAGED variant's PIECE, which P must be a
#: multiple of: 16, 64 or 128 rows).
PAGE_PIECE = 16
#: A key index no query reaches: the diagonal of a mask that is not causal.
NO_DIAGONAL = 1 << 30
LOG2E = 1.4426950408889634
NEG = -math.inf


#: Head dimensions whose output is staged in rows of its own (padded by 16 bytes); past them Q's tile holds it.
OWN_STAGING = 128


def fa_shared_bytes(v: dict[str, Any]) -> int:
    """Shared memory of one group: Q, the K and V rings, the output staging rows (D <= 128; larger heads stage
    the output where Q was) and the barriers (two more for PINGPONG's turns, one for PERSIST's Q)."""
    d, bk, stages = v["D"], v["BK"], v["STAGES"]
    staging = FA_BQ * (d + 8) if d <= OWN_STAGING else 0
    barriers = 1 + 4 * stages + 2 * bool(v.get("PINGPONG")) + bool(v.get("PERSIST"))
    return (FA_BQ * d + 2 * stages * bk * d + staging) * 2 + 8 * barriers


def fa_fits(v: dict[str, Any]) -> bool:
    """The group's shared memory fits sm_90's opt-in limit (227 KiB)."""
    return fa_shared_bytes(v) <= 227 * 1024


def fa_fits_modes(v: dict[str, Any]) -> bool:
    """:func:`fa_fits`, one loop shape at a time (OVERLAP or PINGPONG), a key block of whole pieces (longer ones for
    PAGED alone: elsewhere PIECE is unread), and PERSIST on the ping-pong loop over dense tensors with its own
    staging rows."""
    persist_ok = not v["PERSIST"] or (v["PINGPONG"] and not v["VARLEN"] and not v["PAGED"] and v["D"] <= OWN_STAGING)
    pieces_ok = v["BK"] % v["PIECE"] == 0 and (v["PAGED"] or v["PIECE"] == PAGE_PIECE)
    return fa_fits(v) and not (v["OVERLAP"] and v["PINGPONG"]) and pieces_ok and persist_ok


#: The host's binding: 128-key blocks through rings of two slots, the two consumer warpgroups taking turns at the
#: multipliers (PINGPONG).  On an H100 (2026-12-06, B=1, H=32, D=128, bf16, NVRTC 13.0; docs/std/attention.md) it
#: led at every S from 1024 to 16384, causal and not: 0.79x-0.90x of SDPA, against 0.75x-0.87x for the same loop
#: without turns, 0.70x-0.76x for turns on 64-key blocks through four slots, and 0.44x-0.53x for OVERLAP on
#: 128-key blocks, which needs more registers than that NVRTC's ptxas finds and then serialises every multiply
#: (C7512).
FA_DEFAULT = {"BK": 128, "STAGES": 2, "OVERLAP": False, "PINGPONG": True}


#: Heads of 256: 64-key blocks (the output's 128 accumulator registers beside S's 32), two slots, the output
#: staged where Q was.  Not timed: NVRTC 13.5 builds it with no spill, the GPU machines' NVRTC 13.0 with 1224 bytes
#: of spills and serialised multiplies (right outputs on an H100, 2026-12-06; docs/std/attention.md).
FA_WIDE = {"BK": 64, "STAGES": 2, "OVERLAP": False, "PINGPONG": False}


def fa_config(d: int) -> dict[str, int]:
    """The key block and ring depth the host runs :data:`attention_prefill_ws` with for head dimension ``d``."""
    return dict(FA_WIDE if d > OWN_STAGING else FA_DEFAULT)


@func
def copy_rows(ring, at, src, full, slot, heads, rows, head, r0, count, d, packed):
    """Tile copies of rows r0 .. r0 + count - 1 of head ``head`` of ``src`` into ``ring`` from element ``at`` on, as
    64-column swizzled blocks, completing on ``full``'s ``slot``.  ``src`` is (heads, rows, D) (``rows`` per head),
    or ``packed`` (rows, heads, D) (the tokens of all sequences, a row's heads side by side); rows past ``rows``
    read 0."""
    for c in static_range(d // COLS):
        if packed:
            copy_tile(ring, at + c * count * COLS, src, (rows, heads, d), (r0, head, c * COLS), (count, 1, COLS),
                      full, slot)
        else:
            copy_tile(ring, at + c * count * COLS, src, (heads, rows, d), (head, r0, c * COLS), (1, count, COLS),
                      full, slot)


@func
def copy_keys(ring, src, full, slot, heads, rows, head, k0, bk, d, item, packed):
    """The producer's tile copies of keys k0 .. k0 + BK - 1 of KV head ``head`` (K's or V's rows, as
    :func:`copy_rows` reads them) into ``ring``'s ``slot``, and the arrival on ``full`` that announces their
    bytes."""
    copy_rows(ring, slot * d * bk, src, full, slot, heads, rows, head, k0, bk, d, packed)
    barrier_arrive(full, slot, bytes=bk * d * item)


@func
def sequence_keys(kv_lens, bh, H, n, W, P, paged):
    """How many keys (batch, head) ``bh``'s sequence attends to and how far its causal diagonal is shifted: its
    ``n`` own rows and 0, or ``paged``, kv_lens[b] (clamped into [0, W * P]) and kv_lens[b] - n (the queries are
    the sequence's last tokens: query i sees key j <= i + kv_lens[b] - n, the bottom-right aligned causal mask of a
    prefill after a cached prefix)."""
    nk = n
    if paged:
        nk = min(max(kv_lens[bh // H], 0), W * P)
    return nk, nk - n


@func
def piece_row(table, seq, W, P, N, rows, key, nk):
    """The pool row of key ``key`` of sequence ``seq`` in a paged cache (pools (N, P, heads, D) seen as ``rows`` = N *
    P rows; key j in page table[seq * W + j // P], clamped into [0, N), at row j % P), or for a key at or past
    ``nk``, ``rows``: past the pool, where tile copies read zeros."""
    page = min(max(table[seq * W + min(key // P, W - 1)], 0), N - 1)
    return select(key < nk, page * P + key % P, rows)


@func
def copy_piece(ring, src, full, slot, row, rows, heads, head, c, bk, d, piece):
    """The producer's tile copies of piece ``c`` of a key block (``piece`` rows from pool row ``row`` of KV head
    ``head``) into ``ring``'s ``slot``, in the layout :func:`copy_keys` gives a block."""
    for cb in static_range(d // COLS):
        copy_tile(ring, slot * d * bk + cb * bk * COLS + c * piece * COLS, src, (rows, heads, d),
                  (row, head, cb * COLS), (piece, 1, COLS), full, slot)


@func
def issue_scores(q_s, k_s, wg, slot, nb, bk, pending):
    """S = Q K^T for warpgroup ``wg``'s 64 queries and the BK keys in K's ring ``slot``: one group of multiplies
    (a 64-column block of D each), ``pending`` groups left in flight."""
    sc = frag_acc(f32, 16, bk)
    for c in static_range(nb):
        sc = mma_wg(q_s, c * FA_BQ * COLS + wg * 64 * COLS, k_s, (slot * nb + c) * bk * COLS, sc, k=COLS,
                    commit=c == nb - 1, pending=pending if c == nb - 1 else 0)
    return sc


@func
def issue_pv(p, v_s, slot, acc, nb, bk, dtype, pending):
    """acc + P V for the BK keys in V's ring ``slot``, P (the weights, f32) rounded to ``dtype`` and fed from
    registers 16 keys at a time: one group of multiplies, ``pending`` groups left in flight."""
    for kk in static_range(bk // 16):
        acc = mma_wg(frag_acc_to_a(p, kk * 16, dtype), 0, v_s, slot * nb * bk * COLS + kk * 16 * COLS, acc, k=16,
                     b_major="n", b_block=bk * COLS, commit=kk == bk // 16 - 1,
                     pending=pending if kk == bk // 16 - 1 else 0)
    return acc


@func
def release_slot(empty, slot):
    """A ring slot goes back to the producer: one lane of each consumer subgroup arrives."""
    if lane_id() == 0:
        barrier_arrive(empty, slot)


@func
def mask_scores(sc, k0, S, causal, row0):
    """Scores of keys k0 .. with keys from ``S`` on, and under ``causal`` keys past the query's diagonal (``row0``:
    the key on the first row's), at -inf (the kernel says which blocks take it)."""
    diagonal = NO_DIAGONAL
    if causal != 0:
        diagonal = row0 - k0
    return frag_mask(sc, NEG, cols=S - k0, diagonal=diagonal)


@func
def online_softmax(sc, m, l, sl2):
    """One key block's step of the online softmax on raw scores ``sc`` (masked ones at -inf), with ``sl2`` = scale *
    log2(e) > 0: the running row max ``m`` of raw scores and the sum ``l`` updated, the weights ``p`` = 2^(sl2 (sc -
    m)) and the factor ``alpha`` = 2^(sl2 (m_old - m)) the output rows take.  The max is taken before scaling (sl2 >
    0 keeps the order), so each weight's exponent is one fma (sc * sl2 - m * sl2) and fast_exp2 one instruction: a
    weight under 2^-126 is lost beside the row's 1.  m and l stay row reductions (a row max of values equal along
    the row is that value), so each is one register per row in a loop, not one per element, and the old max meets
    the block's per row, not per element."""
    m_new = frag_row_max(max(m, frag_row_max(sc)))
    p = fast_exp2(sc * sl2 - m_new * sl2)
    alpha = fast_exp2((m - m_new) * sl2)
    return m_new, p, frag_row_max(l * alpha + frag_row_sum(p)), alpha


@func
def overlapped_block(j, sc, m, l, sl2, acc, q_s, k_s, v_s, k_full, k_empty, v_full, v_empty, wg, nb, bk, stages,
                     dtype):
    """Iteration j of the overlapped loop on block j's (masked) scores ``sc``, with P_{j-1} V_{j-1} in
    flight: the softmax, then (once that multiply retired) O rescaled, S_{j+1} and P_j V_j issued, and S_{j+1}
    awaited.  Returns S_{j+1}, m, l and O (its multiply running)."""
    release_slot(k_empty, j % stages)
    m, p, l, alpha = online_softmax(sc, m, l, sl2)
    mma_wg_wait(0)
    if j > 0:
        release_slot(v_empty, (j - 1) % stages)
    acc = frag_scale_rows(acc, alpha)
    sc = issue_scores(q_s, k_s, wg, full_slot(k_full, j + 1, stages), nb, bk, 1)
    acc = issue_pv(p, v_s, full_slot(v_full, j, stages), acc, nb, bk, dtype, 2)
    mma_wg_wait(1)
    return sc, m, l, acc


@func
def take_turn(turn, wg, t):
    """Warpgroup ``wg``'s turn ``t`` (from 0) at the multipliers: the other warpgroup's previous turn (or, for
    warpgroup 0's first, the arrival that opens the ring) has been issued."""
    barrier_wait(turn, wg, t & 1)


@func
def pass_turn(turn, wg):
    """Warpgroup ``wg`` issued its multiplies: the other one's turn comes (one lane of each subgroup arrives)."""
    if lane_id() == 0:
        barrier_arrive(turn, 1 - wg)


@func
def pingpong_consumer(wg, turn, q_s, k_s, v_s, k_full, k_empty, v_full, v_empty, blocks, n, causal, q0, row0, sl2, nb,
                      bk, stages, d, dtype, step0, turn0, q_empty, persist):
    """Warpgroup ``wg``'s loop when the two consumer warpgroups take turns (FlashAttention-3's ping-pong): each turn
    issues P_{j-1} V_{j-1} and S_j = Q K_j^T as one batch, hands the multipliers to the other warpgroup, and
    waits for its batch; block j's softmax then runs while the other warpgroup's batch multiplies.  Nothing is in
    flight during the softmax, so a block's registers are O, S_j and P_{j-1} at most.  ``n``: the keys; ``q0``,
    ``row0``: the keys on the diagonals of the tile's and the subgroup's first rows.  ``step0`` and ``turn0``: the
    ring's steps and the warpgroup's turns of the group's earlier tiles; ``persist``: Q's tile goes back to the
    producer (``q_empty``) once its last product was read.  Returns O (not yet divided) and the row sums."""
    acc = frag_acc(f32, 16, d)
    m = frag_acc(f32, 16, bk, value=NEG)
    l = frag_acc(f32, 16, bk)
    if wg == 1 and turn0 == 0:
        pass_turn(turn, wg)  # warpgroup 0 takes the first turn
    ks = full_slot(k_full, step0, stages)
    take_turn(turn, wg, turn0)
    sc = issue_scores(q_s, k_s, wg, ks, nb, bk, 1)
    pass_turn(turn, wg)
    mma_wg_wait(0)
    release_slot(k_empty, ks)
    if bk > n or (causal != 0 and bk > q0 + wg * 64 + 1):
        sc = mask_scores(sc, 0, n, causal, row0)
    m, p, l, alpha = online_softmax(sc, m, l, sl2)
    for j in range(1, blocks):
        vs = full_slot(v_full, step0 + j - 1, stages)
        ks = full_slot(k_full, step0 + j, stages)
        take_turn(turn, wg, turn0 + j)
        acc = issue_pv(p, v_s, vs, acc, nb, bk, dtype, 2)
        sc = issue_scores(q_s, k_s, wg, ks, nb, bk, 2)
        pass_turn(turn, wg)
        mma_wg_wait(0)
        release_slot(v_empty, vs)
        release_slot(k_empty, ks)
        if (j + 1) * bk > n or (causal != 0 and (j + 1) * bk > q0 + wg * 64 + 1):
            sc = mask_scores(sc, j * bk, n, causal, row0)  # only blocks that reach past S or a query
        m, p, l, alpha = online_softmax(sc, m, l, sl2)
        acc = frag_scale_rows(acc, alpha)  # no multiply in flight: O takes the new max now
    if persist:
        release_slot(q_empty, 0)  # every S of the tile was read: the next tile's Q may land
    vs = full_slot(v_full, step0 + blocks - 1, stages)
    take_turn(turn, wg, turn0 + blocks)
    acc = issue_pv(p, v_s, vs, acc, nb, bk, dtype, 1)
    pass_turn(turn, wg)
    mma_wg_wait(0)
    release_slot(v_empty, vs)
    return acc, l


@func
def persistent_tile(t, S, BH):
    """(first query, batch-head) of tile ``t`` of a persistent launch: the tiles of the last query rows of every
    head first (the longest under a causal mask), then the rows before them."""
    return ((S + FA_BQ - 1) // FA_BQ - 1 - t // BH) * FA_BQ, t % BH


@func
def tile_blocks(S, q0, causal, bk):
    """Key blocks of the query tile from ``q0`` of a dense sequence of S: all, or under ``causal`` those up to its
    last query."""
    kend = S
    if causal != 0:
        kend = min(S, q0 + FA_BQ)
    return (kend + bk - 1) // bk


@func
def store_staged(o, stage, ld, base, rows, ct, d, stride):
    """The consumers' (thread ``ct`` of 256) store of the 128 staged output rows (``ld`` elements apart in
    ``stage``) to ``o[base ..]`` (rows ``stride`` elements apart) in 16-byte pieces, the first ``rows`` of them."""
    for i in static_range(FA_BQ * d // 8 // FA_ROLES[1]):
        e = ct + i * FA_ROLES[1]
        if e // (d // 8) < rows:
            o.store(base + (e // (d // 8)) * stride + (e % (d // 8)) * 8,
                    stage.load((e // (d // 8)) * ld + (e % (d // 8)) * 8, width=8))


@kernel(variants(T=[f16, bf16], D=[128, 64, 256], BK=[128, 64], STAGES=[2, 3, 4], OVERLAP=[True, False],
                 VARLEN=[False, True], PINGPONG=[False, True], PAGED=[False, True], PIECE=[16, 64, 128],
                 PERSIST=[False, True], where=fa_fits_modes))
def attention_prefill_ws(q: In[T], k: In[T], v: In[T], o: Tensor[T], cu: In[i32], S: int, H: int, H_kv: int, BH: int,
                         BH_kv: int, causal: int, scale: f32, kv_lens: In[i32], table: In[i32], P: int, W: int,
                         N: int):
    """o = softmax(scale * Q K^T + mask) V per (batch, head), attention_prefill.attention_prefill's contract on
    Hopper.

    q, o (B, H, S, D); k, v (B, H_kv, S, D); row-major T in {f16, bf16}; D in {64, 128, 256}; H a multiple of H_kv;
    BH = B * H and BH_kv = B * H_kv (the tile copies' outer extents); causal != 0 masks key j > query i;
    0 < scale < inf (each row's max is taken before scaling); ``cu`` unread (any one element).
    VARLEN: packed sequences, q, o (S, H, D) and k, v (S, H_kv, D) with S the tokens of all B sequences;
    sequence b holds rows cu[b] .. cu[b + 1] - 1 (``cu`` (B + 1,) i32, non-decreasing; values clamped into
    [0, S]), attending within itself; BH and BH_kv unread.
    PAGED (q packed or not): k, v are page pools (N, P, H_kv, D), P a multiple of PIECE, and BH_kv = N * P (the
    tile copies' extent); sequence b's keys are its first kv_lens[b] positions (clamped into [0, W * P]), key j
    in page table[b * W + j // P] (``table`` (B, W) i32, entries clamped into [0, N)) at row j % P; its queries
    are its last tokens (causal: query i of its n sees key j <= i + kv_lens[b] - n; a query that sees no key
    gives NaN).  Keys are copied PIECE rows at a time (P a
    multiple of PIECE), so the rows of a sequence's last piece past kv_lens[b] are read: keep them finite (their
    weights are 0, and 0 * Inf is NaN); later pieces read as zeros.  Otherwise kv_lens and table are unread (any
    one element), P, W, N any.
    PERSIST (with PINGPONG, dense tensors, D <= 128): grid (G * 384, 1) for any G: group g computes query tiles
    g, g + G, ... of the ceil(S / 128) * BH (the tiles of every head's last 128 queries first), its rings and turns
    running on across tiles, so a tile's Q and first keys land while the last tile's output is stored.
    Grid (ceil(L / 128) * 384, B * H) for L the longest sequence (S when not VARLEN), group (384,), subgroups of
    32: group (x, bh) owns queries [128 t, 128 t + 128) of head bh for t = ceil(L / 128) - 1 - x (the last tiles
    first); a tile past its sequence computes one block of keys and stores nothing.
    Per key block of BK: S = Q K^T in f32 (products exact, 16-deep slices in the unit's order), the running row
    max m and sum l in f32 (l sums the unrounded weights 2^(scale log2(e) (s - m))), P rounded to T once for P V,
    O rescaled by 2^(scale log2(e) (m_old - m_new)) before each block's P V; one rounding of O / l to T.
    Keys past the sequence read 0 (or the next sequence's rows) and their scores are masked; rows past it are
    computed and never stored.  NaN/Inf in q or k give NaN rows; NaN/Inf in v reach the rows that weight them (a
    masked weight is 0, and 0 * Inf is NaN: a non-finite v also reaches the rows of its query tile that mask it in
    the same key block).
    """
    NB = D // COLS
    q_s = shared(T, FA_BQ * D)
    k_s = shared(T, STAGES * BK * D)
    v_s = shared(T, STAGES * BK * D)
    if D <= OWN_STAGING:
        OLD = D + 8  # staged output rows, 16 bytes longer than D: a row's fragment stores start 4 banks further
        o_s = shared(T, FA_BQ * OLD)
    q_full = async_barriers(1, 1)
    k_full = async_barriers(STAGES, 1)
    k_empty = async_barriers(STAGES, FA_RELEASES)
    v_full = async_barriers(STAGES, 1)
    v_empty = async_barriers(STAGES, FA_RELEASES)
    if PINGPONG:
        turn = async_barriers(2, FA_RELEASES // 2)  # warpgroup w's turns at the multipliers
    if PERSIST:
        q_empty = async_barriers(1, FA_RELEASES)  # Q's tile read by every S of a tile: the next one may land
    role = warp_roles(FA_ROLES, registers=FA_REGISTERS)
    tid = thread_id(0)
    bh = group_id(1)
    q0 = (num_groups(0) - 1 - group_id(0)) * FA_BQ
    h = bh % H
    if VARLEN:
        start = min(max(cu[bh // H], 0), S)  # the sequence's first row
        n = min(max(cu[bh // H + 1], start), S) - start
        q_head, kvh, q_heads, kv_heads, stride = h, h // (H // H_kv), H, H_kv, H * D
        out_base = (start + q0) * stride + h * D
    else:
        start, n = 0, S
        q_head, kvh, q_heads, kv_heads, stride = bh, (bh // H) * H_kv + h // (H // H_kv), BH, BH_kv, D
        out_base = (bh * S + q0) * D
    nk, shift = sequence_keys(kv_lens, bh, H, n, W, P, PAGED)
    kend = nk
    if causal != 0:
        kend = min(nk, q0 + FA_BQ + shift)
    if VARLEN:
        kend = select(q0 < n, max(kend, 1), 1)  # at least one block (every role runs the same trips)
    blocks = (kend + BK - 1) // BK
    if role == 0 and PERSIST:
        if tid == 0:
            step = 0  # key blocks through the rings so far, over every tile of this group
            count = 0  # tiles so far
            for t in range(group_id(0), (S + FA_BQ - 1) // FA_BQ * BH, num_groups(0)):
                tq0, tbh = persistent_tile(t, S, BH)
                tkvh = (tbh // H) * H_kv + (tbh % H) // (H // H_kv)
                tblocks = tile_blocks(S, tq0, causal, BK)
                barrier_wait(q_empty, 0, (count & 1) ^ 1)  # the last tile's products read its Q (the first passes)
                copy_rows(q_s, 0, q, q_full, 0, BH, S, tbh, tq0, FA_BQ, D, False)
                barrier_arrive(q_full, 0, bytes=FA_BQ * D * T.itemsize)
                for j in range(tblocks):
                    copy_keys(k_s, k, k_full, free_slot(k_empty, step + j, STAGES), BH_kv, S, tkvh, j * BK, BK, D,
                              T.itemsize, False)
                    copy_keys(v_s, v, v_full, free_slot(v_empty, step + j, STAGES), BH_kv, S, tkvh, j * BK, BK, D,
                              T.itemsize, False)
                step += tblocks
                count += 1
    elif role == 0:
        if tid == 0:
            copy_rows(q_s, 0, q, q_full, 0, q_heads, S, q_head, start + q0, FA_BQ, D, VARLEN)
            barrier_arrive(q_full, 0, bytes=FA_BQ * D * T.itemsize)
            if PAGED:
                at = local(i32, BK // PIECE)  # a block's pieces' rows in the pool, read once for K and V
            for j in range(blocks):
                if PAGED:
                    for c in static_range(BK // PIECE):  # the table's reads before the slots' waits
                        at[c] = piece_row(table, bh // H, W, P, N, BH_kv, j * BK + c * PIECE, nk)
                    s = free_slot(k_empty, j, STAGES)
                    for c in static_range(BK // PIECE):
                        copy_piece(k_s, k, k_full, s, at[c], BH_kv, H_kv, h // (H // H_kv), c, BK, D, PIECE)
                    barrier_arrive(k_full, s, bytes=BK * D * T.itemsize)
                    s = free_slot(v_empty, j, STAGES)
                    for c in static_range(BK // PIECE):
                        copy_piece(v_s, v, v_full, s, at[c], BH_kv, H_kv, h // (H // H_kv), c, BK, D, PIECE)
                    barrier_arrive(v_full, s, bytes=BK * D * T.itemsize)
                else:
                    copy_keys(k_s, k, k_full, free_slot(k_empty, j, STAGES), kv_heads, S, kvh, start + j * BK, BK, D,
                              T.itemsize, VARLEN)
                    copy_keys(v_s, v, v_full, free_slot(v_empty, j, STAGES), kv_heads, S, kvh, start + j * BK, BK, D,
                              T.itemsize, VARLEN)
    elif PERSIST:
        wg = (tid - FA_ROLES[0]) // 128
        ct = tid - FA_ROLES[0]
        sl2 = scale * LOG2E
        step = 0
        turns = 0  # this warpgroup's turns at the multipliers so far
        count = 0
        for t in range(group_id(0), (S + FA_BQ - 1) // FA_BQ * BH, num_groups(0)):
            tq0, tbh = persistent_tile(t, S, BH)
            tblocks = tile_blocks(S, tq0, causal, BK)
            trow0 = tq0 + wg * 64 + (simd_group_id() % 4) * 16
            barrier_wait(q_full, 0, count & 1)
            if wg == 0:  # fibers on the interpreter, one loop on a GPU (see below)
                acc, l = pingpong_consumer(wg, turn, q_s, k_s, v_s, k_full, k_empty, v_full, v_empty, tblocks, S,
                                           causal, tq0, trow0, sl2, NB, BK, STAGES, D, T, step, turns, q_empty, True)
            else:
                acc, l = pingpong_consumer(wg, turn, q_s, k_s, v_s, k_full, k_empty, v_full, v_empty, tblocks, S,
                                           causal, tq0, trow0, sl2, NB, BK, STAGES, D, T, step, turns, q_empty, True)
            acc = frag_scale_rows(acc, recip(l))
            role_barrier()  # the last tile's output rows left the staging rows
            frag_store(o_s, (trow0 - tq0) * OLD, OLD, acc)
            role_barrier()
            store_staged(o, o_s, OLD, (tbh * S + tq0) * D, S - tq0, ct, D, D)
            step += tblocks
            turns += tblocks + 1
            count += 1
    else:
        wg = (tid - FA_ROLES[0]) // 128
        row0 = q0 + wg * 64 + (simd_group_id() % 4) * 16  # this subgroup's first query
        kq0, kd0 = q0 + shift, row0 + shift  # the keys on the diagonals of the tile's and the subgroup's first rows
        sl2 = scale * LOG2E
        acc = frag_acc(f32, 16, D)
        barrier_wait(q_full, 0, 0)
        if PINGPONG:
            # Each warpgroup runs the loop as its own side of a branch, the same code on both: a GPU runs them
            # apart anyway, and the interpreter runs the two sides as fibers, so one waits for its turn while
            # the other runs (in lock step a turn would pass for one warpgroup and not the other).
            if wg == 0:
                acc, l = pingpong_consumer(wg, turn, q_s, k_s, v_s, k_full, k_empty, v_full, v_empty, blocks, nk,
                                           causal, kq0, kd0, sl2, NB, BK, STAGES, D, T, 0, 0, q_full, False)
            else:
                acc, l = pingpong_consumer(wg, turn, q_s, k_s, v_s, k_full, k_empty, v_full, v_empty, blocks, nk,
                                           causal, kq0, kd0, sl2, NB, BK, STAGES, D, T, 0, 0, q_full, False)
        elif OVERLAP:
            # Block j's scores are in registers when iteration j starts, and P_{j-1} V_{j-1} may still run: the
            # softmax of S_j overlaps it; once it retired, O is rescaled, S_{j+1} is issued and P_j V_j behind
            # it, and S_{j+1} is awaited while P_j V_j runs on.  The last block is peeled off, so that every
            # iteration issues S_{j+1}, and every block is masked: where a conditional multiply or a branch round
            # the mask shares the loop, ptxas waits for the running multiply before the softmax instead (and
            # loops split at the first masked block would run different trip counts in lock-stepped groups on
            # the interpreter).
            sc = issue_scores(q_s, k_s, wg, full_slot(k_full, 0, STAGES), NB, BK, 0)
            m = frag_acc(f32, 16, BK, value=NEG)
            l = frag_acc(f32, 16, BK)
            for j in range(blocks - 1):
                sc, m, l, acc = overlapped_block(j, mask_scores(sc, j * BK, nk, causal, kd0), m, l, sl2, acc, q_s,
                                                 k_s, v_s, k_full, k_empty, v_full, v_empty, wg, NB, BK, STAGES, T)
            last = blocks - 1
            release_slot(k_empty, last % STAGES)
            m, p, l, alpha = online_softmax(mask_scores(sc, last * BK, nk, causal, kd0), m, l, sl2)
            mma_wg_wait(0)
            if last > 0:
                release_slot(v_empty, (last - 1) % STAGES)
            acc = issue_pv(p, v_s, full_slot(v_full, last, STAGES), frag_scale_rows(acc, alpha), NB, BK, T, 0)
            release_slot(v_empty, last % STAGES)
        else:
            m = frag_acc(f32, 16, BK, value=NEG)
            l = frag_acc(f32, 16, BK)
            for j in range(blocks):
                s = full_slot(k_full, j, STAGES)
                sc = issue_scores(q_s, k_s, wg, s, NB, BK, 0)
                release_slot(k_empty, s)
                if (j + 1) * BK > nk or (causal != 0 and (j + 1) * BK > kq0 + wg * 64 + 1):
                    sc = mask_scores(sc, j * BK, nk, causal, kd0)  # only blocks that reach past S or a query
                m, p, l, alpha = online_softmax(sc, m, l, sl2)
                acc = frag_scale_rows(acc, alpha)
                s = full_slot(v_full, j, STAGES)
                acc = issue_pv(p, v_s, s, acc, NB, BK, T, 0)
                release_slot(v_empty, s)
        acc = frag_scale_rows(acc, recip(l))
        first_row = row0 - q0  # this subgroup's first row of the group's tile
        ct = tid - FA_ROLES[0]
        # The consumers stage the output rows, then store them in 16-byte pieces, skipping rows past the sequence.
        if D <= OWN_STAGING:
            frag_store(o_s, first_row * OLD, OLD, acc)
            role_barrier()
            store_staged(o, o_s, OLD, out_base, n - q0, ct, D, stride)
        else:
            role_barrier()  # both warpgroups' last S multiplies read Q before its tile holds the output
            frag_store(q_s, first_row * D, D, acc)
            role_barrier()
            store_staged(o, q_s, D, out_base, n - q0, ct, D, stride)

__all__ = ["FA_BQ", "FA_DEFAULT", "FA_THREADS", "attention_prefill_ws", "fa_config", "fa_fits", "fa_shared_bytes"]

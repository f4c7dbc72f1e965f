"""Scaled-dot-product attention's host functions: a KV-cache decode (flash-decoding: a split pass, then a combine
pass; dense or paged caches) and a tiled flash-attention prefill (dense, packed sequences, or over a paged cache).

Scores are ``scale * q . k`` (``scale`` defaults to ``1/sqrt(D)``); the kernels work in base 2 (scores
times ``log2(e)``, ``exp2``), accumulate in f32 and keep f32 softmax statistics (running max ``m`` and
sum ``l``); an output is rounded to its dtype once.  No float atomics: every sum runs in a fixed order,
so results are deterministic.

The kernels live beside this module: attention_decode.py (the decode's split and combine passes, the paged
append), attention_prefill.py (the portable prefill kernels, ``attention_prefill`` on CUDA's ``mma.sync`` and
``attention_prefill_small`` elsewhere) and attention_ws.py (Hopper's prefill: warp roles, tile copies, warpgroup
multiplies).  The functions here check their arguments, pick a kernel and its tiles, and launch it.
"""

from __future__ import annotations

import math
from typing import Any

from iron import LaunchError, f32, i32
from iron.std import _host
from iron.std._host import (ceil_div, check_float, check_shape, device_starts_off, device_traits, dtype_of, empty_like,
                            leading_rows, output, shape_of, starts_aligned, tuned_for_cuda_mma, unread, vector_width)
from iron.std._plans import Tuning, planned
from iron.std.attention_decode import (APPEND_GROUP, COMBINE_GROUP, DECODE_THREADS, TEAM, attention_decode_combine,
                                       attention_decode_split, combine_grid, paged_kv_append)
from iron.std.attention_decode_mma import DM_KEYS, DM_ROWS, attention_decode_mma, decode_mma_threads
from iron.std.attention_prefill import SBQ, SNT, attention_prefill, attention_prefill_small
from iron.std.attention_ws import FA_BQ, FA_THREADS, PAGE_PIECE, attention_prefill_ws, fa_config, fa_shared_bytes
from iron.std.gemm_ws import WS_SMS, runs_roles

#: The masks (causal or not) under which the Hopper prefill runs persistent groups (``PERSIST``: one a
#: multiprocessor walking the query tiles) where there are more tiles than multiprocessors.  On an H100
#: (2026-12-06, B=1, H=32, D=128, bf16; docs/std/attention.md) they ran 0.84x-1.01x of SDPA causal and 0.81x-0.86x
#: not, against 0.80x-0.86x and 0.74x-0.81x for a group per tile in the same run.
FA_PERSIST_MASKS: tuple[bool, ...] = (True, False)

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


#: Query heads a KV head must serve for the decode to run on the matrix units (attention_decode_mma).
MMA_MIN_HEADS = 2
#: attention_decode_mma's plan: subgroups a group and ring buffers (its variant), the groups its chunks aim for,
#: and the shortest and longest chunk (keys).  About 128 groups of at least 64 keys picked the best-measured chunk
#: of every row timed on an H100 (docs/std/attention.md, 2026-12-07: batch 1 with 1K keys 8.6 us against 11.1 at
#: the earlier 256 groups of at least 256 keys).
#: Chunks grow to ``long_chunk`` keys where the (sequence, KV head) pairs are fewer than ``few_pairs`` (B = 4 at 32K
#: keys: 8192-key chunks 182 us against 210 at 2048), else to ``max_chunk`` (B = 16 at 32K: 2048 keys 703 us, 8192
#: 788).
#: PAR (the subgroups' outputs merged in one barrier, not SUBS) and DIRECT (a launch of one chunk writes the output
#: itself, no combine pass) won or tied on every row timed on an H100 (2026-12-07: B = 1, 1K 8.53 -> 7.72 us with
#: PAR; B = 16, 1K 29.3 -> 26.9 and B = 64, 1K 97.3 -> 93.2 with DIRECT).
#: Where the pairs alone make ``few_pairs`` to ``one_wave`` groups (one a multiprocessor of an H100 or H200) and a
#: pair's keys fit ``long_chunk``, each pair is one chunk, written DIRECT (B = 16 at 4K keys on an H100, 2026-12-07:
#: 96.7 us against 99.4-99.9 at 2048-key chunks and a combine; at 32K keys 8192-key chunks, 512 groups, lost).
#: TABLE_AHEAD (a paged cache's table entries read a ring block before their copies, not in front of them) won on an
#: H100 (2026-12-07, scripts/device/paged_check.py, bf16, 4K keys of 16-key pages, both in one process, the same
#: bits): B = 1 13.57 -> 12.91 us and B = 16 128.06 -> 112.06 (the dense cache 11.40 and 91.29).
MMA_PLAN: dict[str, int] = Tuning({"SUBS": 2, "STAGES": 3, "groups": 128, "min_chunk": 64, "max_chunk": 2048,
                                   "long_chunk": 8192, "few_pairs": 128, "one_wave": 132, "PAR": 1, "DIRECT": 1,
                                   "TABLE_AHEAD": 1})
#: The combine pass runs TILED (a group a head reading its chunks' LSEs at once; the same bits as the per-element
#: kernel, whose two chains of loads take NCH / 4 round trips each) from ``tiled_from`` chunks on.  On an H100
#: (2026-12-07) it won at 16 chunks (B = 1, 1K: 7.86 -> 7.43 us; 4K 11.5 -> 11.1) and lost at 4 (B = 4, 1K: 10.7 ->
#: 11.1: its two barriers cost more than one round trip saves).
COMBINE_PLAN: dict[str, int] = Tuning({"tiled_from": 8})


def decode_on_matrix_units(h: int, h_kv: int, dt: Any, backend: str | None, like: Any = ()) -> bool:
    """Whether the decode's split pass runs on the matrix units (attention_decode_mma): f16 / bf16 on a device
    whose kernels were tuned for mma.sync, with at least MMA_MIN_HEADS query heads a KV head (where the FMA
    kernel runs out of issue slots: docs/std/attention.md), in groups of at most 16 that divide them."""
    r = h // h_kv
    return (dt.name in ("f16", "bf16") and r >= MMA_MIN_HEADS and (r <= DM_ROWS or r % DM_ROWS == 0)
            and tuned_for_cuda_mma(backend, like))


def decode_mma_chunk(batch: int, head_groups: int, s_max: int) -> int:
    """Keys per chunk of attention_decode_mma: enough chunks for about MMA_PLAN's groups, each within its shortest
    and longest chunk (``long_chunk`` while the (sequence, KV head) pairs are fewer than ``few_pairs``, else
    ``max_chunk``) and whole ring buffers, and no longer than the cache; one chunk a pair where the pairs alone
    make one wave of ``few_pairs`` to ``one_wave`` groups and the cache fits ``long_chunk``."""
    block = MMA_PLAN["SUBS"] * DM_KEYS
    pairs = batch * head_groups
    if MMA_PLAN["few_pairs"] <= pairs <= MMA_PLAN["one_wave"] and s_max <= MMA_PLAN["long_chunk"]:
        return ceil_div(s_max, block) * block
    want = max(1, ceil_div(MMA_PLAN["groups"], pairs))
    ch = ceil_div(ceil_div(s_max, want), block) * block
    longest = MMA_PLAN["long_chunk"] if pairs < MMA_PLAN["few_pairs"] else MMA_PLAN["max_chunk"]
    ch = min(max(ch, MMA_PLAN["min_chunk"]), longest)
    return min(ch, ceil_div(s_max, block) * block)


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
    A cache of more than 2**31 - 1 elements (the kernels index with i32) is decoded a batch of sequences at a
    time, on views of their rows (numpy, torch or CuPy arrays).
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
    per_sequence = h_kv * s_max * d
    if b * per_sequence <= _host.MAX_ELEMENTS:
        return _decode(fn, q, k_cache, v_cache, seq_lens, out, h_kv, s_max, (seq_lens, 1, 1), scale, backend, chunk)
    if per_sequence > _host.MAX_ELEMENTS:
        raise LaunchError(f"{fn}: one sequence's cache holds H_kv * S_max * D = {per_sequence} elements; the kernels "
                          f"index with i32, so at most {_host.MAX_ELEMENTS}: shorten S_max or split the heads")
    step = ceil_div(b, ceil_div(b, _host.MAX_ELEMENTS // per_sequence))  # even batches, each under the limit
    for b0 in range(0, b, step):
        q_, k_, v_, lens, out_ = (leading_rows(x, b0, b0 + step, f"{fn}: {name}") for name, x in
                                  (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("seq_lens", seq_lens),
                                   ("out", out)))
        _decode(fn, q_, k_, v_, lens, out_, h_kv, s_max, (lens, 1, 1), scale, backend, chunk)
    return out


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


def _page_pool(fn: str, what: str, x: Any, k_pages: Any, v_pages: Any, block_table: Any,
               sequences: int | None = None) -> tuple[int, ...]:
    """The checks of a cache of pages and its table against ``x`` (``what``: its name and shape, rows of D; one row
    a sequence unless ``sequences`` says how many): the number of pages, keys a page, KV heads and table
    columns."""
    if len(shape_of(x)) != 3 or len(shape_of(k_pages)) != 4 or len(shape_of(block_table)) != 2:
        raise LaunchError(f"{fn}: {what}, k_pages (pages, P, H_kv, D) and block_table (B, max_pages) expected; "
                          f"got {shape_of(x)}, {shape_of(k_pages)} and {shape_of(block_table)}")
    rows, _, d = shape_of(x)
    b = rows if sequences is None else sequences
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
    dt = dtype_of(q)
    if any(device_starts_off(x, 16) for x in (q, k, v)):
        raise LaunchError(f"{fn}: q, k and v must start on 16-byte boundaries (the kernels read them in 16-byte "
                          f"vectors); pass copies (.clone()) of views that start mid-vector")
    mma = decode_on_matrix_units(h, h_kv, dt, backend, (q,))
    gq = min(h // h_kv, DM_ROWS) if mma else heads_per_group(h, h_kv)
    if chunk is not None:
        ch = int(chunk)
    else:
        ch = decode_mma_chunk(b, h // gq, s_max) if mma else decode_chunk(b, h // gq, s_max)
    if ch < 1:
        raise LaunchError(f"{fn}: chunk must be positive, got {ch}")
    nch = ceil_div(s_max, ch)
    if b * h // gq > 65535 or nch > 65535:
        raise LaunchError(f"{fn}: B*H/{gq} = {b * h // gq} groups or {nch} chunks exceed 65535")
    paged = paging[0] is not seq_lens
    direct = mma and nch == 1 and bool(MMA_PLAN["DIRECT"])
    part_o = unread(q, f32) if direct else empty_like(q, (b, h, nch, d), f32)
    part_lse = part_o if direct else empty_like(q, (b, h, nch), f32)
    if mma:
        threads = decode_mma_threads(MMA_PLAN["SUBS"])
        attention_decode_mma.variant(T=dt, D=d, SUBS=MMA_PLAN["SUBS"], STAGES=MMA_PLAN["STAGES"], PAGED=paged,
                                     PAR=bool(MMA_PLAN["PAR"]), DIRECT=direct,
                                     TABLE_AHEAD=paged and bool(MMA_PLAN["TABLE_AHEAD"])).launch(
            q, k, v, seq_lens, part_o, part_lse, out, h, h_kv, s_max, nch, ch, gq, _scale(scale, d), *paging,
            grid=(nch * threads, b * h // gq), group=(threads,), backend=backend)
        if direct:
            return out
    else:
        vec = vector_width(dt)
        tm = team_lanes(ch, d, vec, backend, (q,))
        split = attention_decode_split.variant(T=dt, VEC=vec, D=d, GQ=gq, U=keys_in_flight(gq, tm), TM=tm,
                                               PAGED=paged)
        split.launch(q, k, v, seq_lens, part_o, part_lse, h, h_kv, s_max, nch, ch, _scale(scale, d), *paging,
                     grid=(nch * DECODE_THREADS, b * h // gq), group=(DECODE_THREADS,), backend=backend)
    tiled = nch >= COMBINE_PLAN["tiled_from"]
    attention_decode_combine.variant(T=dt, TILED=tiled).launch(
        part_o, part_lse, out, h, d, nch, grid=combine_grid(h, d, b, tiled), group=(COMBINE_GROUP,), backend=backend)
    return out


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
    _launch_prefill("prefill_attention", bq, (q, k, v, out, unread(q, i32)), dt, d, s, s, b, h, h_kv, causal,
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
    :func:`prefill_attention`; block 128 (Hopper) copies keys in pieces of 128, 64 or 16 rows (the longest the page
    size is a multiple of), so it needs pages of a multiple of 16 keys (others run on block 64 there) and reads the
    rows of a sequence's last piece past seq_lens[b]: keep them finite (a zeroed pool, or older keys), as 0 * Inf
    is NaN."""
    fn = "prefill_attention_paged"
    dt = check_float(q, f"{fn}: q")
    if dt == f32:
        raise LaunchError(f"{fn}: the matrix-unit kernel takes f16 or bf16 (cast f32 inputs)")
    if len(shape_of(cu_seqlens)) != 1 or shape_of(cu_seqlens)[0] < 1:
        raise LaunchError(f"{fn}: cu_seqlens must be (B + 1,); got {shape_of(cu_seqlens)}")
    b = shape_of(cu_seqlens)[0] - 1
    pages, page, h_kv, width = _page_pool(fn, "q (T, H, D)", q, k_pages, v_pages, block_table, b)
    t, h, d = shape_of(q)
    _check_heads(h, h_kv, d, (64, 128, 256))
    check_shape(seq_lens, (b,), f"{fn}: seq_lens")
    for name, x, want in (("k_pages", k_pages, dt), ("v_pages", v_pages, dt), ("cu_seqlens", cu_seqlens, i32),
                          ("seq_lens", seq_lens, i32)):
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
            raise LaunchError(f"{fn}: block 128 copies keys in pieces of {PAGE_PIECE}, 64 or 128 rows, so pages "
                              f"must hold a multiple of {PAGE_PIECE} keys; got {page} (block 64 or 16 take any)")
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
        config = fa_config(d)
        piece = PAGE_PIECE if paging is None else max(p for p in (PAGE_PIECE, 64, 128)
                                                      if p <= config["BK"] and paging[2] % p == 0)
        tiles = ceil_div(longest, FA_BQ) * b * h
        persist = (config["PINGPONG"] and not varlen and paging is None and bool(causal) in FA_PERSIST_MASKS
                   and tiles > WS_SMS)
        grid = (min(tiles, WS_SMS) * FA_THREADS, 1) if persist else (ceil_div(longest, FA_BQ) * FA_THREADS, b * h)
        attention_prefill_ws.variant(T=dt, D=d, VARLEN=varlen, PAGED=paging is not None, PIECE=piece, PERSIST=persist,
                                     **config).launch(*tensors, rows, h, h_kv, b * h, kv_outer, *flags, *pages,
                                                      grid=grid, group=(FA_THREADS,), backend=backend)
    elif bq == 64:
        attention_prefill.variant(T=dt, D=d, BQ=64, VARLEN=varlen, PAGED=paging is not None).launch(
            *tensors, rows, h, h_kv, *flags, *pages, grid=(ceil_div(longest, 64) * 128, b * h), group=(128,),
            backend=backend)
    else:
        attention_prefill_small.variant(T=dt, D=d, VARLEN=varlen, PAGED=paging is not None).launch(
            *tensors, rows, h, h_kv, *flags, *pages, grid=(ceil_div(longest, SBQ) * SNT, b * h), group=(SNT,),
            backend=backend)


__all__ = ["append_paged_kv", "attention_decode_combine", "attention_decode_mma", "attention_decode_split",
           "attention_prefill", "attention_prefill_small", "decode_attention", "decode_attention_paged", "decode_chunk",
           "decode_mma_chunk", "decode_on_matrix_units", "heads_per_group",
           "keys_in_flight", "paged_kv_append", "prefill_attention", "prefill_attention_paged",
           "prefill_attention_varlen", "prefill_block", "team_lanes"]

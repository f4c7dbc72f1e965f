"""A few rows times a GGUF-quantised weight: C = A @ W^T for M <= 16 with W in Q8_0 or Q4_0, read once as its bytes.

A decode step of a batch (2 to 16 sequences) over a quantised model: quant_gemv serves one row; a batch would
otherwise need a float copy of every weight (twice the bytes of Q8_0 to read each step, and memory the model was
quantised to save).  This is gemm_few.py's structure with W's raw bytes in the ring: a group takes BN output
columns (rows of W) and the whole of K in steps of BK weights (BK / 32 blocks: whole 8-byte chunks of a row's
bytes at BK = 128 or 256 for both formats, so the bytes travel by asynchronous 8-byte copies, a u8 copy's widest,
where K % 128 == 0); each step's bytes are dequantised in shared memory to a BN x BK panel of T (gguf's ``d * q``
in f32, one rounding to T: the same weights as ``gguf.dequantize`` to T), which SPLIT subgroups multiply as gemm_few
does.  K-quants (Q4_K, Q6_K) keep the float copy (iron.models).  iron.models calls it where ``mma.sync`` runs and on
the interpreter; the tests run it on the interpreter and Vulkan too.
"""

from __future__ import annotations

from typing import Any

from iron import In, LaunchError, T, Tensor, bf16, f16, f32, func, kernel, u8, variants
from iron.jit.device import device_traits
from iron.lang import (barrier, copy_async, copy_async_commit, copy_async_wait, group_id, shared, simd_group_id,
                       static_range, thread_id)

from . import _host
from .gemm import PAD, acc_tile, stage_chunk
from .gemm_few import FEW_ROWS, SPLIT, few_step, stage_sums
from .gguf import bytes8, check_data, format_of, half_at, int_f32, store8

#: Formats the kernel reads (32-weight blocks: an f16 scale, then the weights).
QTYPES = ("Q8_0", "Q4_0")
#: (BN, BK, STAGES) of the host (the first: 256 weights a step, 272 bytes of a Q8_0 row, 144 of Q4_0), tuning
#: candidates (scripts/device/few_tune.py) and, last, the portable tests' (within Vulkan's 32 KiB of shared memory;
#: its K steps are not whole 8-byte chunks, so its bytes go byte by byte).  At least 3 stages: the ring holds the
#: step being multiplied, the one being dequantised and those in flight.
QFEW_CONFIGS = ((16, 256, 4), (32, 256, 4), (32, 128, 4), (64, 128, 4), (32, 256, 3), (16, 64, 3))


def qfew_fits(v: dict[str, Any]) -> bool:
    """a listed configuration, every thread copying 1 to 8 whole chunks of A's panel, subgroups whole fragments"""
    chunks = FEW_ROWS * v["BK"] / 8 / v["THREADS"]
    return ((v["BN"], v["BK"], v["STAGES"]) in QFEW_CONFIGS and chunks == int(chunks) and 1 <= chunks <= 8
            and v["BK"] % (16 * SPLIT) == 0)


@func
def block_bytes_of(qt):
    """Bytes of one 32-weight block of ``qt``."""
    nbytes = 34
    if qt == "Q4_0":
        nbytes = 18
    return nbytes


@func
def select_index(ok, i):
    """``i`` where ``ok``, else 0 (a copy that reads nothing still names an in-range, aligned source)."""
    j = 0
    if ok:
        j = i
    return j


@func
def dequant_panel(raw, at, w_s, w_at, lda, bn, bk, qt, tid, threads):
    """w_s[w_at + r * lda + e] = weight e of row r of the ring slot at raw[at ..] (bn rows of bk weights), in T."""
    nbytes = block_bytes_of(qt)
    sb = bk // 32 * nbytes
    if qt == "Q8_0":
        units = bk // 8  # 8 weights a unit: 4 a block
        for u in range(tid, bn * units, threads):
            r = u // units
            part = u % units
            base = at + r * sb + (part // 4) * 34
            d = half_at(raw, base)
            q = bytes8(raw, base + 2 + 8 * (part % 4))
            store8(w_s, w_at + r * lda + part * 8, d * int_f32(q ^ 128, 128))
    else:
        units = bk // 16  # 8 bytes a unit, 16 weights: 2 a block
        for u in range(tid, bn * units, threads):
            r = u // units
            part = u % units
            base = at + r * sb + (part // 2) * 18
            d = half_at(raw, base)
            q = bytes8(raw, base + 2 + 8 * (part % 2))
            o = w_at + r * lda + (part // 2) * 32 + 8 * (part % 2)
            store8(w_s, o, d * int_f32(q & 15, 8))
            store8(w_s, o + 16, d * int_f32(q >> 4, 8))


@kernel(variants(T=[bf16, f16], QT=list(QTYPES), BN=[16, 32, 64], BK=[256, 128, 64], STAGES=[4, 3, 6],
                 THREADS=[128, 256, 64, 32], where=[qfew_fits]), fp_contract=False)
def quant_gemm_few(data: In[u8], a: In[T], c: Tensor[T], m: int, n: int, k: int, ldc: int, col0: int,
                   fast: bool):
    """c[i, col0 + j] = sum_e A[i, e] W[j, e] for i < m <= 16, j < n, W the (n, k) weights quantised in ``data``.

    data: n rows of k / 32 QT blocks (Q8_0: f16 d, 32 x i8; Q4_0: f16 d, 16 bytes of nibble pairs), row-major;
    a: (m, k) row-major, T; c: rows of ``ldc`` elements, T, columns col0 .. col0 + n - 1 written.  k % 32 == 0.
    Each weight is gguf's ``d * q`` in f32 rounded once to T (``gguf.dequantize``'s), then as gemm_few:
    products exact, f32 sums, subgroup s < SPLIT adding fragments s, s + SPLIT, ... of each K step, the subgroups'
    sums added in order, one rounding to T.  ``fast``: the host's promise that data starts on an 8-byte boundary
    and :func:`fast_bytes` holds (a row's bytes, and a K step's, are whole 8-byte chunks): the bytes then travel by
    8-byte asynchronous copies.  Launch: grid (ceil(n / BN) * THREADS,), group (THREADS,), THREADS >= SPLIT * the
    subgroup width.
    """
    nbytes = block_bytes_of(QT)
    sb = BK // 32 * nbytes  # a row's bytes a K step
    rb = k // 32 * nbytes
    lda = BK + PAD
    a_stage = FEW_ROWS * lda
    raw_stage = BN * sb
    a_s = shared(T, STAGES * a_stage)
    raw = shared(u8, STAGES * raw_stage)
    w_stage = BN * lda
    w_s = shared(T, 2 * w_stage)  # two panels: step kt + 1's dequantised while step kt's is multiplied
    red_ld = BN + 4
    red = shared(f32, SPLIT * FEW_ROWS * red_ld)
    cpr = BK // 8
    a_chunks = FEW_ROWS * cpr // THREADS
    tid = thread_id(0)
    sg = simd_group_id()
    computes = sg < SPLIT
    bn = group_id(0) * BN
    fcols = BN // 8
    vec_a = k % 8 == 0
    (c0, c1, c2, c3, c4, c5, c6, c7, u10, u11, u12, u13, u14, u15, u16, u17, u20, u21, u22, u23, u24, u25, u26, u27,
     u30, u31, u32, u33, u34, u35, u36, u37) = acc_tile(16, 8)
    ktiles = (k + BK - 1) // BK
    for st in static_range(STAGES - 1):
        if st < ktiles:
            stage_step_q(a, a_s, st * a_stage, raw, st * raw_stage, data, st, bn, m, n, k, rb, sb, lda, cpr,
                         a_chunks, tid, THREADS, vec_a, fast, BK, BN)
        copy_async_commit()
    copy_async_wait(STAGES - 2)
    barrier()  # step 0's bytes landed for every thread
    dequant_panel(raw, 0, w_s, 0, lda, BN, BK, QT, tid, THREADS)
    for kt in range(ktiles):
        # Step kt + 1's bytes landed for every thread and step kt's panel is whole; every subgroup is done with
        # step kt - 1's panel (the other buffer, which step kt + 1's dequantisation now fills) and with the ring
        # slot step kt + STAGES - 1 now refills: one barrier a step, the dequantisation beside the multiplies.
        copy_async_wait(STAGES - 3)
        barrier()
        ahead = kt + STAGES - 1
        if ahead < ktiles:
            slot = ahead % STAGES
            stage_step_q(a, a_s, slot * a_stage, raw, slot * raw_stage, data, ahead, bn, m, n, k, rb, sb, lda, cpr,
                         a_chunks, tid, THREADS, vec_a, fast, BK, BN)
        copy_async_commit()
        if kt + 1 < ktiles:
            dequant_panel(raw, ((kt + 1) % STAGES) * raw_stage, w_s, ((kt + 1) % 2) * w_stage, lda, BN, BK, QT,
                          tid, THREADS)
        if computes:
            c0, c1, c2, c3, c4, c5, c6, c7 = few_step(a_s, (kt % STAGES) * a_stage, w_s, (kt % 2) * w_stage, lda, sg,
                                                      BK, fcols, c0, c1, c2, c3, c4, c5, c6, c7)
    copy_async_wait()
    stage_sums(red, red_ld, sg, computes, fcols, c0, c1, c2, c3, c4, c5, c6, c7)
    for e in range(tid, FEW_ROWS * BN, THREADS):
        row = e // BN
        col = e % BN
        if row < m and bn + col < n:
            total = red[row * red_ld + col]
            for s in static_range(1, SPLIT):
                total = total + red[s * FEW_ROWS * red_ld + row * red_ld + col]
            c[row * ldc + col0 + bn + col] = T(total)


@func
def stage_step_q(a, a_s, a_at, raw, raw_at, data, step, bn, m, n, k, rb, sb, lda, cpr, a_chunks, tid, threads, vec_a,
                 fast, bk, rows_bn):
    """Start copying K step ``step``'s A panel (16 x bk) and W's bytes (rows_bn rows of sb bytes)."""
    k0 = step * bk
    for ch in static_range(a_chunks):
        q = tid + ch * threads
        stage_chunk(a_s, a_at + (q // cpr) * lda + (q % cpr) * 8, a, k, q // cpr, k0 + (q % cpr) * 8, m, k, vec_a)
    stage_bytes(raw, raw_at, data, bn, step * sb, sb, rb, n, tid, threads, fast, rows_bn)


@func
def stage_bytes(raw, at, data, row, first, sb, rb, rows, tid, threads, fast, bn):
    """Start copying bytes first .. first + sb of W's rows row .. row + bn - 1 (``rows`` of them exist; rows ``rb``
    bytes long) into raw[at ..] (rows ``sb`` apart); bytes past a row's end or past the last row are 0.
    ``fast``: 8-byte asynchronous copies (``data`` and its rows on 8-byte boundaries, ``sb`` whole chunks: the
    widest a u8 copy moves); else byte by byte, at once."""
    if fast:
        cps = sb // 8
        for q in range(tid, bn * cps, threads):
            r = q // cps
            off = first + (q % cps) * 8
            ok = row + r < rows and off < rb
            copy_async(raw, at + r * sb + (q % cps) * 8, data, select_index(ok, (row + r) * rb + off), 8, ok)
    else:
        for q in range(tid, bn * sb, threads):
            r = q // sb
            off = first + q % sb
            v = u8(0)
            if row + r < rows and off < rb:
                v = data[(row + r) * rb + off]
            raw[at + q] = v


def fast_bytes(k: int, bk: int, nbytes: int) -> bool:
    """Whether W's rows and K steps are whole 8-byte chunks (K a multiple of 128, a step's bytes of 8), so its bytes
    may travel by 8-byte copies (``quant_gemm_few``'s ``fast``, with ``data`` on an 8-byte boundary)."""
    return k % 128 == 0 and bk // 32 * nbytes % 8 == 0


#: Output columns from which the host's binding takes 32 columns a group and K steps of 128 weights.
QFEW_WIDE_FROM = 8192


def qfew_config(n: int, lanes: int = 32) -> dict[str, int]:
    """The host's binding for N output columns: 16 columns a group and K steps of 256 weights, or from
    QFEW_WIDE_FROM columns 32 and 128; 4 stages, SPLIT subgroups.  Measured on an H100 at 16 rows
    (benchmarks/h100-few-2026-12-07b.jsonl): 4096 columns of Q8_0 / Q4_0 26.6 / 20.0 us against 35.7 / 27.6 for
    the wide binding (fewer than two groups an SM); 28672 columns 125.0 / 84.0 against 135.7 / 101.8."""
    bn, bk, stages = QFEW_CONFIGS[2] if n >= QFEW_WIDE_FROM else QFEW_CONFIGS[0]
    return {"BN": bn, "BK": bk, "STAGES": stages, "THREADS": SPLIT * lanes}


def quant_few(data: Any, qtype: str, a: Any, n: int, out: Any, col0: int = 0, backend: str | None = None,
              binding: dict[str, int] | None = None) -> Any:
    """out[:, col0 : col0 + n] = a @ W^T for a (m, k), 1 <= m <= 16, W the (n, k) weights ``data`` holds in
    ``qtype`` (Q8_0 or Q4_0); out (m, ldc) of a's dtype (f16 / bf16), contiguous.  Returns ``out``."""
    if qtype not in QTYPES:
        raise LaunchError(f"quant_few: {qtype} is not one of {', '.join(QTYPES)} (K-quants: dequantise, then gemm)")
    dt = _host.check_float(a, "quant_few: a")
    if dt not in (f16, bf16):
        raise LaunchError(f"quant_few: a must be f16 or bf16 (the matrix units' inputs), got {dt.name}")
    shape = _host.shape_of(a)
    if len(shape) != 2 or not 1 <= shape[0] <= FEW_ROWS:
        raise LaunchError(f"quant_few: a must be (m, k) with 1 <= m <= {FEW_ROWS}, got shape {shape}")
    m, k = shape
    fmt = format_of(qtype)
    if k % fmt.block:
        raise LaunchError(f"quant_few: K = {k} is not a whole number of {fmt.block}-weight {qtype} blocks")
    check_data(data, fmt, n, k, "quant_few")
    oshape = _host.shape_of(out)
    if len(oshape) != 2 or oshape[0] != m or col0 < 0 or col0 + n > oshape[1]:
        raise LaunchError(f"quant_few: out must be ({m}, >= {col0 + n}) for columns {col0} .. {col0 + n - 1}, got "
                          f"{oshape}")
    if _host.dtype_of(out, "quant_few: out") != dt:
        raise LaunchError(f"quant_few: out must be {dt.name} like a")
    if not (_host.is_contiguous(a) and _host.is_contiguous(out)):
        raise LaunchError("quant_few: a and out must be contiguous (row-major); pass .contiguous() copies")
    if _host.overlaps(out, a) or _host.overlaps(out, data):
        raise LaunchError("quant_few: out shares memory with a or data; give it a buffer of its own")
    from .gemv import aligned

    cfg = binding or qfew_config(n, device_traits(backend, (a,)).lane_width)
    fast = fast_bytes(k, cfg["BK"], fmt.nbytes) and aligned(data, boundary=8)
    kern = quant_gemm_few.variant(T=dt, QT=qtype, **cfg)
    kern.launch(data, a, out, m, n, k, oshape[1], col0, fast, grid=(-(-n // cfg["BN"]) * cfg["THREADS"],),
                group=(cfg["THREADS"],), backend=backend)
    return out


__all__ = ["QFEW_CONFIGS", "QFEW_WIDE_FROM", "QTYPES", "fast_bytes", "qfew_config", "quant_few", "quant_gemm_few"]

"""GGUF block-quantised weights (llama.cpp's Q8_0, Q4_0, Q4_K, Q6_K): their layouts and dequantisation.

A quantised (rows, K) matrix is ``rows * K / block`` blocks stored back to back, row-major: each
row is ``row_bytes(qtype, K)`` bytes, bit-compatible with llama.cpp's ``block_q8_0`` / ``block_q4_0``
/ ``block_q4_K`` / ``block_q6_K`` (little-endian f16 scales).  The kernels read the raw bytes as a
``Tensor[u8]``: f16 fields are assembled from two bytes and bitcast, because a block's alignment
inside the buffer is only what its size allows (2 bytes for the 34-, 18- and 210-byte blocks, 16
for Q4_K's 144), so every load is as wide as that alignment and no wider.  ``dequantize(data,
"Q4_K", (rows, K))`` launches the matching kernel (docs/std/gguf.md); :mod:`iron.std.quant_gemv`
multiplies by the quantised matrix without expanding it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from iron import In, LaunchError, T, Tensor, bf16, f16, f32, func, kernel, u8, u16, u32, variants
from iron.lang import bitcast, cast, grid_size, program_id, static_range, vec

from ..core import dtypes as D
from . import _host
from ._plans import planned

#: Threads per group of the dequantisation kernels.
GROUP = 256
#: Vulkan caps a grid axis at 65535 groups; the kernels loop over their work past that.
MAX_GROUPS = 65535


@dataclass(frozen=True)
class Format:
    """One GGUF block format: ``block`` weights stored in ``nbytes`` bytes; ``units`` threads' worth of
    work per block in the dequantisation kernel, and the byte alignment every block start has."""

    name: str
    block: int
    nbytes: int
    units: int
    align: int


FORMATS: dict[str, Format] = {
    "Q8_0": Format("Q8_0", 32, 34, 4, 2),     # f16 d, 32 x i8
    "Q4_0": Format("Q4_0", 32, 18, 2, 2),     # f16 d, 16 bytes: low nibbles 0..15, high 16..31
    "Q4_K": Format("Q4_K", 256, 144, 4, 16),  # f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 of nibbles
    "Q6_K": Format("Q6_K", 256, 210, 8, 2),   # 128 bytes ql, 64 qh, 16 x i8 scales, f16 d
}


def format_of(qtype: str) -> Format:
    """The :class:`Format` named ``qtype`` ("Q8_0", "Q4_0", "Q4_K", "Q6_K"); a LaunchError otherwise."""
    fmt = FORMATS.get(qtype) if isinstance(qtype, str) else None
    if fmt is None:
        raise LaunchError(f"unknown GGUF quantisation {qtype!r}: expected one of {', '.join(FORMATS)}")
    return fmt


def block_size(qtype: str) -> int:
    """Weights per block: 32 (Q8_0, Q4_0) or 256 (the K-quants' super-blocks)."""
    return format_of(qtype).block


def block_bytes(qtype: str) -> int:
    """Bytes per block: 34 (Q8_0), 18 (Q4_0), 144 (Q4_K), 210 (Q6_K)."""
    return format_of(qtype).nbytes


def row_bytes(qtype: str, k: int) -> int:
    """Bytes of one quantised row of ``k`` weights (``k`` a multiple of the block size)."""
    fmt = format_of(qtype)
    if k <= 0 or k % fmt.block:
        raise LaunchError(f"{qtype}: a row of {k} weights is not a whole number of {fmt.block}-weight blocks")
    return k // fmt.block * fmt.nbytes


# ---------------------------------------------------------------- helpers shared with quant_gemv

@func
def half_at(data, i):
    """The little-endian f16 at byte ``i`` (even) of ``data``, widened to f32."""
    b = data.load(i, width=2)
    return f32(bitcast(u16(b[0]) | (u16(b[1]) << 8), f16))


@func
def int_f32(q, bias):
    """``f32(q - bias)`` exactly, for unsigned ``q`` < 2**23 and a constant ``bias``, without an int->float
    conversion (a quarter-rate instruction on NVIDIA): the bits ``0x4B000000 | q`` are the float 2**23 + q."""
    return bitcast(u32(q) | 0x4B000000, f32) - (8388608.0 + bias)


@func
def bytes8(data, i):
    """Bytes ``i .. i + 8`` of ``data`` (``i`` even) as a u8 vector, in four 2-byte loads."""
    a = data.load(i, width=2)
    b = data.load(i + 2, width=2)
    c = data.load(i + 4, width=2)
    d = data.load(i + 6, width=2)
    return vec(a[0], a[1], b[0], b[1], c[0], c[1], d[0], d[1])


@func
def store8(out, o, v):
    """The f32 8-vector ``v`` rounded once to ``out``'s dtype and stored at ``out[o .. o + 8]`` (``o`` a
    multiple of 8) in 16-byte stores: two for f32, one for f16/bf16."""
    if out.dtype is f32:
        out.store(o, vec(v[0], v[1], v[2], v[3]))
        out.store(o + 4, vec(v[4], v[5], v[6], v[7]))
    else:
        out.store(o, cast(v, out.dtype))


@func
def q4k_scale_min(v0, v1, v2, s):
    """Q4_K's 6-bit scale and min of sub-block ``s`` (a constant, 0..7) from the 12 packed bytes
    (``v0``, ``v1``, ``v2``: bytes 0-3, 4-7, 8-11), as exact f32.  Sub-blocks 0-3 keep theirs in the low 6
    bits of bytes s and s + 4; 4-7 split theirs: low 4 bits in byte s + 4's nibbles, high 2 bits in the
    top bits of bytes s - 4 (scale) and s (min)."""
    if s < 4:
        sc = v0[s] & 63
        m = v1[s] & 63
    else:
        sc = (v2[s - 4] & 15) | ((v0[s - 4] >> 6) << 4)
        m = (v2[s - 4] >> 4) | ((v1[s - 4] >> 6) << 4)
    return int_f32(sc, 0), int_f32(m, 0)


# ---------------------------------------------------------------- dequantisation kernels

@kernel(variants(T=[f32, f16, bf16]), fp_contract=False)
def dequant_q8_0(data: In[u8], out: Tensor[T], units: int):
    """out = dequantised Q8_0: ``out[b * 32 + k] = d_b * q_bk`` for every block b, in f32, rounded once to T.

    data: ``units / 4`` blocks of 34 bytes (f16 d, 32 x i8 q), back to back (rows of K / 32 blocks,
    row-major); out: the (rows, K) result, contiguous, T in f32/f16/bf16.  units = 4 * blocks.
    Thread u (grid-strided) writes weights 8 (u % 4) .. + 8 of block u // 4 in 16-byte stores.
    The product is the single f32 rounding of gguf's ``d * q``: f32 output equals gguf's dequantize
    exactly, f16/bf16 is its round-to-nearest-even.  Non-finite: an Inf/NaN d gives d * q as IEEE
    does (NaN where q = 0).
    """
    for u in range(program_id(0), units, grid_size(0)):
        blk = u // 4
        part = u % 4
        base = blk * 34
        d = half_at(data, base)
        q = bytes8(data, base + 2 + 8 * part)
        store8(out, blk * 32 + 8 * part, d * int_f32(q ^ 128, 128))


@kernel(variants(T=[f32, f16, bf16]), fp_contract=False)
def dequant_q4_0(data: In[u8], out: Tensor[T], units: int):
    """out = dequantised Q4_0: ``out[b * 32 + k] = d_b * (q_bk - 8)``, in f32, rounded once to T.

    data: ``units / 2`` blocks of 18 bytes (f16 d, then 16 bytes whose low nibbles are weights 0..15
    and high nibbles 16..31), back to back, row-major; out: (rows, K) contiguous, T in f32/f16/bf16.
    units = 2 * blocks.  Thread u (grid-strided) reads 8 bytes of block u // 2 and writes weights
    8 h .. + 8 and 16 + 8 h .. + 8 (h = u % 2).  f32 output equals gguf's dequantize exactly (one
    product); f16/bf16 is its round-to-nearest-even.  Non-finite: an Inf/NaN d propagates as IEEE
    products do (NaN where q = 8).
    """
    for u in range(program_id(0), units, grid_size(0)):
        blk = u // 2
        part = u % 2
        base = blk * 18
        d = half_at(data, base)
        q = bytes8(data, base + 2 + 8 * part)
        o = blk * 32 + 8 * part
        store8(out, o, d * int_f32(q & 15, 8))
        store8(out, o + 16, d * int_f32(q >> 4, 8))


@kernel(variants(T=[f32, f16, bf16]), fp_contract=False)
def dequant_q4_k(data: In[u8], out: Tensor[T], units: int):
    """out = dequantised Q4_K: weight 32 s + k of a super-block is ``(d sc_s) q - (dmin m_s)``.

    data: ``units / 4`` super-blocks of 144 bytes (f16 d, f16 dmin, 12 bytes packing eight 6-bit
    scales sc_s and mins m_s, 128 bytes of nibbles: byte 32 j + l holds weight 64 j + l in its low
    nibble and 64 j + 32 + l in its high one), back to back, row-major; the buffer 8-byte aligned.
    out: (rows, K) contiguous, T in f32/f16/bf16.  units = 4 * super-blocks.  Thread u (grid-strided)
    reads 8-byte column l = 8 (u % 4) of each of the four 32-byte nibble chunks and writes 64 weights.
    Arithmetic as gguf's (no fused multiply-add): ``d * sc``, ``dmin * m``, the product with q, the
    difference, each rounded in f32, so f32 output equals gguf's dequantize exactly; f16/bf16 is its
    round-to-nearest-even.  Non-finite: Inf/NaN in d or dmin propagates as IEEE arithmetic does.
    """
    for u in range(program_id(0), units, grid_size(0)):
        sb = u // 4
        col = 8 * (u % 4)
        base = sb * 144
        head = data.load(base, width=4)
        d = f32(bitcast(u16(head[0]) | (u16(head[1]) << 8), f16))
        dmin = f32(bitcast(u16(head[2]) | (u16(head[3]) << 8), f16))
        v0 = data.load(base + 4, width=4)
        v1 = data.load(base + 8, width=4)
        v2 = data.load(base + 12, width=4)
        for j in static_range(4):
            q = data.load(base + 16 + 32 * j + col, width=8)
            sc_lo, m_lo = q4k_scale_min(v0, v1, v2, 2 * j)
            sc_hi, m_hi = q4k_scale_min(v0, v1, v2, 2 * j + 1)
            o = sb * 256 + 64 * j + col
            store8(out, o, (d * sc_lo) * int_f32(q & 15, 0) - dmin * m_lo)
            store8(out, o + 32, (d * sc_hi) * int_f32(q >> 4, 0) - dmin * m_hi)


@kernel(variants(T=[f32, f16, bf16]), fp_contract=False)
def dequant_q6_k(data: In[u8], out: Tensor[T], units: int):
    """out = dequantised Q6_K: weight w of a super-block is ``(d sc_{w // 16}) (q_w - 32)``, q 6 bits.

    data: ``units / 8`` super-blocks of 210 bytes: ql[128] (byte 64 n + l: low nibble of weight
    128 n + l, high nibble of 128 n + 64 + l, l < 64), qh[64] (byte 32 n + l: bits 2t..2t+1 are the top
    bits of weight 128 n + 32 t + l), 16 x i8 scales, f16 d; back to back, row-major.  out: (rows, K)
    contiguous, T in f32/f16/bf16.  units = 8 * super-blocks.  Thread u (grid-strided) takes half
    n = (u % 8) // 4 and columns l = 8 (u % 4) .. + 8, writing weights 128 n + 32 t + l for t < 4.
    Arithmetic as gguf's: ``d * sc`` (exact), then its product with q - 32 rounded once in f32, so f32
    output equals gguf's dequantize exactly; f16/bf16 is its round-to-nearest-even.  Non-finite: an
    Inf/NaN d propagates as IEEE products do.
    """
    for u in range(program_id(0), units, grid_size(0)):
        sb = u // 8
        half = (u % 8) // 4
        col = 8 * (u % 4)
        base = sb * 210
        d = half_at(data, base + 208)
        qa = bytes8(data, base + 64 * half + col)
        qb = bytes8(data, base + 64 * half + 32 + col)
        qh = bytes8(data, base + 128 + 32 * half + col)
        first = base + 192 + 8 * half + col // 16
        o = sb * 256 + 128 * half + col
        for t in static_range(4):
            if t == 0:
                q = (qa & 15) | ((qh & 3) << 4)
            elif t == 1:
                q = (qb & 15) | (((qh >> 2) & 3) << 4)
            elif t == 2:
                q = (qa >> 4) | (((qh >> 4) & 3) << 4)
            else:
                q = (qb >> 4) | ((qh >> 6) << 4)
            sc = int_f32(data[first + 2 * t] ^ 128, 128)
            store8(out, o + 32 * t, (d * sc) * int_f32(q, 32))


KERNELS = {"Q8_0": dequant_q8_0, "Q4_0": dequant_q4_0, "Q4_K": dequant_q4_k, "Q6_K": dequant_q6_k}


# ---------------------------------------------------------------- host

def check_data(data: Any, fmt: Format, rows: int, k: int, what: str) -> None:
    """``data`` must be a u8 array of exactly ``rows`` quantised rows of ``k`` weights, aligned as the
    format's kernels load it (checked where the address is visible: device arrays)."""
    dt = _host.dtype_of(data, f"{what}: data")
    if dt != D.u8:
        raise LaunchError(f"{what}: data must hold the raw bytes as uint8, got {dt.name}")
    want = rows * row_bytes(fmt.name, k)
    got = _host.size_of(data)
    if got != want:
        raise LaunchError(f"{what}: {rows} row(s) of {k} {fmt.name} weights are {want} bytes, data has {got}")
    if want >= 1 << 31:
        raise LaunchError(f"{what}: {want} bytes; the kernels index with i32 (< 2**31)")
    address = _device_address(data)
    need = 8 if fmt.name == "Q4_K" else 2
    if address is not None and address % need:
        raise LaunchError(f"{what}: {fmt.name} data must start on a {need}-byte boundary (it is at {address:#x})")


def _device_address(x: Any) -> int | None:
    try:  # torch raises more than AttributeError for tensors that cannot export it (host, autograd)
        interface = getattr(x, "__cuda_array_interface__", None)
    except Exception:
        return None
    if isinstance(interface, dict) and interface.get("data"):
        return int(interface["data"][0])
    return None


@planned
def dequantize(data: Any, qtype: str, shape: int | tuple[int, ...], dtype: Any = f32, out: Any = None,
               backend: str | None = None) -> Any:
    """The (..., K) float array that the quantised bytes ``data`` hold, in ``dtype`` (f32, f16, bf16).

    ``data``: uint8, ``rows * row_bytes(qtype, K)`` bytes (any shape, contiguous), where ``shape`` ends in
    K (a multiple of the block size) and rows is the product of its other extents.  Writes ``out`` when
    given (that shape and dtype), else returns a new array like ``data`` (same kind and device).
    """
    fmt = format_of(qtype)
    shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    if not shape or any(s < 0 for s in shape):
        raise LaunchError(f"dequantize: bad shape {shape}")
    k = shape[-1]
    rows = math.prod(shape[:-1])
    if k <= 0 or k % fmt.block:
        raise LaunchError(f"dequantize: {qtype} rows hold whole blocks of {fmt.block} weights; K = {k} is not "
                          f"a positive multiple of {fmt.block}")
    check_data(data, fmt, rows, k, "dequantize")
    if rows * k >= 1 << 31:
        raise LaunchError(f"dequantize: {rows * k} weights; the kernels index with i32 (< 2**31)")
    dtype = _host.float_dtype(dtype, "dequantize")
    out = _host.output("dequantize", out, data, shape, dtype, {"data": data})
    if rows == 0:
        return out
    units = rows * (k // fmt.block) * fmt.units
    grid = min(units, MAX_GROUPS * GROUP)
    KERNELS[fmt.name].variant(T=dtype).launch(data, out, units, grid=(grid,), group=(GROUP,), backend=backend)
    return out


__all__ = ["FORMATS", "Format", "KERNELS", "block_bytes", "block_size", "bytes8", "check_data", "dequant_q4_0",
           "dequant_q4_k", "dequant_q6_k", "dequant_q8_0", "dequantize", "format_of", "half_at", "int_f32",
           "q4k_scale_min", "row_bytes", "store8"]

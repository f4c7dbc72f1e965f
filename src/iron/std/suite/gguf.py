"""Tests and benches of iron.std.gguf: dequantisation of Q8_0, Q4_0, Q4_K and Q6_K against the ``gguf``
package (llama.cpp's own Python reader, a test dependency: ``pip install gguf==0.19.0``).

The oracle is ``gguf.quants.dequantize`` of the very bytes the kernel reads, rounded to the output
dtype.  Its arithmetic is the kernels' (f32 products and differences in the same order, no fused
multiply-add: the kernels are compiled with ``fp_contract=False``), so f32 outputs compare exactly and
f16/bf16 outputs must be exactly its round-to-nearest-even (one rounding).

Inputs are real-looking weights (normal, a few large outliers, a row of zeros, a block whose largest
magnitude is negative, a super-block of non-negative values) quantised to the format, with every
fourth block then replaced by random bytes (finite random scales) so that every bit of every field is
exercised, the Q4_K 6-bit scales' high bits included.  gguf 0.19 quantises Q8_0 and Q4_0 but not the
K-quants, so Q4_K and Q6_K are packed here (a plain absmax quantiser written from the layout); the
oracle never uses those packers, only gguf's decoder.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iron import EXACT, Setup, bench, test_kernel
from iron.core import dtypes as D

from ..gguf import FORMATS, GROUP, KERNELS, MAX_GROUPS, row_bytes

#: Where each format keeps its f16 scales (byte offsets in a block): random blocks get finite ones there.
SCALE_FIELDS = {"Q8_0": (0,), "Q4_0": (0,), "Q4_K": (0, 2), "Q6_K": (208,)}
#: Above this many weights a setup draws random blocks only (the quantisers are numpy, slow at 16M).
REALISTIC_LIMIT = 1 << 20

# Rows M by blocks per row B: one block; an odd row count; enough units that G = 1 (a grid of one
# group) makes every thread loop (grid-stride); a long row.
SHAPES = [{"M": 1, "B": 1}, {"M": 3, "B": 2}, {"M": 5, "B": 7}, {"M": 9, "B": 12, "G": 1}, {"M": 2, "B": 33}]
BENCH_SHAPES = {"interp": [{"M": 64, "K": 1024}], "vulkan": [{"M": 1024, "K": 4096}], "*": [{"M": 4096, "K": 4096}]}


def gguf_quants() -> Any:
    """``gguf.quants`` and its type enum, imported on first use (the package is a test dependency)."""
    try:
        import gguf
        import gguf.quants
    except ImportError:
        raise RuntimeError("the GGUF oracle needs the gguf package: pip install 'gguf==0.19.0' "
                           "(pyproject's test extra)") from None
    return gguf


def reference_dequantize(data: np.ndarray, qtype: str) -> np.ndarray:
    """gguf's f32 dequantisation of the bytes ``data`` (rows of whole blocks), shape (rows, K)."""
    gguf = gguf_quants()
    raw = np.ascontiguousarray(data, dtype=np.uint8)
    rows = raw.reshape(-1, raw.shape[-1]) if raw.ndim > 1 else raw.reshape(1, -1)
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite scales give NaN/Inf, as they should
        return gguf.quants.dequantize(rows, getattr(gguf.GGMLQuantizationType, qtype))


# ---------------------------------------------------------------- test data

def realistic_weights(rng: np.random.Generator, rows: int, k: int, block: int) -> np.ndarray:
    """Normal weights with the features real checkpoints have and quantisers trip on."""
    w = rng.standard_normal((rows, k)).astype(np.float32)
    n = rows * k
    spots = rng.choice(n, size=max(1, n // 400), replace=False)
    w.reshape(-1)[spots] *= rng.uniform(6.0, 12.0, size=spots.size).astype(np.float32)  # outliers
    if rows >= 2:
        w[1] = 0.0                                                  # a row of zeros
    last = w[-1, :block]
    last[block // 3] = -8.0 * np.abs(last).max()                    # a block whose max |w| is negative
    if k >= 2 * block:
        w[0, block:2 * block] = np.abs(w[0, block:2 * block])       # a block with nothing below zero
    return w


def pack_q4_k(w: np.ndarray) -> np.ndarray:
    """Q4_K super-blocks of ``w`` (n, 256): per 32-weight sub-block an absmax scale and min, quantised to
    6 bits against the super-block's f16 d and dmin, weights to 4 bits; packed as block_q4_K."""
    x = w.reshape(-1, 8, 32).astype(np.float32)
    low = np.minimum(x.min(axis=-1), 0.0)
    scale = (x.max(axis=-1) - low) / 15.0
    mins = -low
    d = (scale.max(axis=-1) / 63.0).astype(np.float16)
    dmin = (mins.max(axis=-1) / 63.0).astype(np.float16)
    with np.errstate(divide="ignore", invalid="ignore"):
        d32, dmin32 = d[:, None].astype(np.float32), dmin[:, None].astype(np.float32)
        sc = np.where(d32 > 0, np.rint(scale / d32), 0).clip(0, 63).astype(np.uint8)
        m = np.where(dmin32 > 0, np.rint(mins / dmin32), 0).clip(0, 63).astype(np.uint8)
        step = d32 * sc
        offset = dmin32 * m
        q = np.where(step[..., None] > 0, np.rint((x + offset[..., None]) / step[..., None]), 0).clip(0, 15)
    q = q.astype(np.uint8)
    scales = np.concatenate([sc[:, :4] | ((sc[:, 4:] >> 4) << 6), m[:, :4] | ((m[:, 4:] >> 4) << 6),
                             (sc[:, 4:] & 15) | ((m[:, 4:] & 15) << 4)], axis=1)
    nibbles = (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(-1, 128)     # chunk j: sub-blocks 2j (low), 2j+1 (high)
    return np.concatenate([d.reshape(-1, 1).view(np.uint8), dmin.reshape(-1, 1).view(np.uint8), scales, nibbles],
                          axis=1)


def pack_q6_k(w: np.ndarray) -> np.ndarray:
    """Q6_K super-blocks of ``w`` (n, 256): per 16-weight sub-block a signed scale (its absmax element maps
    to -32), quantised to i8 against the super-block's f16 d, weights to 6 bits; packed as block_q6_K."""
    x = w.reshape(-1, 16, 16).astype(np.float32)
    peak = np.take_along_axis(x, np.abs(x).argmax(axis=-1)[..., None], axis=-1)[..., 0]
    s = peak / -32.0
    d = (np.abs(s).max(axis=-1) / 127.0).astype(np.float16)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.rint(s / d[:, None].astype(np.float32)), 0).clip(-128, 127)
        step = d[:, None].astype(np.float32) * sc
        q = np.where(step[..., None] != 0, np.rint(x / step[..., None]), 0) + 32
    q = q.clip(0, 63).astype(np.uint8).reshape(-1, 2, 128)
    ql = ((q[:, :, :64] & 15) | ((q[:, :, 64:] & 15) << 4)).reshape(-1, 128)
    hi = (q >> 4).reshape(-1, 2, 4, 32)
    qh = (hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)).reshape(-1, 64)
    return np.concatenate([ql, qh, sc.astype(np.int8).view(np.uint8), d.reshape(-1, 1).view(np.uint8)], axis=1)


def quantize(w: np.ndarray, qtype: str) -> np.ndarray:
    """``w`` (rows, K) as ``qtype`` bytes (rows, row_bytes): gguf's quantiser for Q8_0/Q4_0, ours for the
    K-quants (gguf 0.19 has none)."""
    rows, k = w.shape
    if qtype in ("Q4_K", "Q6_K"):
        blocks = (pack_q4_k if qtype == "Q4_K" else pack_q6_k)(w.reshape(-1, 256))
        return np.ascontiguousarray(blocks.reshape(rows, row_bytes(qtype, k)))
    gguf = gguf_quants()
    return np.ascontiguousarray(gguf.quants.quantize(w, getattr(gguf.GGMLQuantizationType, qtype)))


def randomize_blocks(data: np.ndarray, qtype: str, rng: np.random.Generator, every: int = 4) -> np.ndarray:
    """Blocks ``every - 1``, ``2 every - 1``, ... (in storage order) replaced by random bytes whose f16
    scale fields are finite (normal * 0.05, either sign); in place, returned."""
    fmt = FORMATS[qtype]
    blocks = data.reshape(-1, fmt.nbytes)
    chosen = blocks[every - 1::every]
    if chosen.shape[0]:
        chosen[:] = rng.integers(0, 256, size=chosen.shape, dtype=np.uint8)
        for at in SCALE_FIELDS[qtype]:
            scales = (rng.standard_normal(chosen.shape[0]) * 0.05).astype(np.float16)
            chosen[:, at:at + 2] = scales.reshape(-1, 1).view(np.uint8)
        blocks[every - 1::every] = chosen
    return data


def make_data(rng: np.random.Generator, qtype: str, rows: int, k: int) -> np.ndarray:
    """Quantised test bytes (rows, row_bytes): real-looking weights with every fourth block random; past
    REALISTIC_LIMIT weights, random blocks only (as a bench needs: the values do not change the timing)."""
    fmt = FORMATS[qtype]
    if rows * k > REALISTIC_LIMIT:
        data = np.empty((rows, row_bytes(qtype, k)), np.uint8)
        return randomize_blocks(data, qtype, rng, every=1)
    data = quantize(realistic_weights(rng, rows, k, fmt.block), qtype)
    return randomize_blocks(data, qtype, rng)


def extents(case: Any, block: int) -> tuple[int, int]:
    """(rows, K) of a case: K given directly or as B blocks."""
    rows = int(case["M"])
    k = int(case.shape["K"]) if "K" in case.shape else int(case.shape["B"]) * block
    return rows, k


# ---------------------------------------------------------------- references

def _torch_dequantize(qtype: str, data: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """The torch ops a user would compose on the GPU to dequantise (gguf's arithmetic, op by op)."""
    import torch

    fmt = FORMATS[qtype]
    b = data.reshape(-1, fmt.nbytes)

    def half(at: int) -> Any:
        return b[:, at:at + 2].contiguous().view(torch.float16).float()

    if qtype == "Q8_0":
        w = half(0) * b[:, 2:].view(torch.int8).float()
    elif qtype == "Q4_0":
        qs = b[:, 2:]
        q = torch.cat([qs & 15, qs >> 4], dim=1).to(torch.int8) - 8
        w = half(0) * q.float()
    elif qtype == "Q4_K":
        s = b[:, 4:16].reshape(-1, 3, 4)
        lo, mid, top = s[:, 0], s[:, 1], s[:, 2]
        sc = torch.cat([lo & 63, (top & 15) | ((lo >> 6) << 4)], dim=1).float()
        m = torch.cat([mid & 63, (top >> 4) | ((mid >> 6) << 4)], dim=1).float()
        qs = b[:, 16:].reshape(-1, 4, 1, 32)
        q = torch.cat([qs & 15, qs >> 4], dim=2).reshape(-1, 8, 32).float()
        w = (half(0) * sc).unsqueeze(-1) * q - (half(2) * m).unsqueeze(-1)
    else:
        ql = b[:, :128].reshape(-1, 2, 1, 64)
        ql = torch.cat([ql & 15, ql >> 4], dim=2).reshape(-1, 8, 32)
        qh = b[:, 128:192].reshape(-1, 2, 1, 32)
        qh = torch.cat([qh & 3, (qh >> 2) & 3, (qh >> 4) & 3, qh >> 6], dim=2).reshape(-1, 8, 32)
        q = ((ql | (qh << 4)).to(torch.int8) - 32).reshape(-1, 16, 16).float()
        sc = b[:, 192:208].view(torch.int8).float()
        w = (half(208) * sc).unsqueeze(-1) * q
    return w.reshape(shape).to(dtype)


def _dequant_torch(qtype: str) -> Any:
    def reference(data, out, units):
        return _torch_dequantize(qtype, data, tuple(out.shape), out.dtype)

    reference.__name__ = f"dequantize_{qtype.lower()}"
    return reference


def _dequant_numpy(qtype: str) -> Any:
    def reference(data, out, units):
        return reference_dequantize(data, qtype).reshape(out.shape).astype(out.dtype)

    reference.__name__ = f"gguf_dequantize_{qtype.lower()}"
    return reference


# ---------------------------------------------------------------- registrations

def _dequant_setup(qtype: str) -> Any:
    fmt = FORMATS[qtype]

    def setup(case):
        rows, k = extents(case, fmt.block)
        units = rows * (k // fmt.block) * fmt.units
        groups = int(case.shape["G"]) if "G" in case.shape else min(-(-units // GROUP), MAX_GROUPS)
        np_dtype = D.numpy_dtype(case.T)

        def oracle(data, out, units):
            # gguf's f32 values, rounded once to T (numpy / ml_dtypes: round to nearest even)
            return reference_dequantize(data, qtype).reshape(rows, k).astype(np_dtype)

        return Setup(args=[make_data(case.rng, qtype, rows, k), case.empty(rows, k), units], grid=groups * GROUP,
                     group=GROUP, oracle=oracle, tolerance=EXACT)

    setup.__name__ = f"dequant_{qtype.lower()}_setup"
    return setup


SETUPS = {}
for _qtype, _kernel in KERNELS.items():
    _name = f"std/gguf/dequant_{_qtype.lower()}"
    SETUPS[_qtype] = bench(_kernel, shapes=BENCH_SHAPES, name=_name,
                           reference={"cuda": _dequant_torch(_qtype), "*": _dequant_numpy(_qtype)})(
        test_kernel(_kernel, shapes=SHAPES, name=_name)(_dequant_setup(_qtype)))


__all__ = ["BENCH_SHAPES", "REALISTIC_LIMIT", "SCALE_FIELDS", "SETUPS", "SHAPES", "extents", "gguf_quants",
           "make_data", "pack_q4_k", "pack_q6_k", "quantize", "randomize_blocks", "realistic_weights",
           "reference_dequantize"]

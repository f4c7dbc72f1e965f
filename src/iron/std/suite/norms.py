"""Tests and benches of :mod:`iron.std.norms`: float64 oracles, tolerances from the rounding chain.

As in the softmax suite, the register kernels are tested at 8 registers per thread (a group holds
2048 elements of every dtype) and the long-row kernels from one past that.  Rows cycle through four
profiles: unit scale; scale 1e-3 (the variance at eps's size: dropping eps shows); scale 10; and unit
scale shifted far (|mean| >> std: E[x^2] - E[x]^2 cancels away the variance; by 1e4 in f32, whose
24 bits leave the deviations 10, and by 100 in f16/bf16, which have 11 and 8 bits).
"""

from __future__ import annotations

import numpy as np

from iron import Depth, Expect, Setup, bench, f32, log2_ceil, test_kernel
from iron.core import dtypes as D
from iron.std import norms as N
from iron.std.softmax import GROUP, MAX_GROUPS, register_items

from .softmax import REGISTER_BINDINGS, TEST_CAP, TEST_GROUPS, VECTORS, sum_depth

REGISTER_SHAPES = [(4, 1), (3, 7), (6, 1001), (40, 96), (4, TEST_CAP)]
LONG_SHAPES = [(4, 1), (3, 7), (40, 96), (4, TEST_CAP + 1), (4, 5000), (4, 6001)]
BENCH_SHAPES = {"interp": [(64, 1024)], "vulkan": [(512, 4096)],
                "*": [(4096, 4096), (16384, 4096), (4096, 16384)]}
#: (scale, shift) per row, cycled; FAR is the shift of the last profile per dtype.
PROFILES = ((1.0, 0.0), (1e-3, 0.0), (10.0, 0.0), (1.0, "FAR"))
FAR = {"f32": 1e4, "f16": 100.0, "bf16": 100.0}
LN_EPS = 1e-5
RMS_EPS = 1e-6


def rows_input(case, rows: int, n: int) -> np.ndarray:
    """(rows, n) inputs in the case's dtype, row r drawn with PROFILES[r % 4]."""
    scale = np.resize(np.array([p[0] for p in PROFILES]), rows)[:, None]
    shifts = [FAR[case.T.name] if p[1] == "FAR" else p[1] for p in PROFILES]
    shift = np.resize(np.array(shifts), rows)[:, None]
    z = case.randn(rows, n, dtype=f32).astype(np.float64)
    return (z * scale + shift).astype(D.numpy_dtype(case.T))


def f32_eps(eps: float) -> float:
    return float(np.float32(eps))


# ---------------------------------------------------------------- oracles (float64)

def layernorm_oracle(x, w, b, n: int, eps: float, has_bias: bool) -> Expect:
    x = x.reshape(-1, n)
    mean = x.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + f32_eps(eps))
    bias = b if has_bias else np.zeros_like(b)
    y = (x - mean) * rstd * w + bias
    # x - mean carries the mean's error, relative to the row's mean |x| (a sum's error is relative
    # to its terms), then rstd and weight scale it; the bias adds its own |b|.
    terms = np.abs(x).mean(axis=1, keepdims=True)
    return Expect(y.reshape(-1), ((np.abs(x) + terms) * rstd * np.abs(w) + np.abs(bias)).reshape(-1))


def rms_oracle(h, w, n: int, eps: float) -> Expect:
    h = h.reshape(-1, n)
    y = h / np.sqrt((h * h).mean(axis=1, keepdims=True) + f32_eps(eps)) * w
    return Expect(y.reshape(-1))


# ---------------------------------------------------------------- depths (rounding chains)

def layernorm_depth(k: int, w: int) -> Depth:
    # mean: the group sum, / n; var: x - mean, the square, the group sum, / n, + eps, rsqrt (2);
    # y: * rstd, * weight, + bias.
    return Depth(steps=1, f32_steps=(sum_depth(k, w) + 1) + (2 + sum_depth(k, w) + 1 + 1 + 2) + 3)


def layernorm_long_depth(n: int, vec: int, aligned: bool, w: int) -> Depth:
    # Welford merges: per thread one per chunk (scalar: one per element), then log2(W) butterfly
    # merges and one per subgroup; a merge rounds ~5 times (d, f, d*f, the adds). A chunk's own
    # statistics: its sum (vec - 1), / vec, the deviations and their squares' sum (vec + 1).
    merges = (-(-n // (GROUP * vec)) if aligned else -(-n // GROUP)) + log2_ceil(w) + -(-GROUP // w)
    chunk = 2 * vec + 1 if aligned else 0
    return Depth(steps=1, f32_steps=5 * merges + chunk + (1 + 1 + 2) + 3)


def rms_depth(k: int, w: int) -> Depth:
    # the square, the group sum, / n, + eps, rsqrt (2), * rstd, * weight.
    return Depth(steps=1, f32_steps=1 + sum_depth(k, w) + 1 + 1 + 2 + 2)


def rms_long_depth(n: int, vec: int, aligned: bool, w: int) -> Depth:
    chunks = -(-n // (GROUP * vec)) if aligned else -(-n // GROUP)
    # per thread: the square, the chunk's tree (log2 vec), the sequential add per chunk; then the group.
    thread = 1 + (log2_ceil(vec) if aligned else 0) + chunks
    return Depth(steps=1, f32_steps=thread + sum_depth(1, w) + 1 + 1 + 2 + 2)


# ---------------------------------------------------------------- setups

def _layernorm_setup(case, long: bool, has_bias: bool, groups_cap: int, items: int | None = None) -> Setup:
    rows, n = case.dims
    vec = case["VEC"]
    x = rows_input(case, rows, n)
    weight = case.randn(n, shift=1.0)
    bias = case.randn(n)
    aligned = n % vec == 0
    depth = (layernorm_long_depth(n, vec, aligned, case.simd_width) if long
             else layernorm_depth(vec * (items or case["ITEMS"]), case.simd_width))
    return Setup(args=[x, weight, bias, case.empty(rows, n), rows, n, np.float32(LN_EPS), has_bias, aligned],
                 grid=min(rows, groups_cap) * GROUP, group=GROUP,
                 oracle=lambda x, w, b, out, rows, n, eps, hb, al: layernorm_oracle(x, w, b, n, LN_EPS, hb),
                 outputs=["out"], depth=depth, binding={"ITEMS": items} if items else {},
                 bytes_moved=(2 * rows + (2 if has_bias else 1)) * n * case.T.itemsize, flops=8 * rows * n)


def _rms_setup(case, long: bool, groups_cap: int, items: int | None = None) -> Setup:
    rows, n = case.dims
    vec = case["VEC"]
    add = case["ADD"]
    x = rows_input(case, rows, n)
    residual = rows_input(case, rows, n) if add else case.empty(1)
    weight = case.randn(n, shift=1.0)
    h = case.empty(rows, n) if add else case.empty(1)
    aligned = n % vec == 0
    depth = (rms_long_depth(n, vec, aligned, case.simd_width) if long
             else rms_depth(vec * (items or case["ITEMS"]), case.simd_width))
    dtype = D.numpy_dtype(case.T)

    def oracle(x, residual, w, out, h, rows, n, eps, aligned):
        if not add:
            return {"out": rms_oracle(x, w, n, RMS_EPS)}
        exact = x + residual
        # out is the norm of the h the kernel returns: h rounded to T (the contract), normalised.
        rounded = exact.astype(dtype).astype(np.float64)
        return {"out": rms_oracle(rounded, w, n, RMS_EPS),
                "h": Expect(exact.reshape(-1), (np.abs(x) + np.abs(residual)).reshape(-1))}

    return Setup(args=[x, residual, weight, case.empty(rows, n), h, rows, n, np.float32(RMS_EPS), aligned],
                 grid=min(rows, groups_cap) * GROUP, group=GROUP, oracle=oracle,
                 outputs=["out", "h"] if add else ["out"], poison=["out", "h"] if add else ["out"],
                 depth=depth, binding={"ITEMS": items} if items else {},
                 bytes_moved=((4 if add else 2) * rows * n + n) * case.T.itemsize, flops=(4 if add else 3) * rows * n)


def _with(bindings: list[dict], **more) -> list[dict]:
    return [{**b, **more} for b in bindings]


@test_kernel(N.layernorm_rows, shapes=REGISTER_SHAPES, bindings=REGISTER_BINDINGS, name="std/norms/layernorm")
def layernorm_test(case) -> Setup:
    return _layernorm_setup(case, False, True, TEST_GROUPS)


@test_kernel(N.layernorm_rows, shapes=[(3, 7), (6, 1001), (4, TEST_CAP)], bindings=REGISTER_BINDINGS,
             name="std/norms/layernorm_nobias")
def layernorm_nobias_test(case) -> Setup:
    return _layernorm_setup(case, False, False, TEST_GROUPS)


@test_kernel(N.layernorm_rows_long, shapes=LONG_SHAPES, bindings=VECTORS, name="std/norms/layernorm_long")
def layernorm_long_test(case) -> Setup:
    return _layernorm_setup(case, True, case.dims[0] % 2 == 0, TEST_GROUPS)


@test_kernel(N.rmsnorm_rows, shapes=REGISTER_SHAPES, bindings=_with(REGISTER_BINDINGS, ADD=False),
             name="std/norms/rmsnorm")
def rmsnorm_test(case) -> Setup:
    return _rms_setup(case, False, TEST_GROUPS)


@test_kernel(N.rmsnorm_rows, shapes=REGISTER_SHAPES, bindings=_with(REGISTER_BINDINGS, ADD=True),
             name="std/norms/add_rmsnorm")
def add_rmsnorm_test(case) -> Setup:
    return _rms_setup(case, False, TEST_GROUPS)


@test_kernel(N.rmsnorm_rows_long, shapes=LONG_SHAPES, bindings=_with(VECTORS, ADD=False),
             name="std/norms/rmsnorm_long")
def rmsnorm_long_test(case) -> Setup:
    return _rms_setup(case, True, TEST_GROUPS)


@test_kernel(N.rmsnorm_rows_long, shapes=LONG_SHAPES, bindings=_with(VECTORS, ADD=True),
             name="std/norms/add_rmsnorm_long")
def add_rmsnorm_long_test(case) -> Setup:
    return _rms_setup(case, True, TEST_GROUPS)


# ---------------------------------------------------------------- benches

def _torch_layernorm(x, w, b, out, rows, n, eps, has_bias, aligned):
    import torch

    return torch.nn.functional.layer_norm(x.reshape(rows, n), (n,), w, b if has_bias else None, float(eps))


def _torch_rms(x, w, eps):
    import torch

    if hasattr(torch.nn.functional, "rms_norm"):  # torch >= 2.4
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, float(eps))
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + float(eps))).to(x.dtype) * w


def _torch_rmsnorm(x, residual, w, out, h, rows, n, eps, aligned):
    return _torch_rms(x.reshape(rows, n), w, eps)


def _torch_add_rmsnorm(x, residual, w, out, h, rows, n, eps, aligned):
    hs = x.reshape(rows, n) + residual.reshape(rows, n)
    return _torch_rms(hs, w, eps), hs


def _np_norm(x, w, b, eps, centre: bool):
    x32 = x.astype(np.float32)
    if centre:
        x32 = x32 - x32.mean(axis=-1, keepdims=True)
    y = x32 / np.sqrt((x32 * x32).mean(axis=-1, keepdims=True) + np.float32(eps)) * w.astype(np.float32)
    return (y + b.astype(np.float32) if b is not None else y).astype(x.dtype)


def _numpy_layernorm(x, w, b, out, rows, n, eps, has_bias, aligned):
    return _np_norm(x.reshape(rows, n), w, b if has_bias else None, eps, True)


def _numpy_rmsnorm(x, residual, w, out, h, rows, n, eps, aligned):
    return _np_norm(x.reshape(rows, n), w, None, eps, False)


def _numpy_add_rmsnorm(x, residual, w, out, h, rows, n, eps, aligned):
    hs = (x.astype(np.float32) + residual.astype(np.float32)).astype(x.dtype).reshape(rows, n)
    return _np_norm(hs, w, None, eps, False), hs


def _items(case) -> int:
    items = register_items(case.dims[1], case["VEC"])
    if items is None:
        raise ValueError(f"a row of {case.dims[1]} does not fit the register kernels")
    return items


@bench(N.layernorm_rows, shapes=BENCH_SHAPES, bindings=VECTORS,
       reference={"cuda": _torch_layernorm, "*": _numpy_layernorm}, name="std/norms/layernorm")
def layernorm_bench(case) -> Setup:
    return _layernorm_setup(case, False, True, MAX_GROUPS, _items(case))


@bench(N.rmsnorm_rows, shapes=BENCH_SHAPES, bindings=_with(VECTORS, ADD=False),
       reference={"cuda": _torch_rmsnorm, "*": _numpy_rmsnorm}, name="std/norms/rmsnorm")
def rmsnorm_bench(case) -> Setup:
    return _rms_setup(case, False, MAX_GROUPS, _items(case))


@bench(N.rmsnorm_rows, shapes=BENCH_SHAPES, bindings=_with(VECTORS, ADD=True),
       reference={"cuda": _torch_add_rmsnorm, "*": _numpy_add_rmsnorm}, name="std/norms/add_rmsnorm")
def add_rmsnorm_bench(case) -> Setup:
    return _rms_setup(case, False, MAX_GROUPS, _items(case))

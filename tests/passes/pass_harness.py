"""Shared helpers for the pass tests: build kernels, run them before and after a pass, compare bits."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from iron.codegen.pipeline import PassContext
from iron.core import dtypes as D
from iron.core.ir import Kernel
from iron.core.printer import print_kernel
from iron.core.types import ScalarType
from iron.core.verifier import verify
from iron.runtime.interp import run

I32, F32, BOOL = ScalarType(D.i32), ScalarType(D.f32), ScalarType(D.bool_)
INTERP = PassContext()


def run_kernel(k: Kernel, args: Sequence[np.ndarray], grid: Any, group: Any = None,
               simd_width: int | None = None) -> list[np.ndarray]:
    """Run on the interpreter with copies of ``args``; return the copies (written in place)."""
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    if group is None:
        group = grid if isinstance(grid, tuple) else (min(int(grid), 64),)
    run(k, copies, grid if isinstance(grid, tuple) else (int(grid),), group, simd_width=simd_width)
    return copies


def assert_same_bits(expected: np.ndarray, got: np.ndarray, what: str = "") -> None:
    """Equal bit for bit, except that any NaN matches any NaN (IEEE leaves NaN payloads open)."""
    assert expected.dtype == got.dtype and expected.shape == got.shape, what
    if expected.dtype.kind == "f" or expected.dtype.name == "bfloat16":
        e64, g64 = expected.astype(np.float64), got.astype(np.float64)
        both_nan = np.isnan(e64) & np.isnan(g64)
        width = expected.dtype.itemsize
        bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
        same = (expected.view(bits) == got.view(bits)) | both_nan
    else:
        same = expected == got
    if not same.all():
        i = int(np.flatnonzero(~same.reshape(-1))[0])
        raise AssertionError(f"{what}: element {i} differs: expected {expected.reshape(-1)[i]!r}, "
                             f"got {got.reshape(-1)[i]!r}")


def apply_pass(fn: Callable[[Kernel, PassContext], Kernel], k: Kernel, ctx: PassContext = INTERP,
               stage: str = "test") -> Kernel:
    """Run one pass, check that its input is unchanged and its output verifies."""
    before = print_kernel(k)
    out = fn(k, ctx)
    assert print_kernel(k) == before, "the pass changed its input kernel"
    verify(out, stage=stage)
    return out


def check_preserves(fn: Callable[[Kernel, PassContext], Kernel], k: Kernel, args: Sequence[np.ndarray], grid: Any,
                    group: Any = None, ctx: PassContext = INTERP, simd_width: int | None = None) -> Kernel:
    """Apply the pass and check the interpreter gives identical outputs before and after."""
    out = apply_pass(fn, k, ctx)
    expected = run_kernel(k, args, grid, group, simd_width)
    got = run_kernel(out, args, grid, group, simd_width)
    for i, (e, g) in enumerate(zip(expected, got)):
        if isinstance(e, np.ndarray):
            assert_same_bits(e, g, f"argument {i} after the pass")
    return out


def count_ops(k: Kernel, opcode: str) -> int:
    return sum(1 for op in k.walk() if op.opcode == opcode)


def special_values(dt: D.DType) -> np.ndarray:
    """Values that break inexact rewrites: signed zeros, infinities, NaN, extremes, wrap-around."""
    npdt = D.numpy_dtype(dt)
    if dt.is_float:
        fi = np.finfo(np.float32) if dt.name == "bf16" else np.finfo(npdt)
        vals = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 3.0, -7.25, np.inf, -np.inf, np.nan, float(fi.max),
                -float(fi.max), float(fi.tiny), float(fi.tiny) / 4, 1e-3, 1234.5]
        with np.errstate(over="ignore"):
            return np.array(vals, dtype=np.float64).astype(npdt)
    if dt.is_bool:
        return np.array([False, True, True, False], dtype=npdt)
    info = np.iinfo(npdt)
    vals = [0, 1, 2, 3, 7, 8, 100, info.max, info.max - 1, info.min, info.min + 1]
    if dt.is_signed:
        vals += [-1, -2, -8, -100]
    return np.array(vals, dtype=np.int64 if dt.is_signed else np.uint64).astype(npdt)

"""Iron's quickstart: four kernels written afresh, run on the best backend present, checked against numpy.

Run:  python examples/quickstart.py      (after scripts/setup.sh, or with PYTHONPATH=src)
"""

from __future__ import annotations

import time

import ml_dtypes
import numpy as np

import iron
from iron import In, T, Tensor, bf16, f16, f32, kernel, variants
from iron.lang import (barrier, exp, group_id, group_size, load, program_id, shared, simd_sum, store,
                       thread_id, atomic_add, lane_id)

GROUP = 256


@kernel(variants(T=[f32, f16, bf16]))
def iron_exp(a: Tensor[T], out: Tensor[T]):
    idx = program_id(0)
    store(out[idx], exp(load(a[idx])))


@kernel(variants(T=[f32, f16, bf16]))
def group_sum(x: In[T], partial: Tensor[f32], n: int):
    """One f32 partial sum per group of GROUP threads: a tree through shared memory."""
    tid = thread_id(0)
    i = program_id(0)
    buf = shared(f32, GROUP)
    v = 0.0
    if i < n:
        v = f32(x[i])
    buf[tid] = v
    barrier()
    stride = GROUP // 2
    while stride > 0:
        if tid < stride:
            buf[tid] = buf[tid] + buf[tid + stride]
        barrier()
        stride //= 2
    if tid == 0:
        partial[group_id(0)] = buf[0]


@kernel
def subgroup_sum(x: In[f32], total: Tensor[f32], n: int):
    """Each subgroup adds its lanes with simd_sum; lane 0 adds that into the total."""
    i = program_id(0)
    v = 0.0
    if i < n:
        v = x[i]
    s = simd_sum(v)
    if lane_id() == 0:
        atomic_add(total, 0, s)


@kernel(variants(T=[f32, f16], SCALE=[2, 3]))
def scaled_copy(a: In[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = a[i] * SCALE


def _check(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float = 0.0) -> tuple[str, bool, float]:
    err = float(np.max(np.abs(got.astype(np.float64) - want) / (np.abs(want) + atol + 1e-30))) if got.size else 0.0
    ok = bool(np.allclose(got.astype(np.float64), want, rtol=rtol, atol=atol))
    return name, ok, err


def main() -> int:
    rng = np.random.default_rng()
    rows = []
    n = 1_000_003
    for dt, rtol in ((np.float32, 2e-6), (np.float16, 1e-3), (ml_dtypes.bfloat16, 8e-3)):
        a = rng.standard_normal(n).astype(dt)
        out = np.full_like(a, np.nan)
        t0 = time.perf_counter()
        iron_exp[a.size](a, out)
        dt_s = time.perf_counter() - t0
        name, ok, err = _check(f"iron_exp {np.dtype(dt).name} n={n} ({dt_s * 1e3:.0f} ms)", out,
                               np.exp(a.astype(np.float64)), rtol)
        rows.append((name, ok, err))

    n = 100_000
    x = rng.standard_normal(n).astype(np.float16)
    groups = -(-n // GROUP)
    partial = np.full(groups, np.nan, np.float32)
    group_sum.launch(x, partial, n, grid=(groups * GROUP,), group=(GROUP,))
    rows.append(_check("group_sum f16 (shared + barrier)", np.array([partial.sum(dtype=np.float64)]),
                       np.array([x.astype(np.float64).sum()]), rtol=1e-4, atol=1e-2))

    x32 = rng.standard_normal(n).astype(np.float32)
    total = np.zeros(1, np.float32)
    subgroup_sum[n](x32, total, n)
    rows.append(_check("subgroup_sum f32 (simd_sum + atomic)", total, np.array([x32.astype(np.float64).sum()]),
                       rtol=1e-4, atol=1e-2))

    a = rng.standard_normal(4097).astype(np.float16)
    out = np.empty_like(a)
    scaled_copy.variant(T=f16, SCALE=3)[a.size](a, out)
    rows.append(_check("scaled_copy[T=f16, SCALE=3] (two variants)", out, a.astype(np.float64) * 3, rtol=1e-3))

    width = max(len(r[0]) for r in rows)
    print(f"{'kernel':<{width}}  ok  max rel err   (backend: {iron.runtime.resolve_backend()})")
    for name, ok, err in rows:
        print(f"{name:<{width}}  {'✓' if ok else '✗'}   {err:.2e}")
    return 0 if all(r[1] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

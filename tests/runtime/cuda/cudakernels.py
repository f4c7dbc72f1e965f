"""Small kernels for the CUDA runtime tests, and their IR after the cuda pass pipeline."""

from __future__ import annotations

from typing import Any

from iron import In, Tensor, f16, f32, i32, kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.core.ir import Kernel
from iron.lang import (async_barriers, barrier, barrier_arrive, barrier_wait, copy_tile, group_id,
                       program_id, shared, thread_id)


@kernel
def axpy(x: In[f32], y: Tensor[f32], a: f32, n: int):
    i = program_id(0)
    if i < n:
        y[i] = a * x[i] + y[i]


@kernel
def add(x: In[f32], y: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = x[i] + y[i]


@kernel
def scale_into(out: Tensor[f32], x: In[f32]):
    i = program_id(0)
    out[i] = 2.0 * x[i]


@kernel
def muladd(a: In[f32], b: In[f32], c: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = a[i] * b[i] + c[i]


@kernel
def half_scale(x: Tensor[f16], s: f16, k: i32):
    i = program_id(0)
    if i < x.size:
        x[i] = x[i] * s + f16(k)


@kernel
def reverse_in_groups(x: Tensor[f32]):
    tile = shared(f32, (64,))
    t = thread_id(0)
    base = group_id(0) * 64
    tile[t] = x[base + t]
    barrier()
    x[base + t] = tile[63 - t]


@kernel
def reverse_far_apart(x: Tensor[f32]):
    """reverse_in_groups through the two ends of 64 KiB of shared memory: past CUDA's static 48 KiB."""
    tile = shared(f32, (16384,))
    t = thread_id(0)
    base = group_id(0) * 64
    tile[t * 256] = x[base + t]
    barrier()
    x[base + t] = tile[(63 - t) * 256]


@kernel
def tile_rows(a: In[f16], out: Tensor[f16], m: int, r0: int):
    """One group copies the 16 x 64 tile at row r0 of the m x 64 matrix ``a`` into ``out`` through shared memory
    (a tile copy: TMA with a tensor map on sm_90); rows past m read as zeros."""
    full = async_barriers(1)
    s = shared(f16, 16 * 64)
    t = thread_id(0)
    if t == 0:
        copy_tile(s, 0, a, (m, 64), (r0, 0), (16, 64), full, 0, layout="rows")
        barrier_arrive(full, 0, 16 * 64 * 2)
    barrier_wait(full, 0, 0)
    for e in range(t, 16 * 64, 32):
        out[e] = s[e]


def ir(k: Any, **overrides: Any) -> Kernel:
    """``k``'s IR after the cuda pipeline (``overrides``: PassContext fields, e.g. fp_contract=False)."""
    spec = k.variant() if hasattr(k, "variant") else k
    return run_pipeline(spec.ir, PassContext.for_target("cuda", **overrides))

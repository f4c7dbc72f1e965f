"""Warp roles on a real NVIDIA GPU: a producer warpgroup feeding two consumer warpgroups through a ring of
tile copies and asynchronous barriers, with register budgets (setmaxnreg on sm_90), against numpy and the
interpreter.  A wrong budget direction hangs or faults, a wrong parity reads a stale slot, a wrong role
barrier races: each shows as wrong sums here."""

from __future__ import annotations

import numpy as np
import pytest

from iron import In, Tensor, f32, kernel, variants
from iron.codegen.emit import emit_kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.lang import (async_barriers, barrier_arrive, barrier_wait, copy_tile, role_barrier, shared, thread_id,
                       warp_roles)

ROWS, COLS, SLOTS, STEPS = 16, 16, 3, 11
CONSUMERS = ROWS * COLS  # one element of a tile per consumer thread


@kernel(variants(BUDGETS=[True, False]))
def tma_ring(a: In[f32], out: Tensor[f32]):
    """Thread 0 of role 0 copies tile k (rows 16k.. of the (16 STEPS) x 16 matrix ``a``) into ring slot k % SLOTS
    and announces its bytes; each role-1 thread waits for the slot, adds (k + 1) times its element, and
    releases it.  Role 1 then reverses its sums through shared memory behind its role barrier."""
    full = async_barriers(SLOTS, 1)
    empty = async_barriers(SLOTS, CONSUMERS)
    ring = shared(f32, SLOTS * ROWS * COLS)
    sums = shared(f32, CONSUMERS)
    role = warp_roles((128, CONSUMERS), registers=(40, 232) if BUDGETS else None)
    t = thread_id(0)
    if role == 0:
        if t == 0:
            for k in range(STEPS):
                s = k % SLOTS
                barrier_wait(empty, s, ((k // SLOTS) & 1) ^ 1)
                copy_tile(ring, s * ROWS * COLS, a, (ROWS * STEPS, COLS), (k * ROWS, 0), (ROWS, COLS), full, s,
                          layout="rows")
                barrier_arrive(full, s, ROWS * COLS * 4)
    else:
        j = t - 128
        acc = f32(0.0)
        for k in range(STEPS):
            s = k % SLOTS
            barrier_wait(full, s, (k // SLOTS) & 1)
            acc += f32(k + 1) * ring[s * ROWS * COLS + j]
            barrier_arrive(empty, s)
        sums[j] = acc
        role_barrier()
        out[j] = sums[CONSUMERS - 1 - j]


@pytest.mark.parametrize("budgets", [True, False], ids=["budgets", "no_budgets"])
def test_a_warp_specialised_tile_ring_matches_numpy_and_the_interpreter(cuda, budgets) -> None:
    if "tma" not in cuda.profile.features:
        pytest.skip(f"tile copies through TMA need sm_90, this GPU is {cuda.arch}")
    k = tma_ring.variant(BUDGETS=budgets)
    # Small integers: every product and sum is exact, so a contracted multiply-add (CUDA) gives the same bits.
    a = np.random.default_rng(3).integers(-64, 64, ROWS * STEPS * COLS).astype(np.float32)
    ir = run_pipeline(k.lower(a, np.zeros(CONSUMERS, np.float32)), PassContext.for_target("cuda"))
    source = emit_kernel(ir, "cuda", cuda.profile).source
    assert ("setmaxnreg.dec.sync.aligned.u32 40;" in source) == budgets
    assert "cp.async.bulk.tensor" in source
    got = np.zeros(CONSUMERS, np.float32)
    k.launch(a, got, grid=(384,), group=(384,), backend="cuda")
    interp = np.zeros(CONSUMERS, np.float32)
    k.launch(a, interp, grid=(384,), group=(384,), backend="interp")
    tiles = a.reshape(STEPS, ROWS * COLS)
    want = np.zeros(CONSUMERS, np.float32)
    for step in range(STEPS):
        want += np.float32(step + 1) * tiles[step]
    np.testing.assert_array_equal(interp, want[::-1])
    np.testing.assert_array_equal(got, want[::-1])

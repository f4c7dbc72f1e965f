"""Clusters on a real NVIDIA GPU (sm_90): pairs and quadruples of groups each copying a piece of every tile into
all of them (TMA multicast), releasing ring slots on each other's barriers (remote arrivals), against numpy and
the interpreter.  A wrong multicast mask leaves a piece out (a hang, which the device's watchdog reports), a
release that misses a group lets a peer overwrite a slot under its readers: wrong sums here."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lang"))
from test_clusters import COLS, ROWS, STEPS, THREADS, _want, cluster_ring  # noqa: E402


@pytest.mark.parametrize("c", [1, 2, 4])
def test_a_cluster_ring_matches_numpy_and_the_interpreter(cuda, c) -> None:
    if "clusters" not in cuda.profile.features:
        pytest.skip(f"clusters need sm_90, this GPU is {cuda.arch}")
    k = cluster_ring.variant(C=c, MISUSE="none")
    # Small integers: every product and sum is exact, so a contracted multiply-add (CUDA) gives the same bits.
    a = np.random.default_rng(c).integers(-64, 64, (STEPS * ROWS, COLS)).astype(np.float32)
    groups = 8
    got = np.zeros((groups * ROWS, COLS), np.float32)
    k.launch(a, got, STEPS * ROWS, grid=(groups * THREADS,), group=(THREADS,), backend="cuda")
    interp = np.zeros_like(got)
    k.launch(a, interp, STEPS * ROWS, grid=(groups * THREADS,), group=(THREADS,), backend="interp")
    np.testing.assert_array_equal(interp, _want(a, groups))
    np.testing.assert_array_equal(got, _want(a, groups))

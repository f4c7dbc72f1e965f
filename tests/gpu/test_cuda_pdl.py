"""Programmatic dependent launches (the ``pdl`` option, docs/cuda.md) on a real sm_90+ GPU: chains of kernels that
each read what the one before wrote give exact results launched early, eagerly, through the generated launchers
and in a captured graph; skips where there is no GPU, or it is older than sm_90."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from gpu_device import open_cuda

from iron import In, Tensor, config, f32, i32, kernel
from iron.lang import group_id, thread_id
from iron.runtime.cuda.arch import sm_number

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime" / "cuda"))
from cudakernels import ir  # noqa: E402

#: Launches in a chain: long enough that a kernel reading before its predecessor finished would be caught.
CHAIN = 400


@kernel
def step(src: In[f32], dst: Tensor[f32], n: i32):
    """dst[i] = src[(i + 1) % n] + 1: each element depends on another group's element of the previous launch, so
    a launch that starts reading before the one before has written reads a stale value somewhere."""
    i = group_id(0) * 256 + thread_id(0)
    if i < n:
        dst[i] = src[(i + 1) % n] + 1.0


@pytest.fixture(autouse=True)
def _pdl_on():
    """The option on in every test (conftest clears options set in code before each; the one test of the option
    off sets it off inside)."""
    with config.scoped("pdl", True):
        yield


@pytest.fixture(scope="module")
def chained(tmp_path_factory):
    dev = open_cuda(tmp_path_factory)
    if sm_number(dev.arch) < 90:
        dev.close()
        pytest.skip(f"programmatic dependent launch needs sm_90, this GPU is {dev.arch}")
    yield dev
    dev.close()


STEP = ir(step)


def _launch_steps(dev, a, b, n: int, launches: int) -> None:
    for j in range(launches):
        src, dst = (a, b) if j % 2 == 0 else (b, a)
        dev.launch(STEP, [src, dst, n], ((n + 255) // 256 * 256,), (256,))


def _chain(dev, n: int, launches: int):
    a = dev.to_device(np.zeros(n, np.float32))
    b = dev.to_device(np.zeros(n, np.float32))
    _launch_steps(dev, a, b, n, launches)
    return (b if launches % 2 else a).numpy()


@pytest.mark.parametrize("n", [256, 1 << 16, 1 << 22])
def test_a_chain_of_dependent_launches_is_exact(chained, n):
    got = _chain(chained, n, CHAIN)
    np.testing.assert_array_equal(got, np.full(n, CHAIN, np.float32))
    plan = chained._plans[id(STEP)]
    assert plan.chained, "the option is on, the GPU is sm_90+ and the kernel waits: its launches are chained"
    assert plan.fast is not None, "the chain went through the generated launcher"


def test_a_captured_chain_replays_exactly(chained):
    n = 1 << 20
    a = chained.to_device(np.zeros(n, np.float32))
    b = chained.to_device(np.zeros(n, np.float32))
    chained.begin_capture()
    _launch_steps(chained, a, b, n, 64)
    graph = chained.end_capture()
    for _ in range(3):
        chained.graph_launch(graph)
    chained.synchronize()
    np.testing.assert_array_equal(a.numpy(), np.full(n, 3 * 64, np.float32))
    assert chained._plans[id(STEP)].chained, "the captured launches were programmatic dependent launches"
    graph.close()


def test_the_option_off_launches_plainly(tmp_path_factory):
    with config.scoped("pdl", False):
        dev = open_cuda(tmp_path_factory)
        try:
            got = _chain(dev, 4096, 8)
            np.testing.assert_array_equal(got, np.full(4096, 8, np.float32))
            assert not dev._plans[id(STEP)].chained
        finally:
            dev.close()

"""The ``cuda`` device (iron.runtime.cuda) on a real NVIDIA GPU; skips cleanly where there is none.

numpy, torch, CuPy and CudaArray arguments, in-place launches, the fast path, CUDA graphs, event
timing, the pools, ahead-of-time builds and the ``fmad`` gate each run for real (the corpus:
test_cuda_corpus.py).  The host side of all of it is also covered without a GPU in tests/runtime/cuda/.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gpu_device import open_cuda

from iron.core.errors import LaunchError


# The kernels the host-side tests use too (tests/runtime/cuda/cudakernels.py); the corpus runs in test_cuda_corpus.py.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime" / "cuda"))
from cudakernels import add, axpy, ir, muladd, reverse_far_apart, reverse_in_groups  # noqa: E402


# ------------------------------------------------------------ arguments
def test_numpy_arguments_in_place_and_through_iron_lang(cuda):
    x = np.arange(1000, dtype=np.float32)
    y = np.ones(1000, np.float32)
    cuda.launch(ir(axpy), [x, y, 2.0, 900], (1000,), (128,))
    np.testing.assert_array_equal(y[:900], 2 * x[:900] + 1)
    np.testing.assert_array_equal(y[900:], 1)
    z = np.arange(256, dtype=np.float32)
    cuda.launch(ir(add), [z, z, z], (256,), (256,))
    np.testing.assert_array_equal(z, 2 * np.arange(256))
    out = np.zeros(256, np.float32)
    add[256](np.ones(256, np.float32), np.full(256, 2, np.float32), out, backend="cuda")
    np.testing.assert_array_equal(out, 3)
    with pytest.raises(LaunchError, match="overlap without being the same buffer"):
        cuda.launch(ir(add), [z[1:], z[:-1].copy(), z[:-1]], (255,), (256,))


def test_pools_are_reused(cuda):
    kir = ir(add)
    a, b, out = (np.ones(5000, np.float32) for _ in range(3))
    cuda.launch(kir, [a, b, out], (5000,), (256,))
    before = cuda.cache_stats["device_pool"]["allocations"]
    for _ in range(10):
        cuda.launch(kir, [a, b, out], (5000,), (256,))
    assert cuda.cache_stats["device_pool"]["allocations"] == before


def test_shared_memory_past_48_kib_runs_dynamic(cuda):
    """64 KiB of shared memory: the driver refuses such a launch unless the function opted in."""
    x = cuda.to_device(np.arange(256, dtype=np.float32))
    kir = ir(reverse_far_apart)
    for _ in range(3):  # the general path, then the fast launcher
        cuda.launch(kir, [x], (256,), (64,))
    want = np.arange(256, dtype=np.float32).reshape(4, 64)[:, ::-1].ravel()
    np.testing.assert_array_equal(x.numpy(), want)
    assert cuda._plans[id(kir)].module.dynamic_shared_bytes == 65536


def test_cuda_arrays_fast_path_and_barrier_kernels(cuda):
    x = cuda.to_device(np.arange(128, dtype=np.float32))
    cuda.launch(ir(reverse_in_groups), [x], (128,), (64,))
    np.testing.assert_array_equal(x.numpy(), np.concatenate([np.arange(63, -1, -1), np.arange(127, 63, -1)]))
    kir = ir(axpy)
    xs, ys = cuda.to_device(np.ones(64, np.float32)), cuda.to_device(np.zeros(64, np.float32))
    for _ in range(10):
        cuda.launch(kir, [xs, ys, 0.5, 64], (64,), (64,))
    assert cuda._plans[id(kir)].fast_kinds == ("iron", "iron", "scalar", "scalar")
    np.testing.assert_array_equal(ys.numpy(), 5)


def test_torch_tensors_by_pointer_on_torchs_stream(cuda):
    torch = pytest.importorskip("torch")
    kir = ir(add)
    x = torch.arange(4096, dtype=torch.float32, device="cuda")
    y = torch.full((4096,), 2.0, device="cuda")
    out = torch.empty_like(x)
    allocations = cuda.cache_stats["device_pool"]["allocations"]
    for _ in range(3):
        cuda.launch(kir, [x, y, out], (4096,), (256,))
    assert torch.equal(out, x + 2), "torch sees the result in order on its own stream, with no explicit sync"
    assert cuda.cache_stats["device_pool"]["allocations"] == allocations, "no copies"
    assert cuda._plans[id(kir)].fast_kinds == ("torch", "torch", "torch")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        z = x * 3
        cuda.launch(kir, [z, y, out], (4096,), (256,))
        w = out + 1
    torch.cuda.synchronize()
    assert torch.equal(w, x * 3 + 3)
    with pytest.raises(LaunchError, match="expects f32 elements"):
        cuda.launch(kir, [x.half(), y, out], (4096,), (256,))
    with pytest.raises(LaunchError, match="C-contiguous"):
        cuda.launch(kir, [x.view(64, 64).t(), y, out], (4096,), (256,))


def test_cupy_arrays(cuda):
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(1000, dtype=cupy.float32)
    out = cupy.zeros(1000, dtype=cupy.float32)
    cuda.launch(ir(add), [x, x, out], (1000,), (256,))
    np.testing.assert_array_equal(cupy.asnumpy(out), 2 * np.arange(1000))


# ------------------------------------------------------------ graphs, timing
def test_graph_capture_and_replay(cuda):
    kir = ir(axpy)
    x, y = cuda.to_device(np.ones(256, np.float32)), cuda.to_device(np.zeros(256, np.float32))
    cuda.begin_capture()
    cuda.launch(kir, [x, y, 1.0, 256], (256,), (128,))
    cuda.launch(kir, [x, y, 2.0, 256], (256,), (128,))
    graph = cuda.end_capture()
    assert graph.launches == 2
    np.testing.assert_array_equal(y.numpy(), 0), "captured launches do not run"
    for _ in range(5):
        cuda.graph_launch(graph)
    ms = cuda.graph_launch(graph, timing=True)
    assert ms is not None and 0 < ms < 1000
    np.testing.assert_array_equal(y.numpy(), 18)
    graph.close()


def test_event_timing(cuda):
    kir = ir(add)
    a = np.ones(1 << 20, np.float32)
    ms = cuda.launch_timed(kir, [a, a, np.empty_like(a)], (1 << 20,), (256,))
    assert 0 < ms < 1000


def test_timed_launches_are_led_by_the_spin_and_it_is_not_timed(cuda):
    """The PTX spin loads on this GPU, and a small kernel's time is well under the spin's own length: the
    start event fires after the spin, and the host's launch latency no longer counts."""
    from iron.runtime.cuda.streams import LEAD_NS

    kir = ir(add)
    x = cuda.to_device(np.ones(256, np.float32))
    out = cuda.to_device(np.zeros(256, np.float32))
    times = [cuda.launch_timed(kir, [x, x, out], (256,), (256,)) for _ in range(20)]
    lead = cuda._timer.lead
    assert lead is not None and not lead.failed and lead._function is not None
    assert sorted(times)[10] * 1e6 < LEAD_NS / 4, f"median {sorted(times)[10] * 1e3:.1f} us"
    np.testing.assert_array_equal(out.numpy(), 2.0)


# ------------------------------------------------------------ ahead of time, fmad
def test_ahead_of_time_build_loads_and_runs(cuda, tmp_path):
    from iron.harness.build import build, write_atomically

    write_atomically(build([("axpy", axpy)], ["cubin", "manifest"]), tmp_path)
    if cuda.arch != "sm_90":
        pytest.skip(f"iron build --emit cubin builds for sm_90; this GPU is {cuda.arch}")
    lib = cuda.load_build(tmp_path)
    x, y = np.arange(100, dtype=np.float32), np.ones(100, np.float32)
    lib["axpy"].launch(x, y, 3.0, 100, grid=100)
    np.testing.assert_array_equal(y, 3 * x + 1)


def test_fmad_off_rounds_the_product(cuda, tmp_path_factory):
    """a*b+c with the product's low bits mattering: one rounding (FFMA) or two (FMUL, FADD).

    fp_contract off keeps the multiply and the add apart in the IR and turns NVRTC's fusion off for that
    kernel, so it rounds like the interpreter; for IR that does not say, the device's fmad option decides.
    """
    no_fmad = open_cuda(tmp_path_factory, fmad=False)
    e = np.float32(1 + 2**-12)
    a, b, c = np.full(32, e), np.full(32, e), np.full(32, -(1 + 2**-11), np.float32)
    apart = ir(muladd, fp_contract=False)
    twice = np.empty(32, np.float32)
    cuda.launch(apart, [a, b, c, twice], (32,), (32,))
    assert twice[0] == 0, "fp_contract off must not fuse on CUDA either"
    kir = ir(muladd, fp_contract=False)
    del kir.meta["contract"]  # IR that does not say: NVRTC's default (--fmad=true) decides
    fused, split = np.empty(32, np.float32), np.empty(32, np.float32)
    cuda.launch(kir, [a, b, c, fused], (32,), (32,))
    no_fmad.launch(kir, [a, b, c, split], (32,), (32,))
    assert fused[0] == np.float32(2**-24) and split[0] == 0
    on, off = cuda._plans[id(kir)].module.binary, no_fmad._plans[id(kir)].module.binary
    assert on != off
    if shutil.which("cuobjdump"):
        sass = {}
        for name, binary in (("on", on), ("off", off)):
            path = tmp_path_factory.mktemp("sass") / f"{name}.cubin"
            path.write_bytes(binary)
            sass[name] = subprocess.run(["cuobjdump", "-sass", str(path)], capture_output=True, text=True,
                                        check=True).stdout
        assert "FFMA" in sass["on"] and "FFMA" not in sass["off"] and "FMUL" in sass["off"]
    no_fmad.close()


def test_info_and_cache(cuda):
    info = cuda.info
    assert info["arch"] == cuda.arch and info["multiprocessors"] > 0 and info["total_memory"] > 0
    assert info["nvrtc"].startswith("nvrtc ") and info["driver_version"]
    stats = cuda.cache_stats
    assert stats["compiles"] + stats["disk_hits"] >= 1 and stats["format"] == "cubin"

"""``iron device --probe``: measure a device's real ceilings with kernels written in Iron itself.

Three probes, each timed with the device's own clock (``launch_timed``: CUDA events, Vulkan timestamp
queries) after a warm-up launch, the median of several repetitions kept:

* ``copy``: a float4 copy over buffers far larger than any L2; bandwidth = bytes read + written / time;
* ``fma``: eight independent FMA chains per thread (enough to hide the FMA latency), f32 FLOP/s;
* ``mma``: matrix fragments (``frag_a`` / ``frag_b`` / ``mma``), four independent accumulators per
  subgroup, f16 inputs into f32; on a target without a matrix unit this measures Iron's portable
  fallback, and the record says so.

The interpreter has no device clock, so it is timed on the host wall clock (and says so).  The record
goes to the cache directory (:mod:`.measured`), where the bench roofline can read it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

import numpy as np

from .. import config
from .._version import __version__
from ..jit import kernel
from ..lang import (Constexpr, In, Tensor, f16, f32, fma, frag_a, frag_acc, frag_b, frag_store, group_id, mma,
                    num_simd_groups, program_id, simd_group_id)


@kernel
def copy_kernel(src: In[f32], dst: Tensor[f32]):
    i = program_id(0) * 4
    dst.store(i, src.load(i, width=4))


@kernel
def fma_kernel(x: In[f32], coef: In[f32], out: Tensor[f32], iters: int):
    i = program_id(0)
    m = coef[0]
    c = coef[1]
    v0 = x[i]
    v1 = v0 + 1.0
    v2 = v0 + 2.0
    v3 = v0 + 3.0
    v4 = v0 + 4.0
    v5 = v0 + 5.0
    v6 = v0 + 6.0
    v7 = v0 + 7.0
    for _ in range(iters):
        v0 = fma(v0, m, c)
        v1 = fma(v1, m, c)
        v2 = fma(v2, m, c)
        v3 = fma(v3, m, c)
        v4 = fma(v4, m, c)
        v5 = fma(v5, m, c)
        v6 = fma(v6, m, c)
        v7 = fma(v7, m, c)
    out[i] = ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7))


#: Independent accumulators per subgroup in the matrix probe.
MMA_ACCUMULATORS = 4


@kernel
def mma_kernel(A: In[f16], B: In[f16], C: Tensor[f32], iters: int, M: Constexpr[int], N: Constexpr[int],
              K: Constexpr[int]):
    a = frag_a(A, 0, K, M, K)
    b = frag_b(B, 0, N, K, N)
    # Distinct starting values: four equal accumulators could be merged by a compiler into one.
    acc0 = frag_acc(f32, M, N, 0.0)
    acc1 = frag_acc(f32, M, N, 1.0)
    acc2 = frag_acc(f32, M, N, 2.0)
    acc3 = frag_acc(f32, M, N, 3.0)
    for _ in range(iters):
        acc0 = mma(a, b, acc0)
        acc1 = mma(a, b, acc1)
        acc2 = mma(a, b, acc2)
        acc3 = mma(a, b, acc3)
    base = (group_id(0) * num_simd_groups() + simd_group_id()) * (4 * M * N)
    frag_store(C, base, N, acc0)
    frag_store(C, base + M * N, N, acc1)
    frag_store(C, base + 2 * M * N, N, acc2)
    frag_store(C, base + 3 * M * N, N, acc3)


#: Matrix shapes tried in order; the first the device compiles is measured.
MMA_SHAPES = ((16, 8, 16), (16, 16, 16), (8, 8, 8))


@dataclass(frozen=True)
class ProbeSize:
    copy_elements: int
    fma_threads: int
    fma_iters: int
    mma_threads: int
    mma_iters: int
    repetitions: int


SIZES = {
    # Enough for a real GPU: 128 MiB per copy buffer (well past any L2), ~34 GFLOP of FMA.
    "full": ProbeSize(1 << 25, 1 << 20, 2048, 1 << 18, 2048, 20),
    # For the interpreter and CPU Vulkan drivers: seconds, not minutes.
    "small": ProbeSize(1 << 16, 1024, 64, 256, 8, 3),
}


def device_name(device: Any) -> str:
    """The name the driver reports (what ``device_specs.lookup`` matches), or a description of the interpreter."""
    info = device_info(device)
    name = info.get("name") if isinstance(info, dict) else None
    return str(name) if name else ("Iron interpreter (numpy)" if device.name == "interp" else device.name)


def device_info(device: Any) -> dict[str, Any]:
    """The device's ``info`` (a property or a method), or {} when it has none."""
    info = getattr(device, "info", None)
    if callable(info):
        info = info()
    return dict(info) if isinstance(info, dict) else {}


def pick_size(device: Any, requested: str = "auto") -> str:
    """``small`` on the interpreter and on CPU drivers (lavapipe), ``full`` on a GPU, unless requested."""
    if requested != "auto":
        if requested not in SIZES:
            raise ValueError(f"probe size must be auto, {', '.join(SIZES)}; got {requested!r}")
        return requested
    cpu = device.name == "interp" or device_info(device).get("device_type") == "cpu"
    return "small" if cpu else "full"


def lane_width(device: Any) -> int:
    profile = getattr(device, "profile", None)
    if profile is not None and getattr(profile, "lane_width", None):
        return int(profile.lane_width)
    if device.name == "interp":
        return int(config.get("simd_width"))
    from ..codegen.targets import default_profile

    return default_profile(device.target).lane_width


def _median_ms(device: Any, kir: Any, args: list[Any], grid: tuple[int, ...], group: tuple[int, ...],
               reps: int) -> tuple[float, str]:
    """Median time of ``reps`` launches after one warm-up, and how it was clocked."""
    device.launch(kir, args, grid, group)
    timed = getattr(device, "launch_timed", None)
    samples, clock = [], "device timestamps"
    for _ in range(reps):
        ms = timed(kir, args, grid, group, timing=True) if timed is not None else None
        if ms is None:
            clock = "host wall clock"
            start = time.perf_counter()
            device.launch(kir, args, grid, group)
            ms = (time.perf_counter() - start) * 1e3
        samples.append(float(ms))
    return statistics.median(samples), clock


def probe_bandwidth(device: Any, size: ProbeSize) -> dict[str, Any]:
    n = size.copy_elements
    src = np.arange(n, dtype=np.float32)
    dst = np.zeros(n, dtype=np.float32)
    grid = (n // 4,)
    ms, clock = _median_ms(device, copy_kernel.variant().compiled(device.target), [src, dst], grid,
                           device.default_group(grid), size.repetitions)
    if not np.array_equal(src, dst):
        raise RuntimeError("the copy probe wrote wrong data; its timing is meaningless")
    moved = 2 * src.nbytes
    return {"bandwidth_gbps": moved / (ms * 1e-3) / 1e9, "bytes": moved, "median_ms": ms, "clock": clock}


def probe_fma(device: Any, size: ProbeSize) -> dict[str, Any]:
    threads = size.fma_threads
    x = np.linspace(0.0, 1.0, threads, dtype=np.float32)
    coef = np.array([0.999, 0.001], dtype=np.float32)  # v -> 0.999 v + 0.001 stays finite and normal
    out = np.zeros(threads, dtype=np.float32)
    grid = (threads,)
    ms, clock = _median_ms(device, fma_kernel.variant().compiled(device.target), [x, coef, out, size.fma_iters],
                           grid, device.default_group(grid), size.repetitions)
    if not np.all(np.isfinite(out)):
        raise RuntimeError("the FMA probe produced non-finite values")
    flops = 2 * 8 * size.fma_iters * threads
    return {"f32_gflops": flops / (ms * 1e-3) / 1e9, "flops": flops, "median_ms": ms, "clock": clock}


def probe_matrix(device: Any, size: ProbeSize) -> dict[str, Any]:
    threads, group = size.mma_threads, (128,)
    lanes = lane_width(device)
    subgroups = threads // lanes
    errors = []
    for m, n, k in MMA_SHAPES:
        a = np.full(m * k, 0.01, dtype=np.float16)
        b = np.full(k * n, 0.01, dtype=np.float16)
        c = np.zeros(subgroups * MMA_ACCUMULATORS * m * n, dtype=np.float32)
        try:
            kir = mma_kernel.variant(M=m, N=n, K=k).compiled(device.target)
            ms, clock = _median_ms(device, kir, [a, b, c, size.mma_iters], (threads,), group, size.repetitions)
        except Exception as e:  # an unsupported shape on this target: try the next one
            errors.append(f"{m}x{n}x{k}: {_first_line(e)}")
            continue
        flops = 2 * m * n * k * MMA_ACCUMULATORS * size.mma_iters * subgroups
        profile = getattr(device, "profile", None)
        unit = getattr(profile, "mma_strategy", None) if device.name != "interp" else "interpreter"
        return {"matrix_f16_gflops": flops / (ms * 1e-3) / 1e9, "flops": flops, "median_ms": ms, "clock": clock,
                "shape": f"{m}x{n}x{k}", "matrix_unit": unit or "portable fallback (no matrix unit)"}
    raise RuntimeError("no matrix shape ran: " + "; ".join(errors))


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


PROBES: dict[str, Callable[[Any, ProbeSize], dict[str, Any]]] = {
    "copy": probe_bandwidth, "fma": probe_fma, "mma": probe_matrix}


def run_probes(device: Any, size: str = "auto", only: tuple[str, ...] | None = None,
               progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every probe (or those in ``only``) on ``device``: a record for :func:`iron.harness.measured.save`.

    A probe that fails is recorded under ``errors`` with the reason; the others still run.
    """
    chosen = pick_size(device, size)
    dims = SIZES[chosen]
    record: dict[str, Any] = {
        "device": device_name(device), "backend": device.name, "size": chosen, "iron_version": __version__,
        "created": datetime.now(timezone.utc).replace(microsecond=0).isoformat(), "probes": {}, "errors": {}}
    for name, fn in PROBES.items():
        if only and name not in only:
            continue
        if progress:
            progress(name)
        try:
            result = fn(device, dims)
        except Exception as e:
            record["errors"][name] = _first_line(e)
            continue
        record["probes"][name] = result
        for key in ("bandwidth_gbps", "f32_gflops", "matrix_f16_gflops"):
            if key in result:
                record[key] = result[key]
    return record


__all__ = ["MMA_SHAPES", "PROBES", "SIZES", "ProbeSize", "device_info", "device_name", "lane_width", "pick_size",
           "copy_kernel", "fma_kernel", "mma_kernel", "probe_bandwidth", "probe_fma", "probe_matrix", "run_probes"]

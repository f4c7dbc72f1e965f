"""Host time per kernel launch from Python: Iron's cuda device next to torch.add and CuPy, one JSON object.

For the GPU machine (the H200).  A tiny kernel (out = x + y over 1024 f32) is launched thousands of
times in a row with its arrays already on the GPU (torch tensors, so no copies); the figure is the
wall-clock time of the loop divided by the launches, without a synchronisation inside the loop (the
GPU runs each launch in a few microseconds, so the host is the bottleneck and the figure is the
host's cost).  Each figure is the median over ``--reps`` loops after a warm-up.  Rows:

* ``iron_device_launch_us``: ``CudaDevice.launch(ir, [x, y, out], grid, group)``, the device's fast path;
* ``iron_cudaarray_launch_us``: the same with Iron's own CudaArrays;
* ``iron_kernel_call_us``: ``add[grid](x, y, out)`` through iron.lang (the user-facing path), or why not;
* ``iron_variant_launch_us``: ``add_v.variant(T=f32).launch(x, y, out, flag, n, grid=...)``, the path the
  std library's hosts take (a variant binding, a bool and an int scalar);
* ``torch_add_us`` (``torch.add(x, y, out=out)``) and ``cupy_add_us`` (``cupy.add``) where importable;
* ``kernel_py_overhead_us``: ``add[grid](...)`` with numpy arguments on a device that does nothing,
  i.e. iron.lang's own share of a launch (runs on any machine).

Every output is checked against x + y.  Run: ``PYTHONPATH=src python3 scripts/device/launch_overhead.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

from iron import In, T, Tensor, f16, f32, i32, kernel, variants
from iron.lang import program_id

N = 1024


@kernel
def add(x: In[f32], y: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = x[i] + y[i]


@kernel(variants(T=[f32, f16]))
def add_v(x: In[T], y: In[T], out: Tensor[T], flag: bool, n: i32):
    i = program_id(0)
    if i < n:
        if flag:
            out[i] = x[i] + y[i]
        else:
            out[i] = x[i] - y[i]


def per_launch_us(launch: Callable[[], Any], count: int, reps: int, sync: Callable[[], Any]) -> float:
    """Median over ``reps`` loops of ``count`` launches of the loop's wall time per launch, in us."""
    for _ in range(min(count, 200)):
        launch()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(count):
            launch()
        times.append((time.perf_counter() - t0) / count * 1e6)
        sync()
    return statistics.median(times)


def kernel_py_overhead(count: int, reps: int) -> float:
    """iron.lang's share of ``add[grid](...)``: the same call on a device that does nothing."""
    import iron.runtime as rt

    class NullDevice:
        name, target = "null", "cuda"

        def default_group(self, grid: tuple[int, ...]) -> tuple[int, ...]:
            return (256,)

        def launch(self, *args: Any) -> None:
            pass

    saved = rt._devices.get("interp")
    rt._devices["interp"] = NullDevice()  # type: ignore[assignment]
    try:
        x = np.ones(N, np.float32)
        return per_launch_us(lambda: add[N](x, x, np.empty_like(x), backend="interp"), count, reps, lambda: None)
    finally:
        if saved is None:
            rt._devices.pop("interp", None)
        else:
            rt._devices["interp"] = saved


def bare_rows(dev: Any, ir: Any, count: int, reps: int, torch: Any) -> dict[str, Any]:
    """The driver call alone, on the arguments the last launch packed: through cuda-bindings' wrapper and
    through the native module (what the fast launchers call; ``native_launch`` says which one they use)."""
    from iron.runtime.cuda import native

    plan = dev._plans[id(ir)]
    drv, shared = dev._drv, plan.module.dynamic_shared_bytes
    handle = int(torch.cuda.current_stream().cuda_stream)
    stream, function, params = drv.CUstream(handle), plan.function, plan.args.params_address
    rows: dict[str, Any] = {"native_launch": dev._dispatch.native is not None,
                            "native_why_not": native.LAUNCH.why_not}
    rows["bare_bindings_launch_us"] = per_launch_us(
        lambda: drv.cuLaunchKernel(function, N // 256, 1, 1, 256, 1, 1, shared, stream, params, 0), count, reps,
        torch.cuda.synchronize)
    module = native.load()
    if module is not None:
        f = int(function)
        rows["bare_native_launch_us"] = per_launch_us(
            lambda: module.launch(f, N // 256, 1, 1, 256, 1, 1, shared, handle, params), count, reps,
            torch.cuda.synchronize)
    return rows


def gpu_rows(count: int, reps: int) -> dict[str, Any]:
    from iron.runtime import get_device

    dev = get_device("cuda")
    out: dict[str, Any] = {"device": dev.info["name"], "arch": dev.arch, "driver": dev.info["driver_version"],
                           "nvrtc": dev.info["nvrtc"]}
    ir = add.variant().compiled("cuda")
    rng = np.random.default_rng(0)
    hx, hy = rng.random(N, np.float32), rng.random(N, np.float32)
    want = hx + hy
    # Iron's own device arrays.
    ax, ay, ao = dev.to_device(hx), dev.to_device(hy), dev.empty(N, f32)
    out["iron_cudaarray_launch_us"] = per_launch_us(lambda: dev.launch(ir, [ax, ay, ao], (N,), (256,)),
                                                    count, reps, dev.synchronize)
    np.testing.assert_allclose(ao.numpy(), want, rtol=1e-6)
    try:
        import torch
    except ImportError as e:
        out["torch"] = f"not importable ({e})"
        return out
    tx, ty = torch.from_numpy(hx).cuda(), torch.from_numpy(hy).cuda()
    to = torch.empty_like(tx)
    out["iron_device_launch_us"] = per_launch_us(lambda: dev.launch(ir, [tx, ty, to], (N,), (256,)),
                                                 count, reps, torch.cuda.synchronize)
    np.testing.assert_allclose(to.cpu().numpy(), want, rtol=1e-6)
    out["iron_fast_path"] = dev.cache_stats["fast_plans"] > 0
    out.update(bare_rows(dev, ir, count, reps, torch))
    to.zero_()
    try:
        out["iron_kernel_call_us"] = per_launch_us(lambda: add[N](tx, ty, to, backend="cuda"), count, reps,
                                                   torch.cuda.synchronize)
        np.testing.assert_allclose(to.cpu().numpy(), want, rtol=1e-6)
    except Exception as e:  # iron.lang may not take torch tensors yet
        out["iron_kernel_call_us"] = f"not measured: {type(e).__name__}: {e}"
    to.zero_()
    v = add_v.variant(T=f32)
    out["iron_variant_launch_us"] = per_launch_us(
        lambda: v.launch(tx, ty, to, True, N, grid=(N,), backend="cuda"), count, reps, torch.cuda.synchronize)
    np.testing.assert_allclose(to.cpu().numpy(), want, rtol=1e-6)
    out["torch_add_us"] = per_launch_us(lambda: torch.add(tx, ty, out=to), count, reps, torch.cuda.synchronize)
    try:
        import cupy
    except ImportError as e:
        out["cupy_add_us"] = f"not importable ({e})"
        return out
    cx, cy = cupy.asarray(hx), cupy.asarray(hy)
    co = cupy.empty_like(cx)
    out["cupy_add_us"] = per_launch_us(lambda: cupy.add(cx, cy, out=co), count, reps,
                                       cupy.cuda.Device().synchronize)
    np.testing.assert_allclose(cupy.asnumpy(co), want, rtol=1e-6)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=5000, help="launches per timed loop (default 5000)")
    p.add_argument("--reps", type=int, default=7, help="timed loops; the median is reported (default 7)")
    args = p.parse_args()
    result: dict[str, Any] = {"launches_per_loop": args.count, "reps": args.reps, "elements": N,
                              "python": sys.version.split()[0]}
    result["kernel_py_overhead_us"] = kernel_py_overhead(args.count, args.reps)
    try:
        result.update(gpu_rows(args.count, args.reps))
    except Exception as e:  # no GPU here: the iron.lang figure alone
        result["cuda"] = f"unavailable: {type(e).__name__}: {e}"
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

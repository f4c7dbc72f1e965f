"""Running registered benches: one at a time, each timed beside its reference, both outputs checked.

Per item: a correctness launch on fresh poisoned arguments (its wall time, with the pass pipeline
and the backend's compile, is the row's ``compile_ms``); the reference once; then Iron's timing
and the reference's (:mod:`iron.harness.timing`); then each side's call time (host wall time per
call, back to back, one synchronisation at the end: what a program pays per call, host included);
only then the checks and the metrics (``iron.harness.metrics.profile``), so nothing is computed
while the clock runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.protocol import BenchRow, ProfileInfo
from ..harness import timing
from ..harness.registry import Item
from . import execute, reference

Emit = Callable[[str, Any], None]


def run_benches(items: Sequence[Item], device: Any, backend: str, device_name: str, seed: int, emit: Emit,
                policy: timing.Policy) -> int:
    """Run every item, emitting start/bench_row per item; returns the number of failed rows."""
    failures = 0
    for item in items:
        emit("start", {"item": item.id})
        fields: dict[str, Any] = {}
        try:
            _bench(item, device, backend, device_name, seed, policy, fields)
        except Exception as e:  # the row's own failure; the run goes on
            fields["ok"] = False
            fields["error"] = execute.describe(e)
        row = BenchRow(bench=item.entry.name, kernel=item.entry.kernel_name, shape=item.case_label,
                       dtype=item.dtype_label, backend=backend, **fields)
        failures += not row.ok
        emit("bench_row", row)
    return failures


def on_gpu(device: Any) -> bool:
    """Whether the device has its own memory hierarchy worth rotating inputs through (not a CPU)."""
    if device.name == "interp":
        return False
    info = getattr(device, "info", None)
    kind = info.get("device_type") if isinstance(info, dict) else None
    return kind != "cpu"


def _bench(item: Item, device: Any, backend: str, device_name: str, seed: int, policy: timing.Policy,
           row: dict[str, Any]) -> None:
    case, setup = execute.make_setup(item, seed, device)
    launch = execute.resolve(item, case, setup)
    ref = reference.choose(item, setup, backend)
    answer = execute.call_oracle(setup)
    if answer is None and ref is None:
        raise execute.SetupError(f"the bench '{item.entry.name}' has neither an oracle nor a reference for "
                                 f"{backend}: nothing to check its output against")
    group = launch.group or device.default_group(launch.grid)
    started = time.perf_counter()
    compiled = launch.compiled(device.target)
    args = execute.fresh_args(launch)
    runtime_args = launch.runtime_args(args)
    device.launch(compiled, runtime_args, launch.grid, group)
    launch.run_steps(device, runtime_args)
    row["compile_ms"] = round((time.perf_counter() - started) * 1e3, 3)
    ref_expect = None
    if ref is not None:
        row["ref_name"] = ref.name
        ref_expect, _ = reference.outputs(ref, launch)

    # ---- the timed region: Iron, then the reference
    set_bytes = sum(a.nbytes for a in setup.args if isinstance(a, np.ndarray))
    copies = timing.rotation_copies(set_bytes, on_gpu(device), _l2_bytes(device, device_name))
    stats = _time_iron(device, backend, compiled, launch, group, policy, copies)
    ref_stats = reference.measure(ref, launch, policy, copies) if ref is not None else None
    if on_gpu(device):  # on a CPU device a call is the kernel's own time: nothing more to say, and slow to repeat
        row["iron_call_us"] = _iron_call_us(device, backend, compiled, launch, group)
        row["ref_call_us"] = reference.call_us(ref, launch) if ref is not None else None

    # ---- after timing: checks and metrics
    nbytes = execute.bytes_moved(launch)
    row.update(iron_us=stats.median_us, iron_min_us=stats.min_us, iron_max_us=stats.max_us,
               samples=len(stats.samples_us))
    if ref_stats is not None:
        row["ref_us"] = ref_stats.median_us
        row["ref_gbps"] = nbytes / (ref_stats.median_us * 1e3) if ref_stats.median_us > 0 else None
    problems = []
    expected = execute.expectations(launch, answer) if answer is not None else ref_expect
    verdict = execute.judge(launch, args, expected)
    problems += [f"Iron: {p}" for p in verdict.problems]
    if ref_expect is not None and answer is not None:
        ref_host = {i: e.value for i, e in ref_expect.items()}
        ref_verdict = execute.judge(launch, [ref_host.get(i) for i in range(len(launch.names))], expected)
        problems += [f"reference {ref.name}: {p}" for p in ref_verdict.problems]
    registers, occupancy = _resources(device, compiled)
    dtype = item.dtype.name if item.dtype is not None else None
    row["iron"] = profile(stats.median_us, nbytes, setup.flops, device_name, dtype, registers, occupancy, setup.matrix)
    row["ok"] = not problems
    row["error"] = "; ".join(problems) or None


def _time_iron(device: Any, backend: str, compiled: Any, launch: execute.Launch, group: tuple[int, ...],
               policy: timing.Policy, copies: int) -> timing.Stats:
    """Iron's times: the kernel's, plus its ``then`` steps' (each timed on the device, summed)."""
    sets = [launch.runtime_args(execute.fresh_args(launch)) for _ in range(copies)]
    timed = getattr(device, "launch_timed", None)
    steps = [(s, s.compiled(device.target), s.group or device.default_group(s.grid)) for s in launch.then]
    if timed is None:
        def run(i: int) -> float | None:
            device.launch(compiled, sets[i % copies], launch.grid, group)
            for step, code, step_group in steps:
                device.launch(code, step.args(sets[i % copies]), step.grid, step_group)
            return None
        return timing.measure(run, policy)
    sets, release = _device_resident(device, backend, compiled, sets, launch, group)

    def run_timed(i: int) -> float | None:
        ms = timed(compiled, sets[i % copies], launch.grid, group, timing=True)
        for step, code, step_group in steps:
            more = timed(code, step.args(sets[i % copies]), step.grid, step_group, timing=True)
            ms = None if ms is None or more is None else ms + more
        return ms

    try:
        return timing.measure(run_timed, policy)
    finally:
        release()


def _iron_call_us(device: Any, backend: str, compiled: Any, launch: execute.Launch,
                  group: tuple[int, ...]) -> float | None:
    """Host wall time per call of the kernel as a program launches it (``k.variant(...).launch(..., backend=)``,
    then its ``then`` steps), back to back on device-resident arguments, one synchronisation at the end."""
    args = execute.fresh_args(launch)
    placed, release = _device_resident(device, backend, compiled, [launch.runtime_args(args)], launch, group)
    for position, value in zip(launch.runtime, placed[0]):
        args[position] = value
    spec = launch.kernel.variant(**launch.binding)
    runtime = launch.runtime_args(args)
    steps = [(s, s.compiled(device.target), s.group or device.default_group(s.grid)) for s in launch.then]

    def call() -> None:
        spec.launch(*args, grid=launch.grid, group=launch.group, backend=backend)
        for step, _, _ in steps:
            step.kernel.launch(*step.args(runtime), grid=step.grid, group=step.group, backend=backend)

    def device_call() -> None:  # a device the runtime does not serve under ``backend``: its own launch
        device.launch(compiled, runtime, launch.grid, group)
        for step, code, step_group in steps:
            device.launch(code, step.args(runtime), step.grid, step_group)

    if not _serves(backend, device):
        call = device_call

    try:
        return timing.call_us(call, getattr(device, "synchronize", None))
    finally:
        release()


def _serves(backend: str, device: Any) -> bool:
    """Whether a launch with ``backend=backend`` reaches ``device`` (the runner's device is the runtime's)."""
    from .. import runtime

    try:
        return runtime.get_device(backend) is device
    except Exception:  # an unknown or absent backend: only the runner holds this device
        return False


def _device_resident(device: Any, backend: str, compiled: Any, sets: list[list[Any]], launch: execute.Launch,
                     group: tuple[int, ...]) -> tuple[list[list[Any]], Callable[[], None]]:
    """The argument sets in the device's own memory, so no copy runs inside the timed loop: the device's
    arrays (``to_device``), else torch tensors on a CUDA/HIP backend; else the numpy sets as they are
    (the Vulkan device stages them itself).  Returns the sets and how to give their memory back."""
    to_device = getattr(device, "to_device", None)
    if callable(to_device):
        placed = [[to_device(a) if isinstance(a, np.ndarray) else a for a in s] for s in sets]
        give_back = getattr(device, "release_array", lambda a: None)

        def release() -> None:
            for host, dev in zip(sets, placed):
                for h, d in zip(host, dev):
                    if isinstance(h, np.ndarray):
                        give_back(d)
        return placed, release
    if backend in reference.TORCH_BACKENDS:
        try:
            resident = [[reference.to_torch(a) for a in s] for s in sets]
            device.launch(compiled, resident[0], launch.grid, group)
            return resident, lambda: None
        except Exception:  # no torch, or the device does not take its tensors: numpy still works
            pass
    return sets, lambda: None


def _l2_bytes(device: Any, device_name: str) -> int | None:
    """The device's L2 size: its own report, else the datasheet's (``device_specs``), else unknown."""
    info = getattr(device, "info", None)
    if isinstance(info, dict) and info.get("l2_bytes"):
        return int(info["l2_bytes"])
    try:
        from ..harness import device_specs
    except ImportError:
        return None
    spec = device_specs.lookup(device_name)
    value = getattr(spec, "l2_bytes", None) if spec is not None else None
    return int(value) if value else None


def _resources(device: Any, compiled: Any) -> tuple[int | None, float | None]:
    """Registers and occupancy from the device's compile report, where it has one."""
    report = getattr(device, "kernel_report", None)
    if not callable(report):
        return None, None
    try:
        r = report(compiled) or {}
    except Exception:
        return None, None
    return r.get("registers"), r.get("occupancy")


def profile(median_us: float, nbytes: int | None, flops: int | None, device_name: str, dtype: str | None = None,
            registers: int | None = None, occupancy: float | None = None, matrix: bool = False) -> ProfileInfo:
    """``iron.harness.metrics.profile`` (with the ceilings ``iron device --probe`` measured, if any);
    a bare GB/s and GFLOP/s where that module is not installed."""
    try:
        from ..harness import measured, metrics
    except ImportError:
        us = median_us if median_us > 0 else None
        return ProfileInfo(bytes_moved=nbytes, flops=flops, gbps=nbytes / (us * 1e3) if nbytes and us else None,
                           gflops=flops / (us * 1e3) if flops and us else None,
                           intensity=flops / nbytes if flops and nbytes else None, registers=registers,
                           occupancy=occupancy)
    return metrics.profile(median_us, nbytes, flops, device_name, dtype=dtype, registers=registers,
                           occupancy=occupancy, measured_peaks=measured.peaks(device_name), matrix=matrix)


__all__ = ["on_gpu", "profile", "run_benches"]

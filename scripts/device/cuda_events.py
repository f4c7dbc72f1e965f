"""Timing a GPU call from Python for the device scripts (torch): kernel time from CUDA events or from the CUDA
profiler, and call time (host wall time per call, back to back)."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable


def median_ms(torch: Any, fn: Callable[[], Any], reps: int, warmup: int = 3, batch: int = 1) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` event-timed runs after ``warmup`` untimed ones.

    With ``batch`` > 1 each timed run is that many calls back to back, divided: the host's cost of a
    launch (tens of microseconds from Python) then hides behind the previous kernel instead of adding
    to a short kernel's time."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / batch)
    return statistics.median(times)


def call_us(torch: Any, calls: list[Callable[[], Any]], count: int, reps: int) -> list[float]:
    """Host wall time per call of each of ``calls``: ``reps`` back-to-back loops of ``count`` calls each with one
    synchronize at the end, the loops of the calls interleaved (so that the machine's drift falls on all of
    them alike), the median per call."""
    for call in calls:
        for _ in range(20):
            call()
    torch.cuda.synchronize()
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(reps):
        for call, seen in zip(calls, times):
            t0 = time.perf_counter()
            for _ in range(count):
                call()
            torch.cuda.synchronize()
            seen.append((time.perf_counter() - t0) / count * 1e6)
    return [statistics.median(t) for t in times]


def kernel_us(torch: Any, call: Callable[[], Any], calls: int) -> float:
    """GPU time of the kernels ``calls`` calls launched, per call, from the CUDA profiler (CUPTI, which sees
    driver-API launches too): unlike events around one call, the host's time to launch never counts.

    The time at least one kernel ran, not the sum of their durations: a programmatic dependent launch (Iron's
    ``pdl``, docs/cuda.md) starts a kernel while the one before drains, and its blocks wait for it inside the
    kernel, so the profiler's durations of back-to-back kernels overlap and their sum would count that time
    twice.  Kernels one after the other (every peer's) give the same figure both ways."""
    return busy_us(kernel_spans(torch, call, calls)) / calls


def busy_us(spans: list[tuple[str, float, float]]) -> float:
    """Microseconds covered by at least one of the (name, start, end) spans."""
    total, reach = 0.0, float("-inf")
    for _, start, end in sorted(spans, key=lambda s: s[1]):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def kernel_us_by_name(torch: Any, call: Callable[[], Any], calls: int, width: int = 70) -> list[list]:
    """[name (its first ``width`` characters), GPU us per call] of every kernel ``call`` launches, the longest
    first (the same profile as :func:`kernel_us`).  Under programmatic dependent launch a kernel's duration
    includes the time its blocks waited for the kernel before it, so these may add up to more than kernel_us."""
    spent: dict[str, float] = {}
    for name, us in kernel_events(torch, call, calls):
        spent[name[:width]] = spent.get(name[:width], 0.0) + us / calls
    return sorted(([n, round(us, 2)] for n, us in spent.items()), key=lambda kv: -kv[1])


def kernel_events(torch: Any, call: Callable[[], Any], calls: int) -> list[tuple[str, float]]:
    """(kernel name, GPU us) of every kernel ``calls`` back-to-back calls launched, after one untimed call."""
    return [(name, end - start) for name, start, end in kernel_spans(torch, call, calls)]


def kernel_spans(torch: Any, call: Callable[[], Any], calls: int) -> list[tuple[str, float, float]]:
    """(kernel name, start, end in us) of every kernel ``calls`` back-to-back calls launched, after one untimed
    call."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    return [(e.name, e.time_range.start, e.time_range.end) for e in prof.events()
            if e.device_type == DeviceType.CUDA]

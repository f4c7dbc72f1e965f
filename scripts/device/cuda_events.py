"""Timing a GPU call from Python with CUDA events (torch): the median over repetitions, for the device scripts."""

from __future__ import annotations

import statistics
from typing import Any, Callable


def median_ms(torch: Any, fn: Callable[[], Any], reps: int, warmup: int = 3) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` event-timed runs after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)

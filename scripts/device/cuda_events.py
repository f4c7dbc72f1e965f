"""Timing a GPU call from Python with CUDA events (torch): the median over repetitions, for the device scripts."""

from __future__ import annotations

import statistics
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

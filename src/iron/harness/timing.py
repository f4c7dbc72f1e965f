"""Timing a launch the way DESIGN.md asks: warm-up, many repetitions, the median, rotated inputs.

Only the device's timed region counts when the device can time itself (``launch_timed``: CUDA
events, Vulkan timestamp queries); elsewhere (the interpreter, numpy references) the host clock
around the call.  On a GPU the inputs are rotated through enough copies that together they are
larger than twice the L2 cache, so no repetition finds its data already cached by the previous
one.  Nothing here derives metrics: those come afterwards, from the finished :class:`Stats`.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import config

#: L2 size assumed where the device's is unknown: larger than any current GPU's (H200: 60 MiB).
DEFAULT_L2_BYTES = 128 << 20
#: At most this many rotated copies, and at most this many bytes in all of them.
MAX_COPIES = 256
MAX_ROTATION_BYTES = 2 << 30


@dataclass(frozen=True)
class Policy:
    """How many launches: ``warmup`` first, then ``reps`` measured, cut short after ``max_seconds``
    of measuring (never below ``min_reps``)."""

    warmup: int = 10
    reps: int = 100
    max_seconds: float = 2.0
    min_reps: int = 5

    @classmethod
    def from_config(cls) -> Policy:
        """The ``bench_warmup``, ``bench_reps`` and ``bench_seconds`` options."""
        reps = int(config.get("bench_reps"))
        return cls(int(config.get("bench_warmup")), reps, float(config.get("bench_seconds")), min(5, reps))


@dataclass(frozen=True)
class Stats:
    """Per-repetition times in microseconds, in the order measured."""

    samples_us: tuple[float, ...]
    device_timed: bool

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples_us)

    @property
    def min_us(self) -> float:
        return min(self.samples_us)

    @property
    def max_us(self) -> float:
        return max(self.samples_us)


def measure(run: Callable[[int], float | None], policy: Policy) -> Stats:
    """Call ``run(i)`` for warm-up and measured repetitions ``i``; ``run`` returns its device time in
    milliseconds, or None, in which case the host clock around the call is used."""
    for i in range(policy.warmup):
        run(i)
    samples: list[float] = []
    device_timed = True
    started = time.perf_counter()
    for i in range(policy.reps):
        t0 = time.perf_counter()
        ms = run(policy.warmup + i)
        wall = time.perf_counter() - t0
        if ms is None:
            device_timed = False
            samples.append(wall * 1e6)
        else:
            samples.append(float(ms) * 1e3)
        if len(samples) >= policy.min_reps and time.perf_counter() - started > policy.max_seconds:
            break
    return Stats(tuple(samples), device_timed)


def call_us(call: Callable[[], Any], sync: Callable[[], Any] | None = None, rounds: int = 3,
            round_seconds: float = 0.02, most_calls: int = 500) -> float:
    """Host wall time per ``call()`` in microseconds: calls back to back (no wait between them) and one
    ``sync()`` at the end of each round, the round's time over its calls; the median of ``rounds`` rounds.
    What a program pays per call when it issues calls in a row, host and queueing included.  Each round
    makes as many calls as fit ``round_seconds`` by a first timed call (at least 3, at most ``most_calls``)."""
    call()
    if sync is not None:
        sync()
    t0 = time.perf_counter()
    call()
    if sync is not None:
        sync()
    once = max(time.perf_counter() - t0, 1e-7)
    count = max(3, min(most_calls, int(round_seconds / once)))
    per_call = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(count):
            call()
        if sync is not None:
            sync()
        per_call.append((time.perf_counter() - t0) / count * 1e6)
    return statistics.median(per_call)


def rotation_copies(set_bytes: int, on_gpu: bool, l2_bytes: int | None = None) -> int:
    """How many copies of one argument set (``set_bytes``) to rotate through: 1 off a GPU or when
    one set already exceeds twice the L2, else enough to exceed it (within the caps)."""
    if not on_gpu or set_bytes <= 0:
        return 1
    need = 2 * (l2_bytes or DEFAULT_L2_BYTES)
    if set_bytes >= need:
        return 1
    return max(1, min(MAX_COPIES, math.ceil(need / set_bytes), MAX_ROTATION_BYTES // set_bytes))


__all__ = ["DEFAULT_L2_BYTES", "Policy", "Stats", "call_us", "measure", "rotation_copies"]

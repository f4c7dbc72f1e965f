"""Running registered tests: setups and oracles ahead on CPU threads, device launches one at a time.

Setup callbacks and float64 oracles are CPU work, so a pool of worker threads prepares the next
items while the device runs the current one (numpy releases the GIL).  On a device with a slow,
thread-safe build step (``device.prepare``: CUDA's NVRTC), the main thread also lowers the
kernels of the items whose setups are ready and hands their builds to a second pool, so a cold
cache compiles on every core.  Launches stay on the main thread, one at a time, in plan order.
Each item is framed by ``start`` and its ``test_row``: a setup that hangs blocks only when its own
item is started, so the CLI's watchdog blames the right row.  With ``lookahead=0`` nothing runs ahead (the CLI asks for that after a crash, so a hard
crash in a setup is attributed exactly).
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..core.protocol import TestRow
from ..harness.registry import Item
from . import execute

Emit = Callable[[str, Any], None]


def _prepare(item: Item, seed: int, device: Any) -> tuple[Any, Any, Any]:
    case, setup = execute.make_setup(item, seed, device)
    return case, setup, execute.call_oracle(setup)


def run_tests(items: Sequence[Item], device: Any, backend: str, seed: int, emit: Emit, lookahead: int) -> int:
    """Run every item on ``device``, emitting start/test_row per item; returns the number of failures."""
    failures = 0
    pool = ThreadPoolExecutor(max_workers=max(1, lookahead), thread_name_prefix="iron-oracle") if lookahead else None
    builder = Builder(device, lookahead)
    pending: deque[tuple[Item, Future | None]] = deque()
    queue = list(items)

    def refill() -> None:
        while queue and len(pending) < max(1, 2 * lookahead):
            item = queue.pop(0)
            pending.append((item, pool.submit(_prepare, item, seed, device) if pool else None))

    try:
        refill()
        while pending:
            item, future = pending.popleft()
            emit("start", {"item": item.id})
            started = time.perf_counter()
            try:
                prepared = future.result() if future is not None else _prepare(item, seed, device)
                refill()
                row = _check(item, prepared, device, backend, builder.take(item))
            except Exception as e:  # the item's own failure: report it in its row and go on
                refill()
                builder.take(item)
                row = _row(item, backend, False, error=execute.describe(e))
            row = dataclasses.replace(row, seconds=round(time.perf_counter() - started, 6))
            failures += not row.ok
            emit("test_row", row)
            builder.ahead(pending)
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        builder.close()
    return failures


class Builder:
    """Builds the modules of items ahead of their launch on worker threads, where the device can
    (``device.prepare``); the IR is lowered on the calling (main) thread, which owns the frontend."""

    def __init__(self, device: Any, workers: int) -> None:
        self.prepare = getattr(device, "prepare", None) if workers else None
        self.device = device
        self.pool = (ThreadPoolExecutor(max_workers=workers, thread_name_prefix="iron-build")
                     if self.prepare is not None else None)
        self.started: dict[int, tuple[execute.Launch, list[Future]] | None] = {}

    def ahead(self, pending: deque[tuple[Item, Future | None]]) -> None:
        """Start the builds of the pending items whose setups are done (and not started yet)."""
        if self.pool is None:
            return
        for item, future in pending:
            if id(item) in self.started or future is None or not future.done() or future.exception() is not None:
                continue
            try:
                case, setup, _ = future.result()
                launch = execute.resolve(item, case, setup)
                kernels = [launch.compiled(self.device.target), *(s.compiled(self.device.target) for s in launch.then)]
            except Exception:  # the item reports it when it runs
                self.started[id(item)] = None
                continue
            self.started[id(item)] = (launch, [self.pool.submit(self.prepare, k) for k in kernels])

    def take(self, item: Item) -> execute.Launch | None:
        """The item's launch resolved ahead, once its builds are done (None: resolve it now)."""
        started = self.started.pop(id(item), None)
        if started is None:
            return None
        launch, builds = started
        for b in builds:
            b.exception()  # waits; a failed build fails again, with its message, at the launch
        return launch

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)


def _check(item: Item, prepared: tuple[Any, Any, Any], device: Any, backend: str,
           launch: execute.Launch | None = None) -> TestRow:
    case, setup, answer = prepared
    if setup.oracle is None:
        raise execute.SetupError(f"the test '{item.entry.name}' has no oracle: return Setup(..., oracle=...)")
    launch = launch or execute.resolve(item, case, setup)
    expected = execute.expectations(launch, answer)
    args = execute.fresh_args(launch)
    compiled = launch.compiled(device.target)
    runtime_args = launch.runtime_args(args)
    device.launch(compiled, runtime_args, launch.grid, launch.group or device.default_group(launch.grid))
    launch.run_steps(device, runtime_args)
    verdict = execute.judge(launch, args, expected)
    return _row(item, backend, verdict.ok, worst=verdict.worst, tolerance=verdict.tolerance,
                error="; ".join(verdict.problems) or None)


def _row(item: Item, backend: str, ok: bool, **fields: Any) -> TestRow:
    return TestRow(test=item.entry.name, kernel=item.entry.kernel_name, case=item.case_label, dtype=item.dtype_label,
                   backend=backend, ok=ok, **fields)


__all__ = ["run_tests"]

"""The test runner builds modules ahead (iron.runner.tests.Builder): on a device with ``prepare`` (CUDA:
NVRTC), the kernels of items whose setups are ready are lowered on the main thread and built on worker
threads before their launch; without ``prepare``, or with no lookahead, nothing is built ahead."""

from __future__ import annotations

import importlib
import threading

from iron.harness import registry
from iron.runner.tests import run_tests
from iron.runtime.interp import InterpDevice


class PreparingInterp(InterpDevice):
    """The interpreter with a ``prepare`` that records which thread built which kernel, and when."""

    def __init__(self):
        super().__init__()
        self.events: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()

    def prepare(self, kernel):
        with self.lock:
            self.events.append(("prepare", kernel.name, threading.current_thread().name))

    def launch(self, kernel, args, grid, group):
        with self.lock:
            self.events.append(("launch", kernel.name, threading.current_thread().name))
        return super().launch(kernel, args, grid, group)


def _split_items():
    import iron.std.suite.gemv as suite_gemv

    registry.clear()
    importlib.reload(suite_gemv)
    items = [i for i in registry.select("test", "interp") if i.entry.name == "std/gemv/cols_split"]
    registry.clear()
    return items


def test_kernels_are_built_on_worker_threads_before_their_launch(seed):
    items = _split_items()
    dev = PreparingInterp()
    rows = []
    assert run_tests(items, dev, "interp", seed, lambda k, p: rows.append(p) if k == "test_row" else None,
                     lookahead=2) == 0
    assert len(rows) == len(items) and all(r.ok for r in rows)
    prepares = [e for e in dev.events if e[0] == "prepare"]
    assert prepares and all(t.startswith("iron-build") for _, _, t in prepares)
    assert {"gemv_cols", "gemv_cols_sum"} <= {k for _, k, _ in prepares}, "the then= step is built too"
    assert all(t == threading.main_thread().name for e, _, t in dev.events if e == "launch")
    # every item but the first few (whose setups were not ready when the first ran) is built ahead
    launches = [i for i, e in enumerate(dev.events) if e[0] == "launch" and e[1] == "gemv_cols"]
    built_before = sum(any(e[0] == "prepare" and e[1] == "gemv_cols" for e in dev.events[:i]) for i in launches)
    assert built_before >= len(launches) - 2


def test_nothing_is_built_ahead_without_lookahead_or_prepare(seed):
    items = _split_items()
    dev = PreparingInterp()
    assert run_tests(items, dev, "interp", seed, lambda k, p: None, lookahead=0) == 0
    assert not [e for e in dev.events if e[0] == "prepare"]
    plain = InterpDevice()
    assert run_tests(items, plain, "interp", seed, lambda k, p: None, lookahead=2) == 0

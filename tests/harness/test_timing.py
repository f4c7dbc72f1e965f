"""Timing: warm-up first, many repetitions, device time preferred, a time budget, rotated inputs on GPUs."""

import time

import pytest

from iron import config
from iron.harness import timing
from iron.harness.timing import Policy, measure, rotation_copies


def test_warmup_runs_first_and_only_the_repetitions_are_kept():
    calls = []

    def run(i):
        calls.append(i)
        return 0.5 if i >= 3 else 99.0  # warm-up launches are slow; they must not count

    stats = measure(run, Policy(warmup=3, reps=7, max_seconds=10))
    assert calls == list(range(10))
    assert stats.samples_us == (500.0,) * 7 and stats.device_timed
    assert (stats.median_us, stats.min_us, stats.max_us) == (500.0, 500.0, 500.0)


def test_without_device_time_the_host_clock_is_used():
    stats = measure(lambda i: time.sleep(0.002), Policy(warmup=0, reps=3))
    assert not stats.device_timed and len(stats.samples_us) == 3
    assert all(s >= 2000 for s in stats.samples_us)


def test_the_median_resists_outliers():
    values = iter([1.0, 1.0, 50.0, 1.0, 1.0])
    stats = measure(lambda i: next(values), Policy(warmup=0, reps=5))
    assert stats.median_us == 1000.0 and stats.max_us == 50000.0


def test_a_time_budget_cuts_repetitions_short_but_never_below_the_minimum():
    stats = measure(lambda i: time.sleep(0.01), Policy(warmup=0, reps=1000, max_seconds=0.02, min_reps=4))
    assert 4 <= len(stats.samples_us) < 10


def test_inputs_rotate_past_twice_the_l2_on_gpus_only():
    l2 = 50 << 20
    assert rotation_copies(1 << 20, on_gpu=False, l2_bytes=l2) == 1
    assert rotation_copies(200 << 20, on_gpu=True, l2_bytes=l2) == 1
    n = rotation_copies(16 << 20, on_gpu=True, l2_bytes=l2)
    assert n * (16 << 20) >= 2 * l2 and (n - 1) * (16 << 20) < 2 * l2
    assert rotation_copies(1024, on_gpu=True, l2_bytes=l2) == timing.MAX_COPIES
    assert rotation_copies(4 << 20, on_gpu=True) * (4 << 20) >= 2 * timing.DEFAULT_L2_BYTES


def test_the_policy_comes_from_the_options(monkeypatch):
    monkeypatch.setenv("IRON_BENCH_REPS", "7")
    monkeypatch.setenv("IRON_BENCH_WARMUP", "2")
    monkeypatch.setenv("IRON_BENCH_SECONDS", "0.5")
    config.reload()
    assert Policy.from_config() == Policy(warmup=2, reps=7, max_seconds=0.5, min_reps=5)
    monkeypatch.setenv("IRON_BENCH_REPS", "lots")
    config.reload()
    with pytest.raises(config.ConfigError, match="IRON_BENCH_REPS"):
        Policy.from_config()
    monkeypatch.delenv("IRON_BENCH_REPS")
    config.reload()

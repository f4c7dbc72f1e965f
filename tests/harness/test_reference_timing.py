"""How a torch reference is timed (iron.runner.reference.measure), with a recording stand-in for torch:
every timed call is led by a ``torch.cuda._sleep`` long enough to cover the host's cost of issuing it,
so the reference's events time the GPU alone, as Iron's do (its own lead is tested in tests/runtime/cuda).
The real torch path runs on the H200 in every CUDA bench."""

from __future__ import annotations

import time
from types import SimpleNamespace

from iron.harness import timing
from iron.runner import reference


class Recorder:
    """torch.cuda as far as measure() uses it, writing each call to ``log``."""

    def __init__(self):
        self.log: list[tuple] = []
        recorder = self

        class Event:
            def __init__(self, enable_timing=False):
                self.name = "start" if not any(isinstance(x, Event) for x in recorder.events) else "end"
                recorder.events.append(self)

            def record(self):
                recorder.log.append(("record", self.name))

            def synchronize(self):
                recorder.log.append(("wait", self.name))

            def elapsed_time(self, other):
                return 0.25

        self.events: list = []
        self.cuda = SimpleNamespace(Event=Event, synchronize=lambda: self.log.append(("sync",)),
                                    _sleep=lambda cycles: self.log.append(("sleep", cycles)))


def _measure(monkeypatch, fn, torch):
    monkeypatch.setattr(reference, "_torch", lambda: torch)
    monkeypatch.setattr(reference, "arguments", lambda ref, args: list(args))
    launch = SimpleNamespace(setup=SimpleNamespace(args=[1, 2]))
    ref = reference.Reference("ref", fn, on_torch=True)
    return reference.measure(ref, launch, timing.Policy(warmup=1, reps=4, max_seconds=10, min_reps=4), copies=1)


def test_each_timed_call_is_led_by_a_sleep_longer_than_its_host_cost(monkeypatch):
    torch = Recorder()
    host_s = 0.002

    def slow_to_issue(a, b):
        time.sleep(host_s)
        torch.log.append(("ref",))

    stats = _measure(monkeypatch, slow_to_issue, torch)
    assert stats.samples_us == (250.0,) * 4
    timed = torch.log[torch.log.index(("sync",), 6):]  # after host_cost's three calls and syncs
    sleeps = [e for e in timed if e[0] == "sleep"]
    assert len(sleeps) == 5, "one lead per warm-up and timed call"
    # cycles at SLEEP_CYCLES_PER_S last at least twice the host cost on any clock up to that rate
    assert all(c / reference.SLEEP_CYCLES_PER_S >= 2 * host_s for _, c in sleeps)
    for i, e in enumerate(timed):
        if e[0] == "sleep":
            assert timed[i + 1:i + 4] == [("record", "start"), ("ref",), ("record", "end")]


def test_the_lead_has_a_floor_and_a_ceiling():
    assert reference.lead_cycles(0.0) == int(reference.SLEEP_CYCLES_PER_S * reference.LEAD_MIN_S)
    assert reference.lead_cycles(1e-4) == int(reference.SLEEP_CYCLES_PER_S * 2e-4)
    assert reference.lead_cycles(5.0) == int(reference.SLEEP_CYCLES_PER_S * reference.LEAD_MAX_S)


def test_a_torch_without_sleep_is_timed_without_a_lead(monkeypatch):
    torch = Recorder()
    del torch.cuda._sleep
    stats = _measure(monkeypatch, lambda a, b: torch.log.append(("ref",)), torch)
    assert len(stats.samples_us) == 4
    assert not any(e[0] == "sleep" for e in torch.log)

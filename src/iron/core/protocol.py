"""The runner's wire protocol: one JSON object per line on the runner's stdout, read by the CLI.

The CLI never touches a GPU (docs/runner.md): ``iron bench`` / ``iron test`` spawn
``python -m iron.runner``, which writes :class:`ProtocolMessage` lines.  Every line carries the
protocol version and the runner's Iron version, so a CLI that meets a runner of another protocol
says so instead of misreading it.  Payloads are plain dicts of the dataclasses below
(:func:`dataclasses.asdict`), so a message survives a round trip through JSON unchanged.

Message kinds, in the order a run sends them:

* ``hello``: ``{"command", "backend", "device", "pid"}``, first;
* ``plan``: ``{"items": [item ids]}``, what the run will do, so the CLI can show progress and
  resume after a crash past the last finished item;
* ``start``: ``{"item"}`` before each item (the CLI's watchdog times it);
* ``bench_row`` (a :class:`BenchRow`) / ``test_row`` (a :class:`TestRow`) when an item ends;
* ``log``: ``{"level", "text"}``, anything worth showing;
* ``error``: ``{"item" (or None), "message"}``, a failure outside any row;
* ``done``: ``{"items": n}``, last.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import IronError

#: Bumped whenever a message's meaning or a field changes incompatibly.
PROTOCOL_VERSION = 1

KINDS = ("hello", "plan", "start", "bench_row", "test_row", "log", "error", "done")


class ProtocolError(IronError):
    """A line that is not a message of this protocol version."""


@dataclass(frozen=True)
class ProfileInfo:
    """What a bench row's figures mean against the device: computed after timing, never during it.

    ``None`` where the device is unknown to ``device_specs`` or the bench declares no model.
    """

    bytes_moved: int | None = None
    flops: int | None = None
    gbps: float | None = None
    gflops: float | None = None
    #: Fractions of the device's peak bandwidth and FLOP/s (0.93, not 93).
    bw_fraction: float | None = None
    flop_fraction: float | None = None
    #: FLOPs per byte moved.
    intensity: float | None = None
    #: "memory", "compute", "latency" or None.
    bottleneck: str | None = None
    registers: int | None = None
    occupancy: float | None = None
    peak_source: str | None = None


@dataclass(frozen=True)
class BenchRow:
    """One (bench, shape, dtype) measured on one backend, with its reference measured in the same run."""

    bench: str
    kernel: str
    shape: str
    dtype: str
    backend: str
    ok: bool
    #: Median, min and max device time of Iron's kernel in microseconds (None when it failed).
    iron_us: float | None = None
    iron_min_us: float | None = None
    iron_max_us: float | None = None
    ref_name: str | None = None
    ref_us: float | None = None
    ref_gbps: float | None = None
    iron: ProfileInfo = field(default_factory=ProfileInfo)
    compile_ms: float | None = None
    #: Host wall time per call, back to back with one synchronisation at the end (host included, no lead
    #: kernel): Iron's through the kernel's own launch (``k.variant(...).launch``), the reference's as called.
    iron_call_us: float | None = None
    ref_call_us: float | None = None
    samples: int = 0
    #: Why the row failed (a mismatch, a crash, a timeout), or None.
    error: str | None = None


@dataclass(frozen=True)
class TestRow:
    """One (test, case) checked against its oracle on one backend."""

    test: str
    kernel: str
    case: str
    dtype: str
    backend: str
    ok: bool
    #: Worst error relative to the tolerance (<= 1 passes), when the comparison ran.
    worst: float | None = None
    tolerance: str | None = None
    error: str | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class ProtocolMessage:
    kind: str
    data: dict[str, Any]
    runner_version: str
    protocol: int = PROTOCOL_VERSION


def encode(kind: str, data: dict[str, Any] | Any, runner_version: str) -> str:
    """One protocol line (no newline) for ``kind`` with ``data`` (a dict or one of the dataclasses above)."""
    if kind not in KINDS:
        raise ProtocolError(f"unknown message kind {kind!r}; kinds: {', '.join(KINDS)}")
    payload = data if isinstance(data, dict) else asdict(data)
    return json.dumps({"protocol": PROTOCOL_VERSION, "runner_version": runner_version, "kind": kind,
                       "data": payload}, separators=(",", ":"), allow_nan=False, default=_plain)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"not JSON: {type(value).__name__}")


def decode(line: str) -> ProtocolMessage:
    """The message on ``line``; :class:`ProtocolError` for anything else (another version, garbage)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise ProtocolError(f"not a protocol line ({e.msg}): {line[:120]!r}") from None
    if not isinstance(obj, dict) or "protocol" not in obj:
        raise ProtocolError(f"not a protocol message: {line[:120]!r}")
    if obj["protocol"] != PROTOCOL_VERSION:
        raise ProtocolError(f"the runner speaks protocol {obj['protocol']} (Iron {obj.get('runner_version')}), "
                            f"this CLI protocol {PROTOCOL_VERSION}: run both from the same Iron installation")
    if obj.get("kind") not in KINDS or not isinstance(obj.get("data"), dict):
        raise ProtocolError(f"malformed message: {line[:120]!r}")
    return ProtocolMessage(obj["kind"], obj["data"], str(obj.get("runner_version")), obj["protocol"])


def bench_row(data: dict[str, Any]) -> BenchRow:
    """A :class:`BenchRow` from a ``bench_row`` payload."""
    fields = dict(data)
    fields["iron"] = ProfileInfo(**(fields.get("iron") or {}))
    return BenchRow(**fields)


def test_row(data: dict[str, Any]) -> TestRow:
    """A :class:`TestRow` from a ``test_row`` payload."""
    return TestRow(**data)


__all__ = ["BenchRow", "KINDS", "PROTOCOL_VERSION", "ProfileInfo", "ProtocolError", "ProtocolMessage", "TestRow",
           "bench_row", "decode", "encode", "test_row"]

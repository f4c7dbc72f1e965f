"""The runner's wire protocol: versioned JSON lines that survive a round trip, and clear refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from iron.core import protocol as P


def test_rows_round_trip_through_one_line():
    row = P.BenchRow(bench="unary/exp", kernel="iron_exp", shape="N=16M", dtype="f16", backend="cuda", ok=True,
                     iron_us=62.1, ref_name="torch.exp", ref_us=60.0,
                     iron=P.ProfileInfo(bytes_moved=64 << 20, gbps=540.1, bw_fraction=0.11, bottleneck="memory"))
    line = P.encode("bench_row", row, "0.1.0")
    assert "\n" not in line
    message = P.decode(line)
    assert message.kind == "bench_row" and message.runner_version == "0.1.0" and message.protocol == P.PROTOCOL_VERSION
    assert P.bench_row(message.data) == row
    test = P.TestRow(test="exp", kernel="iron_exp", case="n=4099", dtype="bf16", backend="vulkan", ok=False,
                     worst=3.5, tolerance="rtol=7.8e-3", error="4/4099 elements differ")
    assert P.test_row(P.decode(P.encode("test_row", test, "0.1.0")).data) == test


def test_numpy_scalars_become_plain_numbers():
    line = P.encode("log", {"level": "info", "value": np.float32(1.5), "count": np.int64(3)}, "x")
    assert json.loads(line)["data"] == {"level": "info", "value": 1.5, "count": 3}


@pytest.mark.parametrize("line,problem", [
    ("hello", "not a protocol line"),
    ("[1, 2]", "not a protocol message"),
    ('{"protocol": 999, "runner_version": "9.9", "kind": "log", "data": {}}', "protocol 999"),
    ('{"protocol": 1, "runner_version": "x", "kind": "shout", "data": {}}', "malformed"),
    ('{"protocol": 1, "runner_version": "x", "kind": "log", "data": 3}', "malformed"),
])
def test_what_is_not_a_message_is_refused_clearly(line, problem):
    with pytest.raises(P.ProtocolError, match=problem):
        P.decode(line)


def test_unknown_kinds_and_non_finite_values_are_not_sent():
    with pytest.raises(P.ProtocolError):
        P.encode("shout", {}, "x")
    with pytest.raises(ValueError):
        P.encode("log", {"value": float("nan")}, "x")  # JSON has no NaN: a row must say None instead

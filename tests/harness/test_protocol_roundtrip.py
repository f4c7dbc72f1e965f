"""The runner's wire protocol: every message survives encode -> decode; strangers are refused clearly."""

import io
import json

import pytest

from iron.core import protocol
from iron.core.protocol import BenchRow, ProfileInfo, ProtocolError, decode, encode
from iron.runner.main import Emitter

BENCH = BenchRow(bench="mlx/gemv", kernel="gemv", shape="N=16M", dtype="f16", backend="cuda", ok=True,
                 iron_us=62.1, iron_min_us=60.0, iron_max_us=70.5, ref_name="torch.mv", ref_us=60.2, ref_gbps=583.6,
                 iron=ProfileInfo(bytes_moved=33554432, flops=16777216, gbps=540.1, gflops=270.0,
                                  bw_fraction=0.11, intensity=0.5, bottleneck="memory"),
                 compile_ms=12.5, samples=100)
TEST = protocol.TestRow(test="axpy", kernel="axpy", case="N=4099", dtype="bf16", backend="vulkan", ok=False, worst=3.5,
               tolerance="rtol=0.008, atol=1.18e-38", error="output 'out': 1/4099 elements differ", seconds=0.01)


def test_rows_round_trip_exactly():
    msg = decode(encode("bench_row", BENCH, "9.9"))
    assert (msg.kind, msg.runner_version, msg.protocol) == ("bench_row", "9.9", protocol.PROTOCOL_VERSION)
    assert protocol.bench_row(msg.data) == BENCH
    assert protocol.test_row(decode(encode("test_row", TEST, "9.9")).data) == TEST


@pytest.mark.parametrize("kind, data", [
    ("hello", {"command": "test", "backend": "interp", "device": "interp", "pid": 12, "seed": 3, "lookahead": 2}),
    ("plan", {"items": ["a[N=1,f32]"], "meta": [{"name": "a", "kernel": "k", "case": "N=1", "dtype": "f32"}]}),
    ("start", {"item": "a[N=1,f32]"}), ("log", {"level": "info", "text": "x"}),
    ("error", {"item": None, "message": "cannot load m"}), ("done", {"items": 1, "failed": 0})])
def test_every_kind_round_trips(kind, data):
    line = encode(kind, data, "1.0")
    assert "\n" not in line and decode(line).data == data and decode(line).kind == kind


def test_another_protocol_version_and_garbage_are_refused_with_a_reason():
    other = json.dumps({"protocol": protocol.PROTOCOL_VERSION + 1, "runner_version": "2.0", "kind": "done",
                        "data": {}})
    with pytest.raises(ProtocolError, match="speaks protocol .* same Iron installation"):
        decode(other)
    with pytest.raises(ProtocolError, match="not a protocol line"):
        decode("warning: something printed")
    with pytest.raises(ProtocolError, match="malformed"):
        decode(json.dumps({"protocol": protocol.PROTOCOL_VERSION, "kind": "nope", "data": {}}))
    with pytest.raises(ProtocolError, match="unknown message kind"):
        encode("shout", {}, "1.0")


def test_the_runner_emitter_writes_one_decodable_line_per_message():
    out = io.StringIO()
    emit = Emitter(out)
    emit("start", {"item": "x"})
    emit("test_row", TEST)
    lines = out.getvalue().splitlines()
    assert [decode(ln).kind for ln in lines] == ["start", "test_row"]
    assert protocol.test_row(decode(lines[1]).data) == TEST

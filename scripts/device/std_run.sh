#!/usr/bin/env bash
# The standard library on the H200 (through the device tool, from the source tree): its GPU tests, then
# `iron test` and the benches on CUDA for the std/ rows, the bench rows under $OUT for BENCHMARKS.md and
# `iron snap --from $OUT/bench.json`.  Arguments: a filter (default "std/") and what to run ("test",
# "bench" or "all"); DTYPE=bf16 keeps one dtype, BENCH_SECONDS caps the bench (default 500).
# Budget: each 64M-element row costs ~15 s of host-side setup and float64 oracle there.
set -uo pipefail
filter=${1:-std/}
what=${2:-all}
out=${OUT:-/tmp/out}
mkdir -p "$out"
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl; fi
export PYTHONPATH=/tmp/site:src:tests
export IRON_CACHE_DIR=/tmp/iron-cache
if [ "$what" = all ] || [ "$what" = test ]; then
  python3 -m pytest -p no:cacheprovider tests/gpu/test_std_cuda.py -k "${filter//\//_}" -x -q 2>&1 | tail -25
  python3 -m iron test --backend cuda --filter "$filter" 2>&1 | tail -40
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
  # The runner streams one protocol line per row, so a call that runs out of time still brings back every
  # finished row (`iron bench` prints its table only at the end); render them here with stream_table.py.
  timeout "${BENCH_SECONDS:-500}" python3 -m iron.runner bench --backend cuda --filter "$filter" \
    ${DTYPE:+--dtype "$DTYPE"} > "$out/rows.jsonl" 2> "$out/bench.err"
  python3 scripts/device/stream_table.py "$out/rows.jsonl" -v --save "$out/bench.json" | cut -c1-200
  tail -5 "$out/bench.err"
fi

#!/usr/bin/env bash
# The standard library on the H200 (through the device tool, from the source tree): its GPU tests, then
# `iron test` and `iron bench` on CUDA for the std/ rows, the bench as JSON under $OUT for BENCHMARKS.md
# and `iron snap`.  Arguments: a filter (default "std/") and what to run ("test", "bench" or "all").
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
  python3 -m iron bench --backend cuda --filter "$filter" -v --save "$out/bench.json" > "$out/bench.txt" 2> "$out/bench.err"
  cat "$out/bench.txt"; tail -5 "$out/bench.err"
fi

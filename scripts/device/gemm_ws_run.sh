#!/usr/bin/env bash
# gemm on warp roles on the H200, in one device call (from the source tree): the GPU tests of the gemm
# kernels (the host's choice, every registered gemm row, the warp-role ring), gemm_tune.py beside cuBLAS for
# the host's configurations (WS_*: one group per tile) and one group per multiprocessor (WSP_*) on issue 20's
# shapes, both layouts of B, and the host's gemm calls beside torch (kernel and call time, std_call_table.py).
# JSON under $OUT (tune.jsonl, calls.json) for BENCHMARKS.md.  About 3 minutes.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; fi
export PYTHONPATH=/tmp/site:src:tests
export IRON_CACHE_DIR=/tmp/iron-cache
timeout 150 python3 -m pytest -p no:cacheprovider tests/gpu/test_std_host_cuda.py tests/gpu/test_std_cuda.py \
  tests/gpu/test_cuda_roles.py -k "gemm or roles" -rfE 2>&1 | tail -8
configs="WS_256_S3 WS_256_S4 WS_128_S4 WSP_256_S3"
cd scripts/device
export PYTHONPATH=/tmp/site:../../src:.
timeout 90 python3 gemm_tune.py --sizes 4096 8192 --configs $configs 2>&1 | grep '^{' | tee "$out/tune.jsonl" | cut -c1-250
timeout 200 python3 gemm_tune.py --sizes 8192 --shapes 8192x11008x4096 512x4096x4096 512x11008x4096 8192x4096x4096 \
  --bt --configs $configs WS_128_S6 WS_168_S4 WS_168_S5 2>&1 | grep '^{' | tee -a "$out/tune.jsonl" | cut -c1-250
timeout 120 python3 std_call_table.py --filter gemm --count 50 > "$out/calls.json" 2>/dev/null; grep -E '"op"|_us"' "$out/calls.json"

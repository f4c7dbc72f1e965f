#!/usr/bin/env bash
# The 8-bit float pipeline and the new warpgroup widths on the H200, in one device call (from the source tree):
# the GPU tests of mma_wg on 8-bit tiles, of any-width accumulators, of A from registers and of elementwise
# accumulator arithmetic; gemm_fp8 beside torch._scaled_mm (fp8_tune.py); gemm_ws's BN 168 and deeper rings
# on the 512-row linear shapes (gemm_tune.py); which TMA stores the GPU takes (tma_store_probe.py).
# JSON under $OUT (fp8.jsonl, ws512.jsonl, tma_store.jsonl).  About 5 minutes.
set -uo pipefail
source scripts/device/device_env.sh
timeout 90 python3 -m pytest -p no:cacheprovider tests/gpu/test_cuda_mma.py tests/gpu/test_cuda_corpus.py \
  -k "warpgroup or mma_elementwise or f8 or mma_narrow or tile_copies" -rfE 2>&1 | tail -8
cd scripts/device
export PYTHONPATH=/tmp/site:../../src:.
timeout 110 python3 fp8_tune.py --shapes 4096x4096x4096 8192x11008x4096 512x11008x4096 \
  --configs FOLD_128_S5 FOLD_128_S4 FAST_256_S4 2>&1 | grep '^{' | tee "$out/fp8.jsonl" | cut -c1-200
timeout 80 python3 gemm_tune.py --sizes --shapes 512x4096x4096 512x11008x4096 --bt \
  --configs WS_128_S4 WS_128_S6 WS_168_S4 WS_168_S5 2>&1 | grep '^{' | tee "$out/ws512.jsonl" | cut -c1-200
timeout 60 python3 tma_store_probe.py 2>&1 | tee "$out/tma_store.jsonl" | grep -v '"equal": true' | cut -c1-200

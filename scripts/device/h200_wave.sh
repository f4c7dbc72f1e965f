#!/usr/bin/env bash
# The figures issues 19 and 20 need from the H200, in two device calls (from the source tree, carry .whl), each
# under the 10-minute limit:
#   bash scripts/device/h200_wave.sh gemm   the GPU tests of gemm and clusters; gemm_ws beside cuBLAS on issue
#                                          20's shapes, with and without clusters (gemm_tune.py, B both ways);
#                                          gemm_fp8 beside torch._scaled_mm (fp8_tune.py: the host's folding
#                                          and fast configurations, 128-wide folds).  About 6 minutes.
#   bash scripts/device/h200_wave.sh conv   the GPU tests of conv; iron.std.conv's host functions beside cuDNN on
#                                          issue 19's shapes (conv_table.py: GPU time from the profiler and call
#                                          time, both outputs checked); 192-wide tiles on Whisper.  About 5 minutes.
#   bash scripts/device/h200_wave.sh attention   issue 21: the attention GPU tests; prefill_attention (the host's
#                                          persistent ping-pong loop) and the plain loop beside SDPA at S 1K-16K,
#                                          causal and not, through the host (prefill_tune.py --host); decode beside
#                                          SDPA on every listed B, S and H_kv (decode_table.py); the paged decode
#                                          and prefill beside their dense twins.  About 7 minutes.
# JSON under $OUT (gemm.jsonl, fp8.jsonl, conv_table.jsonl, conv_ws192.jsonl, prefill.jsonl, decode.jsonl,
# paged*.jsonl, tests-*.txt) for BENCHMARKS.md.
set -uo pipefail
source scripts/device/device_env.sh
part=${1:?usage: h200_wave.sh gemm|conv|attention}
if [ "$part" = gemm ]; then
  gpu_tests gemm 150 tests/gpu/test_cuda_clusters.py tests/gpu/test_std_cuda.py tests/gpu/test_std_host_cuda.py \
    -k "clusters or gemm"
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  timeout 80 python3 gemm_tune.py --sizes 4096 8192 --configs WS_256_S4 WSC_256_S4 2>&1 | grep '^{' \
    | tee "$out/gemm.jsonl" | cut -c1-200
  timeout 150 python3 gemm_tune.py --sizes --shapes 8192x11008x4096 8192x4096x4096 512x4096x4096 512x11008x4096 --bt \
    --configs WS_256_S4 WSC_256_S4 WS_128_S6 WSC_128_S6 WS_168_S4 WSC_168_S5 2>&1 | grep '^{' \
    | tee -a "$out/gemm.jsonl" | cut -c1-200
  timeout 150 python3 fp8_tune.py --shapes 4096x4096x4096 8192x8192x8192 8192x11008x4096 8192x4096x4096 \
    512x11008x4096 512x4096x4096 --configs FOLD_128_S5 FOLDP_256_S4 FOLD_192_S4 FASTP_256_S4 FASTC_128_S5 2>&1 \
    | grep '^{' | tee "$out/fp8.jsonl" | cut -c1-200
elif [ "$part" = attention ]; then
  gpu_tests attention 130 tests/gpu/test_std_host_cuda.py tests/gpu/test_std_cuda.py \
    -k "attention or prefill or decode or paged or varlen"
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  timeout 150 python3 prefill_tune.py --configs WSPP_128_S2 WSP_128_S2 --host --reps 5 2>&1 | grep '^{' \
    | tee "$out/prefill.jsonl" | cut -c1-200
  timeout 140 python3 decode_table.py 2>&1 | grep '^{' | tee "$out/decode.jsonl" | cut -c1-220
  timeout 40 python3 paged_check.py 2>&1 | grep '^{' | tee "$out/paged_decode.jsonl" | cut -c1-200
  timeout 50 python3 paged_prefill_check.py 2>&1 | grep '^{' | tee "$out/paged_prefill.jsonl" | cut -c1-200
else
  gpu_tests conv 100 tests/gpu/test_std_host_cuda.py tests/gpu/test_std_cuda.py -k "conv"
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  timeout 200 python3 conv_table.py --reps 3 --count 30 2>&1 | grep '^{' | tee "$out/conv_table.jsonl" | cut -c1-160
  timeout 50 python3 conv_tune.py --reps 3 --shapes whisper_80_384 whisper_384_s2 --configs WS128_S4 WS192_S4 2>&1 \
    | grep '^{' | tee "$out/conv_ws192.jsonl" | cut -c1-200  # fewer, wider tiles for 384 channels (UNet: 160 wide)
fi

#!/usr/bin/env bash
# conv_ws (convolution on warp roles, input boxes by tile copies of rank 4) on the H200, in one device call (from
# the source tree): its registered rows, the rank-4 tile copy corpus cases and the tile stores through TMA
# (IRON_TMA_STORE=1) on the GPU, then conv_tune.py's shapes of issue 19 with conv_ws beside conv_wg and cuDNN
# (kernel times from the profiler, event times back to back, outputs checked), and gemm_ws's call time (tensor
# maps on the generated launcher).  JSON under $OUT (conv_ws.jsonl, gemm_call.jsonl).  About 4 minutes.
set -uo pipefail
source scripts/device/device_env.sh
timeout 120 python3 -m pytest -p no:cacheprovider tests/gpu/test_std_cuda.py tests/gpu/test_cuda_corpus.py \
  -k "conv_mma/ws or tile_box" -rfE 2>&1 | tail -4
IRON_TMA_STORE=1 timeout 60 python3 -m pytest -p no:cacheprovider tests/gpu/test_cuda_corpus.py \
  -k "tile_store or tile_box_store" -rfE 2>&1 | tail -4
cd scripts/device
export PYTHONPATH=/tmp/site:../../src:.
timeout 40 python3 gemm_tune.py --sizes --shapes 512x4096x4096 --bt --configs WS_128_S4 2>&1 | grep '^{' \
  | tee "$out/gemm_call.jsonl" | cut -c1-300
timeout 260 python3 conv_tune.py --reps 5 --shapes resnet_64_56 resnet_128_s2 resnet_256_14 resnet_512_7 \
  unet_320_64 conv1d_512_4096 whisper_80_384 whisper_384_s2 resnet_1x1_256_1024 \
  --configs WS128_S4 WS256_S3 WS64_S4 WG128_S4_P1 WG256_S4_P1 2>&1 \
  | tee "$out/conv_ws.jsonl" | cut -c1-300

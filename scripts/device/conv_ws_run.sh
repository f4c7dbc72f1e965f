#!/usr/bin/env bash
# conv_ws (convolution on warp roles, input boxes by tile copies of rank 4) on the H200, in one device call (from
# the source tree): its registered rows and the rank-4 tile copy corpus cases on the GPU, then conv_tune.py's
# shapes of issue 19 with conv_ws beside conv_wg and cuDNN (kernel times, outputs checked).
# JSON under $OUT (conv_ws.jsonl).  About 3 minutes.
set -uo pipefail
source scripts/device/device_env.sh
timeout 120 python3 -m pytest -p no:cacheprovider -q tests/gpu/test_std_cuda.py tests/gpu/test_cuda_corpus.py \
  -k "conv_mma/ws or tile_box" -rfE 2>&1 | tail -8
cd scripts/device
export PYTHONPATH=/tmp/site:../../src:.
timeout 240 python3 conv_tune.py --reps 5 --shapes resnet_64_56 resnet_128_s2 resnet_256_14 resnet_512_7 \
  unet_320_64 conv1d_512_4096 whisper_80_384 whisper_384_s2 resnet_1x1_256_1024 \
  --configs WS128_S4 WS128_S4_P WS256_S3 WS64_S4 WG128_S4_P1 WG256_S4_P1 2>&1 \
  | tee "$out/conv_ws.jsonl" | cut -c1-250

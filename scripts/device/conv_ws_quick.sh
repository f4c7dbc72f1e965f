#!/usr/bin/env bash
# conv_ws_run.sh cut to what about four minutes of device time allow: the registered conv_ws rows and the rank 4/5
# tile copy corpus cases on the GPU, then four shapes of issue 19 (stride 1 and 2, 1-D and 2-D) with conv_ws beside
# conv_wg and cuDNN.  JSON under $OUT (conv_ws.jsonl).
set -uo pipefail
source scripts/device/device_env.sh
timeout 100 python3 -m pytest -p no:cacheprovider tests/gpu/test_std_cuda.py tests/gpu/test_cuda_corpus.py \
  -k "conv_mma/ws or tile_box" -rfE 2>&1 | tail -6
cd scripts/device
export PYTHONPATH=/tmp/site:../../src:.
timeout 130 python3 conv_tune.py --reps 5 --shapes resnet_256_14 unet_320_64 conv1d_512_4096 resnet_128_s2 \
  --configs WS128_S4 WS128_S4_P WG128_S4_P1 WG256_S4_P1 2>&1 | tee "$out/conv_ws.jsonl" | cut -c1-250

#!/usr/bin/env bash
# conv_ws at each patch width (8, 16, 32), with a box per patch row (_R) and 64-wide tiles beside conv_wg on
# four ResNet shapes (stride 1 and 2): whether the patch's shape sets conv_ws's time.  JSON under $OUT (pw.jsonl).
# About 30 seconds warm.
set -uo pipefail
source scripts/device/device_env.sh
cd scripts/device
export PYTHONPATH=/tmp/site:../../src:.
timeout 150 python3 conv_tune.py --reps 5 --shapes resnet_256_14 resnet_128_s2 resnet_64_56 resnet_512_7 \
  --configs WS128_S4_PW8 WS128_S4_PW8_R WS128_S4_PW16 WS128_S4_PW32 WS64_S4_PW8 WG128_S4_P1 2>&1 \
  | tee "$out/pw.jsonl" | cut -c1-130

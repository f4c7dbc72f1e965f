#!/usr/bin/env bash
# The fused decode (attention_decode_mma FUSED: the combine in the split's last group) on the GPU in one device
# call (from the source tree, carry .whl): its registered rows and the decode GPU tests, then beside the two-launch
# form and SDPA on the short rows where the combine's launch shows (decode_mma_tune.py, configs 2x3 and 2x3f).
# JSON under $OUT (decode_fused.jsonl, tests-fused.txt).  About 3 minutes.
set -uo pipefail
source scripts/device/device_env.sh
d=scripts/device
timeout 120 python3 -m pytest -p no:cacheprovider -q tests/gpu/test_std_cuda.py -k "decode_mma" -rfE \
  > "$out/tests-fused.txt" 2>&1
tail -3 "$out/tests-fused.txt"
PYTHONPATH=/tmp/site:src:$d timeout 150 python3 $d/decode_mma_tune.py --shapes 1,1024,8 1,4096,8 4,4096,8 16,1024,8 \
  16,4096,8 1,32768,8 --chunks 256 1024 2048 --configs 2x3 2x3f 2>&1 | grep '^{' | tee "$out/decode_fused.jsonl" \
  | cut -c1-200

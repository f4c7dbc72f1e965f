#!/usr/bin/env bash
# Issue 21's decode on the matrix units in one device call (from the source tree, carry .whl), under the 10-minute
# limit, the most telling first: attention_decode_mma's configurations beside SDPA and the host's plan
# (decode_mma_tune.py), the decode table through the host (kernel and call time, decode_table.py, every H_kv-8
# row, then the 32-KV-head rows), the paged decode beside the dense one, and the GPU tests of the matrix-unit
# fragments and the decode.  JSON under $OUT (decode_mma.jsonl, decode_table.jsonl, paged.jsonl, tests.txt).
set -uo pipefail
source scripts/device/device_env.sh
d=scripts/device
export PYTHONPATH=/tmp/site:src:$d
timeout 100 python3 $d/decode_mma_tune.py --shapes 16,4096,8 1,4096,8 4,4096,8 64,4096,8 1,32768,8 16,1024,8 \
  --chunks 128 256 512 1024 2048 2>&1 | grep '^{' > "$out/decode_mma.jsonl"
wc -l < "$out/decode_mma.jsonl"
timeout 120 python3 $d/decode_table.py --kv-heads 8 2>&1 | grep '^{' > "$out/decode_table.jsonl"
timeout 60 python3 $d/paged_check.py 2>&1 | grep '^{' > "$out/paged.jsonl"
timeout 90 python3 -m pytest -p no:cacheprovider tests/gpu/test_cuda_mma.py tests/gpu/test_std_cuda.py \
  tests/gpu/test_std_host_cuda.py -k "mma or decode or paged" -rfE > "$out/tests.txt" 2>&1
tail -3 "$out/tests.txt"
timeout 120 python3 $d/decode_table.py --kv-heads 32 2>&1 | grep '^{' >> "$out/decode_table.jsonl"
wc -l < "$out/decode_table.jsonl"

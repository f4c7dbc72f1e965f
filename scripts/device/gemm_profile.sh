#!/usr/bin/env bash
# One gemm_tune.py configuration under Nsight Compute on the H200: the first launch of the kernel whose name
# matches $KERNEL (default gemm_ws) with the full section set, then its details page and its SASS-level
# source page (stall samples per instruction) as text under $OUT.  Usage:
#   bash scripts/device/gemm_profile.sh WS_256_S3 4096 [--bt]
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
config=${1:-WS_256_S3}; size=${2:-4096}; shift 2 || true
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl; fi
export IRON_CACHE_DIR=/tmp/iron-cache PYTHONPATH=/tmp/site:../../src:.
cd scripts/device
timeout 240 ncu --clock-control none --set full --import-source no -k "regex:${KERNEL:-gemm_ws}" -c 1 \
  -o "$out/profile" -f python3 gemm_tune.py --sizes "$size" --configs "$config" --check-only "$@" 2>&1 | tail -4
ncu -i "$out/profile.ncu-rep" --page details > "$out/details.txt" 2>&1
ncu -i "$out/profile.ncu-rep" --page source --csv --print-source sass > "$out/source.csv" 2>&1
wc -c "$out/details.txt" "$out/source.csv"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Registers Per|Issue Slots Busy|No Eligible" \
  "$out/details.txt" | head -20

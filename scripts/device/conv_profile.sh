#!/usr/bin/env bash
# One conv_tune.py shape and configuration under Nsight Compute on the GPU machine: the first launch of the kernel
# whose name matches $KERNEL (default conv_ws) with the full section set, its details page and its SASS-level
# source page (stall samples per instruction) as text under $OUT/<shape>_<config>.  Usage:
#   bash scripts/device/conv_profile.sh unet_320_64 WS128_S4
set -uo pipefail
out=${OUT:-/tmp/out}
shape=${1:-unet_320_64}; config=${2:-WS128_S4}
dir="$out/${shape}_${config}"
mkdir -p "$dir"
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; fi
export IRON_CACHE_DIR=/tmp/iron-cache PYTHONPATH=/tmp/site:../../src:.
cd scripts/device
timeout 200 ncu --clock-control none --set full --import-source no -k "regex:${KERNEL:-conv_ws}" -c 1 \
  -o "$dir/profile" -f python3 conv_tune.py --shapes "$shape" --configs "$config" --check-only 2>&1 | tail -3
ncu -i "$dir/profile.ncu-rep" --page details > "$dir/details.txt" 2>&1
ncu -i "$dir/profile.ncu-rep" --page source --csv --print-source sass > "$dir/source.csv" 2>&1
rm -f "$dir/profile.ncu-rep"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Registers Per|Issue Slots Busy|\
No Eligible" \
  "$dir/details.txt" | head -12

#!/usr/bin/env bash
# One fp8_tune.py configuration under Nsight Compute: the first gemm_fp8 launch with the full section set, its
# details page and its SASS-level source page (stall samples per instruction) as text under $OUT, and the
# stall reasons summed over the instructions.  Usage: bash scripts/device/fp8_profile.sh FOLD_128_S5 4096x4096x4096
set -uo pipefail
config=${1:-FOLD_128_S5}; shape=${2:-4096x4096x4096}
out=${OUT:-/tmp/out}/${config}_${shape}
mkdir -p "$out"
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl; fi
export IRON_CACHE_DIR=/tmp/iron-cache PYTHONPATH=/tmp/site:../../src:.
cd scripts/device
timeout 240 ncu --clock-control none --set full --import-source no -k "regex:gemm_fp8" -c 1 \
  -o "$out/profile" -f python3 fp8_tune.py --shapes "$shape" --configs "$config" --check-only 2>&1 | tail -3
ncu -i "$out/profile.ncu-rep" --page details > "$out/details.txt" 2>&1
ncu -i "$out/profile.ncu-rep" --page source --csv --print-source sass > "$out/source.csv" 2>&1
rm -f "$out/profile.ncu-rep"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Registers Per|Issue Slots Busy|No Eligible|Warp Cycles Per Issued" \
  "$out/details.txt" | head -20

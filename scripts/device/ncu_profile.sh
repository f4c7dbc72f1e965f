#!/usr/bin/env bash
# One tuner launch under Nsight Compute on the GPU machine, shared by conv_profile.sh, fp8_profile.sh and
# gemm_profile.sh: the first launch of the kernel whose name matches KERNEL (a regex) with the full section set,
# its details page and its SASS-level source page (stall samples per instruction) as text under DIR, the
# headline metrics, and the stall reasons summed over the instructions (ncu_stalls.py).  Usage, from the
# repository root: bash scripts/device/ncu_profile.sh DIR KERNEL TUNER.py [tuner arguments; --check-only is added]
set -uo pipefail
dir=$1; kernel=$2; shift 2
mkdir -p "$dir"
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; fi
export IRON_CACHE_DIR=/tmp/iron-cache PYTHONPATH=/tmp/site:../../src:.
cd scripts/device
timeout 240 ncu --clock-control none --set full --import-source no -k "regex:${kernel}" -c 1 \
  -o "$dir/profile" -f python3 "$@" --check-only 2>&1 | tail -3
ncu -i "$dir/profile.ncu-rep" --page details > "$dir/details.txt" 2>&1
ncu -i "$dir/profile.ncu-rep" --page source --csv --print-source sass > "$dir/source.csv" 2>&1
rm -f "$dir/profile.ncu-rep"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Registers Per|Issue Slots Busy|\
No Eligible|Warp Cycles Per Issued" "$dir/details.txt" | head -20
python3 ncu_stalls.py "$dir/source.csv"

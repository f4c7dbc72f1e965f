#!/usr/bin/env bash
# One fp8_tune.py configuration under Nsight Compute (ncu_profile.sh: the first gemm_fp8 launch, its details and
# SASS stall samples as text under $OUT/<config>_<shape>, the stall reasons summed).  Usage:
#   bash scripts/device/fp8_profile.sh FOLD_128_S5 4096x4096x4096
config=${1:-FOLD_128_S5}; shape=${2:-4096x4096x4096}
exec bash scripts/device/ncu_profile.sh "${OUT:-/tmp/out}/${config}_${shape}" "${KERNEL:-gemm_fp8}" fp8_tune.py \
  --shapes "$shape" --configs "$config"

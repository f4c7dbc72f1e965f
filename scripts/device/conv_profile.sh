#!/usr/bin/env bash
# One conv_tune.py shape and configuration under Nsight Compute (ncu_profile.sh: the first launch of the kernel
# matching $KERNEL, default conv_ws, its details and SASS stall samples as text under $OUT/<shape>_<config>, the
# stall reasons summed).  Usage:
#   bash scripts/device/conv_profile.sh unet_320_64 WS128_S4
shape=${1:-unet_320_64}; config=${2:-WS128_S4}
exec bash scripts/device/ncu_profile.sh "${OUT:-/tmp/out}/${shape}_${config}" "${KERNEL:-conv_ws}" conv_tune.py \
  --shapes "$shape" --configs "$config"

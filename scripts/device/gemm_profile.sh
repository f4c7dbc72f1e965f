#!/usr/bin/env bash
# One gemm_tune.py configuration under Nsight Compute (ncu_profile.sh: the first launch of the kernel matching
# $KERNEL, default gemm_ws, its details and SASS stall samples as text under $OUT, the stall reasons summed).
# Usage:
#   bash scripts/device/gemm_profile.sh WS_256_S3 4096 [--bt]
config=${1:-WS_256_S3}; size=${2:-4096}; shift 2 || true
exec bash scripts/device/ncu_profile.sh "${OUT:-/tmp/out}" "${KERNEL:-gemm_ws}" gemm_tune.py --sizes "$size" \
  --configs "$config" "$@"

#!/usr/bin/env bash
# Set up everything Iron needs on a fresh machine: the system toolchains that
# validate emitted code (scripts/install_toolchains.sh), and a virtual
# environment with Iron installed (editable), its test dependencies, the CUDA
# compiler (NVRTC) and the Vulkan binding.  Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bash scripts/install_toolchains.sh
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
# cuda: cuda-bindings + NVRTC (pinned as a pair); vulkan: the cffi Vulkan binding.
"${PIP[@]}" -e '.[test,cuda,vulkan]'
# The headers NVRTC needs (cuda_fp16.h, cuda_bf16.h, crt/*), same CUDA release as NVRTC.
"${PIP[@]}" --no-deps nvidia-cuda-runtime==13.5.37 nvidia-cuda-crt==13.5.37
# nvdisasm, same release: the SASS of a CUBIN (iron.codegen.toolchains.sass; the Hopper kernels' tests read it).
"${PIP[@]}" --no-deps nvidia-cuda-nvdisasm==13.5.37
# PyTorch for iron.torch's tests (tests/pytorch): 2.13.0 is the CPU build this kind of machine keeps on disk
# (a plain 'torch' would fetch a CUDA build of several GB).  Already present: nothing is installed.
"${PIP[@]}" torch==2.13.0

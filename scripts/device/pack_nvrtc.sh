#!/usr/bin/env bash
# Packs this machine's NVRTC (the 13.5 wheel `pip install iron-kernels[cuda]` pins) into .nvrtc/ (about 37 MiB,
# xz; listed in .git/info/exclude) for the GPU machine, whose own NVRTC is 13.0: device_env.sh unpacks it there
# and preloads it, so a wave's kernels are built as a user's install builds them.  NVRTC 13.0 spills where 13.5
# does not (attention_prefill_ws's one-tile loop 160 bytes, OVERLAP 252 and serialised wgmma; docs/toolchains.md).
# The CUBINs it makes need no newer driver (CUDA's minor-version compatibility; PTX is never handed to the driver).
# Run once here, at the repository root:  bash scripts/device/pack_nvrtc.sh
# then carry it with the wheels a wave uses (carry is limited to 64 MiB, so not the whole .whl: its two cmeel
# wheels are Vulkan's):  [".nvrtc", ".whl/gguf-0.19.0-py3-none-any.whl", ".whl/tqdm-4.70.1-py3-none-any.whl",
# ".whl/pyyaml-6.0.4-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl"]
set -euo pipefail
lib=${1:-$(.venv/bin/python -c "import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], 'lib'))")}
mkdir -p .nvrtc
for f in "$lib"/libnvrtc.so.13 "$lib"/libnvrtc-builtins.so.13.*; do
  case $f in *.alt.*) continue ;; esac
  to=".nvrtc/$(basename "$f").xz"
  xz -T0 -9e -c "$f" > "$to.part" && mv "$to.part" "$to"
done
ls -la .nvrtc

#!/usr/bin/env bash
# The correctness checks of the GPU machine in one call (through the device tool, from the source tree):
# the Vulkan loader and wheels carried in .gl / .whl (README.md here), then
#   1. the GPU tests and the CUDA/Vulkan runtime tests (NVIDIA's Vulkan driver: float controls, loop limit);
#   2. the std host functions' argument contract on CUDA tensors;
#   3. the differential fuzzer (docs/fuzzing.md) on interp, vulkan and cuda: JOBS processes of COUNT seeds each,
#      from SEED (default 1000).
# Logs under $OUT.  Arguments: what to run ("tests", "fuzz" or "all"; default all).
set -uo pipefail
what=${1:-all}
out=${OUT:-/tmp/out}
mkdir -p "$out"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:src:tests PYTHONUNBUFFERED=1
export IRON_CACHE_DIR=/tmp/iron-cache
if [ "$what" = all ] || [ "$what" = tests ]; then
  python3 -m iron device 2>&1 | tee "$out/device.txt" | head -40
  python3 -m pytest -p no:cacheprovider tests/gpu tests/runtime/cuda tests/runtime/vulkan \
    tests/std/test_host_contract.py tests/fuzz 2>&1 | tee "$out/pytest.log" | tail -30
fi
if [ "$what" = all ] || [ "$what" = fuzz ]; then
  jobs=${JOBS:-8}
  count=${COUNT:-40}
  for j in $(seq 0 $((jobs - 1))); do
    python3 scripts/fuzz.py --count "$count" --seed $((${SEED:-1000} + j * count)) --backends interp,vulkan,cuda \
      --out /tmp/fuzz-fail > "/tmp/fuzz-$j.log" 2>&1 &
  done
  wait
  tail -n 3 /tmp/fuzz-*.log | tee "$out/fuzz.log"
  if [ -d /tmp/fuzz-fail ]; then tar czf "$out/fuzz-fail.tgz" -C /tmp fuzz-fail; fi
fi

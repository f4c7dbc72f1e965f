#!/usr/bin/env bash
# Issue 22 on the GPU in one device call (from the source tree, carry .whl): the CUDA tests of iron.models (the tiny
# GGUF against the float64 reference: f32 lock step, f16 / bf16 prefill then decode), then llama_bench.py at real
# sizes (hidden 4096, 32 / 8 heads, MLP 14336, 4 blocks; B 1 and 16; Iron eager and graphed beside PyTorch eager
# and graphed, logits checked against f32 torch).  JSON under $OUT (llama.jsonl, tests-models.txt).  About 4
# minutes; issue 22's table takes two calls, LLAMA_ARGS=--compile (bf16) then LLAMA_ARGS="--compile --qtype Q4_K"
# (torch.compile with and without CUDA graphs too; about 6 minutes each).
set -uo pipefail
source scripts/device/device_env.sh
export PYTHONPATH=/tmp/site:src
TAIL=15 gpu_tests models 120 tests/gpu/test_models_cuda.py -x
timeout ${LLAMA_TIMEOUT:-200} python3 scripts/device/llama_bench.py --layers 4 --batch 1 16 --profile ${LLAMA_ARGS:-} 2>&1 \
  | tee "$out/llama.log" | grep '^{' | tee "$out/llama.jsonl"
grep -v '^{' "$out/llama.log" | tail -20

#!/usr/bin/env bash
# What the sessions of 2026-12-07 changed without a GPU, measured in two device calls (from the source tree, carry
# .whl), any NVIDIA card, each under the 10-minute limit:
#   bash scripts/device/followup_wave.sh kernels   (about 6 minutes)
#     the GPU tests of the decode, the few-row products, the launch paths and programmatic dependent launch;
#     pdl_chain.py with IRON_PDL off and on (chains of dependent kernels, eager and graphed);
#     decode_mma_tune.py at B = 1, 4 and 16, the subgroups merged in turn or in one step (PAR), two and four subgroups;
#     decode_table.py --kernels (each kernel beside cuDNN's: did the Q copy cut the split pass's fixed cost?);
#     few_tune.py (gemm_few's chosen configurations, the 256-deep candidates, every quant_few candidate).
#   bash scripts/device/followup_wave.sh models    (about 7 minutes)
#     llama_bench.py --compile (the compiled PyTorch baseline with its weights static) at B 1 and 16;
#     llama_bench.py with IRON_PDL=1 (Iron eager and graphed with programmatic dependent launch);
#     Nsight Compute on the B = 1, 1K-key split pass (where its fixed cost goes, under $OUT/ncu-decode).
#   bash scripts/device/followup_wave.sh verify    (about 8 minutes)
#     with the defaults those runs chose (programmatic dependent launch on, the batch-1 decode chunks, the few-row
#     bindings): the whole CUDA GPU suite, decode_table.py beside SDPA and llama_bench.py at B 1 and 16.
#   bash scripts/device/followup_wave.sh quant     (about 6 minutes; carry .base too)
#     the quant GPU tests; every std/quant_gemv bench row of the tree before the word kernels (.base/src) and of
#     this one, beside torch.mv on the bf16 weights (before_after.py: Q4_K's word kernel against the one before it,
#     and its other order (q4_k_pieces); Q8_0's and Q4_0's word kernels beside their byte
#     kernels; the split rows);
#     llama_bench.py --qtype Q4_K at B = 1 on both trees (quant.jsonl, llama_q4k.jsonl).
#   bash scripts/device/followup_wave.sh decode    (about 2 minutes)
#     the decode GPU tests; decode_table.py at B 1, 4, 16, 64 and S 1K, 4K, 32K with the plan as it stands, with
#     about 256 groups instead of 128 (MMA_PLAN["groups"]), and without PAR, DIRECT and the tiled combine, twice in
#     turn (decode_now.jsonl, decode_groups256.jsonl, decode_before.jsonl); paged_check.py, the paged decode beside
#     the dense one, bit for bit (decode_paged.jsonl).
# JSON under $OUT (tests-followup.txt, pdl.jsonl, decode_short.jsonl, decode_kernels.jsonl, few.jsonl, llama.jsonl,
# llama_pdl.jsonl; verify: tests-gpu.txt, decode.jsonl, llama.jsonl).
set -uo pipefail
source scripts/device/device_env.sh
part=${1:-kernels}
if [ "$part" = kernels ]; then
  gpu_tests followup 150 tests/gpu/test_cuda_pdl.py tests/gpu/test_cuda_runtime.py tests/gpu/test_std_host_cuda.py \
    tests/gpu/test_std_cuda.py -k "pdl or chain or runtime or decode or few or graph"
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  for pdl in 0 1; do
    IRON_PDL=$pdl timeout 45 python3 pdl_chain.py 2>&1 | grep '^{' | tee -a "$out/pdl.jsonl"
  done
  timeout 150 python3 decode_mma_tune.py --shapes 1,1024,8 1,4096,8 4,1024,8 16,4096,8 \
    --configs 2x3 2x3p 4x2 4x2p 4x3p --chunks 64 128 256 2048 --calls 5 2>&1 | grep '^{' \
    | tee "$out/decode_short.jsonl" | cut -c1-200
  timeout 50 python3 decode_table.py --batches 1 16 --seqs 1024 4096 --kv-heads 8 --kernels 2>&1 | grep '^{' \
    | tee "$out/decode_kernels.jsonl" | cut -c1-330
  timeout 130 python3 few_tune.py --rows 16 --configs 32_128_6 64_128_4 32_256_4 32_256_5 64_256_3_256 2>&1 \
    | grep '^{' | tee "$out/few.jsonl" | cut -c1-140
elif [ "$part" = decode ]; then
  gpu_tests decode 100 tests/gpu/test_std_host_cuda.py tests/gpu/test_std_cuda.py -k "decode"
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  for mode in now groups256 before now groups256 before; do
    extra=""; [ $mode = before ] && extra="--plan PAR=0,DIRECT=0 --combine tiled_from=65536"
    [ $mode = groups256 ] && extra="--plan groups=256"
    timeout 70 python3 decode_table.py --batches 1 4 16 64 --seqs 1024 4096 32768 --kv-heads 8 $extra 2>&1 \
      | grep '^{' | tee -a "$out/decode_$mode.jsonl" | cut -c1-250
  done
  timeout 50 python3 paged_check.py 2>&1 | grep '^{' | tee "$out/decode_paged.jsonl" | cut -c1-250
elif [ "$part" = quant ]; then
  # base: the tree before Q4_K's word kernel, carried as .base/src (git archive <commit> src | tar -x -C .base)
  gpu_tests quant 90 tests/gpu/test_std_host_cuda.py tests/gpu/test_std_cuda.py -k "quant or gguf"
  EXTRA_PYTHONPATH=/tmp/site timeout 300 python3 scripts/device/before_after.py .base/src src \
    --filter std/quant_gemv --rounds 1 2>&1 | tee "$out/quant.jsonl" | cut -c1-200
  for tree in .base/src src; do
    PYTHONPATH=/tmp/site:$tree:scripts/device timeout 120 python3 scripts/device/llama_bench.py --layers 4 --batch 1 \
      --qtype Q4_K 2>&1 | grep '^{' | sed "s|^{|{\"tree\": \"$tree\", |" | tee -a "$out/llama_q4k.jsonl" | cut -c1-300
  done
elif [ "$part" = verify ]; then
  TAIL=4 gpu_tests gpu 330 -x tests/gpu tests/runtime/cuda
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  timeout 70 python3 decode_table.py --batches 1 4 16 --seqs 1024 4096 32768 --kv-heads 8 2>&1 | grep '^{' \
    | tee "$out/decode.jsonl" | cut -c1-330
  timeout 150 python3 llama_bench.py --layers 4 --batch 1 16 2>&1 | grep '^{' | tee "$out/llama.jsonl"
else
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  timeout 180 python3 llama_bench.py --layers 4 --batch 1 16 --compile 2>&1 | grep '^{' | tee "$out/llama.jsonl"
  IRON_PDL=1 timeout 150 python3 llama_bench.py --layers 4 --batch 1 16 2>&1 | grep '^{' \
    | sed 's/^{/{"pdl": true, /' | tee "$out/llama_pdl.jsonl"
  (cd ../.. && timeout 90 bash scripts/device/ncu_profile.sh "$out/ncu-decode" attention_decode_mma decode_once.py \
    1 32 8 1024 128 bfloat16 2>&1 | tail -30)
fi

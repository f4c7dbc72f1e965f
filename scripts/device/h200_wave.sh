#!/usr/bin/env bash
# The figures issues 19 and 20 need from the H200, in two device calls (from the source tree, carry .whl), each
# under the 10-minute limit:
#   bash scripts/device/h200_wave.sh gemm   the GPU tests of gemm and clusters; gemm_ws beside cuBLAS on issue
#                                          20's shapes, with and without clusters (gemm_tune.py, B both ways);
#                                          gemm_fp8 beside torch._scaled_mm (fp8_tune.py: the host's folding
#                                          and fast configurations, 128-wide folds).  About 6 minutes.
#   bash scripts/device/h200_wave.sh conv   the GPU tests of conv; iron.std.conv's host functions beside cuDNN on
#                                          issue 19's shapes (conv_table.py: GPU time from the profiler and call
#                                          time, both outputs checked); 192-wide tiles on Whisper.  About 7 minutes.
#   bash scripts/device/h200_wave.sh attention   issue 21: the attention GPU tests; prefill_attention (the host's
#                                          persistent ping-pong loop) and the plain loop beside SDPA at S 1K-16K,
#                                          causal and not, through the host (prefill_tune.py --host); decode beside
#                                          SDPA on every listed B, S and H_kv (decode_table.py); the paged decode
#                                          and prefill beside their dense twins.  About 7 minutes.
#   bash scripts/device/h200_wave.sh rest   what the 2026-12-07 H200 session left: `iron run --check` on GGUF files
#                                          of real sizes (f16, then Q4_K; issue 22's command line, every step's
#                                          logits against PyTorch's f32 model), the launch path
#                                          (launch_overhead.py, issue 18's kern.launch), Whisper's rows through the
#                                          host on 192-wide tiles (conv_table.py), the conv and quant GPU tests.
#                                          About 8 minutes.
#   bash scripts/device/h200_wave.sh tune   the 2026-12-07 session's gaps as tuning runs: first the decode at B 16
#                                          and 64 with more bytes in flight an SM (four subgroups a group, four or
#                                          six ring stages, both: at B = 16, 4K one group an SM keeps 32 KiB in
#                                          flight, below what the H200's bandwidth-latency product asks); the paged
#                                          decode with its table read a ring block early (paged_check.py); ResNet
#                                          512 at 7^2 in conv_ws's narrow and persistent configurations
#                                          (conv_tune.py); the decode table's 32-KV-head rows (a cache past the i32
#                                          limit is now decoded in batches); B 1 and 4 with 256 groups instead of
#                                          128.  About 9 minutes.
#   bash scripts/device/h200_wave.sh now    for a session lent a single call: the models, paged and index-limit GPU
#                                          tests, rest's two `iron run --check` runs, the paged decode with and
#                                          without TABLE_AHEAD, and B = 16 with four subgroups (and four stages),
#                                          six stages, or two chunks a pair.  About 8 minutes (4 on an H100).
#   bash scripts/device/h200_wave.sh split  conv_ws's K split (conv_ws_finish adds the ranges) on ResNet's 512 at
#                                          7^2: the kernels beside the 64-wide whole tiles (conv_tune.py), the host
#                                          with WS_PLAN's split on and off (conv_table.py --plan), then the GPU
#                                          tests (with gemm's and fp8's clusters of four); the 512-row gemm and fp8
#                                          shapes in clusters of four beside pairs (gemm_tune.py, fp8_tune.py), and
#                                          fp8's fast accumulation on 192 columns.  About 7 minutes.
#   bash scripts/device/h200_wave.sh nvrtc  (carry .nvrtc, pack_nvrtc.sh says with which wheels) the prefill's loops
#                                          and the decode under the carried NVRTC 13.5, then the machine's 13.0:
#                                          what a user's pinned NVRTC gives beside the image's.  About 8 minutes.
# While H200 figures are missing, a session's order: now, split, nvrtc, tune, rest (call run with timeout_s 600).
# JSON under $OUT (gemm.jsonl, fp8.jsonl, conv_table.jsonl, conv_ws192.jsonl, prefill.jsonl, decode.jsonl,
# paged*.jsonl, run-*.txt, launch.json, tests-*.txt) for BENCHMARKS.md.
set -uo pipefail
source scripts/device/device_env.sh
part=${1:?usage: h200_wave.sh gemm|conv|attention|rest|tune|now|split|nvrtc}

# model_checks: issue 22's command line on GGUF files of real sizes (f16, then Q4_K), every step's logits against
# PyTorch's f32 model (--check exits 1 past the dtype's bound); the output in $out/run-*.txt.
model_checks() {
  mkdir -p build
  for q in f16 Q4_K; do
    qtype=$([ "$q" = f16 ] || echo "--qtype $q")
    timeout 90 python3 -m iron.models random "build/llama-4l-$q.gguf" --preset llama-4l $qtype > /dev/null
    timeout 90 python3 -m iron run "build/llama-4l-$q.gguf" --prompt 1,15043,29892,338 --prompt 1,450 --max-new 32 \
      --graphs --check 2>&1 | tee "$out/run-$q.txt" | tail -4
  done
}

if [ "$part" = gemm ]; then
  gpu_tests gemm 150 tests/gpu/test_cuda_clusters.py tests/gpu/test_std_cuda.py tests/gpu/test_std_host_cuda.py \
    -k "clusters or gemm"
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  timeout 80 python3 gemm_tune.py --sizes 4096 8192 --configs WS_256_S4 WSC_256_S4 2>&1 | grep '^{' \
    | tee "$out/gemm.jsonl" | cut -c1-200
  timeout 150 python3 gemm_tune.py --sizes --shapes 8192x11008x4096 8192x4096x4096 512x4096x4096 512x11008x4096 --bt \
    --configs WS_256_S4 WSC_256_S4 WS_128_S6 WSC_128_S6 WS_168_S4 WSC_168_S5 2>&1 | grep '^{' \
    | tee -a "$out/gemm.jsonl" | cut -c1-200
  timeout 150 python3 fp8_tune.py --shapes 4096x4096x4096 8192x8192x8192 8192x11008x4096 8192x4096x4096 \
    512x11008x4096 512x4096x4096 --configs FOLD_128_S5 FOLDP_256_S4 FOLD_192_S4 FASTP_256_S4 FASTC_128_S5 2>&1 \
    | grep '^{' | tee "$out/fp8.jsonl" | cut -c1-200
elif [ "$part" = attention ]; then
  gpu_tests attention 130 tests/gpu/test_std_host_cuda.py tests/gpu/test_std_cuda.py \
    -k "attention or prefill or decode or paged or varlen"
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  timeout 150 python3 prefill_tune.py --configs WSPP_128_S2 WSP_128_S2 --host --reps 5 2>&1 | grep '^{' \
    | tee "$out/prefill.jsonl" | cut -c1-200
  timeout 220 python3 decode_table.py 2>&1 | grep '^{' | tee "$out/decode.jsonl" | cut -c1-220
  timeout 40 python3 paged_check.py 2>&1 | grep '^{' | tee "$out/paged_decode.jsonl" | cut -c1-200
  timeout 50 python3 paged_prefill_check.py 2>&1 | grep '^{' | tee "$out/paged_prefill.jsonl" | cut -c1-200
elif [ "$part" = rest ]; then
  gpu_tests rest 220 tests/gpu/test_std_host_cuda.py tests/gpu/test_std_cuda.py tests/gpu/test_models_cuda.py \
    -k "conv or quant or gguf or models or index_limit"
  model_checks
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  timeout 60 python3 launch_overhead.py --count 2000 --reps 5 > "$out/launch.json" 2>&1; tail -c 1500 "$out/launch.json"
  timeout 60 python3 conv_table.py --reps 3 --count 30 --shapes whisper_80_384 whisper_384_s2 2>&1 | grep '^{' \
    | tee "$out/conv_whisper.jsonl" | cut -c1-200
elif [ "$part" = now ]; then  # the most of rest and tune that one call holds, for a session lent one call
  model_checks
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  timeout 60 python3 paged_check.py 2>&1 | grep '^{' | tee "$out/paged_ahead.jsonl" | cut -c1-260
  # B = 16: more bytes in flight a group (four subgroups, four or six stages), or two groups a pair (4096-key
  # caches in 2048-key chunks and a combine, not one chunk a pair: one_wave=0)
  for plan in SUBS=4 SUBS=4,STAGES=4 STAGES=6 one_wave=0; do
    timeout 45 python3 decode_table.py --kv-heads 8 --batches 16 --plan $plan 2>&1 | grep '^{' \
      | tee "$out/decode_${plan//[=,]/_}.jsonl" | cut -c1-220
  done
  # B = 1 and 4: a group of 256-key chunks walks eight ring blocks, about half a microsecond each with two in
  # flight (an H100's tune, docs/std/attention.md); six stages keep five in flight.
  timeout 45 python3 decode_table.py --kv-heads 8 --batches 1 4 --plan STAGES=6 2>&1 | grep '^{' \
    | tee "$out/decode_STAGES_6_b1_4.jsonl" | cut -c1-220
  cd ../..
  export PYTHONPATH=/tmp/site:src:tests
  gpu_tests now 100 tests/gpu/test_std_host_cuda.py tests/gpu/test_models_cuda.py -k "models or index_limit or paged"
elif [ "$part" = split ]; then  # conv_ws's K ranges on ResNet's 512 at 7^2: kernels, the host, the GPU tests
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  timeout 90 python3 conv_tune.py --reps 3 --shapes resnet_512_7 --configs WS64_S4 WS128_S4_K2 WS128_S4_K4 \
    WS256_S3_K4 2>&1 | grep '^{' | tee "$out/conv_split_tune.jsonl" | cut -c1-330
  for plan in split=1 split=0; do
    timeout 45 python3 conv_table.py --reps 3 --count 30 --shapes resnet_512_7 --plan $plan 2>&1 | grep '^{' \
      | tee -a "$out/conv_split_host.jsonl" | cut -c1-600
  done
  cd ../..
  export PYTHONPATH=/tmp/site:src:tests
  TAIL=6 gpu_tests split 150 tests/gpu/test_std_host_cuda.py tests/gpu/test_std_cuda.py \
    -k "k_ranges or ws_split or cluster4"
  cd scripts/device  # then 512-row gemm and fp8 in clusters of four, and fp8's fast accumulation on 192 columns
  export PYTHONPATH=/tmp/site:../../src:.
  timeout 100 python3 gemm_tune.py --sizes --shapes 512x4096x4096 512x11008x4096 --bt --configs WSC_128_S6 \
    WSC4_128_S6 WSC4_128_S4 WSC_168_S5 WSC4_168_S5 2>&1 | grep '^{' | tee "$out/gemm_cluster4.jsonl" | cut -c1-200
  timeout 100 python3 fp8_tune.py --shapes 512x11008x4096 512x4096x4096 --configs FOLD_192_S4 FASTC_128_S5 \
    FAST_192_S4 FASTC_192_S4 FASTC4_128_S5 FOLDC4_128_S5 FOLDC4_192_S4 FASTC4_192_S4 2>&1 | grep '^{' \
    | tee "$out/fp8_192.jsonl" | cut -c1-200
elif [ "$part" = nvrtc ]; then  # NVRTC 13.5 (carried, .nvrtc) against the machine's 13.0, in turn, same kernels
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  for tc in 13.5 13.0; do
    run=()
    [ "$tc" = 13.0 ] && run=(env -u LD_PRELOAD LD_LIBRARY_PATH="$IRON_OWN_LIBRARY_PATH" \
      IRON_CACHE_DIR=/tmp/iron-cache-130)
    "${run[@]}" python3 -c "from iron.codegen.toolchains import nvrtc; print(nvrtc.version())"
    # the host's persistent ping-pong loop, the one-tile loop (13.0: 160 bytes of spills), OVERLAP (13.0: 252 bytes
    # and serialised wgmma; 13.5: neither)
    "${run[@]}" timeout 170 python3 prefill_tune.py --configs WSPP_128_S2 WSP_128_S2 WSO_128_S2 --seqs 1024 4096 16384 \
      --reps 5 2>&1 | grep '^{' | tee "$out/prefill_nvrtc_$tc.jsonl" | cut -c1-200
    "${run[@]}" timeout 60 python3 decode_table.py --kv-heads 8 --batches 1 16 2>&1 | grep '^{' \
      | tee "$out/decode_nvrtc_$tc.jsonl" | cut -c1-220
  done
elif [ "$part" = tune ]; then
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  # More bytes in flight an SM at B 16 and 64 (one group an SM keeps two 16 KiB ring blocks in flight at the plan's
  # SUBS=2, STAGES=3): four subgroups (two 32 KiB blocks), four or six stages, and both.
  for plan in SUBS=4 STAGES=4 SUBS=4,STAGES=4 STAGES=6; do
    timeout 60 python3 decode_table.py --kv-heads 8 --batches 16 64 --plan $plan 2>&1 | grep '^{' \
      | tee "$out/decode_${plan//[=,]/_}.jsonl" | cut -c1-220
  done
  timeout 60 python3 paged_check.py 2>&1 | grep '^{' | tee "$out/paged_ahead.jsonl" | cut -c1-260
  timeout 90 python3 conv_tune.py --reps 3 --shapes resnet_512_7 --configs WS64_S4 WS64_S6 WS64_S4_P WS128_S4 \
    WS128_S4_P WS64_S4_PW8_R 2>&1 | grep '^{' | tee "$out/conv_512_7.jsonl" | cut -c1-200
  timeout 150 python3 decode_table.py --kv-heads 32 2>&1 | grep '^{' | tee "$out/decode_kv32.jsonl" | cut -c1-220
  timeout 100 python3 decode_table.py --kv-heads 8 --batches 1 4 --plan groups=256 2>&1 | grep '^{' \
    | tee "$out/decode_groups256.jsonl" | cut -c1-220
else
  gpu_tests conv 200 tests/gpu/test_std_host_cuda.py tests/gpu/test_std_cuda.py -k "conv"
  cd scripts/device
  export PYTHONPATH=/tmp/site:../../src:.
  timeout 200 python3 conv_table.py --reps 3 --count 30 2>&1 | grep '^{' | tee "$out/conv_table.jsonl" | cut -c1-160
  timeout 50 python3 conv_tune.py --reps 3 --shapes whisper_80_384 whisper_384_s2 --configs WS128_S4 WS192_S4 2>&1 \
    | grep '^{' | tee "$out/conv_ws192.jsonl" | cut -c1-200  # fewer, wider tiles for 384 channels (UNet: 160 wide)
fi

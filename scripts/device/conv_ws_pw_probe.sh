set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
cd scripts/device && export PYTHONPATH=/tmp/site:../../src:. IRON_CACHE_DIR=/tmp/iron-cache
timeout 150 python3 conv_tune.py --reps 5 --shapes resnet_256_14 resnet_128_s2 resnet_64_56 resnet_512_7 \
  --configs WS128_S4_PW8 WS128_S4_PW16 WS128_S4_PW32 WS64_S4_PW8 WG128_S4_P1 2>&1 | tee $OUT/pw.jsonl | cut -c1-130

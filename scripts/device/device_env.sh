# Sourced (from the repository root) by the device scripts that run tests and tuners in one call: $out for their
# JSON ($OUT, which the device tool brings back), the local wheels (.whl, carried) installed into /tmp/site, the
# GPU's name, and the source tree, the tests and a module cache on the path.
out=${OUT:-/tmp/out}
mkdir -p "$out"
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; fi
nvidia-smi --query-gpu=name --format=csv,noheader
# NVRTC 13.5 where .nvrtc was carried (pack_nvrtc.sh; IRON_CARRIED_NVRTC=0 keeps the machine's 13.0): unpacked
# once, preloaded so cuda-bindings' NVRTC module binds it, its builtins found on the library path.
# (IRON_OWN_LIBRARY_PATH keeps the path as it was, so a process can go back to the machine's NVRTC: env -u LD_PRELOAD
# LD_LIBRARY_PATH="$IRON_OWN_LIBRARY_PATH", as h200_wave.sh nvrtc does; the carried folder first on the path could
# otherwise still win the library's lookup by name.)
export IRON_OWN_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
if [ -d .nvrtc ] && [ "${IRON_CARRIED_NVRTC:-1}" = 1 ]; then
  python3 - <<'PY' && export LD_PRELOAD=/tmp/nvrtc/libnvrtc.so.13 \
    LD_LIBRARY_PATH=/tmp/nvrtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
import lzma, os, pathlib, shutil
dst = pathlib.Path("/tmp/nvrtc")
dst.mkdir(exist_ok=True)
for src in pathlib.Path(".nvrtc").glob("*.xz"):
    target = dst / src.name[:-3]
    if not target.exists():
        with lzma.open(src) as f, open(f"{target}.part", "wb") as g:
            shutil.copyfileobj(f, g, 1 << 22)
        os.replace(f"{target}.part", target)
PY
fi
export PYTHONPATH=/tmp/site:src:tests
export IRON_CACHE_DIR=/tmp/iron-cache

# gpu_tests NAME SECONDS PYTEST-ARGS...: the GPU tests of a wave, their report in $out/tests-NAME.txt (brought back)
# and its last lines on the output; TAIL lines (default 3).
gpu_tests() {
  local name=$1 seconds=$2
  shift 2
  timeout "$seconds" python3 -m pytest -p no:cacheprovider -rfE "$@" > "$out/tests-$name.txt" 2>&1
  tail -"${TAIL:-3}" "$out/tests-$name.txt"
}

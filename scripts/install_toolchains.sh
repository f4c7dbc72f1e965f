#!/usr/bin/env bash
# Install the system toolchains Iron validates its emitted code with (Debian 12):
#   Vulkan / SPIR-V: Mesa lavapipe, the Vulkan loader, glslc, spirv-tools, the validation layer
#   HIP:             hipcc, the HIP headers and the AMDGPU device libraries (ROCm 5.2, clang-15)
#   Metal:           clang-19 (syntax checks MSL against Iron's Metal shim header)
# The CUDA toolchain (NVRTC) comes from PyPI wheels, installed by scripts/setup.sh.
#
# Idempotent: installs only the packages that are missing.  Does nothing (and
# says so) where it cannot install: not root, or no apt-get.  Fails loudly when
# an install fails.  IRON_SKIP_TOOLCHAINS=1 skips it entirely.
set -euo pipefail

PACKAGES=(
  mesa-vulkan-drivers libvulkan1 vulkan-tools glslc spirv-tools glslang-tools vulkan-validationlayers
  hipcc libamdhip64-dev rocm-device-libs llvm-15
  clang-19
)

log() { printf 'install_toolchains: %s\n' "$*" >&2; }

if [ "${IRON_SKIP_TOOLCHAINS:-0}" = "1" ]; then
  log "IRON_SKIP_TOOLCHAINS=1: skipped"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
  log "no apt-get here: install these packages (or their equivalents) yourself: ${PACKAGES[*]}"
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  log "not root: run 'sudo apt-get install ${PACKAGES[*]}' (or run this script as root)"
  exit 0
fi

installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

missing=()
for pkg in "${PACKAGES[@]}"; do
  installed "$pkg" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

# Another apt/dpkg run may hold the lock: wait for it rather than fail.
export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-q -y --no-install-recommends -o DPkg::Lock::Timeout=600)

log "installing ${missing[*]}"
# Refresh the package lists only when some package is unknown to apt.
for pkg in "${missing[@]}"; do
  if ! apt-cache show "$pkg" >/dev/null 2>&1; then
    apt-get -qq -o DPkg::Lock::Timeout=600 update >/dev/null
    break
  fi
done
if ! out=$(apt-get install "${APT_OPTS[@]}" "${missing[@]}" 2>&1); then
  printf '%s\n' "$out" | tail -n 40 >&2
  log "FAILED to install: ${missing[*]}"
  exit 1
fi
for pkg in "${missing[@]}"; do
  if ! installed "$pkg"; then
    log "FAILED: $pkg is still not installed"
    exit 1
  fi
done
log "done"

"""The code-generation targets, the defaults the pass pipeline takes from them, and device profiles.

A :class:`TargetProfile` describes one device family of a target (lane width,
limits, dtypes, atomics, matrix-unit strategy, optional features): the
emitters and :mod:`iron.codegen.capabilities` read it, and
:func:`default_profile` / :func:`profile` pick one (docs/backends.md).

Floating-point contraction (fusing ``a*b + c`` into one ``fma``, rounded
once instead of twice) changes results in the last bit, so each target
follows what its own compiler does to hand-written C-like code by default.
A kernel then gives the same bits through Iron as through the vendor's
compiler, and ``fp_contract`` (``iron.config``) overrides it either way.

* ``cuda``: NVCC and NVRTC default to ``--fmad=true``: a multiply feeding an
  add becomes an FFMA.
* ``hip``: clang (hence hipcc) defaults to ``-ffp-contract=fast`` for CUDA
  and HIP sources, ``fast-honor-pragmas`` in current releases: contraction
  across statements unless a pragma forbids it.
* ``metal``: the Metal compiler compiles with fast math on unless told
  otherwise, and fast math licenses contraction.
* ``spirv``: GLSL lets a driver fuse unless the result is ``precise``, and
  some do; since that is the driver's choice, not a rule, the pipeline does
  not contract on its own.
* ``interp``: the interpreter runs exactly the operations the kernel wrote,
  so there is no contraction: it is the reference the other targets are
  compared against.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..core.dtypes import ALL_DTYPES
from .backends import UnknownTargetError, get_target

__all__ = ["TargetProfile", "PROFILES", "VULKAN_FEATURES", "UnknownTargetError", "default_profile", "profile",
           "vulkan_device_profile"]


# ---------------------------------------------------------------- target profiles

#: Every dtype name; a profile lists the ones its target can express.
_ALL_DTYPES = frozenset(d.name for d in ALL_DTYPES)
_INTS_32 = frozenset({"i32", "u32"})
_INTS_64 = frozenset({"i64", "u64"})


@dataclass(frozen=True)
class TargetProfile:
    """What one device family of a target can express, and its launch limits.

    The emitters read it to pick intrinsics (``lane_width``), the capability
    checks to refuse what the device lacks (``dtypes``, ``atomics``,
    ``features``) and ``check_launch`` to refuse launches over its limits.
    """

    target: str
    #: "sm_90", "gfx90a", "vulkan-lavapipe", "apple-m2", ...
    arch: str
    #: Threads per subgroup (warp, wavefront, simdgroup, Vulkan subgroup).
    lane_width: int
    max_threads_per_group: int
    #: Largest group extent per axis.
    max_group_dims: tuple[int, int, int]
    #: Shared (threadgroup) memory per group a kernel may declare statically, in bytes.
    max_shared_bytes: int
    #: Names of the dtypes the target computes with (``"f16"``, ``"i64"``, ...).
    dtypes: frozenset[str]
    #: ``(op, dtype)`` pairs, op one of add/max/min/xchg/cas, on global memory.
    atomics: frozenset[tuple[str, str]]
    #: The same for shared (threadgroup) memory.
    shared_atomics: frozenset[tuple[str, str]]
    #: Name of the matrix-unit strategy (``iron.codegen.mma``), or None.
    mma_strategy: str | None = None
    #: Optional device features and extensions the emitter may rely on.
    features: frozenset[str] = frozenset()
    #: For a device-queried strategy (Vulkan cooperative matrices): the ``(M, N, K, input, accumulator)``
    #: dtype-name combos the device reports; None for fixed strategies, whose combos are their own.
    mma_offered: frozenset[tuple[int, int, int, str, str]] | None = None
    #: CUDA: the larger per-group limit a kernel reaches by opting in (dynamic shared memory and
    #: ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``); None where ``max_shared_bytes`` is the limit.
    max_shared_bytes_optin: int | None = None

    @property
    def key(self) -> str:
        return f"{self.target}:{self.arch}"

    @property
    def shared_limit(self) -> int:
        """The most shared memory one group may use on this target, opting in where it must."""
        return max(self.max_shared_bytes, self.max_shared_bytes_optin or 0)

    def supports_dtype(self, name: str) -> bool:
        return name in self.dtypes

    def supports_atomic(self, op: str, dtype: str, space: str = "global") -> bool:
        table = self.shared_atomics if space == "shared" else self.atomics
        return (op, dtype) in table


def _atomics(spec: dict[str, frozenset[str] | set[str]]) -> frozenset[tuple[str, str]]:
    return frozenset((op, dt) for op, dts in spec.items() for dt in dts)


_ATOMIC_OPS = ("add", "max", "min", "xchg", "cas")

# CUDA: add on every 32/64-bit type and f16 (sm_70+) / bf16 (sm_80+); float max/min and
# 64-bit float exchange/compare-and-swap through compare-and-swap loops on the bit pattern.
_CUDA_ATOMICS = _atomics({
    "add": _INTS_32 | _INTS_64 | {"f32", "f64", "f16", "bf16"},
    "max": _INTS_32 | _INTS_64 | {"f32", "f64"},
    "min": _INTS_32 | _INTS_64 | {"f32", "f64"},
    "xchg": _INTS_32 | _INTS_64 | {"f32", "f64"},
    "cas": _INTS_32 | _INTS_64 | {"f32", "f64"},
})
# HIP (ROCm 5.x): the same set without the 16-bit float adds (bf16 is stored as bits there).
_HIP_ATOMICS = _atomics({
    "add": _INTS_32 | _INTS_64 | {"f32", "f64"},
    "max": _INTS_32 | _INTS_64 | {"f32", "f64"},
    "min": _INTS_32 | _INTS_64 | {"f32", "f64"},
    "xchg": _INTS_32 | _INTS_64 | {"f32", "f64"},
    "cas": _INTS_32 | _INTS_64 | {"f32", "f64"},
})


def _vulkan_atomics(int64: bool, float_add: bool, shared: bool) -> frozenset[tuple[str, str]]:
    ints = _INTS_32 | (_INTS_64 if int64 else frozenset())
    spec: dict[str, set[str]] = {op: set(ints) for op in _ATOMIC_OPS}
    if float_add:
        spec["add"].add("f32")
        spec["xchg"].add("f32")
    if not shared:
        # Global floats also take max/min/cas through a compare-and-swap loop on a
        # 32-bit unsigned view of the same buffer; shared arrays have no such view.
        for op in ("max", "min", "cas"):
            spec[op].add("f32")
    return _atomics(spec)


# Metal 3: 32-bit integer atomics, float add/exchange; float max/min/cas via a uint loop.
_METAL_ATOMICS = _atomics({"add": _INTS_32 | {"f32"}, "max": _INTS_32 | {"f32"}, "min": _INTS_32 | {"f32"},
                           "xchg": _INTS_32 | {"f32"}, "cas": _INTS_32 | {"f32"}})


#: Shared memory per block a CUDA kernel may opt in to, by compute capability (the CUDA C++ Programming
#: Guide's table of technical specifications; the device's own MAX_SHARED_MEMORY_PER_BLOCK_OPTIN is
#: checked at load).  Static ``__shared__`` declarations stop at 48 KiB on every one of them.
_CUDA_SHARED_OPTIN = {70: 96 * 1024, 75: 64 * 1024, 80: 163 * 1024, 86: 99 * 1024, 89: 99 * 1024, 90: 227 * 1024}


def _cuda(arch: str, mma: str | None) -> TargetProfile:
    sm = int(arch[3:].rstrip("a"))
    atomics = _CUDA_ATOMICS if sm >= 80 else _CUDA_ATOMICS - {("add", "bf16")}
    # wgmma (mma_wg) exists on sm_90 alone (Blackwell dropped it); code using it is built for sm_90a.
    # mbarrier objects exist from sm_80; arrivals that expect bytes, try_wait and tile copies in hardware (TMA)
    # from sm_90.
    # Named barriers (bar.sync id, count: role barriers) exist on every arch; setmaxnreg (register budgets of
    # warp roles) is sm_90a's.  Clusters of groups (distributed shared memory, multicast tile copies) from sm_90.
    features = frozenset({"subgroups", "f64", "mbarrier", "named_barriers"} | ({"wgmma", "setmaxnreg"} if sm == 90 else set())
                         | ({"mbarrier_tx", "tma", "clusters"} if sm >= 90 else set()))
    return TargetProfile("cuda", arch, 32, 1024, (1024, 1024, 64), 48 * 1024, _ALL_DTYPES, atomics, atomics, mma,
                         features, max_shared_bytes_optin=_CUDA_SHARED_OPTIN[sm])


def _hip(arch: str, wave: int, mma: str | None) -> TargetProfile:
    return TargetProfile("hip", arch, wave, 1024, (1024, 1024, 1024), 64 * 1024, _ALL_DTYPES, _HIP_ATOMICS,
                         _HIP_ATOMICS, mma, frozenset({"subgroups", "f64"}))


def _vulkan(arch: str, lane: int, shared: int, mma: str | None, features: frozenset[str]) -> TargetProfile:
    dtypes = _ALL_DTYPES - (frozenset() if "f64" in features else {"f64"})
    int64 = "atomic_int64" in features
    fadd = "atomic_float_add" in features
    return TargetProfile("spirv", arch, lane, 1024, (1024, 1024, 64), shared, dtypes,
                         _vulkan_atomics(int64, fadd, shared=False), _vulkan_atomics(int64, fadd, shared=True),
                         mma, features | {"subgroups"})


def vulkan_device_profile(name: str, lane_width: int, max_threads: int, max_group_dims: tuple[int, int, int],
                          max_shared_bytes: int, features: frozenset[str],
                          cooperative_matrix: frozenset[tuple[int, int, int, str, str]] = frozenset()
                          ) -> TargetProfile:
    """The profile of one Vulkan device, built from what it reports (``VulkanDevice.profile``).

    ``features`` uses the names of :data:`VULKAN_FEATURES`; ``cooperative_matrix`` is the set of
    subgroup-scope ``(M, N, K, input, accumulator)`` combos the device's
    ``vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR`` lists, with dtype names.  A device
    that lists any combo gets the ``vulkan_khr_cooperative_matrix`` strategy; which multiplies
    then run on it is the emitter's intersection (``emit.fragments.native_combos``).
    """
    unknown = features - VULKAN_FEATURES
    if unknown:
        raise ValueError(f"unknown Vulkan feature name(s): {', '.join(sorted(unknown))}")
    base = _vulkan(f"vulkan-device:{name}", lane_width, max_shared_bytes, None, features)
    combos = frozenset(cooperative_matrix) if "cooperative_matrix" in features else frozenset()
    return replace(base, max_threads_per_group=max_threads, max_group_dims=tuple(max_group_dims),
                   mma_strategy="vulkan_khr_cooperative_matrix" if combos else None,
                   mma_offered=combos or None)


#: The Vulkan feature names a device profile may carry (what the GLSL emitter and capability checks read).
VULKAN_FEATURES = frozenset({"f64", "int64", "f16", "int8", "int16", "storage8", "storage16", "atomic_int64",
                             "atomic_float_add", "subgroup_extended_types", "cooperative_matrix"})


def _metal(arch: str) -> TargetProfile:
    return TargetProfile("metal", arch, 32, 1024, (1024, 1024, 1024), 32 * 1024, _ALL_DTYPES - {"f64"},
                         _METAL_ATOMICS, _METAL_ATOMICS, "metal_simdgroup_8x8", frozenset({"subgroups"}))


#: The subgroup-scope cooperative-matrix combos with f16 inputs that the H200's driver (580.159) reports
#: (scripts/device/vulkan_probe.py), in Iron's fragment shapes; it also lists 16x8x8, 8-bit and bf16 ones.
_NVIDIA_COOPMAT = frozenset((m, n, k, "f16", acc) for (m, n, k) in ((16, 16, 16), (16, 8, 16)) for acc in ("f16", "f32"))

_VK_COMMON = frozenset({"f64", "int64", "f16", "int8", "int16", "storage8", "storage16"})

PROFILES: dict[tuple[str, str], TargetProfile] = {(p.target, p.arch): p for p in (
    _cuda("sm_80", "cuda_mma_sync_m16n8k16"),
    _cuda("sm_86", "cuda_mma_sync_m16n8k16"),
    _cuda("sm_89", "cuda_mma_sync_m16n8k16"),
    _cuda("sm_90", "cuda_mma_sync_m16n8k16"),
    _cuda("sm_90a", "cuda_mma_sync_m16n8k16"),
    _hip("gfx90a", 64, "amd_mfma_gfx90a"),
    _hip("gfx940", 64, "amd_mfma_gfx90a"),
    _hip("gfx1030", 32, None),
    _hip("gfx1100", 32, "amd_wmma_rdna3"),
    _vulkan("vulkan-lavapipe", 8, 32 * 1024, None,
            _VK_COMMON | {"atomic_int64", "atomic_float_add", "subgroup_extended_types"}),
    replace(_vulkan("vulkan-nvidia", 32, 48 * 1024, "vulkan_khr_cooperative_matrix",
                    _VK_COMMON | {"atomic_int64", "atomic_float_add", "subgroup_extended_types", "cooperative_matrix"}),
            mma_offered=_NVIDIA_COOPMAT),
    # The least a Vulkan 1.2 device with 16-bit storage and subgroup arithmetic offers.
    _vulkan("vulkan-baseline", 32, 16 * 1024, None, frozenset({"storage16", "f16", "int16", "int8", "storage8"})),
    _metal("apple-m1"),
    _metal("apple-m2"),
    _metal("apple-m3"),
)}

def profile(target: str, arch: str) -> TargetProfile:
    """The profile of ``arch`` on ``target``; a clear error lists the known ones."""
    get_target(target)
    try:
        return PROFILES[(target, arch)]
    except KeyError:
        known = ", ".join(a for t, a in PROFILES if t == target) or "none"
        raise UnknownTargetError(f"unknown architecture {arch!r} for target {target!r}; known: {known}") from None


def default_profile(target: str) -> TargetProfile:
    """The profile ``target`` compiles for when no device is named (its backend's ``default_arch``: the
    devices this project runs on, the H200 and lavapipe in CI, or the most common one, gfx90a and M2)."""
    arch = get_target(target).default_arch
    if arch is None:
        raise UnknownTargetError(f"target {target!r} emits no device code, so it has no profile")
    return profile(target, arch)

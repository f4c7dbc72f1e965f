"""What a target (or one device profile) can express, checked before emission and before launch.

Two kinds of check, both before anything reaches a compiler or a device:

* :func:`check_kernel` walks a kernel (call-free IR, after the pass
  pipeline) and raises :class:`~iron.core.errors.UnsupportedOnTarget` at the
  first op the profile cannot express, naming the op, the target and
  architecture, the kernel and the op's source line: a dtype the target
  lacks (f64 on Metal), an atomic it lacks (i64 atomics on Metal, float
  atomic add on a Vulkan device without ``VK_EXT_shader_atomic_float``),
  a fragment the subgroup width does not divide, or static shared memory over the limit.
* :func:`check_launch` refuses a group size or shared-memory footprint over
  the profile's limits, so a launch is rejected instead of truncated;
  :func:`check_emitted_launch` adds what an emitted kernel needs (a static
  mma scratch's group limit, whole groups for barriers and fragment ops).

A grid that is no multiple of the group is unsafe for some kernels: see
docs/backends.md, "Partial groups", and :func:`check_emitted_launch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core import dtypes as D
from ..core.errors import LaunchError, SourceLoc, UnsupportedOnTarget
from ..core.ir import Kernel, Op
from ..core.ops import FRAGMENT_OPS
from ..core.uniformity import GROUP_BARRIERS, find_divergent_barriers
from ..core.types import FragmentType, ScalarType, TensorType, VarType, VectorType
from .mma import PORTABLE, MmaLayoutError
from .backends import get_target
from .targets import TargetProfile

_ATOMIC_NAMES = {"atomic_add": "add", "atomic_max": "max", "atomic_min": "min", "atomic_xchg": "xchg",
                 "atomic_cas": "cas"}
_SUBGROUP_64BIT = frozenset({"simd_sum", "simd_max", "simd_min", "simd_shuffle", "simd_shuffle_xor",
                             "simd_shuffle_up", "simd_shuffle_down", "simd_broadcast"})


def shared_bytes(kernel: Kernel) -> int:
    """The static shared (threadgroup) memory ``kernel`` declares, in bytes."""
    total = 0
    for op in kernel.walk():
        if op.opcode in ("shared_alloc", "abar_alloc"):
            total += _shared_alloc_bytes(op)
    return total


def _shared_alloc_bytes(op: Op) -> int:
    if op.opcode == "abar_alloc":
        return 8 * op.attrs["count"]
    n = 1
    for s in op.attrs["shape"]:
        n *= s
    return n * op.attrs["dtype"].itemsize


def check_kernel(kernel: Kernel, profile: TargetProfile) -> None:
    """Raise UnsupportedOnTarget at the first op of ``kernel`` that ``profile`` cannot express."""
    where = f"{profile.target} ({profile.arch})"
    for p in kernel.params:
        dt = _dtype_of(p.type)
        if dt is not None and not profile.supports_dtype(dt.name):
            raise _unsupported(f"parameter '{p.name}' has dtype {dt}, which {where} does not support",
                               kernel.loc, kernel, _dtype_hint(dt, profile))
    if "wgmma" not in profile.features:  # before the shared-memory total: the reason that matters first
        for op in kernel.walk():
            if op.opcode in ("mma_wg", "mma_wg_wait"):
                _check_op(op, kernel, profile, where)
    _check_portable_waits(kernel, profile, where)
    used_shared = 0
    for op in kernel.walk():
        _check_op(op, kernel, profile, where)
        if op.opcode in ("shared_alloc", "abar_alloc"):
            used_shared += _shared_alloc_bytes(op)
            if used_shared > profile.shared_limit:
                raise _unsupported(f"shared memory reaches {used_shared} bytes here, over the "
                                   f"{profile.shared_limit} bytes per group of {where}", op.loc, kernel,
                                   "use smaller tiles, or a narrower dtype for the shared arrays")


#: Ops a target without a feature runs as a group barrier, and what it lacks then.
_GROUP_BARRIER_STANDINS = {"abar_wait": ("mbarrier", "asynchronous barriers"),
                           "role_barrier": ("named_barriers", "named barriers")}


def _check_portable_waits(kernel: Kernel, profile: TargetProfile, where: str) -> None:
    """Without asynchronous barriers a ``barrier_wait`` is a group barrier, without named barriers a
    ``role_barrier``: every thread must reach it."""
    standing_in = frozenset(code for code, (feature, _) in _GROUP_BARRIER_STANDINS.items()
                            if feature not in profile.features)
    found = find_divergent_barriers(kernel, GROUP_BARRIERS | standing_in) if standing_in else []
    found = [d for d in found if d.barrier.opcode in standing_in]
    if found:
        d = found[0]
        lacks = _GROUP_BARRIER_STANDINS[d.barrier.opcode][1]
        raise _unsupported(f"{d.builtin} {d.reason}: {where} has no {lacks} and waits with a group "
                           "barrier, which every thread of the group must reach", d.barrier.loc, kernel,
                           "keep the waits where every thread runs them (roles in program order), or run on CUDA")


def _check_op(op: Op, kernel: Kernel, profile: TargetProfile, where: str) -> None:
    code = op.opcode
    if code in ("mma_wg", "mma_wg_wait") and "wgmma" not in profile.features:
        raise _unsupported(f"'{code}' (warpgroup multiplies) runs on NVIDIA Hopper's wgmma alone (CUDA sm_90), "
                           f"not on {where}", op.loc, kernel,
                           "use mma() fragments there (iron.std.gemm picks its kernel per device)")
    if code == "cluster_groups" and op.attrs["size"] > 1 and "clusters" not in profile.features:
        raise _unsupported(f"cluster_groups({op.attrs['size']}): clusters of groups exist on NVIDIA Hopper (CUDA "
                           f"sm_90) and later, not on {where}", op.loc, kernel,
                           "make the cluster size a variant parameter and choose 1 there (every group then loads "
                           "its tiles itself)")
    if code == "role_barrier" and "named_barriers" in profile.features:
        odd = next((n for n in op.attrs["sizes"] if n % profile.lane_width), None)
        if odd is not None:
            raise _unsupported(f"role_barrier() counts whole subgroups on {where}, but a role has {odd} threads",
                               op.loc, kernel, f"make every role a multiple of {profile.lane_width} threads")
    if code in FRAGMENT_OPS:
        _check_fragment_layout(op, kernel, profile, where)
    for v in ([op.result] if op.result is not None else []) + list(op.operands):
        dt = _dtype_of(v.type)
        if dt is not None and not profile.supports_dtype(dt.name):
            raise _unsupported(f"'{code}' uses {dt}, which {where} does not support", op.loc, kernel,
                               _dtype_hint(dt, profile))
    if code in _ATOMIC_NAMES:
        t = op.operands[0].type
        assert isinstance(t, TensorType)
        if not profile.supports_atomic(_ATOMIC_NAMES[code], t.dtype.name, t.space):
            memory = "shared" if t.space == "shared" else "global"
            raise _unsupported(f"'{code}' on {memory} {t.dtype} is not available on {where}", op.loc, kernel,
                               _atomic_hint(code, t.dtype, profile))
    feature = get_target(profile.target).requires.get("subgroup_64bit")
    if (code in _SUBGROUP_64BIT and feature is not None and _dtype_of(op.operands[0].type).bits == 64
            and feature not in profile.features):
        raise _unsupported(f"'{code}' on a 64-bit value needs the {feature} feature "
                           f"(VK_KHR_shader_subgroup_extended_types on Vulkan), which {where} lacks", op.loc, kernel,
                           "reduce or shuffle 32-bit values instead")


def _check_fragment_layout(op: Op, kernel: Kernel, profile: TargetProfile, where: str) -> None:
    """Fragments are spread over the subgroup's lanes: the profile's width must divide them evenly."""
    types = [v.type for v in [op.result, *op.operands] if v is not None and isinstance(v.type, FragmentType)]
    for t in types:
        try:
            PORTABLE.fragment_layout(t.role, t.rows, t.cols, t.dtype, profile.lane_width)
        except MmaLayoutError as e:
            raise _unsupported(f"'{op.opcode}' on {t}: {e} (the subgroup width of {where})", op.loc, kernel,
                               "use a larger fragment shape") from None


def _dtype_of(t: object) -> D.DType | None:
    if isinstance(t, (ScalarType, VectorType, TensorType, FragmentType)):
        return t.dtype
    if isinstance(t, VarType):
        return _dtype_of(t.elem)
    return None


def _dtype_hint(dt: D.DType, profile: TargetProfile) -> str:
    if dt == D.f64:
        return f"{profile.target} has no double precision: compute in f32"
    return f"use one of: {', '.join(sorted(profile.dtypes))}"


def _atomic_hint(code: str, dt: D.DType, profile: TargetProfile) -> str:
    hint = get_target(profile.target).hints.get(f"atomic_{dt.name}")
    if hint is not None:
        return hint
    ok = sorted(d for op, d in profile.atomics if op == _ATOMIC_NAMES[code])
    return f"'{code}' works on: {', '.join(ok) or 'nothing'} here"


def _unsupported(message: str, loc: SourceLoc | None, kernel: Kernel, hint: str) -> UnsupportedOnTarget:
    return UnsupportedOnTarget(message, loc or kernel.loc, hint, kernel=kernel.name)


def check_launch(profile: TargetProfile, group: Sequence[int], shared_bytes: int = 0) -> None:
    """Refuse a launch whose group or shared memory exceeds ``profile``'s limits (LaunchError)."""
    dims = tuple(int(g) for g in group)
    if not 1 <= len(dims) <= 3 or any(g < 1 for g in dims):
        raise LaunchError(f"group must be 1 to 3 positive extents, got {tuple(group)}")
    where = f"{profile.target} ({profile.arch})"
    threads = 1
    for axis, (g, limit) in enumerate(zip(dims, profile.max_group_dims)):
        threads *= g
        if g > limit:
            raise LaunchError(f"group extent {g} on axis {axis} is over the limit of {limit} on {where}")
    if threads > profile.max_threads_per_group:
        raise LaunchError(f"group {dims} has {threads} threads, over the limit of "
                          f"{profile.max_threads_per_group} per group on {where}")
    if shared_bytes > profile.shared_limit:
        raise LaunchError(f"{shared_bytes} bytes of shared memory per group is over the limit of "
                          f"{profile.shared_limit} on {where}")


def check_emitted_launch(emitted: Any, grid: Sequence[int], group: Sequence[int]) -> None:
    """Refuse a launch of an emitted kernel that its target cannot run as written (LaunchError).

    On top of :func:`check_launch`: a group over the threads a static mma scratch was sized for
    (``EmittedKernel.max_group_threads``), and a grid that ends in a partial group when the kernel
    has an op every thread of a group must reach together (``whole_group_op``: a barrier or a
    fragment op).  Threads past the grid return at entry (docs/backends.md), so such a kernel
    would wait on threads that have left: undefined on every GPU target (a hang or a race on real
    hardware; a CPU driver coping proves nothing).  A kernel with warp roles takes groups of exactly its
    roles' threads (``EmittedKernel.role_threads``).
    """
    check_launch(emitted.profile, group, emitted.shared_bytes)
    dims = tuple(int(g) for g in group)
    threads = 1
    for g in dims:
        threads *= g
    name = emitted.abi.entry
    if threads > emitted.max_group_threads:
        raise LaunchError(
            f"kernel '{name}': group {dims} has {threads} threads, but its mma scratch was sized for "
            f"{emitted.max_group_threads} on {emitted.profile.target} ({emitted.profile.arch}) beside its "
            f"shared arrays: use groups of at most {emitted.max_group_threads} threads or smaller shared arrays")
    groups_x = -(-int(grid[0]) // dims[0]) if len(grid) else 1
    if emitted.cluster_size > 1 and groups_x % emitted.cluster_size:
        raise LaunchError(f"kernel '{name}': clusters of {emitted.cluster_size} groups along axis 0, but the launch "
                          f"has {groups_x} groups there: launch a multiple of {emitted.cluster_size}")
    if emitted.role_threads and threads != emitted.role_threads:
        raise LaunchError(f"kernel '{name}': warp_roles splits groups of {emitted.role_threads} threads, but the "
                          f"launch's group {dims} has {threads}: launch groups of {emitted.role_threads} threads")
    check_whole_groups(name, grid, dims, emitted.whole_group_op)


def check_whole_groups(name: str, grid: Sequence[int], group: Sequence[int], op: Any) -> None:
    """Refuse a grid that ends in a partial group when the kernel has ``op`` (from ``whole_group_op``; None
    for none), which every thread of a group must reach together (LaunchError)."""
    grid_t, group_t = tuple(int(g) for g in grid), tuple(int(g) for g in group)
    if op is not None and any(g % b for g, b in zip(grid_t, group_t)):
        where = f" ({op.loc})" if op.loc else ""
        raise LaunchError(
            f"kernel '{name}': grid {grid_t} is not a multiple of the group {group_t}, and the kernel uses "
            f"{op.opcode}{where}, which every thread of a group must reach: round the grid up to whole groups "
            f"and guard the tail with the kernel's own bounds check")

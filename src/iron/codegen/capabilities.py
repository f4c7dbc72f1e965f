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
  the profile's limits, so a launch is rejected instead of truncated.

:func:`needs_full_groups` tells the runtime when a grid that is no multiple
of the group is unsafe (see docs/backends.md, "Partial groups").
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core import dtypes as D
from ..core.errors import LaunchError, SourceLoc, UnsupportedOnTarget
from ..core.ir import Kernel, Op
from ..core.types import FragmentType, ScalarType, TensorType, VarType, VectorType
from .mma import PORTABLE, MmaLayoutError
from .targets import TargetProfile

#: Ops whose meaning depends on every thread of a group or subgroup taking part.
COLLECTIVE_OPCODES = frozenset({
    "barrier", "simd_sum", "simd_max", "simd_min", "simd_any", "simd_all", "simd_shuffle", "simd_shuffle_xor",
    "simd_shuffle_up", "simd_shuffle_down", "simd_broadcast", "frag_fill", "frag_load", "frag_store", "mma",
})

_FRAGMENT_OPCODES = frozenset({"frag_fill", "frag_load", "frag_store", "mma"})
_ATOMIC_NAMES = {"atomic_add": "add", "atomic_max": "max", "atomic_min": "min", "atomic_xchg": "xchg",
                 "atomic_cas": "cas"}
_SUBGROUP_64BIT = frozenset({"simd_sum", "simd_max", "simd_min", "simd_shuffle", "simd_shuffle_xor",
                             "simd_shuffle_up", "simd_shuffle_down", "simd_broadcast"})


def needs_full_groups(kernel: Kernel) -> bool:
    """Whether ``kernel`` has barriers, subgroup or fragment ops.

    Threads past the grid return at entry.  Such a kernel is only safe when
    the grid is a multiple of the group on every axis: otherwise a barrier
    waits for threads that have left (undefined on Vulkan) and a subgroup op
    runs with lanes missing.  The runtime should round the grid up (and let
    the kernel's own bounds checks guard) or refuse such launches.
    """
    return any(op.opcode in COLLECTIVE_OPCODES for op in kernel.walk())


def shared_bytes(kernel: Kernel) -> int:
    """The static shared (threadgroup) memory ``kernel`` declares, in bytes."""
    total = 0
    for op in kernel.walk():
        if op.opcode == "shared_alloc":
            total += _shared_alloc_bytes(op)
    return total


def _shared_alloc_bytes(op: Op) -> int:
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
    used_shared = 0
    for op in kernel.walk():
        _check_op(op, kernel, profile, where)
        if op.opcode == "shared_alloc":
            used_shared += _shared_alloc_bytes(op)
            if used_shared > profile.max_shared_bytes:
                raise _unsupported(f"shared memory reaches {used_shared} bytes here, over the "
                                   f"{profile.max_shared_bytes} bytes per group of {where}", op.loc, kernel,
                                   "use smaller tiles, or a narrower dtype for the shared arrays")


def _check_op(op: Op, kernel: Kernel, profile: TargetProfile, where: str) -> None:
    code = op.opcode
    if code in _FRAGMENT_OPCODES:
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
    if (code in _SUBGROUP_64BIT and profile.target == "spirv" and _dtype_of(op.operands[0].type).bits == 64
            and "subgroup_extended_types" not in profile.features):
        raise _unsupported(f"'{code}' on a 64-bit value needs VK_KHR_shader_subgroup_extended_types, which "
                           f"{where} lacks", op.loc, kernel, "reduce or shuffle 32-bit values instead")


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
    if profile.target == "spirv" and dt == D.f32:
        return "float atomics need VK_EXT_shader_atomic_float: pick a profile whose device has it"
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
    if shared_bytes > profile.max_shared_bytes:
        raise LaunchError(f"{shared_bytes} bytes of shared memory per group is over the limit of "
                          f"{profile.max_shared_bytes} on {where}")

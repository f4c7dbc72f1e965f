"""Emit native GPU source from optimised IR: CUDA C++, HIP C++, GLSL (for SPIR-V) and MSL.

``emit_kernel(kernel, target)`` takes the call-free output of
``iron.codegen.pipeline.run_pipeline`` and

1. checks the kernel against the target profile (``capabilities.check_kernel``:
   a located ``UnsupportedOnTarget`` for what the device cannot express);
2. legalises it for the target (``legalize.legalize``: IR -> IR, verified);
3. prints it with the one shared C-like printer (``cstyle``) and the
   target's dialect table (``cxx``, ``glsl``, ``msl``).

The kernel ABI (buffer numbering, parameter block) comes from ``abi.py`` and
is taken from the kernel as given, before legalisation, so it is the same
contract the runtime packs (docs/backends.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ... import config

from ...core.errors import IronCompileError
from ...core.ir import Kernel, Op
from ..abi import KernelABI, kernel_abi, with_tensor_maps
from ...core.ops import WHOLE_GROUP_OPS
from ..capabilities import check_kernel, shared_bytes
from ..backends import EMITTING, UnknownTargetError, get_target
from ..legalize import legalize
from ..targets import TargetProfile, default_profile
from .cstyle import KernelPrinter
from .fragments import native_fragment_types, scratch_floats_per_subgroup, scratch_subgroups


@dataclass(frozen=True)
class EmittedKernel:
    """One kernel's source for one target, with the ABI its launches follow."""

    target: str
    source: str
    abi: KernelABI
    #: The function a runtime looks up: the ABI's entry name; ``main`` for GLSL.
    entry: str
    profile: TargetProfile
    #: "cuda", "hip", "glsl" or "msl".
    language: str
    #: Threads a group may have: the profile's limit, or fewer where a static mma scratch was sized to fit.
    max_group_threads: int = 0
    #: Static shared memory per group in bytes (the kernel's arrays and a static mma scratch).
    shared_bytes: int = 0
    #: Of ``shared_bytes``, what the module declares as dynamic shared memory (CUDA past 48 KiB): the
    #: runtime opts the function in to it and passes it at every launch.  0: all static.
    dynamic_shared_bytes: int = 0
    #: The first op every thread of a group must reach together (a barrier, a fragment op), if any:
    #: launches of such kernels must cover whole groups.
    whole_group_op: Op | None = None
    #: Bytes of portable mma scratch per subgroup (the fragments the device's matrix unit does not hold), 0 if
    #: none.  GLSL sizes the scratch from the pipeline's group size, so the runtime checks a launch's
    #: ``ceil(threads / lane_width)`` of it, beside ``shared_bytes``, against the device's shared memory.
    scratch_bytes_per_subgroup: int = 0
    #: GLSL emitted with ``loop_guard``: the binding of the status buffer the runtime appends after the
    #: kernel's tensors (two u32: the check loop's trip count, 2, in; the threads that saw a loop cut short
    #: out; :data:`.glsl_loops.LOOP_CHECK`).  None where there is no guard (no loop, or not asked for).
    loop_status_binding: int | None = None
    #: The exact threads a group has when the kernel splits it into warp roles (``warp_roles``), else 0.
    role_threads: int = 0
    #: The groups of a cluster along axis 0 (``cluster_groups``; a launch's groups there a multiple), else 1.
    cluster_size: int = 1
    #: Whether every thread first waits for the previous grid in the stream (CUDA sm_90's griddepcontrol.wait), so
    #: the runtime may launch the kernel before that grid finished (programmatic dependent launch).
    waits_upstream: bool = False


def emit_kernel(kernel: Kernel, target: str, profile: TargetProfile | None = None, *,
                loop_guard: bool = False) -> EmittedKernel:
    """``kernel`` (call-free, after ``run_pipeline``) as ``target`` source for ``profile`` (default: the target's).

    ``loop_guard`` (``spirv`` only): for a driver that ends long loops early (lavapipe), make a shader that
    runs loops report whether any was cut short (:data:`.glsl_loops.LOOP_CHECK`, ``loop_status_binding``).
    The compile driver (:func:`iron.codegen.compiler.compile`) runs the two halves, :func:`legalise` and
    :func:`emit_legal`, as stages of their own.
    """
    prof = emission_profile(target, profile, loop_guard)
    return emit_legal(kernel, legalise(kernel, target, prof), target, prof, loop_guard=loop_guard)


def emission_profile(target: str, profile: TargetProfile | None = None, loop_guard: bool = False) -> TargetProfile:
    """The profile ``target`` emits for (``profile``, else its default); clear errors for a target that emits
    nothing, a profile of another target, or a loop guard the target has no use for."""
    backend = get_target(target)
    if not backend.emits:
        raise UnknownTargetError(f"no emitter for target {target!r}; emitters: "
                                 f"{', '.join(b.target for b in EMITTING)}")
    if loop_guard and not backend.loop_guard:
        raise ValueError(f"loop_guard is for the targets whose drivers may cut loops short "
                         f"({', '.join(b.target for b in EMITTING if b.loop_guard)}), not {target!r}")
    prof = profile or default_profile(target)
    if prof.target != target:
        raise ValueError(f"profile {prof.key} is for target {prof.target!r}, not {target!r}")
    return prof


def legalise(kernel: Kernel, target: str, profile: TargetProfile) -> Kernel:
    """``kernel`` checked against ``profile``'s capabilities, then legalised for ``target`` (its record's
    legalisation passes); the input is unchanged."""
    check_kernel(kernel, profile)
    try:
        return legalize(kernel, target, min_lane_width=profile.lane_width)
    except IronCompileError as e:
        raise e.with_kernel(kernel.name) from None


def emit_legal(kernel: Kernel, legal: Kernel, target: str, profile: TargetProfile, *,
               loop_guard: bool = False) -> EmittedKernel:
    """The source of ``legal`` (:func:`legalise` of ``kernel``), whose ABI is ``kernel``'s."""
    backend = get_target(target)
    abi = kernel_abi(kernel)
    if "tma" in profile.features:
        if config.get("tma_store"):
            profile = dataclasses.replace(profile, features=profile.features | {"tma_store"})
        try:
            abi = with_tensor_maps(abi, legal, ("tile_copy", "tile_store") if "tma_store" in profile.features
                                   else ("tile_copy",))
        except IronCompileError as e:
            raise e.with_kernel(kernel.name) from None
    cls = backend.dialect_class()
    dialect = cls(profile, kernel.name, loop_guard=True) if loop_guard else cls(profile, kernel.name)
    source = KernelPrinter(legal, dialect, abi).print()
    entry = backend.entry or abi.entry
    threads, shared = launch_limits(legal, profile)
    whole = next((op for op in legal.walk() if op.opcode in WHOLE_GROUP_OPS), None)
    roles = next((op for op in legal.walk() if op.opcode == "warp_role"), None)
    dynamic = dialect.dynamic_shared_bytes
    return EmittedKernel(target, source, abi, entry, profile, dialect.language, threads, max(shared, dynamic),
                         dynamic_shared_bytes=dynamic, whole_group_op=whole,
                         scratch_bytes_per_subgroup=scratch_bytes_per_subgroup(legal, profile),
                         loop_status_binding=getattr(dialect, "loop_status_binding", None),
                         role_threads=sum(roles.attrs["sizes"]) if roles is not None else 0,
                         cluster_size=dialect.cluster_size,
                         waits_upstream=getattr(dialect, "waits_upstream", False))


def scratch_bytes_per_subgroup(kernel: Kernel, profile: TargetProfile) -> int:
    """Bytes of portable mma scratch one subgroup of ``kernel`` needs on ``profile`` (0: none)."""
    return scratch_floats_per_subgroup(kernel, native_fragment_types(kernel, profile)) * 4


def launch_limits(kernel: Kernel, profile: TargetProfile) -> tuple[int, int]:
    """(most threads per group, static shared bytes) of ``kernel`` as emitted for ``profile``.

    CUDA, HIP and Metal declare the portable mma scratch statically, for as many subgroups as fit
    beside the kernel's own shared arrays (:func:`.fragments.scratch_subgroups`): a group may not
    have more subgroups than that.  GLSL sizes the scratch from the pipeline's group size, so its
    limit depends on the launch: the shared bytes here are the arrays alone, and the Vulkan runtime
    checks them plus the scratch for the launch's group (``EmittedKernel.scratch_bytes_per_subgroup``,
    ``iron.runtime.vulkan.shared_memory``).
    """
    arrays = shared_bytes(kernel)
    per = scratch_bytes_per_subgroup(kernel, profile)
    if per == 0 or not get_target(profile.target).static_scratch:
        return profile.max_threads_per_group, arrays
    subgroups = scratch_subgroups(kernel, profile, arrays)
    return min(profile.max_threads_per_group, subgroups * profile.lane_width), arrays + subgroups * per


__all__ = ["EmittedKernel", "emission_profile", "emit_kernel", "emit_legal", "launch_limits", "legalise",
           "scratch_bytes_per_subgroup"]

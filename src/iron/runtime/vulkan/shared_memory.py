"""Shared memory of one launch against the device's ``maxComputeSharedMemorySize``.

GLSL declares the portable mma scratch (the fragments a device's matrix unit does not hold) with a size
taken from the pipeline's group size, so the emitter cannot check it: a group of ``t`` threads needs
``ceil(t / subgroupSize)`` slices of it beside the kernel's own shared arrays.  A launch over the limit
is invalid Vulkan; lavapipe does not refuse it but can spend many minutes compiling such a pipeline
(``prefill_attention(block=64)`` did: 31 KiB of arrays and 24 KiB of scratch against 32 KiB), so it is
refused here, before the pipeline is created.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.errors import LaunchError
from ...core.ir import Kernel

if TYPE_CHECKING:
    from ...codegen.emit import EmittedKernel


def check_shared_memory(kernel: Kernel, emitted: EmittedKernel, group: tuple[int, int, int], device_name: str) -> None:
    """LaunchError unless ``kernel``'s shared arrays plus the mma scratch for ``group`` fit the device (the sizes
    are ``emitted``'s: the arrays in ``shared_bytes``, the scratch in ``scratch_bytes_per_subgroup``)."""
    profile, arrays, per = emitted.profile, emitted.shared_bytes, emitted.scratch_bytes_per_subgroup
    threads = group[0] * group[1] * group[2]
    scratch = -(-threads // profile.lane_width) * per
    if arrays + scratch <= profile.max_shared_bytes:
        return
    what = f"{arrays} bytes of shared arrays"
    if scratch:
        fit = max(0, (profile.max_shared_bytes - arrays) // per) * profile.lane_width
        hint = (f"use groups of at most {fit} threads" if fit else
                "the arrays leave no room for the scratch: use smaller tiles (e.g. a smaller block)")
        raise LaunchError(f"kernel '{kernel.name}': group {group} needs {scratch} bytes of mma scratch "
                          f"({per} per subgroup of {profile.lane_width}) beside {what}, over the "
                          f"{profile.max_shared_bytes} bytes of shared memory '{device_name}' has "
                          f"(it has no matrix unit for these fragments); {hint}")
    raise LaunchError(f"kernel '{kernel.name}': {what}, over the {profile.max_shared_bytes} bytes of shared "
                      f"memory '{device_name}' has; use smaller shared arrays")

"""What a compiled kernel uses and how full it keeps the GPU, for ``iron bench -v``.

Registers, shared memory and spills come from ptxas's report (kept with the
module in the cache) or, for ahead-of-time modules, from the function's
attributes.  Occupancy is the driver's answer for the group size the kernel
was last launched with (``cuOccupancyMaxActiveBlocksPerMultiprocessor``):
resident threads per multiprocessor over the most it can hold.
"""

from __future__ import annotations

from typing import Any

from .modules import Loaded
from .plan import KernelPlan

DEFAULT_THREADS = 256


def kernel_report(drv: Any, plan: KernelPlan, loaded: Loaded, max_threads_per_sm: int | None,
                  group_threads: int | None = None) -> dict[str, Any]:
    """Registers, shared bytes, spills, wgmma serialisation, dropped register budgets, the group size considered,
    resident groups per SM and occupancy."""
    ptxas = plan.module.report.get("kernel", {}) if plan.module.report else {}
    threads = group_threads or _last_threads(plan) or DEFAULT_THREADS
    # ptxas counts static arrays; a module past 48 KiB has its arrays in launch-time (dynamic) shared memory.
    static, dynamic = ptxas.get("shared_bytes"), plan.module.dynamic_shared_bytes
    out: dict[str, Any] = {
        "registers": ptxas.get("registers") or loaded.registers,
        "shared_bytes": static + dynamic if static is not None else (dynamic or None),
        "spill_stores": ptxas.get("spill_stores"),
        "spill_loads": ptxas.get("spill_loads"),
        #: "ptxas", or "cubin" where NVRTC printed no report and the registers were read from the CUBIN.
        "report_source": (plan.module.report or {}).get("source", "ptxas"),
        #: Why ptxas ran the kernel's wgmma one at a time (its C7515 note), or None: a pipeline, or no wgmma.
        "wgmma_serialized": next(iter(((plan.module.report or {}).get("wgmma_serialized") or {}).values()), None),
        #: Whether ptxas dropped the register budgets of warp roles (its C7507 note; False without roles).
        "setmaxnreg_ignored": bool((plan.module.report or {}).get("setmaxnreg_ignored")),
        "local_bytes": loaded.local_bytes,
        "group_threads": threads,
        "arch": plan.module.arch,
        "origin": plan.module.origin,
    }
    blocks = _resident_groups(drv, loaded.function, threads, dynamic)
    out["groups_per_sm"] = blocks
    if blocks is not None and max_threads_per_sm:
        out["occupancy"] = min(1.0, blocks * threads / max_threads_per_sm)
    else:
        out["occupancy"] = None
    return out


def _last_threads(plan: KernelPlan) -> int | None:
    geometries = list(plan.geometries.values())
    if not geometries:
        return None
    t = geometries[-1].threads
    return t[0] * t[1] * t[2]


def _resident_groups(drv: Any, function: Any, threads: int, dynamic_shared: int = 0) -> int | None:
    query = getattr(drv, "cuOccupancyMaxActiveBlocksPerMultiprocessor", None)
    if query is None:
        return None
    result = query(function, threads, dynamic_shared)
    return int(result[1]) if int(result[0]) == 0 else None

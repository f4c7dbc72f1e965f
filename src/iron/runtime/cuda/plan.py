"""Everything about launching one kernel that does not depend on the arguments' values, made once.

A :class:`KernelPlan` holds the loaded function, its signature and ABI, the
argument buffer (:mod:`.packer`), a scalar converter per scalar parameter,
and the launch geometries already checked (grid and group -> blocks,
threads, the grid for the parameter block).  Launching then only binds the
arguments, packs one buffer and calls ``cuLaunchKernel``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...codegen.capabilities import check_emitted_launch
from ...codegen.compiler import Artifact
from ...core.errors import LaunchError
from ..interp.args import normalize_geometry
from .binding import Bound
from .packer import ArgBuffer
from .signature import Signature, scalar_converter
from .tensor_maps import TensorMapEncoder

#: Blocks per grid axis the driver accepts (x, y, z).
MAX_BLOCKS = (2**31 - 1, 65535, 65535)
_MAX_GEOMETRIES = 256


@dataclass(frozen=True)
class Geometry:
    blocks: tuple[int, int, int]
    threads: tuple[int, int, int]
    #: Threads per axis of the grid (what the parameter block carries).
    grid: tuple[int, int, int]


class KernelPlan:
    """One kernel ready to launch: ``function`` (a CUfunction) of ``module``, bound through ``signature``.

    ``check_launch(grid, group)`` is the emitted kernel's launch check (``check_emitted_launch``), run once
    per geometry.
    """

    def __init__(self, signature: Signature, module: Artifact, function: Any,
                 check_launch: Callable[[tuple[int, ...], tuple[int, ...]], None], keep: Any = None,
                 maps: TensorMapEncoder | None = None, chained: bool = False) -> None:
        self.signature = signature
        #: Launched as a programmatic dependent launch (the ``pdl`` option, on a device and kernel that allow it).
        self.chained = chained
        self.module = module
        self.function = function
        self.abi = module.abi
        self.args = ArgBuffer(module.abi)
        self.converters = {p.name: scalar_converter(signature.kernel, p) for p in signature.params if not p.is_tensor}
        self._check_launch = check_launch
        self._geometries: dict[tuple[Any, Any], Geometry] = {}
        self._order = self.args.order()
        #: A generated launcher for arguments of the kinds seen first (:mod:`.fastpath`), or None.
        self.fast: Callable[..., bool] | None = None
        self.fast_kinds: tuple[str, ...] | None = None
        #: Every launcher generated so far, by argument kinds (the last one used is ``fast``).
        self.fast_by_kinds: dict[tuple[str, ...], Callable[..., bool]] = {}
        #: The kernel object the plan was made for, kept so its id() stays unique while the plan lives.
        self.keep = keep
        #: Encodes the kernel's tensor maps at each launch (a kernel with tile copies on sm_90).
        self.maps = maps
        if self.abi.maps and maps is None:
            raise LaunchError(f"kernel '{signature.kernel}' copies tiles with tensor maps, which this device cannot "
                              "encode (no CUDA driver)")
        names = {p.name for p in signature.params}
        missing = [t.name for t in self.abi.tensors if t.name not in names]
        missing += [f.name for f in self.abi.fields if f.kind == "param" and f.name not in names]
        if missing:
            raise LaunchError(f"kernel '{signature.kernel}': the module's ABI has parameters {missing} that the "
                              f"launch signature ({signature.names()}) lacks")

    @property
    def geometries(self) -> dict[tuple[Any, Any], Geometry]:
        return self._geometries

    def geometry(self, grid: Any, group: Any) -> Geometry:
        """The checked geometry of ``grid`` in groups of ``group`` (LaunchError when it cannot run)."""
        key: Any = (grid, group)
        try:
            geo = self._geometries.get(key)
        except TypeError:  # lists: checked, not cached
            geo, key = None, None
        if geo is not None:
            return geo
        grid3, group3, ndim = normalize_geometry(grid, group)
        self._check_launch(grid3[:ndim], group3[:ndim])
        blocks = tuple(-(-g // b) for g, b in zip(grid3, group3))
        for axis, (n, limit) in enumerate(zip(blocks, MAX_BLOCKS)):
            if n > limit:
                raise LaunchError(f"kernel '{self.signature.kernel}': grid {grid3[:ndim]} in groups of "
                                  f"{group3[:ndim]} needs {n} blocks on axis {axis}; CUDA launches at most {limit}")
        if any(g >= 2**32 for g in grid3):
            raise LaunchError(f"kernel '{self.signature.kernel}': grid {grid3[:ndim]} has an axis of 2**32 threads "
                              f"or more, which the parameter block's 32-bit grid cannot hold")
        geo = Geometry(blocks, group3, grid3)  # type: ignore[arg-type]
        if key is not None:
            if len(self._geometries) >= _MAX_GEOMETRIES:
                self._geometries.clear()
            self._geometries[key] = geo
        return geo

    def values(self, pointers: dict[str, int], bound: Bound, geo: Geometry) -> list[int | float]:
        """The argument buffer's values for one launch (:meth:`ArgBuffer.order`)."""
        out: list[int | float] = []
        for kind, what in self._order:
            if kind == "pointer":
                out.append(pointers[what])  # type: ignore[index]
            elif kind == "param":
                out.append(bound.scalars[what])  # type: ignore[index]
            elif kind == "grid":
                out.append(geo.grid[what])  # type: ignore[index]
            elif kind == "tensormap":
                m = what
                out.append(self.maps.encode(self.signature.kernel, m, pointers[m.tensor], bound.scalars,  # type: ignore
                                            bound.counts[m.tensor]))
            else:
                out.append(bound.counts[what])  # type: ignore[index]
        return out


def emitted_check(emitted: Any, max_threads: int | None, grid: tuple[int, ...], group: tuple[int, ...]) -> None:
    """``check_emitted_launch`` for an emitted kernel, and the compiled function's own thread limit."""
    if emitted is not None:
        check_emitted_launch(emitted, grid, group)
    threads = 1
    for g in group:
        threads *= g
    if max_threads is not None and threads > max_threads:
        raise LaunchError(f"group {tuple(group)} has {threads} threads, but this kernel's compiled code runs at "
                          f"most {max_threads} per group (its register use): use smaller groups")

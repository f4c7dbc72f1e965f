"""Running kernels built ahead of time (``iron build --emit cubin,manifest``) with no NVRTC.

:func:`load_build` reads the folder (:mod:`.manifest`), loads each
variant's CUBIN (or PTX) that runs on this GPU, checks it against its ABI,
and returns an :class:`AotLibrary`.  Launches go through the device's
normal path (argument binding, copies, the fast path), so they behave as
kernels compiled at run time do.  Arguments are positional in call order
when the manifest records it, else in ABI order (tensors, then scalars);
keywords by parameter name work either way.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...codegen.capabilities import check_launch
from ...codegen.compiler import Artifact
from ...core.errors import LaunchError
from .arch import TARGET
from .errors import AotError
from .manifest import Variant, abi_mismatch, cubin_params, pick_binary, read_manifest
from .plan import KernelPlan
from .signature import of_abi

if TYPE_CHECKING:
    from .device import CudaDevice


class AotKernel:
    """One variant, loaded: ``k.launch(*args, grid=..., group=...)`` or ``k[grid](*args)``."""

    def __init__(self, device: "CudaDevice", variant: Variant, plan: KernelPlan, path: Path) -> None:
        self.device = device
        self.variant = variant
        self.plan = plan
        self.path = path

    @property
    def entry(self) -> str:
        return self.variant.entry

    def launch(self, *args: Any, grid: Any, group: Any = None, timing: bool = False, **kwargs: Any) -> float | None:
        if kwargs:
            args = self._by_name(args, kwargs)
        grid_t = grid if isinstance(grid, tuple) else (grid,)
        group_t = group if group is not None else self.device.default_group(grid_t)
        group_t = group_t if isinstance(group_t, tuple) else (group_t,)
        if not timing and self.device.launch_fast(self.plan, args, grid_t, group_t):
            return None
        return self.device.run_plan(self.plan, args, grid_t, group_t, timing)

    def __getitem__(self, key: Any) -> Any:
        grid, group = key if isinstance(key, tuple) and len(key) == 2 else (key, None)
        return lambda *args, **kw: self.launch(*args, grid=grid, group=group, **kw)

    def _by_name(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        names = [p.name for p in self.plan.signature.params]
        values = dict(zip(names, args))
        for name, v in kwargs.items():
            if name not in names or name in values:
                raise LaunchError(f"kernel '{self.entry}': unexpected or repeated argument '{name}'; it takes "
                                  f"({', '.join(names)})")
            values[name] = v
        missing = [n for n in names if n not in values]
        if missing:
            raise LaunchError(f"kernel '{self.entry}' is missing argument(s) {', '.join(missing)}")
        return tuple(values[n] for n in names)

    def __repr__(self) -> str:
        return f"<AotKernel {self.entry} ({self.plan.module.kind} for {self.plan.module.arch})>"


class AotLibrary:
    """The loaded variants of a build, by entry name (``lib["iron_exp__T_f32"]``) or kernel name."""

    def __init__(self, folder: Path, kernels: dict[str, AotKernel], skipped: dict[str, str]) -> None:
        self.folder = folder
        self.kernels = kernels
        #: Entry -> why it was not loaded.
        self.skipped = skipped

    def __getitem__(self, entry: str) -> AotKernel:
        try:
            return self.kernels[entry]
        except KeyError:
            why = self.skipped.get(entry)
            detail = f": {why}" if why else f"; loaded: {', '.join(self.kernels)}"
            raise KeyError(f"'{entry}' is not loaded{detail}") from None

    def variants(self, kernel: str) -> list[AotKernel]:
        """Every loaded variant of the kernel called ``kernel``."""
        return [k for k in self.kernels.values() if k.variant.kernel == kernel]

    def __len__(self) -> int:
        return len(self.kernels)


def load_build(device: "CudaDevice", folder: Path) -> AotLibrary:
    """Load every variant of ``folder`` that has a binary for ``device``'s GPU (AotError if none has)."""
    kernels: dict[str, AotKernel] = {}
    skipped: dict[str, str] = {}
    for variant in read_manifest(folder):
        try:
            kernels[variant.entry] = _load(device, variant, folder)
        except AotError as e:
            skipped[variant.entry] = str(e)
    if not kernels:
        reasons = "; ".join(skipped.values()) or "the manifest lists no kernels"
        raise AotError(f"{folder}: nothing loads on {device.arch}: {reasons}")
    return AotLibrary(folder, kernels, skipped)


def _load(device: "CudaDevice", variant: Variant, folder: Path) -> AotKernel:
    path, fmt, arch = pick_binary(variant, folder, device.arch)
    binary = path.read_bytes()
    if fmt == "cubin":
        problem = abi_mismatch(variant.abi, cubin_params(binary, variant.entry))
        if problem:
            raise AotError(f"'{variant.entry}' ({path}): {problem}; rebuild the folder with this Iron")
    digest = hashlib.sha256(binary).hexdigest()
    module = Artifact(TARGET, "binary", binary=binary, kind=fmt, arch=arch, key=f"aot:{digest}", origin="aot",
                      entry=variant.entry, abi=variant.abi, dynamic_shared_bytes=variant.dynamic_shared_bytes)
    loaded = device._modules.load(module)
    try:
        sig = of_abi(variant.entry, variant.abi, list(variant.order) if variant.order else None)
    except ValueError as e:
        raise AotError(f"'{variant.entry}': {e}") from None
    plan = KernelPlan(sig, module, loaded.function, _launch_check(device, variant, loaded.max_threads),
                      maps=device._tensor_maps)
    return AotKernel(device, variant, plan, path)


def _launch_check(device: "CudaDevice", variant: Variant, max_threads: int | None) -> Any:
    limit = min(t for t in (variant.max_group_threads, max_threads, device.profile.max_threads_per_group) if t)

    def check(grid: tuple[int, ...], group: tuple[int, ...]) -> None:
        check_launch(device.profile, group, variant.shared_bytes)
        threads = 1
        for g in group:
            threads *= g
        if threads > limit:
            raise LaunchError(f"kernel '{variant.entry}': group {tuple(group)} has {threads} threads; it runs at "
                              f"most {limit} per group")
        if variant.whole_group and any(g % b for g, b in zip(grid, group)):
            raise LaunchError(f"kernel '{variant.entry}': grid {tuple(grid)} is not a multiple of the group "
                              f"{tuple(group)}, and the kernel has an op every thread of a group must reach")
    return check

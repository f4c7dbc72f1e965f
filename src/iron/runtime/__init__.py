"""iron.runtime: the devices that run compiled kernels.

Each device has a name, the codegen target whose pipeline prepares kernels
for it, a default group size, and ``launch(kernel_ir, args, grid, group)``.
Today: ``interp`` (numpy, always present) and ``vulkan`` (SPIR-V on any
Vulkan driver; see docs/vulkan.md).  Other GPU devices register here as
they land.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from .. import config
from ..core.errors import IronError
from ..core.ir import Kernel


class Device(Protocol):
    name: str
    target: str

    def default_group(self, grid: tuple[int, ...]) -> tuple[int, ...]: ...

    def launch(self, kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...]) -> None: ...


class BackendUnavailable(IronError):
    pass


KNOWN_BACKENDS = ("interp", "cuda", "vulkan", "hip", "metal")
_devices: dict[str, Device] = {}


def get_device(name: str) -> Device:
    """The device for ``name`` (created once); BackendUnavailable says why one is absent."""
    if name in _devices:
        return _devices[name]
    if name == "interp":
        from .interp import InterpDevice

        dev: Device = InterpDevice()
    elif name == "vulkan":
        from .vulkan import VulkanDevice

        dev = VulkanDevice()
    elif name in KNOWN_BACKENDS:
        raise BackendUnavailable(f"backend '{name}' is not available in this build of Iron yet; use backend='interp'")
    else:
        raise BackendUnavailable(f"unknown backend '{name}'; choose one of: {', '.join(KNOWN_BACKENDS)}")
    _devices[name] = dev
    return dev


def resolve_backend(explicit: str | None = None) -> str:
    """An explicit choice, else the configured one (iron.use / IRON_BACKEND / iron.toml), else auto."""
    name = explicit or config.get("backend")
    if name == "auto":
        return "interp"
    return name


def best_backend() -> str:
    """The fastest backend that works here: a Vulkan device when one answers, else the interpreter.

    (``auto`` still means the interpreter until the CUDA device lands; the CLI's main job asks this.)
    """
    try:
        get_device("vulkan")
    except BackendUnavailable:
        return "interp"
    return "vulkan"

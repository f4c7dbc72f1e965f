"""iron.runtime: the devices that run compiled kernels.

Each device has a name, the codegen target whose pipeline prepares kernels
for it, a default group size, and ``launch(kernel_ir, args, grid, group)``.
Today: ``interp`` (numpy, always present), ``cuda`` (NVIDIA GPUs through
cuda-bindings; see docs/cuda.md) and ``vulkan`` (SPIR-V on any Vulkan
driver; see docs/vulkan.md).  Other GPU devices register here as they land.
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
    elif name == "cuda":
        from .cuda import CudaDevice

        dev = CudaDevice()
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
    """An explicit choice, else the configured one (iron.use / IRON_BACKEND / iron.toml), else auto.

    ``auto`` still launches on the interpreter: the test suites and existing programs rely on its checks
    (races, out-of-bounds).  Tools that want the fastest device ask :func:`best_backend`.
    """
    name = explicit or config.get("backend")
    if name == "auto":
        return "interp"
    return name


#: The order ``best_backend`` tries GPU backends in.
PREFERENCE = ("cuda", "vulkan")


def best_backend() -> str:
    """The fastest backend that works here: cuda where an NVIDIA GPU answers, else vulkan where a Vulkan
    device exists, else the interpreter (``--backend auto`` of the CLI)."""
    for name in PREFERENCE:
        if backend_available(name)[0]:
            return name
    return "interp"


def backend_available(name: str) -> tuple[bool, str]:
    """(True, "") or (False, why not) for one backend, creating its device if need be."""
    if name == "cuda" and "cuda" not in _devices:
        from .cuda.driver import availability

        ok, reason = availability()  # cheap: no context, no compiler
        if not ok:
            return False, reason
    try:
        get_device(name)
    except BackendUnavailable as e:
        return False, str(e)
    return True, ""

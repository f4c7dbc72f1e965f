"""iron.runtime: the devices that run compiled kernels.

Each device has a name, the codegen target whose pipeline prepares kernels
for it, a default group size, and ``launch(kernel_ir, args, grid, group)``.
Today: ``interp`` (numpy, always present), ``cuda`` (NVIDIA GPUs through
cuda-bindings; see docs/cuda.md) and ``vulkan`` (SPIR-V on any Vulkan
driver; see docs/vulkan.md).  Other GPU devices register here as they land.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, Sequence

from .. import config
from ..codegen.backends import BACKENDS, DEVICE_NAMES, UnknownTargetError, by_device
from ..core.errors import IronError
from ..core.ir import Kernel


class Device(Protocol):
    name: str
    target: str

    def default_group(self, grid: tuple[int, ...]) -> tuple[int, ...]: ...

    def launch(self, kernel: Kernel, args: Sequence[Any], grid: tuple[int, ...], group: tuple[int, ...]) -> None: ...


class BackendUnavailable(IronError):
    pass


#: Every device name a backend record gives (``iron.codegen.backends``), available in this build or not.
KNOWN_BACKENDS = DEVICE_NAMES
_devices: dict[str, Device] = {}


def get_device(name: str) -> Device:
    """The device for ``name`` (created once, from its backend's ``device_factory``); BackendUnavailable says
    why one is absent.  ``cuda:1`` is GPU 1 (``cuda`` and ``cuda:0`` are GPU 0)."""
    dev = _devices.get(name)
    if dev is not None:
        return dev
    base, ordinal = split_device_name(name)
    if ordinal == 0 and base != name:
        dev = _devices[name] = get_device(base)
        return dev
    try:
        backend = by_device(base)
    except UnknownTargetError:
        raise BackendUnavailable(f"unknown backend '{name}'; choose one of: {', '.join(KNOWN_BACKENDS)}") from None
    if backend.device_factory is None:
        raise BackendUnavailable(f"backend '{name}' is not available in this build of Iron yet; use backend='interp'")
    if ordinal and not backend.device_ordinals:
        raise BackendUnavailable(f"backend '{base}' takes no device index ('{name}'); use backend='{base}'")
    module, _, cls = backend.device_factory.partition(":")
    factory = getattr(importlib.import_module(module), cls)
    dev = factory(ordinal=ordinal) if ordinal else factory()
    _devices[name] = dev
    return dev


def split_device_name(name: str) -> tuple[str, int]:
    """("cuda", 1) for "cuda:1"; (name, 0) for a name without an index.  A bad index is a clear error."""
    base, sep, index = name.partition(":")
    if not sep:
        return name, 0
    if not index.isdigit():
        raise BackendUnavailable(f"backend '{name}': the part after ':' must be a device index, as in 'cuda:1'")
    return base, int(index)


def _precheck(name: str) -> tuple[bool, str]:
    """A device package's own cheap ``availability()`` (no context, no compiler), where it has one."""
    try:
        factory = by_device(name).device_factory
    except UnknownTargetError:
        return True, ""  # get_device says why
    if factory is None:
        return True, ""
    check = getattr(importlib.import_module(factory.partition(":")[0]), "availability", None)
    return check() if check is not None else (True, "")


def resolve_backend(explicit: str | None = None, data: str | None = None) -> str:
    """Where a launch runs: an explicit choice, else the configured one (iron.use / IRON_BACKEND / iron.toml),
    else ``auto``, which follows the data as PyTorch does: ``data`` (the device holding the launch's arrays,
    ``iron.lang.numpy_compat.data_device``: "cuda", "cuda:1"), or the interpreter for host arrays (numpy),
    with its checks (races, out-of-bounds).  A choice of "cuda" with the data on another GPU runs there.
    Commands that make their own data (``iron test``, ``iron bench``) ask :func:`best_backend` instead."""
    name = explicit or config.get("backend")
    if name == "auto":
        return data or "interp"
    if data is not None and data.startswith(name + ":"):
        return data
    return name


#: The order ``best_backend`` tries GPU backends in (their records' ``auto_rank``).
PREFERENCE = tuple(b.device for b in sorted((b for b in BACKENDS if b.auto_rank is not None and b.device),
                                            key=lambda b: b.auto_rank or 0))


def best_backend() -> str:
    """The fastest backend that works here: cuda where an NVIDIA GPU answers, else vulkan where a Vulkan
    device exists, else the interpreter (``--backend auto`` of the CLI)."""
    for name in PREFERENCE:
        if backend_available(name)[0]:
            return name
    return "interp"


def backend_available(name: str) -> tuple[bool, str]:
    """(True, "") or (False, why not) for one backend, creating its device if need be."""
    if name not in _devices:
        ok, reason = _precheck(name)
        if not ok:
            return False, reason
    try:
        get_device(name)
    except BackendUnavailable as e:
        return False, str(e)
    return True, ""

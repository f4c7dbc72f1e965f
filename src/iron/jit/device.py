"""What library code may ask about the device a launch would run on, without naming its target.

``iron.std`` picks tile shapes, team widths and kernels from these traits (the subgroup width, the
matrix unit, the shared-memory limit, optional features) rather than from a backend's name, and
never imports the runtime: this module is its one door to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .. import config
from ..codegen.backends import get_backend
from ..codegen.mma import STRATEGIES, MmaStrategy
from ..codegen.targets import TargetProfile, default_profile
from ..lang.numpy_compat import data_device


@dataclass(frozen=True)
class DeviceTraits:
    """The traits of one backend's device."""

    #: The device name a launch with this backend runs on ("interp", "cuda", "vulkan", ...).
    backend: str
    #: Threads per subgroup (the interpreter's configured ``simd_width``).
    lane_width: int
    #: The target profile; None where the interpreter runs the IR itself (no device limits).
    profile: TargetProfile | None

    @property
    def interpreted(self) -> bool:
        """The interpreter runs the IR itself: every fragment shape and feature works, at any size."""
        return self.profile is None

    @property
    def matrix_unit(self) -> MmaStrategy | None:
        """The device's native matrix-multiply strategy (``iron.codegen.mma``), or None."""
        name = self.profile.mma_strategy if self.profile is not None else None
        return STRATEGIES[name] if name is not None else None

    @property
    def shared_limit(self) -> int | None:
        """The most shared memory one group may use (opting in where it must); None: no limit."""
        return self.profile.shared_limit if self.profile is not None else None

    @property
    def loose_math(self) -> bool:
        """Whether its exp, log and tanh follow a precision table looser than a few ulp (Vulkan's)."""
        return get_backend(self.backend).loose_math

    def has(self, feature: str) -> bool:
        """Whether the device offers an optional feature (``TargetProfile.features``: "wgmma", "f64", ...)."""
        return self.profile is None or feature in self.profile.features

    def offers_fragment(self, combo: tuple[int, int, int, str, str]) -> bool:
        """Whether a device-queried matrix unit lists ``(M, N, K, input, accumulator)`` (Vulkan)."""
        return self.profile is not None and combo in (self.profile.mma_offered or ())


def resolve_backend(explicit: str | None = None, data: str | None = None) -> str:
    """The device a launch with ``backend=explicit`` runs on (``iron.runtime.resolve_backend``, imported on the
    first call: ``import iron`` imports no runtime; the per-call cost is then one global lookup)."""
    global _resolve
    if _resolve is None:
        from ..runtime import resolve_backend as imported

        _resolve = imported
    return _resolve(explicit, data)


_resolve: Any = None


_cache: dict[tuple[str, int], DeviceTraits] = {}


def device_traits(backend: str | None = None, like: Sequence[Any] = ()) -> DeviceTraits:
    """The traits of the device a launch with ``backend`` runs on (None: the configured one), for arrays
    ``like`` these (``auto`` follows the data: torch CUDA tensors run on CUDA).

    Where that device does not answer here (no GPU), the backend's default profile stands in, so a
    library can plan for it ahead of time; the launch itself then says why it cannot run.
    """
    name = resolve_backend(backend, data_device(like) if like else None)
    key = (name, config.generation())
    hit = _cache.get(key)
    if hit is None:
        hit = _cache[key] = _traits(name)
    return hit


def _traits(name: str) -> DeviceTraits:
    from ..runtime import BackendUnavailable, get_device

    record = get_backend(name.partition(":")[0])
    if not record.emits:
        return DeviceTraits(name, int(config.get("simd_width")), None)
    profile: Any = None
    try:
        profile = getattr(get_device(name), "profile", None)
    except BackendUnavailable:
        pass
    if profile is None:
        profile = default_profile(record.target)
    return DeviceTraits(name, int(profile.lane_width), profile)

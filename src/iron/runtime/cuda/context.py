"""One GPU through the driver API: its primary context, a dedicated stream, and what it is.

The primary context is the one the CUDA runtime (and so PyTorch and CuPy)
uses on that GPU, so pointers from those libraries are valid in it and
their streams can be launched on.  The device's own stream is created
non-blocking: it does not synchronise with the legacy default stream, so
other libraries' work there neither waits for Iron's nor delays it, and it
can be captured into CUDA graphs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .arch import arch_of
from .driver import check


@dataclass(frozen=True)
class DeviceInfo:
    """What ``iron device`` shows for a CUDA GPU (clocks in MHz, sizes in bytes; None where not reported)."""

    ordinal: int
    name: str
    arch: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    total_memory: int
    sm_clock_mhz: int | None
    memory_clock_mhz: int | None
    memory_bus_bits: int | None
    l2_bytes: int | None
    max_threads_per_group: int
    max_shared_per_group: int
    max_shared_per_group_optin: int | None
    warp_size: int
    max_threads_per_sm: int | None
    driver_version: str
    pci_bus_id: int | None

    @property
    def peak_bandwidth_gbs(self) -> float | None:
        """Memory clock x bus width x 2 (double data rate), where both are reported."""
        if not self.memory_clock_mhz or not self.memory_bus_bits:
            return None
        return self.memory_clock_mhz * 1e6 * 2 * self.memory_bus_bits / 8 / 1e9

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["compute_capability"] = f"{self.compute_capability[0]}.{self.compute_capability[1]}"
        d["peak_bandwidth_gbs"] = self.peak_bandwidth_gbs
        return d


def _attribute(drv: Any, dev: Any, name: str) -> int | None:
    attr = getattr(drv.CUdevice_attribute, name, None)
    if attr is None:
        return None
    result = drv.cuDeviceGetAttribute(attr, dev)
    return int(result[1]) if int(result[0]) == 0 else None


def query(drv: Any, dev: Any, ordinal: int) -> DeviceInfo:
    """Read ``dev``'s name, architecture, limits and clocks from the driver."""
    def a(name: str) -> int | None:
        return _attribute(drv, dev, "CU_DEVICE_ATTRIBUTE_" + name)

    major, minor = a("COMPUTE_CAPABILITY_MAJOR") or 0, a("COMPUTE_CAPABILITY_MINOR") or 0
    raw = check(drv, drv.cuDeviceGetName(256, dev), "cuDeviceGetName")
    name = raw.split(b"\0")[0].decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    version = int(check(drv, drv.cuDriverGetVersion(), "cuDriverGetVersion"))
    clock, mem_clock = a("CLOCK_RATE"), a("MEMORY_CLOCK_RATE")
    return DeviceInfo(
        ordinal=ordinal, name=name, arch=arch_of(major, minor), compute_capability=(major, minor),
        multiprocessors=a("MULTIPROCESSOR_COUNT") or 0,
        total_memory=int(check(drv, drv.cuDeviceTotalMem(dev), "cuDeviceTotalMem")),
        sm_clock_mhz=clock // 1000 if clock else None, memory_clock_mhz=mem_clock // 1000 if mem_clock else None,
        memory_bus_bits=a("GLOBAL_MEMORY_BUS_WIDTH"), l2_bytes=a("L2_CACHE_SIZE"),
        max_threads_per_group=a("MAX_THREADS_PER_BLOCK") or 1024,
        max_shared_per_group=a("MAX_SHARED_MEMORY_PER_BLOCK") or 48 * 1024,
        max_shared_per_group_optin=a("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"), warp_size=a("WARP_SIZE") or 32,
        max_threads_per_sm=a("MAX_THREADS_PER_MULTIPROCESSOR"),
        driver_version=f"{version // 1000}.{version % 1000 // 10}", pci_bus_id=a("PCI_BUS_ID"))


class Context:
    """The primary context of GPU ``ordinal``, made current on this thread, and a non-blocking stream."""

    def __init__(self, drv: Any, ordinal: int) -> None:
        self.drv = drv
        self.ordinal = ordinal
        count = int(check(drv, drv.cuDeviceGetCount(), "cuDeviceGetCount"))
        if not 0 <= ordinal < count:
            from .errors import CudaUnavailable

            raise CudaUnavailable(f"backend 'cuda': there is no GPU {ordinal} (this machine has {count})")
        self.device = check(drv, drv.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
        self.info = query(drv, self.device, ordinal)
        self.context = check(drv, drv.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        try:
            self.make_current()
            flags = drv.CUstream_flags.CU_STREAM_NON_BLOCKING
            self.stream = check(drv, drv.cuStreamCreate(flags), "cuStreamCreate")
        except BaseException:
            drv.cuDevicePrimaryCtxRelease(self.device)
            raise

    def make_current(self) -> None:
        check(self.drv, self.drv.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def synchronize(self) -> None:
        """Wait for all work in the context: Iron's streams and any other library's on this GPU."""
        check(self.drv, self.drv.cuCtxSynchronize(), "cuCtxSynchronize")

    def close(self) -> None:
        drv = self.drv
        drv.cuStreamDestroy(self.stream)
        drv.cuDevicePrimaryCtxRelease(self.device)

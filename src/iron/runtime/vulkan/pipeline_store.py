"""The VkPipelineCache on disk, so a second process skips the driver's shader compilation.

One file per device and driver build under ``<cache_dir>/vulkan/``, named by
vendorID, deviceID, driverVersion and pipelineCacheUUID.  Loaded data is
handed to the driver only after its VkPipelineCacheHeaderVersionOne header
(checked here, not left to the driver: a driver fed a foreign or damaged
blob may crash) names this very device and driver build, and the envelope's key
(the file's name: vendor, device, driver version and cache UUID) matches; anything else is
ignored with the reason in :attr:`PipelineStore.status`, and the device
starts from an empty cache.  Saved at close, atomically (:mod:`iron.codegen.diskcache`).
"""

from __future__ import annotations

import struct
from pathlib import Path

from ...codegen import diskcache
from .properties import PhysicalDeviceInfo

#: VkPipelineCacheHeaderVersionOne: headerSize, headerVersion, vendorID, deviceID, pipelineCacheUUID,
#: least significant byte first whatever the host's byte order.
HEADER = struct.Struct("<IIII16s")
HEADER_VERSION_ONE = 1
KIND = b"VKPC"


def cache_key(info: PhysicalDeviceInfo) -> str:
    """The whole key of a pipeline cache file: the device and the driver build."""
    return (f"pipelines-{info.vendor_id:04x}-{info.device_id:04x}-"
            f"{info.driver_version:08x}-{info.pipeline_cache_uuid}")


def cache_file(directory: Path, info: PhysicalDeviceInfo) -> Path:
    """Where ``info``'s device and driver keep their pipeline cache under ``directory``."""
    return directory / "vulkan" / f"{cache_key(info)}.bin"


def header_problem(data: bytes, info: PhysicalDeviceInfo) -> str | None:
    """Why ``data`` is not pipeline-cache data of ``info``'s device and driver; None when it is."""
    if len(data) < HEADER.size:
        return f"{len(data)} bytes, shorter than the {HEADER.size}-byte pipeline cache header"
    size, version, vendor, device, uuid = HEADER.unpack_from(data)
    if version != HEADER_VERSION_ONE:
        return f"header version {version}, not VK_PIPELINE_CACHE_HEADER_VERSION_ONE"
    if not HEADER.size <= size <= len(data):
        return f"header size {size} outside {HEADER.size}..{len(data)}"
    if (vendor, device) != (info.vendor_id, info.device_id):
        return (f"written for vendor 0x{vendor:x} device 0x{device:x}, this is vendor 0x{info.vendor_id:x} "
                f"device 0x{info.device_id:x}")
    if uuid.hex() != info.pipeline_cache_uuid:
        return f"written by another driver build (pipelineCacheUUID {uuid.hex()}, this one {info.pipeline_cache_uuid})"
    return None


class PipelineStore:
    """Loads and saves one device's pipeline cache data; ``status`` says what happened to the file."""

    def __init__(self, directory: Path | None, info: PhysicalDeviceInfo) -> None:
        self.info = info
        self.path = cache_file(directory, info) if directory is not None else None
        self.status = "off (cache_dir = off)" if self.path is None else "not loaded yet"
        self._loaded: bytes | None = None

    def load(self) -> bytes | None:
        """The initial data for vkCreatePipelineCache, or None (then ``status`` says why)."""
        if self.path is None:
            return None
        data, why = diskcache.read(self.path, KIND, cache_key(self.info))
        if data is None and why == "no file yet":
            self.status = f"no file yet at {self.path}; started an empty cache"
            return None
        if data is not None:
            why = header_problem(data, self.info) or "ok"
        if why != "ok":
            self.status = f"ignored {self.path}: {why}; started an empty cache"
            return None
        self.status = f"loaded {len(data)} bytes from {self.path}"
        self._loaded = data
        return data

    def save(self, data: bytes) -> None:
        """Store the cache's data at close, unless it is unchanged or is not this device's."""
        if self.path is None or data == self._loaded:
            return
        problem = header_problem(data, self.info)
        if problem is not None:  # the driver's own data, which it should never produce
            self.status += f"; not saved: {problem}"
            return
        diskcache.ensure_folder(self.path.parent)  # if it cannot be made, the write below says why
        failed = diskcache.write(self.path, KIND, data, cache_key(self.info))
        self.status += f"; not saved: {failed}" if failed else f"; saved {len(data)} bytes"

"""A fake of cuda-bindings' driver module, so the CUDA device's host side runs on a machine without a GPU.

It keeps "device memory" in bytearrays at made-up addresses, real pinned host memory (ctypes buffers, since
the device writes through them), records every launch (entry, blocks, threads, stream, each parameter's
bytes, read through the CUBIN's own parameter table) and lets a test emulate a kernel with a Python function
over device memory.  Results follow the binding: a tuple (CUresult, value...) or (CUresult,).
"""

from __future__ import annotations

import ctypes
import enum
import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from iron.runtime.cuda.manifest import cubin_params

OK = 0
DEVICE_BASE = 0x7F0000000000


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    CUDA_ERROR_NOT_SUPPORTED = 801


class _Names:
    """Any attribute is an enum-like int-valued member (what the device only passes back to the driver)."""

    def __init__(self, **values: int):
        self._values = values

    def __getattr__(self, name: str) -> Any:
        return self._values.get(name, hash(name) & 0xFFFF)


class Handle(int):
    """CUstream / CUevent / CUmodule / CUfunction: an int with a type."""


@dataclass
class Launch:
    entry: str
    blocks: tuple[int, int, int]
    threads: tuple[int, int, int]
    stream: int
    params: list[bytes]
    #: Dynamic shared memory bytes the launch asked for.
    shared: int = 0


_PTX_PARAM_BYTES = {"u64": 8, "s64": 8, "b64": 8, "f64": 8, "u32": 4, "s32": 4, "b32": 4, "f32": 4}


def ptx_params(image: bytes, entry: str) -> list[int] | None:
    """Parameter sizes of ``entry`` in a PTX module (scalar parameters only, what the runtime's own PTX uses);
    None when the image is not PTX text declaring that entry."""
    m = re.search(rb"\.entry\s+" + re.escape(entry.encode()) + rb"\s*\(([^)]*)\)", image)
    if m is None:
        return None
    types = [t.decode() for t in re.findall(rb"\.param\s+\.(\w+)", m.group(1))]
    return [_PTX_PARAM_BYTES[t] for t in types] if all(t in _PTX_PARAM_BYTES for t in types) else None


@dataclass
class FakeDriver:
    arch: tuple[int, int] = (9, 0)
    name: str = "Fake H200"
    devices: int = 1
    memory: dict[int, bytearray] = field(default_factory=dict)
    pinned: dict[int, Any] = field(default_factory=dict)
    launches: list[Launch] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    kernels: dict[str, Callable[["FakeDriver", Launch], None]] = field(default_factory=dict)
    fail_launch: CUresult | None = None
    capturing: bool = False
    capture_stream: int | None = None
    #: A stream captured by another library (torch.cuda.graph), which the device only sees through the query.
    outside_capture: int | None = None
    captured: list[Launch] = field(default_factory=list)
    elapsed_ms: float = 0.25
    foreign: dict[int, int] = field(default_factory=dict)  # pointer -> device ordinal of memory not ours
    #: MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (the H200's).
    shared_optin: int = 232448
    #: The launches that came through cuLaunchKernelEx with programmatic stream serialization (their entries), and
    #: whether the fake refuses such launches (CUDA_ERROR_NOT_SUPPORTED, as a driver without them would).
    chained: list[str] = field(default_factory=list)
    refuse_chained: bool = False
    #: Chained launches refused (with ``refuse_chained``).
    refused: int = 0

    def __post_init__(self) -> None:
        self._next = DEVICE_BASE
        self._handles = 0
        self.modules: dict[int, bytes] = {}
        self.functions: dict[int, tuple[str, list[int] | None]] = {}
        #: (entry, attribute) -> the value cuFuncSetAttribute set.
        self.function_attributes: dict[tuple[str, int], int] = {}
        self.CUdevice_attribute = _Names(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR=1,
                                         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR=2,
                                         CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT=3,
                                         CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR=4,
                                         CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN=5)
        self.CUstream_flags = _Names(CU_STREAM_NON_BLOCKING=1)
        self.CUevent_flags = _Names(CU_EVENT_DEFAULT=0, CU_EVENT_DISABLE_TIMING=2)
        self.CUfunction_attribute = _Names(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK=0, CU_FUNC_ATTRIBUTE_NUM_REGS=4,
                                           CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES=3,
                                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=8)
        self.CUpointer_attribute = _Names(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL=9)
        self.CUstreamCaptureMode = _Names(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL=1)
        self.CUstreamCaptureStatus = _Names(CU_STREAM_CAPTURE_STATUS_NONE=0, CU_STREAM_CAPTURE_STATUS_ACTIVE=1)
        self.CUtensorMapDataType = self.CUtensorMapSwizzle = self.CUtensorMapInterleave = _Names()
        self.CUtensorMapL2promotion = self.CUtensorMapFloatOOBfill = _Names()
        self.cuuint64_t = self.cuuint32_t = int
        self.CUlaunchAttributeID = _Names(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION=6)
        #: (address, extents, box) of each cuTensorMapEncodeTiled; the n-th map's bytes are sixteen words n.
        self.encoded: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = []

    # ------------------------------------------------------------ helpers for tests
    def handle(self) -> Handle:
        self._handles += 1
        return Handle(0x1000 + self._handles)

    def CUstream(self, value: int) -> Handle:
        return Handle(value)

    def CUdeviceptr(self, value: int) -> int:
        return int(value)

    def array(self, ptr: int, count: int, dtype: Any) -> np.ndarray:
        """A numpy view of ``count`` elements of device memory at ``ptr``."""
        base, offset = self._block(ptr)
        dt = np.dtype(dtype)
        return np.frombuffer(self.memory[base], dtype=dt, count=count, offset=offset)

    def _block(self, ptr: int) -> tuple[int, int]:
        for base, buf in self.memory.items():
            if base <= ptr < base + len(buf):
                return base, ptr - base
        raise AssertionError(f"0x{ptr:x} is not fake device memory")

    def _ok(self, name: str, *values: Any) -> tuple:
        self.calls.append(name)
        return (CUresult.CUDA_SUCCESS, *values)

    # ------------------------------------------------------------ the driver API
    def cuInit(self, flags: int) -> tuple:
        return self._ok("cuInit") if self.devices else (CUresult.CUDA_ERROR_NO_DEVICE,)

    def cuDeviceGetCount(self) -> tuple:
        return self._ok("cuDeviceGetCount", self.devices)

    def cuDeviceGet(self, ordinal: int) -> tuple:
        return self._ok("cuDeviceGet", ordinal)

    def cuDeviceGetName(self, length: int, dev: int) -> tuple:
        return self._ok("cuDeviceGetName", self.name.encode() + b"\0" * (length - len(self.name)))

    def cuDeviceGetAttribute(self, attr: int, dev: int) -> tuple:
        values = {1: self.arch[0], 2: self.arch[1], 3: 132, 4: 2048, 5: self.shared_optin}
        return self._ok("cuDeviceGetAttribute", values.get(attr, 0))

    def cuDeviceTotalMem(self, dev: int) -> tuple:
        return self._ok("cuDeviceTotalMem", 141 << 30)

    def cuDriverGetVersion(self) -> tuple:
        return self._ok("cuDriverGetVersion", 13000)

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple:
        return self._ok("cuDevicePrimaryCtxRetain", self.handle())

    def cuDevicePrimaryCtxRelease(self, dev: int) -> tuple:
        return self._ok("cuDevicePrimaryCtxRelease")

    def cuCtxSetCurrent(self, ctx: int) -> tuple:
        return self._ok("cuCtxSetCurrent")

    def cuCtxSynchronize(self) -> tuple:
        return self._ok("cuCtxSynchronize")

    def cuStreamCreate(self, flags: int) -> tuple:
        return self._ok("cuStreamCreate", self.handle())

    def cuStreamDestroy(self, stream: int) -> tuple:
        return self._ok("cuStreamDestroy")

    def cuStreamSynchronize(self, stream: int) -> tuple:
        return self._ok("cuStreamSynchronize")

    def cuEventCreate(self, flags: int) -> tuple:
        return self._ok("cuEventCreate", self.handle())

    def cuEventRecord(self, event: int, stream: int) -> tuple:
        return self._ok(f"cuEventRecord({int(stream)})")

    def cuEventSynchronize(self, event: int) -> tuple:
        return self._ok("cuEventSynchronize")

    def cuEventElapsedTime(self, start: int, end: int) -> tuple:
        return self._ok("cuEventElapsedTime", self.elapsed_ms)

    def cuEventDestroy(self, event: int) -> tuple:
        return self._ok("cuEventDestroy")

    def cuStreamWaitEvent(self, stream: int, event: int, flags: int) -> tuple:
        return self._ok(f"cuStreamWaitEvent({int(stream)})")

    def cuModuleLoadData(self, image: bytes) -> tuple:
        h = self.handle()
        self.modules[h] = bytes(image)
        return self._ok("cuModuleLoadData", h)

    def cuModuleGetFunction(self, module: int, name: bytes) -> tuple:
        h = self.handle()
        image = self.modules[module]
        entry = name.decode()
        sizes = cubin_params(image, entry) if image[:4] == b"\x7fELF" else ptx_params(image, entry)
        self.functions[h] = (entry, sizes)
        return self._ok("cuModuleGetFunction", h)

    def cuModuleUnload(self, module: int) -> tuple:
        return self._ok("cuModuleUnload")

    def cuFuncGetAttribute(self, attr: int, function: int) -> tuple:
        return self._ok("cuFuncGetAttribute", {0: 1024, 4: 16, 3: 0}.get(attr, 0))

    def cuFuncSetAttribute(self, function: int, attr: int, value: int) -> tuple:
        if attr == 8 and value > self.shared_optin:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        self.function_attributes[(self.functions[function][0], attr)] = value
        return self._ok("cuFuncSetAttribute")

    def cuLaunchKernel(self, f: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int,
                       stream: int, params: int, extra: int) -> tuple:
        if self.fail_launch is not None:
            return (self.fail_launch,)
        entry, sizes = self.functions[f]
        if shared > max(48 * 1024, self.function_attributes.get((entry, 8), 0)):
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)  # what the driver says to a launch that did not opt in
        assert sizes is not None, "the fake reads parameters from CUBINs only"
        slots = (ctypes.c_void_p * len(sizes)).from_address(params)
        values = [ctypes.string_at(slots[i], size) for i, size in enumerate(sizes)]
        launch = Launch(entry, (gx, gy, gz), (bx, by, bz), int(stream), values, int(shared))
        if self.capturing:
            self.captured.append(launch)
        else:
            self.launches.append(launch)
            if entry in self.kernels:
                self.kernels[entry](self, launch)
        return self._ok("cuLaunchKernel")

    def CUlaunchAttribute(self) -> Any:
        return SimpleNamespace(id=None, value=SimpleNamespace(programmaticStreamSerializationAllowed=0))

    def CUlaunchConfig(self) -> Any:
        return SimpleNamespace()

    def cuLaunchKernelEx(self, cfg: Any, f: int, params: int, extra: int) -> tuple:
        """A launch with attributes: only programmatic stream serialization, recorded, then launched as
        cuLaunchKernel would (or refused with ``refuse_chained``)."""
        (attr,) = cfg.attrs[:cfg.numAttrs]
        assert int(attr.id) == 6 and attr.value.programmaticStreamSerializationAllowed == 1
        if self.refuse_chained:
            self.refused += 1
            return (CUresult.CUDA_ERROR_NOT_SUPPORTED,)
        self.chained.append(self.functions[f][0])
        return self.cuLaunchKernel(f, cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY,
                                   cfg.blockDimZ, cfg.sharedMemBytes, cfg.hStream, params, extra)

    def cuTensorMapEncodeTiled(self, kind: int, rank: int, address: int, dims: list, strides: list, box: list,
                               *rest: Any) -> tuple:
        self.encoded.append((int(address), tuple(dims), tuple(box)))
        return self._ok("cuTensorMapEncodeTiled", SimpleNamespace(opaque=[len(self.encoded)] * 16))

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, function: int, threads: int, shared: int) -> tuple:
        return self._ok("cuOccupancyMaxActiveBlocksPerMultiprocessor", 4 if shared <= 48 * 1024 else 2)

    def cuMemAlloc(self, size: int) -> tuple:
        ptr = self._next
        self._next += (size + 0xFFFF) & ~0xFFFF
        self.memory[ptr] = bytearray(size)
        return self._ok("cuMemAlloc", ptr)

    def cuMemFree(self, ptr: int) -> tuple:
        del self.memory[int(ptr)]
        return self._ok("cuMemFree")

    def cuMemHostAlloc(self, size: int, flags: int) -> tuple:
        buf = ctypes.create_string_buffer(size)
        self.pinned[ctypes.addressof(buf)] = buf
        return self._ok("cuMemHostAlloc", ctypes.addressof(buf))

    def cuMemFreeHost(self, ptr: int) -> tuple:
        del self.pinned[ptr]
        return self._ok("cuMemFreeHost")

    def cuMemcpyHtoDAsync(self, dst: int, src: int, size: int, stream: int) -> tuple:
        base, offset = self._block(int(dst))
        self.memory[base][offset:offset + size] = ctypes.string_at(src, size)
        return self._ok("cuMemcpyHtoDAsync")

    def cuMemcpyDtoHAsync(self, dst: int, src: int, size: int, stream: int) -> tuple:
        base, offset = self._block(int(src))
        ctypes.memmove(dst, bytes(self.memory[base][offset:offset + size]), size)
        return self._ok("cuMemcpyDtoHAsync")

    def cuPointerGetAttribute(self, attr: int, ptr: int) -> tuple:
        if ptr in self.foreign:
            return self._ok("cuPointerGetAttribute", self.foreign[ptr])
        try:
            self._block(ptr)
        except AssertionError:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        return self._ok("cuPointerGetAttribute", 0)

    def cuStreamIsCapturing(self, stream: int) -> tuple:
        """NONE (0) or ACTIVE (1): the stream of a begun capture, or ``outside_capture`` (a capture by torch)."""
        active = (self.capturing and int(stream) == self.capture_stream) or int(stream) == self.outside_capture
        return (CUresult.CUDA_SUCCESS, 1 if active else 0)

    def cuStreamBeginCapture(self, stream: int, mode: int) -> tuple:
        self.capturing = True
        self.capture_stream = int(stream)
        self.captured = []
        return self._ok("cuStreamBeginCapture")

    def cuStreamEndCapture(self, stream: int) -> tuple:
        self.capturing = False
        graph = self.handle()
        self.graphs = getattr(self, "graphs", {})
        self.graphs[graph] = list(self.captured)
        return self._ok("cuStreamEndCapture", graph)

    def cuGraphInstantiate(self, graph: int, flags: int) -> tuple:
        h = self.handle()
        self.graphs[h] = self.graphs[graph]
        return self._ok("cuGraphInstantiate", h)

    def cuGraphLaunch(self, executable: int, stream: int) -> tuple:
        for launch in self.graphs[executable]:
            self.launches.append(launch)
            if launch.entry in self.kernels:
                self.kernels[launch.entry](self, launch)
        return self._ok("cuGraphLaunch")

    def cuGraphExecDestroy(self, executable: int) -> tuple:
        return self._ok("cuGraphExecDestroy")

    def cuGraphDestroy(self, graph: int) -> tuple:
        return self._ok("cuGraphDestroy")

    def cuGetErrorName(self, err: Any) -> tuple:
        return self._ok("cuGetErrorName", CUresult(int(err)).name.encode())

    def cuGetErrorString(self, err: Any) -> tuple:
        return self._ok("cuGetErrorString", b"a fake description")


def pointer(launch: Launch, i: int) -> int:
    return int.from_bytes(launch.params[i], "little")


def fake_torch(ordinal_stream: int = 0x77) -> SimpleNamespace:
    """A stand-in for the torch module: enough of torch.Tensor for Iron's interop and fast path."""

    class Tensor:
        def __init__(self, ptr: int, count: int, dtype: Any, device: int = 0, contiguous: bool = True):
            self._ptr, self._count, self.dtype, self._device, self._contiguous = ptr, count, dtype, device, contiguous
            self.is_cuda = device >= 0

        def data_ptr(self) -> int:
            return self._ptr

        def numel(self) -> int:
            return self._count

        def element_size(self) -> int:
            return self.dtype.itemsize

        def get_device(self) -> int:
            return self._device

        def is_contiguous(self) -> bool:
            return self._contiguous

    class DType:
        def __init__(self, name: str, itemsize: int):
            self.name, self.itemsize = name, itemsize

        def __repr__(self) -> str:
            return f"torch.{self.name}"

    dtypes = {n: DType(n, s) for n, s in
              (("float32", 4), ("float16", 2), ("bfloat16", 2), ("int32", 4), ("float64", 8), ("int64", 8),
               ("int8", 1), ("uint8", 1), ("int16", 2), ("bool", 1))}
    module = SimpleNamespace(Tensor=Tensor, **dtypes)
    module._C = SimpleNamespace(_cuda_getCurrentRawStream=lambda ordinal: ordinal_stream)
    return module


def interpreted(kernel: Any, counts: dict[str, int]) -> Callable[[FakeDriver, Launch], None]:
    """A fake kernel that runs ``kernel``'s IR on the interpreter over the fake device memory.

    ``counts`` gives each tensor parameter's element count; scalars and the grid come from the launch's
    parameter block (decoded with the kernel's ABI), so what the device packed is what runs.
    """
    from iron.codegen.abi import kernel_abi
    from iron.core import dtypes as D
    from iron.runtime.interp.launch import run

    abi = kernel_abi(kernel)
    slot = {t.name: i for i, t in enumerate(abi.tensors)}

    def emulate(drv: FakeDriver, launch: Launch) -> None:
        block = launch.params[len(abi.tensors)]
        fields = {f.name: np.frombuffer(block, D.numpy_dtype(f.storage), 1, f.offset)[0] for f in abi.fields}
        grid = tuple(int(fields[f"iron_grid_{a}"]) for a in "xyz")
        args = []
        for p in kernel.params:
            if p.is_tensor:
                ptr = pointer(launch, slot[p.name])
                args.append(drv.array(ptr, counts[p.name], D.numpy_dtype(p.type.dtype)) if counts[p.name]
                            else np.zeros(0, D.numpy_dtype(p.type.dtype)))
            else:
                args.append(fields[p.name].astype(D.numpy_dtype(p.type.dtype)).item())
        ndim = 3 if grid[2] > 1 else 2 if grid[1] > 1 else 1
        run(kernel, args, grid[:ndim], launch.threads[:ndim])
    return emulate

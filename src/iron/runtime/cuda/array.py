"""``CudaArray``: device memory of the ``cuda`` device, for data that should stay on the GPU.

What :meth:`CudaDevice.to_device` / :meth:`CudaDevice.empty` return: a
C-contiguous array of one Iron dtype in a pooled device block.  Kernels
take it by pointer, like a torch tensor, so launches with it copy nothing
and may be captured into CUDA graphs.  It offers
``__cuda_array_interface__`` (so CuPy, Numba or torch can view it) and
:meth:`numpy` to copy it back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...core import dtypes as D
from ...core.errors import LaunchError
from .driver import check
from .pools import Pool, host_view

if TYPE_CHECKING:
    from .device import CudaDevice


class CudaArray:
    """``shape`` elements of ``dtype`` at device address ``ptr`` (owned by ``device``'s pool)."""

    __slots__ = ("device", "ptr", "shape", "dtype", "size", "nbytes", "ordinal", "_capacity", "__weakref__")
    #: Read by layers that may not import the runtime (iron.std's call plans): a C-contiguous device array
    #: whose address is ``ptr`` and whose GPU is ``ordinal``.
    iron_device_array = True

    def __init__(self, device: "CudaDevice", ptr: int, shape: tuple[int, ...], dtype: D.DType, capacity: int):
        self.device = device
        self.ptr = ptr
        self.shape = shape
        self.dtype = dtype
        self.size = int(np.prod(shape)) if shape else 1
        self.nbytes = self.size * dtype.itemsize
        self.ordinal = device.ordinal
        self._capacity = capacity

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": D.numpy_dtype(self.dtype).str, "data": (self.ptr, False),
                "strides": None, "version": 3, "stream": None}

    def numpy(self) -> np.ndarray:
        """A host copy (waits for the device's stream)."""
        out = np.empty(self.shape, D.numpy_dtype(self.dtype))
        self.device.copy_to_host(out, self)
        return out

    def copy_from(self, host: np.ndarray) -> None:
        """Overwrite with ``host`` (same dtype and element count)."""
        self.device.copy_to_device(self, host)

    def free(self) -> None:
        """Return the block to the device's pool now (also done when the array is garbage collected)."""
        if self.ptr:
            self.device.release_array(self)

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<CudaArray {self.dtype.name}{list(self.shape)} at 0x{self.ptr:x} on GPU {self.ordinal}>"


class ArrayStore:
    """Device arrays of one device: allocation from its pool, copies through pinned memory, deferred frees.

    A freed array's block is not reused at once: a kernel enqueued earlier may still be using it.  Blocks wait
    in a list until the next device-wide synchronisation (:meth:`reclaim`).
    """

    #: Freed blocks that make the device synchronise and reclaim them.
    RECLAIM_AT = 64

    def __init__(self, device: "CudaDevice", drv: Any, device_pool: Pool, pinned_pool: Pool) -> None:
        self.device = device
        self.drv = drv
        self.device_pool = device_pool
        self.pinned_pool = pinned_pool
        self.pending: list[int] = []

    def empty(self, shape: int | Sequence[int], dtype: D.DType) -> CudaArray:
        shape_t = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
        nbytes = int(np.prod(shape_t)) * dtype.itemsize if shape_t else dtype.itemsize
        with self.device._lock:
            self.device._check_open()
            ptr, cap = self.device_pool.acquire(max(nbytes, 1))
        return CudaArray(self.device, ptr, shape_t, dtype, cap)

    def to_device(self, host: np.ndarray) -> CudaArray:
        arr = self.empty(host.shape, D.from_numpy(host.dtype))
        self.copy(arr, host, to_device=True)
        return arr

    def copy(self, arr: CudaArray, host: np.ndarray, to_device: bool) -> None:
        """Copy between ``arr`` and ``host`` on the device's stream, after every earlier launch; waits for it."""
        if host.dtype != D.numpy_dtype(arr.dtype) or host.size != arr.size or not host.flags.c_contiguous:
            raise LaunchError(f"cannot copy a {host.dtype} array of {host.size} elements (C-contiguous: "
                              f"{host.flags.c_contiguous}) to or from {arr!r}")
        if not arr.ptr:
            raise LaunchError(f"{arr!r} was freed")
        dev, drv = self.device, self.drv
        with dev._lock:
            dev._check_open()
            dev._ctx.make_current()
            stream = dev._order.enter(dev._order.own_handle)
            pinned, _ = self.pinned_pool.acquire(max(arr.nbytes, 1))
            try:
                view = host_view(pinned, arr.nbytes)
                if to_device:
                    np.copyto(view, host.reshape(-1).view(np.uint8))
                    check(drv, drv.cuMemcpyHtoDAsync(arr.ptr, pinned, arr.nbytes, stream), "cuMemcpyHtoDAsync")
                else:
                    check(drv, drv.cuMemcpyDtoHAsync(pinned, arr.ptr, arr.nbytes, stream), "cuMemcpyDtoHAsync")
                check(drv, drv.cuStreamSynchronize(stream), "cuStreamSynchronize")
                if not to_device:
                    np.copyto(host.reshape(-1).view(np.uint8), view)
            finally:
                self.pinned_pool.release(pinned)

    def release(self, ptr: int) -> bool:
        """Queue ``ptr`` for reuse; True when enough are queued that the device should synchronise."""
        self.pending.append(ptr)
        return len(self.pending) >= self.RECLAIM_AT

    def reclaim(self) -> None:
        """After a device-wide synchronisation: queued blocks go back to the pool."""
        for ptr in self.pending:
            self.device_pool.release(ptr)
        self.pending.clear()

"""One buffer per kernel holding every launch argument: the tensor pointers, then the parameter block.

``cuLaunchKernel`` takes ``kernelParams``, an array of pointers, one per
kernel parameter, to memory holding that parameter's value; the driver
copies the values when the call is made, so the memory can be refilled for
the next launch at once.  Iron's kernels take the tensors' device pointers
(8 bytes each, in ABI order) then one ``IronParams`` struct
(:mod:`iron.codegen.abi`).  :class:`ArgBuffer` lays all of them out in one
ctypes buffer, pointer slots first, and builds the ``kernelParams`` array
once; a launch is then one ``struct.pack_into`` of the values, in
:meth:`ArgBuffer.order` order, and the buffer's address.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Sequence

from ...codegen.abi import KernelABI
from ...codegen.tensor_maps import MAP_BYTES
from ...core import dtypes as D

_CODES = {D.i32: "i", D.u32: "I", D.i64: "q", D.u64: "Q", D.f32: "f", D.f64: "d"}
POINTER = 8


def block_format(abi: KernelABI) -> str:
    """The ``struct`` format (no byte-order prefix) of the parameter block, padding included."""
    out, offset = [], 0
    for name, at, code, size in [(f.name, f.offset, _CODES[f.storage], f.storage.itemsize) for f in abi.fields] + \
            [(m.name, m.offset, f"{MAP_BYTES}s", MAP_BYTES) for m in abi.maps]:
        if at < offset:
            raise ValueError(f"field {name} at offset {at} overlaps the one before it")
        out.append("x" * (at - offset) + code)
        offset = at + size
    if offset > abi.params_size:
        raise ValueError(f"the parameter block's fields end at {offset}, past its size {abi.params_size}")
    out.append("x" * (abi.params_size - offset))
    return "".join(out)


class ArgBuffer:
    """The argument memory of one kernel: ``len(abi.tensors)`` pointer slots then the parameter block."""

    def __init__(self, abi: KernelABI) -> None:
        self.abi = abi
        tensors = len(abi.tensors)
        self.struct = struct.Struct("<" + "Q" * tensors + block_format(abi))
        assert self.struct.size == POINTER * tensors + abi.params_size
        self.buffer = ctypes.create_string_buffer(self.struct.size)
        base = ctypes.addressof(self.buffer)
        offsets = [POINTER * i for i in range(tensors)] + [POINTER * tensors]
        self._pointers = (ctypes.c_void_p * len(offsets))(*[base + o for o in offsets])
        #: The ``kernelParams`` value for cuLaunchKernel (a ``void**`` as an int).
        self.params_address = ctypes.addressof(self._pointers)

    def order(self) -> list[tuple[str, object]]:
        """What each value of :meth:`pack` is: ("pointer", tensor name) per tensor, then per field
        (field kind, its parameter name / grid axis / sized tensor name), then ("tensormap", map) per map."""
        out: list[tuple[str, object]] = [("pointer", t.name) for t in self.abi.tensors]
        for f in self.abi.fields:
            out.append((f.kind, f.name if f.kind == "param" else f.axis if f.kind == "grid" else f.of))
        out += [("tensormap", m) for m in self.abi.maps]  # 128 bytes each, encoded per launch
        return out

    def pack(self, values: Sequence[int | float]) -> None:
        """Fill the buffer (raises struct.error or OverflowError on a value its slot cannot hold)."""
        self.struct.pack_into(self.buffer, 0, *values)

    def block(self) -> bytes:
        """The parameter block as last packed (for tests: it must equal ``pack_params``)."""
        return self.buffer.raw[POINTER * len(self.abi.tensors):]

    def pointers(self) -> list[int]:
        """The pointer slots as last packed."""
        n = len(self.abi.tensors)
        return list(struct.unpack_from("<" + "Q" * n, self.buffer, 0)) if n else []

"""The kernel ABI: how a launch's arguments reach a compiled kernel, the same on every target.

* Tensor parameters are buffers, numbered in parameter order from 0: a
  pointer parameter in CUDA/HIP, ``layout(set = 0, binding = i) buffer`` in
  GLSL, ``[[buffer(i)]]`` in MSL.
* Everything else travels in one plain-old-data *parameter block*: the scalar
  parameters in order, then the launch's grid (threads per axis, three u32,
  which every kernel needs to keep threads past the grid from running), then
  the element count of each tensor whose size the kernel reads.  It is a
  by-value struct argument in CUDA/HIP, the push-constant block in GLSL and
  a ``constant`` struct at buffer index ``len(tensors)`` in MSL.
* Fields narrower than 32 bits are widened (8/16-bit ints sign- or
  zero-extended to 32, f16/bf16/f8 carried as the f32 of the same value), since
  16-bit push constants are an optional Vulkan feature and by-value 16-bit
  parameters differ between C ABIs.  Each field is aligned to its size; the
  block's size is a multiple of 8 (never 0, so every target can declare it).

Every device packs the block with :func:`pack_params`, so the layout is
defined once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..core import dtypes as D
from ..core.ir import Kernel
from ..core.types import ScalarType, TensorType
from .tensor_maps import MAP_ALIGN, MAP_BYTES, TensorMap, find_tensor_maps

#: The storage type of a scalar of each dtype in the parameter block.
_WIDENED = {D.i8: D.i32, D.i16: D.i32, D.u8: D.u32, D.u16: D.u32, D.f16: D.f32, D.bf16: D.f32, D.bool_: D.u32,
            D.f8e4m3: D.f32, D.f8e5m2: D.f32}


@dataclass(frozen=True)
class TensorArg:
    name: str
    dtype: D.DType
    binding: int
    #: "read", "write" or "readwrite", from the body's uses.
    access: str


@dataclass(frozen=True)
class Field:
    """One field of the parameter block."""

    name: str
    #: The dtype the field is stored as (see the widening rule above).
    storage: D.DType
    #: The dtype the kernel uses (the parameter's own; u32 for grid and sizes).
    dtype: D.DType
    offset: int
    #: "param" (a scalar parameter), "grid" (``axis`` 0..2) or "size" (of tensor ``of``).
    kind: str
    of: str | None = None
    axis: int | None = None


@dataclass(frozen=True)
class KernelABI:
    entry: str
    tensors: tuple[TensorArg, ...]
    fields: tuple[Field, ...]
    params_size: int
    #: Tensor maps after the fields (targets that copy tiles in hardware: :mod:`.tensor_maps`).
    maps: tuple[TensorMap, ...] = ()

    @property
    def params_binding(self) -> int:
        """Where MSL takes the parameter block (after the tensors)."""
        return len(self.tensors)

    def field(self, kind: str, of: str | None = None, axis: int | None = None) -> Field:
        for f in self.fields:
            if f.kind == kind and f.of == of and f.axis == axis:
                return f
        raise KeyError((kind, of, axis))

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "tensors": [{"name": t.name, "dtype": t.dtype.name, "binding": t.binding, "access": t.access}
                        for t in self.tensors],
            "params": [{"name": f.name, "dtype": f.dtype.name, "storage": f.storage.name, "offset": f.offset,
                        "kind": f.kind, **({"of": f.of} if f.of else {}),
                        **({"axis": f.axis} if f.axis is not None else {})} for f in self.fields],
            "params_size": self.params_size,
            **({"maps": [m.to_json() for m in self.maps]} if self.maps else {}),
        }


def storage_dtype(dt: D.DType) -> D.DType:
    return _WIDENED.get(dt, dt)


def entry_name(k: Kernel) -> str:
    """A C identifier unique per kernel and variant: ``iron_exp__T_f16`` or ``block_sum__BLOCK_128__T_f32``."""
    binding = k.meta.get("variant") or {}
    parts = [k.name] + [f"{key}_{_value_text(v)}" for key, v in sorted(binding.items())]
    ident = re.sub(r"[^A-Za-z0-9_]", "_", "__".join(parts))
    from .emit.names import RESERVED  # here: the emitters import this module

    if ident in RESERVED or not (ident[:1].isalpha() or ident[:1] == "_"):  # a kernel named `double` or `main`
        ident = f"iron_k_{ident}"
    return ident


def _value_text(v: Any) -> str:
    if isinstance(v, D.DType):
        return v.name
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v).replace(".", "p").replace("-", "m").replace("+", "")
    return str(v).replace("-", "m")


def sized_tensors(k: Kernel) -> list[str]:
    """Tensor parameters whose element count the body reads (``tensor_size``), in parameter order."""
    used = {op.operands[0] for op in k.walk() if op.opcode == "tensor_size"}
    for f in k.functions.values():
        used |= {op.operands[0] for op in f.body.walk() if op.opcode == "tensor_size"}
    return [p.name for p in k.params if p.value in used]


def kernel_abi(k: Kernel) -> KernelABI:
    """The ABI of a (call-free) kernel."""
    tensors = []
    fields: list[Field] = []
    offset = 0

    def add(name: str, dt: D.DType, kind: str, of: str | None = None, axis: int | None = None) -> None:
        nonlocal offset
        st = storage_dtype(dt)
        size = st.itemsize
        offset = (offset + size - 1) // size * size
        fields.append(Field(name, st, dt, offset, kind, of, axis))
        offset += size

    for p in k.params:
        t = p.type
        if isinstance(t, TensorType):
            tensors.append(TensorArg(p.name, t.dtype, len(tensors), p.access or ("read" if t.readonly else "readwrite")))
        elif isinstance(t, ScalarType):
            add(p.name, t.dtype, "param")
        else:  # pragma: no cover - the frontend only makes tensor and scalar parameters
            raise TypeError(f"parameter {p.name} of type {t} has no ABI")
    for axis, name in enumerate(("grid_x", "grid_y", "grid_z")):
        add(f"iron_{name}", D.u32, "grid", axis=axis)
    for name in sized_tensors(k):
        add(f"iron_size_{name}", D.u32, "size", of=name)
    size = max(8, (offset + 7) // 8 * 8)
    return KernelABI(entry_name(k), tuple(tensors), tuple(fields), size)


def with_tensor_maps(abi: KernelABI, kernel: Kernel,
                     opcodes: Sequence[str] = ("tile_copy", "tile_store")) -> KernelABI:
    """``abi`` with the tensor maps of ``kernel``'s tile copies (the ops of ``opcodes`` that the target runs in
    hardware) appended to its parameter block (64-byte aligned, the block then a multiple of 64 bytes); ``abi``
    itself when it has none."""
    maps = find_tensor_maps(kernel, abi.params_size, opcodes)
    if not maps:
        return abi
    end = maps[-1].offset + MAP_BYTES
    return KernelABI(abi.entry, abi.tensors, abi.fields, -(-end // MAP_ALIGN) * MAP_ALIGN, maps)


def pack_params(abi: KernelABI, scalars: dict[str, Any], grid: Sequence[int], sizes: dict[str, int]) -> bytes:
    """The parameter block for one launch: ``scalars`` by parameter name, ``grid`` padded to 3 axes,
    ``sizes`` the element count of each tensor by name."""
    import numpy as np

    buf = bytearray(abi.params_size)
    g = tuple(grid) + (1,) * (3 - len(grid))
    for f in abi.fields:
        if f.kind == "param":
            value = scalars[f.name]
        elif f.kind == "grid":
            value = g[f.axis]
        else:
            value = sizes[f.of]
        arr = np.asarray(value).astype(D.numpy_dtype(f.storage))
        buf[f.offset:f.offset + f.storage.itemsize] = arr.tobytes()
    return bytes(buf)

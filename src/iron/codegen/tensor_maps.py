"""The tensor maps (TMA descriptors) a kernel's tile copies and stores use where tiles move in hardware.

On CUDA sm_90 a ``tile_copy`` or ``tile_store`` is one ``cp.async.bulk.tensor`` instruction using a
128-byte descriptor of the global matrix (address, extents, row stride, box, swizzle) that the host
encodes before the launch and passes in the parameter block (``__grid_constant__``, docs/backends.md).
The host can encode only what it knows at launch: a map's tensor is a parameter, and its extents and row
stride are scalar parameters or constants.  One map serves every tile copy and store with the same
tensor, extents, box and layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, Union

from ..core import dtypes as D
from ..core.errors import UnsupportedOnTarget
from ..core.ir import Kernel, Op, Value
from ..core.types import TILE_LAYOUTS

#: An extent of a map: a scalar parameter's name, or a constant.
Extent = Union[str, int]
#: Bytes and alignment of one descriptor (CUtensorMap).
MAP_BYTES, MAP_ALIGN = 128, 64


@dataclass(frozen=True)
class TensorMap:
    """One descriptor in the parameter block, at ``offset``: ``tensor`` seen as ``rows x cols`` with rows
    ``ld`` elements apart (under ``outer`` axes dense over that matrix, outermost first), copied in ``box``
    tiles (``box_outer`` x rows x cols) laid out as ``layout`` (``TILE_LAYOUTS``)."""

    name: str
    offset: int
    tensor: str
    dtype: D.DType
    rows: Extent
    cols: Extent
    ld: Extent
    box: tuple[int, int]
    layout: str
    outer: tuple[Extent, ...] = ()
    box_outer: tuple[int, ...] = ()

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.tensor, self.rows, self.cols, self.ld, self.box, self.layout, self.outer, self.box_outer)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "offset": self.offset, "tensor": self.tensor, "dtype": self.dtype.name,
                "rows": self.rows, "cols": self.cols, "ld": self.ld, "box": list(self.box), "layout": self.layout,
                "outer": list(self.outer), "box_outer": list(self.box_outer)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "TensorMap":
        return TensorMap(d["name"], int(d["offset"]), d["tensor"], D.by_name(d["dtype"]), d["rows"], d["cols"],
                         d["ld"], (int(d["box"][0]), int(d["box"][1])), d["layout"], tuple(d.get("outer", ())),
                         tuple(int(e) for e in d.get("box_outer", ())))


#: Per op with a map: (its builtin's name, the operand of the global tensor, the first of rows, cols, ld, the
#: first of the outer axes' extents).
MAP_OPS = {"tile_copy": ("copy_tile", 2, 3, 10), "tile_store": ("store_tile", 0, 1, 8)}


def map_key(op: Op, kernel: Kernel, defs: dict[Value, Op]) -> tuple[Any, ...]:
    """The key of the map ``op`` (a ``tile_copy`` or ``tile_store`` of ``kernel``) uses, or UnsupportedOnTarget
    naming the extent the host cannot know."""
    params = {p.value: p.name for p in kernel.params}
    builtin, tensor, first, outer_at = MAP_OPS[op.opcode]
    box_outer = tuple(op.attrs.get("box_outer", ()))
    extents: list[Extent] = []
    named = [*zip(op.operands[first:first + 3], ("rows", "cols", "row stride")),
             *((v, "outer extent") for v in op.operands[outer_at:outer_at + len(box_outer)])]
    for v, what in named:
        if v in params:
            extents.append(params[v])
        elif v in defs and defs[v].opcode == "const":
            extents.append(int(defs[v].attrs["value"]))
        else:
            raise UnsupportedOnTarget(f"{builtin}'s {what} is computed in the kernel; tile copies in hardware read a "
                                      "descriptor the runtime builds before the launch, from the tensor and scalar "
                                      "parameters", op.loc, kernel=kernel.name,
                                      hint="pass the matrix's rows, cols and row stride as kernel parameters (or "
                                           "constants)")
    return (params[op.operands[tensor]], *extents[:3], (op.attrs["box_rows"], op.attrs["box_cols"]), op.attrs["layout"],
            tuple(extents[3:]), box_outer)


def find_tensor_maps(kernel: Kernel, start: int, opcodes: Sequence[str] = tuple(MAP_OPS)) -> tuple[TensorMap, ...]:
    """The maps of ``kernel``'s tile copies and stores (those of ``opcodes``), in order of first use, placed from
    byte ``start`` on."""
    defs = {op.result: op for op in kernel.walk() if op.result is not None}
    dtypes = {p.name: p.type.dtype for p in kernel.params if p.is_tensor}
    found: dict[tuple[Any, ...], TensorMap] = {}
    offset = -(-start // MAP_ALIGN) * MAP_ALIGN
    for op in kernel.walk():
        if op.opcode not in MAP_OPS or op.opcode not in opcodes:
            continue
        key = map_key(op, kernel, defs)
        if key not in found:
            tensor, rows, cols, ld, box, layout, outer, box_outer = key
            found[key] = TensorMap(f"iron_map_{len(found)}", offset, tensor, dtypes[tensor], rows, cols, ld, box,
                                   layout, outer, box_outer)
            offset += MAP_BYTES
    return tuple(found.values())


def map_name(op: Op, kernel: Kernel, maps: tuple[TensorMap, ...]) -> str:
    """The member of the parameter block holding ``op``'s map."""
    defs = {o.result: o for o in kernel.walk() if o.result is not None}
    key = map_key(op, kernel, defs)
    return next(m.name for m in maps if m.key == key)


@dataclass(frozen=True)
class Encoding:
    """What ``cuTensorMapEncodeTiled`` takes for one map at one launch (innermost dimension first: ``dims`` and
    ``box`` have one entry per axis, ``strides_bytes`` one per axis but the innermost)."""

    dtype: D.DType
    address: int
    dims: tuple[int, ...]
    strides_bytes: tuple[int, ...]
    box: tuple[int, ...]
    swizzle_128b: bool


def encoding(m: TensorMap, address: int, scalars: dict[str, Any], elements: int) -> Encoding:
    """The encoding of ``m`` for a launch with the tensor at ``address`` (``elements`` long) and these scalar
    arguments, or ValueError saying which of TMA's rules the arguments break."""
    rows, cols, ld, *outer = (int(scalars[e]) if isinstance(e, str) else int(e)
                              for e in (m.rows, m.cols, m.ld, *m.outer))
    item = m.dtype.itemsize
    shape = " x ".join(map(str, (*outer, rows, cols)))
    where = f"a tile copy or store of '{m.tensor}' as a {shape} {'tensor' if outer else 'matrix'} with rows {ld} " \
            "elements apart"
    if rows < 1 or cols < 1 or min(outer, default=1) < 1:
        raise ValueError(f"{where}: the {'tensor' if outer else 'matrix'} is empty")
    if cols > ld and (rows > 1 or outer):
        raise ValueError(f"{where}: a row is longer than the row stride")
    if math.prod(outer) * rows * ld - ld + cols > elements:
        raise ValueError(f"{where}: the {'tensor' if outer else 'matrix'} ends past the tensor's {elements} elements")
    if address % 16 or ld * item % 16:
        raise ValueError(f"{where}: tile copies need the tensor 16-byte aligned and rows a multiple of 16 bytes apart "
                         f"(address {address:#x}, {ld * item} bytes)")
    strides = [ld * item]
    for e in [rows, *reversed(outer[1:])]:  # each outer axis's stride: the axes inside it, dense
        strides.append(strides[-1] * e)
    if rows >= 2 ** 32 or cols >= 2 ** 32 or max(outer, default=1) >= 2 ** 32 or strides[-1] >= 2 ** 40:
        raise ValueError(f"{where}: too large for a tensor map")
    return Encoding(m.dtype, address, (cols, rows, *reversed(outer)), tuple(strides[:1 + len(outer)]),
                    (m.box[1], m.box[0], *reversed(m.box_outer)), TILE_LAYOUTS[m.layout].swizzled)

"""IR value types: scalars, short vectors, tensors (buffers), matrix fragments.

Every SSA value in the IR has exactly one of these types.  They are frozen
dataclasses so they hash and compare by value, which the CSE pass and the
content hash rely on.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dtypes as D
from .dtypes import DType

#: Widths a vector value may have (the DSL's vector loads/stores).
VECTOR_WIDTHS = (2, 4, 8)

#: Matrix-fragment shapes (M, N, K) the ``mma`` op accepts.  The interpreter
#: defines each exactly; the targets map them onto their matrix units.
MMA_SHAPES: tuple[tuple[int, int, int], ...] = ((8, 8, 8), (16, 8, 16), (16, 16, 16))

#: Warpgroup multiplies (``mma_wg``, docs/ir.md "Warpgroup multiplies"): four consecutive subgroups
#: multiply a 64-row A tile by a K x N B tile, both in shared memory; subgroup ``s`` holds rows
#: ``16 (s % 4)`` .. of the product as a 16 x N accumulator fragment.
WG_ROWS = 64
#: N: any multiple of 8 up to 256 (wgmma's m64nNk16 / k32 shapes); B stored k-by-n takes multiples of 64.
WG_N: tuple[int, ...] = tuple(range(8, 257, 8))
WG_ACC_SHAPES: tuple[tuple[int, int], ...] = tuple((16, n) for n in WG_N)
#: Elements in one row of a swizzled tile (128 bytes of 16-bit values), and the rows of one swizzle atom.
SW128_ROW = 64
SW128_ATOM_ROWS = 8
#: The element types warpgroup multiplies read: 16-bit floats, and 8-bit ones (K-major tiles only).
WG_DTYPES: frozenset[DType] = frozenset({D.f16, D.bf16, D.f8e4m3, D.f8e5m2})


def wg_k_step(dt: DType) -> int:
    """The K columns one warpgroup multiply instruction takes: 32 bytes of a tile row (16 of f16, 32 of f8)."""
    return 32 // dt.itemsize


def wg_row(dt: DType) -> int:
    """The elements of one swizzled tile row: 128 bytes (64 of f16, 128 of f8), the most K one ``mma_wg`` takes."""
    return 128 // dt.itemsize


def sw128_index(row, col):
    """Where element (row, col) of a swizzled tile lives, as an offset from the tile's first element.

    A swizzled tile (the layout ``mma_wg`` reads, NVIDIA's 128-byte swizzle of 16-bit values) keeps
    each row in 64 consecutive elements and permutes the row's eight 8-element chunks by the row's
    position in its 8-row atom: chunk ``c`` of row ``r`` is stored as chunk ``c ^ (r % 8)``.  Works on
    ints and numpy int arrays.
    """
    return row * SW128_ROW + (((col >> 3) ^ (row & 7)) << 3) + (col & 7)


@dataclass(frozen=True)
class TileLayout:
    """How a tile copy (``copy_tile``) places a box of ``rows x cols`` elements in shared memory.

    ``row_bytes``: the bytes a box row must span (0: any multiple of 16); ``align``: the alignment of the
    tile's first element, in bytes; ``swizzled``: whether 16-byte chunks are permuted within 8-row atoms
    (NVIDIA's 128-byte swizzle, what ``mma_wg`` reads).  The same table drives the interpreter, the
    portable copy loops and the TMA descriptor.
    """

    name: str
    row_bytes: int
    align: int
    swizzled: bool

    def index(self, row, col, cols: int, itemsize: int):
        """The offset of element (row, col) from the tile's first element (ints or numpy int arrays)."""
        if not self.swizzled:
            return row * cols + col
        chunk = 16 // itemsize
        return row * (128 // itemsize) + (((col // chunk) ^ (row % 8)) * chunk) + col % chunk


#: The shared tile layouts by name: ``rows`` (row-major) and ``sw128`` (``mma_wg``'s); TMA writes tiles at least
#: 128-byte aligned.
TILE_LAYOUTS = {layout.name: layout for layout in (TileLayout("rows", 0, 128, False),
                                                   TileLayout("sw128", 128, 1024, True))}
#: The largest extent of a tile copy's box along each axis (TMA's limit).
TILE_BOX_MAX = 256
#: The most axes a tile copy's tensor and box have (TMA's limit): a matrix and up to three outer axes.
TILE_RANK_MAX = 5


def tile_rows(attrs: dict) -> int:
    """The rows of a tile copy's or store's shared tile: its box's extents but the innermost multiplied (the
    outer axes' ``box_outer``, then ``box_rows``), in row-major order."""
    n = attrs["box_rows"]
    for e in attrs.get("box_outer", ()):
        n *= e
    return n
#: A box's first column, in bytes from its row's start, is a multiple of this: TMA's rule (on the H200 a copy
#: from column 3 or 5 of an f32 matrix raises an illegal instruction; 4, 8 and -4 copy).
TILE_COL_ALIGN_BYTES = 16


class IRType:
    """Base class of IR types."""

    def __str__(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass(frozen=True)
class ScalarType(IRType):
    dtype: DType

    def __str__(self) -> str:
        return self.dtype.name


@dataclass(frozen=True)
class VectorType(IRType):
    dtype: DType
    width: int

    def __str__(self) -> str:
        return f"{self.dtype.name}x{self.width}"


@dataclass(frozen=True)
class TensorType(IRType):
    """A buffer of ``dtype`` elements, indexed by a flat element index.

    ``space`` is ``"global"`` (a kernel argument) or ``"shared"``
    (threadgroup memory, whose ``shape`` is static).  ``readonly`` marks a
    global tensor the kernel never stores to (the frontend infers it; a
    parameter annotated ``In[T]`` / ``Const[T]`` is declared read-only).
    """

    dtype: DType
    space: str = "global"
    readonly: bool = False
    shape: tuple[int, ...] | None = None

    def __str__(self) -> str:
        ro = " readonly" if self.readonly else ""
        if self.space == "shared":
            dims = "x".join(str(s) for s in (self.shape or ()))
            return f"shared<{self.dtype.name}[{dims}]>"
        return f"tensor<{self.dtype.name}{ro}>"

    @property
    def num_elements(self) -> int | None:
        if self.shape is None:
            return None
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class FragmentType(IRType):
    """A matrix fragment owned collectively by one subgroup.

    ``role`` is ``"a"`` (M x K), ``"b"`` (K x N) or ``"acc"`` (M x N);
    ``rows`` and ``cols`` are the fragment's matrix shape.
    """

    role: str
    dtype: DType
    rows: int
    cols: int

    def __str__(self) -> str:
        return f"frag<{self.role},{self.dtype.name},{self.rows}x{self.cols}>"


@dataclass(frozen=True)
class VarType(IRType):
    """A mutable local slot holding a value of ``elem`` (scalar, vector or fragment)."""

    elem: IRType

    def __str__(self) -> str:
        return f"var<{self.elem}>"


@dataclass(frozen=True)
class BarrierType(IRType):
    """``count`` asynchronous barriers in a group's shared memory (``async_barriers``, docs/ir.md).

    Not a tensor: a kernel arrives on and waits for them, it never loads or stores them.
    """

    count: int

    def __str__(self) -> str:
        return f"barriers<{self.count}>"


@dataclass(frozen=True)
class TupleType(IRType):
    """Several values returned together by a helper function (gone after inlining)."""

    elems: tuple[IRType, ...]

    def __str__(self) -> str:
        return "(" + ", ".join(str(e) for e in self.elems) + ")"


def scalar(dt: DType) -> ScalarType:
    return ScalarType(dt)


def element_dtype(t: IRType) -> DType:
    """The element dtype of a scalar, vector, tensor or fragment type."""
    if isinstance(t, (ScalarType, VectorType, TensorType, FragmentType)):
        return t.dtype
    if isinstance(t, VarType):
        return element_dtype(t.elem)
    raise TypeError(f"type {t} has no element dtype")


def with_dtype(t: IRType, dt: DType) -> IRType:
    """``t`` with its element dtype replaced (scalar stays scalar, vector keeps width)."""
    if isinstance(t, ScalarType):
        return ScalarType(dt)
    if isinstance(t, VectorType):
        return VectorType(dt, t.width)
    if isinstance(t, FragmentType):
        return FragmentType(t.role, dt, t.rows, t.cols)
    raise TypeError(f"cannot change the dtype of {t}")


def is_value_type(t: IRType) -> bool:
    """Scalars and vectors: the types arithmetic works on."""
    return isinstance(t, (ScalarType, VectorType))


def width_of(t: IRType) -> int:
    return t.width if isinstance(t, VectorType) else 1

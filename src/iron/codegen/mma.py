"""Matrix units as data: how each architecture spreads a fragment over a subgroup's lanes.

A fragment (docs/ir.md, "Matrix fragments") belongs to a whole subgroup; a
matrix unit holds it in per-lane registers.  An :class:`MmaStrategy` states,
for one family of matrix instructions, which shapes and dtypes it runs and,
for each fragment role (``a`` is MxK, ``b`` KxN, ``acc`` MxN), which element
each (lane, register) pair holds.  Layouts are data, not code: a
:class:`BitFieldLayout` names, for every bit of the row and column index, the
lane or register bit it comes from (every layout here is a permutation of
power-of-two index bits), a :class:`StripedLayout` is the portable closed
form, and a :class:`TableLayout` is an explicit table.  The emitters and the
interpreter (``fragment_layout`` mode) read the same objects, so every
layout is exercised on the CPU.

"register" below means one per-lane element slot (``a0..a7`` in the PTX ISA,
``a_frag[0..15]`` for WMMA); :func:`register_words` converts slots to 32-bit
hardware registers, where 16-bit elements are packed in pairs.

See docs/matrix-units.md for the sources and for what is normative.
"""

from __future__ import annotations

import functools
import itertools
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from ..core import dtypes as D
from ..core.dtypes import DType
from ..core.errors import IronError
from ..core.types import MMA_SHAPES, WG_ACC_SHAPES, WG_N
from .backends import get_target

Role = Literal["a", "b", "acc"]
ROLES: tuple[Role, ...] = ("a", "b", "acc")
Shape = tuple[int, int, int]

#: How trustworthy a strategy's per-lane layout is (docs/matrix-units.md).
#: ``normative``: the vendor's ISA documents it; code may depend on it.
#: ``informational``: the vendor does not document it; recorded from public
#: code and reverse engineering; emitters never depend on it.
#: ``opaque``: implementation-defined and unknowable offline; no layout.
#: ``portable``: Iron's own choice for targets without a matrix unit.
LayoutStatus = Literal["normative", "informational", "opaque", "portable"]


class MmaLayoutError(IronError, ValueError):
    """A fragment layout is malformed, or a strategy has none for what was asked."""


class OpaqueLayoutError(MmaLayoutError):
    """The strategy's per-lane layout is implementation-defined (Vulkan cooperative matrices)."""


def role_dims(role: str, shape: Shape) -> tuple[int, int]:
    """(rows, cols) of ``role``'s fragment in an (M, N, K) multiply."""
    m, n, k = shape
    dims = {"a": (m, k), "b": (k, n), "acc": (m, n)}
    if role not in dims:
        raise MmaLayoutError(f"unknown fragment role {role!r}; roles are {', '.join(ROLES)}")
    return dims[role]


def register_words(layout: "FragmentLayout", dtype: DType) -> int:
    """32-bit hardware registers per lane that hold ``layout``'s slots of ``dtype`` (16-bit values pack in pairs)."""
    return -(-layout.registers_per_lane * dtype.bits // 32)


# ---------------------------------------------------------------- layouts

class FragmentLayout(ABC):
    """Where each element of a ``rows x cols`` fragment lives among ``lane_width`` lanes.

    ``element(lane, reg)`` is total: every slot holds one element.  An element
    is held by ``replication`` slots (1 for a bijection; 2 for RDNA3 WMMA
    operands in wave32, whose upper 16 lanes mirror the lower 16);
    ``owner`` gives the lowest-lane one, ``owners`` all of them.
    """

    rows: int
    cols: int

    @property
    @abstractmethod
    def lane_width(self) -> int: ...

    @property
    @abstractmethod
    def registers_per_lane(self) -> int: ...

    @abstractmethod
    def to_table(self) -> np.ndarray:
        """``table[lane, reg] = (row, col)``: an int64 array (lane_width, registers_per_lane, 2)."""

    def resolve(self, lane_width: int | None) -> "FragmentLayout":
        """This layout at ``lane_width`` (None: its own); fixed layouts reject any other width."""
        if lane_width is not None and lane_width != self.lane_width:
            raise MmaLayoutError(f"this {self.rows}x{self.cols} layout spreads over {self.lane_width} lanes, "
                                 f"not {lane_width}")
        return self

    @property
    def replication(self) -> int:
        return self.lane_width * self.registers_per_lane // (self.rows * self.cols)

    def element(self, lane: int, reg: int) -> tuple[int, int]:
        self._check_slot(lane, reg)
        row, col = self.to_table()[lane, reg]
        return int(row), int(col)

    def owners(self, row: int, col: int) -> tuple[tuple[int, int], ...]:
        """Every (lane, reg) that holds element (row, col), lowest lane first."""
        self._check_element(row, col)
        table = self.to_table()
        lanes, regs = np.nonzero((table[..., 0] == row) & (table[..., 1] == col))
        return tuple(sorted(zip(map(int, lanes), map(int, regs))))

    def owner(self, row: int, col: int) -> tuple[int, int]:
        """The lowest-lane (lane, reg) holding element (row, col)."""
        found = self.owners(row, col)
        if not found:
            raise MmaLayoutError(f"no lane holds element ({row}, {col}) of this {self.rows}x{self.cols} layout")
        return found[0]

    def owner_table(self) -> np.ndarray:
        """``owners[row, col] = (lane, reg)`` of each element's lowest-lane owner: int64 (rows, cols, 2).

        Raises unless every element has an owner.
        """
        table = self.to_table()
        regs = self.registers_per_lane
        slots = np.arange(self.lane_width * regs).reshape(self.lane_width, regs)  # lane-major: lowest lane first
        first = np.full((self.rows, self.cols), self.lane_width * regs, dtype=np.int64)
        np.minimum.at(first, (table[..., 0], table[..., 1]), slots)
        missing = np.argwhere(first == self.lane_width * regs)
        if missing.size:
            r, c = map(int, missing[0])
            raise MmaLayoutError(f"no lane holds element ({r}, {c}) of this {self.rows}x{self.cols} layout")
        return np.stack(np.divmod(first, regs), axis=-1)

    def check(self) -> None:
        """Raise :class:`MmaLayoutError` unless every element is held by exactly ``replication`` slots."""
        total = self.lane_width * self.registers_per_lane
        if total % (self.rows * self.cols):
            raise MmaLayoutError(f"{self.lane_width} lanes x {self.registers_per_lane} registers cannot hold "
                                 f"a {self.rows}x{self.cols} fragment an equal number of times")
        table = self.to_table()
        if table.shape != (self.lane_width, self.registers_per_lane, 2):
            raise MmaLayoutError(f"the table has shape {table.shape}, expected "
                                 f"{(self.lane_width, self.registers_per_lane, 2)}")
        rows, cols = table[..., 0], table[..., 1]
        outside = np.argwhere((rows < 0) | (rows >= self.rows) | (cols < 0) | (cols >= self.cols))
        if outside.size:
            lane, reg = map(int, outside[0])
            raise MmaLayoutError(f"lane {lane} register {reg} holds ({int(rows[lane, reg])}, "
                                 f"{int(cols[lane, reg])}), outside the {self.rows}x{self.cols} fragment")
        counts = np.zeros((self.rows, self.cols), dtype=np.int64)
        np.add.at(counts, (rows, cols), 1)
        wrong = np.argwhere(counts != self.replication)
        if wrong.size:
            r, c = map(int, wrong[0])
            held = ", ".join(f"lane {lane} reg {reg}" for lane, reg in self.owners(r, c)) or "no lane"
            raise MmaLayoutError(f"element ({r}, {c}) is held {int(counts[r, c])} times ({held}); every element "
                                 f"must be held exactly {self.replication} time(s)")

    def _check_slot(self, lane: int, reg: int) -> None:
        if not (0 <= lane < self.lane_width and 0 <= reg < self.registers_per_lane):
            raise MmaLayoutError(f"(lane {lane}, register {reg}) is outside {self.lane_width} lanes x "
                                 f"{self.registers_per_lane} registers")

    def _check_element(self, row: int, col: int) -> None:
        if not (0 <= row < self.rows and 0 <= col < self.cols):
            raise MmaLayoutError(f"({row}, {col}) is outside the {self.rows}x{self.cols} fragment")


_BIT = re.compile(r"^([lr])(\d)$")


@functools.lru_cache(maxsize=None)
def _parse_bit(bit: str) -> tuple[str, int]:
    m = _BIT.match(bit)
    if not m:
        raise MmaLayoutError(f"bad bit source {bit!r}: write 'l<k>' for lane bit k or 'r<k>' for register bit k")
    return m.group(1), int(m.group(2))


def _log2(n: int, what: str) -> int:
    if n < 1 or n & (n - 1):
        raise MmaLayoutError(f"{what} must be a power of two, got {n}")
    return n.bit_length() - 1


@dataclass(frozen=True)
class BitFieldLayout(FragmentLayout):
    """A layout in which each bit of the row and column index is one bit of the lane or register index.

    ``row_bits`` / ``col_bits`` list, least significant first, the source of
    each index bit: ``"l2"`` is bit 2 of the lane, ``"r0"`` bit 0 of the
    register.  Every register bit must be used once; a lane bit used nowhere
    replicates the fragment across the lanes that differ only in it.
    """

    rows: int
    cols: int
    lanes: int
    registers: int
    row_bits: tuple[str, ...]
    col_bits: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.row_bits) != _log2(self.rows, "rows") or len(self.col_bits) != _log2(self.cols, "cols"):
            raise MmaLayoutError(f"a {self.rows}x{self.cols} layout needs {_log2(self.rows, 'rows')} row bits and "
                                 f"{_log2(self.cols, 'cols')} column bits")
        lane_bits, reg_bits = _log2(self.lanes, "lanes"), _log2(self.registers, "registers")
        sources = [_parse_bit(b) for b in self.row_bits + self.col_bits]
        if len(set(sources)) != len(sources):
            raise MmaLayoutError(f"a lane or register bit is used twice in {self.row_bits} / {self.col_bits}")
        for kind, k in sources:
            if k >= (lane_bits if kind == "l" else reg_bits):
                raise MmaLayoutError(f"bit source {kind}{k} is out of range for {self.lanes} lanes x "
                                     f"{self.registers} registers")
        if {k for kind, k in sources if kind == "r"} != set(range(reg_bits)):
            raise MmaLayoutError("every register bit must be used once: a register index the row and column "
                                 "ignore would hold the same element twice in one lane")

    @property
    def lane_width(self) -> int:
        return self.lanes

    @property
    def registers_per_lane(self) -> int:
        return self.registers

    def element(self, lane: int, reg: int) -> tuple[int, int]:
        self._check_slot(lane, reg)
        return _gather_bits(self.row_bits, lane, reg), _gather_bits(self.col_bits, lane, reg)

    def owners(self, row: int, col: int) -> tuple[tuple[int, int], ...]:
        self._check_element(row, col)
        lane = reg = 0
        for bits, value in ((self.row_bits, row), (self.col_bits, col)):
            for j, bit in enumerate(bits):
                kind, k = _parse_bit(bit)
                if (value >> j) & 1:
                    lane, reg = (lane | 1 << k, reg) if kind == "l" else (lane, reg | 1 << k)
        free = [1 << k for k in range(_log2(self.lanes, "lanes")) if f"l{k}" not in self.row_bits + self.col_bits]
        lanes = {lane | sum(pick) for n in range(len(free) + 1) for pick in itertools.combinations(free, n)}
        return tuple((x, reg) for x in sorted(lanes))

    def owner(self, row: int, col: int) -> tuple[int, int]:
        return self.owners(row, col)[0]

    def to_table(self) -> np.ndarray:
        lane, reg = np.meshgrid(np.arange(self.lanes), np.arange(self.registers), indexing="ij")
        return np.stack([_gather_bits(self.row_bits, lane, reg), _gather_bits(self.col_bits, lane, reg)], axis=-1)


def _gather_bits(bits: tuple[str, ...], lane, reg):
    """The index whose bit j is the source named by ``bits[j]`` (works on ints and int arrays)."""
    value = 0 * lane
    for j, bit in enumerate(bits):
        kind, k = _parse_bit(bit)
        value = value + (((lane if kind == "l" else reg) >> k) & 1) * (1 << j)
    return value


@dataclass(frozen=True)
class ColumnBlocksLayout(FragmentLayout):
    """``blocks`` copies of ``base`` side by side: register ``i`` holds ``base``'s element of register
    ``i % base.registers`` moved right by ``base.cols * (i // base.registers)`` columns.  wgmma's m64nNk16
    accumulator is N / 8 copies of mma.sync's 16 x 8 one; for N / 8 not a power of two (N = 168, say) no bit
    field describes it."""

    base: BitFieldLayout
    blocks: int

    @property
    def rows(self) -> int:  # type: ignore[override]
        return self.base.rows

    @property
    def cols(self) -> int:  # type: ignore[override]
        return self.base.cols * self.blocks

    @property
    def lane_width(self) -> int:
        return self.base.lanes

    @property
    def registers_per_lane(self) -> int:
        return self.base.registers * self.blocks

    def to_table(self) -> np.ndarray:
        base = self.base.to_table()
        return np.concatenate([base + np.array([0, self.base.cols * j]) for j in range(self.blocks)], axis=1)


@dataclass(frozen=True)
class StripedLayout(FragmentLayout):
    """The portable layout: element (r, c) is number ``e = r*cols + c``, in lane ``e % W``, register ``e // W``.

    ``lanes`` is None until :meth:`resolve` fixes the subgroup width (the
    portable strategy runs at any width).
    """

    rows: int
    cols: int
    lanes: int | None = None

    def resolve(self, lane_width: int | None) -> "StripedLayout":
        if lane_width is None:
            if self.lanes is None:
                raise MmaLayoutError("the portable layout needs a lane width (the target's subgroup size)")
            return self
        if (self.rows * self.cols) % lane_width:
            raise MmaLayoutError(f"a {self.rows}x{self.cols} fragment does not divide evenly over "
                                 f"{lane_width} lanes")
        return replace(self, lanes=lane_width)

    @property
    def lane_width(self) -> int:
        if self.lanes is None:
            raise MmaLayoutError("this portable layout has no lane width yet; call resolve(lane_width)")
        return self.lanes

    @property
    def registers_per_lane(self) -> int:
        return self.rows * self.cols // self.lane_width

    def element(self, lane: int, reg: int) -> tuple[int, int]:
        self._check_slot(lane, reg)
        return divmod(reg * self.lane_width + lane, self.cols)

    def owners(self, row: int, col: int) -> tuple[tuple[int, int], ...]:
        self._check_element(row, col)
        reg, lane = divmod(row * self.cols + col, self.lane_width)
        return ((lane, reg),)

    def owner(self, row: int, col: int) -> tuple[int, int]:
        return self.owners(row, col)[0]

    def to_table(self) -> np.ndarray:
        lane, reg = np.meshgrid(np.arange(self.lane_width), np.arange(self.registers_per_lane), indexing="ij")
        row, col = np.divmod(reg * self.lane_width + lane, self.cols)
        return np.stack([row, col], axis=-1)


@dataclass(frozen=True)
class TableLayout(FragmentLayout):
    """An explicit table: ``table[lane][reg] = (row, col)``.

    For layouts with no closed form, and for tests that build deliberately
    wrong layouts; :meth:`check` says whether it is usable.
    """

    rows: int
    cols: int
    table: tuple[tuple[tuple[int, int], ...], ...]

    @classmethod
    def from_array(cls, rows: int, cols: int, table: np.ndarray) -> "TableLayout":
        """From a (lanes, registers, 2) array, such as another layout's ``to_table()``."""
        t = np.asarray(table)
        if t.ndim != 3 or t.shape[2] != 2:
            raise MmaLayoutError(f"a layout table has shape (lanes, registers, 2), got {t.shape}")
        return cls(rows, cols, tuple(tuple((int(r), int(c)) for r, c in lane) for lane in t))

    @property
    def lane_width(self) -> int:
        return len(self.table)

    @property
    def registers_per_lane(self) -> int:
        return len(self.table[0]) if self.table else 0

    def to_table(self) -> np.ndarray:
        return np.array(self.table, dtype=np.int64).reshape(self.lane_width, self.registers_per_lane, 2)


# ---------------------------------------------------------------- strategies

@dataclass(frozen=True)
class ArchSet:
    """The architectures of a target that a strategy covers.

    An arch matches if it is one of ``names``, or it is ``prefix`` followed by
    a number of at least ``minimum`` and optional letters (``sm_90a`` is in
    ``sm_`` >= 80).  ``unknown`` says whether the strategy applies when the
    arch is not known (None); ``every`` covers all archs, known or not.
    """

    names: tuple[str, ...] = ()
    prefix: str | None = None
    minimum: int | None = None
    unknown: bool = False
    every: bool = False

    def matches(self, arch: str | None) -> bool:
        if self.every:
            return True
        if arch is None:
            return self.unknown
        if arch in self.names:
            return True
        if self.prefix is not None and arch.startswith(self.prefix):
            m = re.fullmatch(r"(\d+)[a-z]*", arch[len(self.prefix):])
            return m is not None and (self.minimum is None or int(m.group(1)) >= self.minimum)
        return False


@dataclass(frozen=True)
class MmaCombo:
    """One supported multiply: shape (M, N, K), operand and accumulator dtypes, and the instruction that runs it."""

    m: int
    n: int
    k: int
    in_dtype: DType
    acc_dtype: DType
    instruction: str = ""

    @property
    def shape(self) -> Shape:
        return self.m, self.n, self.k

    def __str__(self) -> str:
        return f"{self.m}x{self.n}x{self.k} {self.in_dtype}->{self.acc_dtype}"


@dataclass(frozen=True)
class LayoutRule:
    """The layout of ``role`` fragments of ``rows x cols`` in any of ``dtypes``."""

    role: Role
    rows: int
    cols: int
    dtypes: tuple[DType, ...]
    layout: FragmentLayout


@dataclass(frozen=True)
class MmaStrategy:
    """How one family of matrix instructions holds fragments; see the module docstring.

    ``combos`` lists what it runs.  When ``device_queried`` is set they are
    candidates only: the device reports what it actually offers, and
    :meth:`restricted_to` keeps the intersection.
    """

    name: str
    targets: tuple[str, ...]
    archs: ArchSet
    lane_width: int | None
    combos: tuple[MmaCombo, ...]
    layouts: tuple[LayoutRule, ...]
    layout_status: LayoutStatus
    sources: tuple[str, ...] = ()
    notes: str = ""
    device_queried: bool = False

    @property
    def has_lane_layout(self) -> bool:
        return self.layout_status != "opaque"

    def applies_to(self, target: str, arch: str | None) -> bool:
        return target in self.targets and self.archs.matches(arch)

    def supports(self, shape: Shape, in_dtype: DType, acc_dtype: DType) -> bool:
        return any(c.shape == tuple(shape) and c.in_dtype == in_dtype and c.acc_dtype == acc_dtype
                   for c in self.combos)

    def combo(self, shape: Shape, in_dtype: DType, acc_dtype: DType) -> MmaCombo:
        """The supported combo for this multiply (for its instruction name); a clear error when none."""
        for c in self.combos:
            if c.shape == tuple(shape) and c.in_dtype == in_dtype and c.acc_dtype == acc_dtype:
                return c
        m, n, k = shape
        raise MmaLayoutError(f"{self.name} does not run {m}x{n}x{k} {in_dtype}->{acc_dtype}; it runs: "
                             f"{self.describe_combos()}")

    def describe_combos(self) -> str:
        return ", ".join(map(str, self.combos)) or "nothing"

    def layout(self, role: Role, shape: Shape, dtype: DType, lane_width: int | None = None) -> FragmentLayout:
        """The layout of ``role``'s fragment in a ``shape`` multiply with elements of ``dtype``."""
        in_role = role != "acc"
        if not any(c.shape == tuple(shape) and (c.in_dtype if in_role else c.acc_dtype) == dtype
                   for c in self.combos):
            m, n, k = shape
            raise MmaLayoutError(f"{self.name} has no {role} fragment of {dtype} for {m}x{n}x{k}; it runs: "
                                 f"{self.describe_combos()}")
        rows, cols = role_dims(role, shape)
        return self.fragment_layout(role, rows, cols, dtype, lane_width)

    def fragment_layout(self, role: str, rows: int, cols: int, dtype: DType,
                        lane_width: int | None = None) -> FragmentLayout:
        """The layout of a ``frag<role, dtype, rows x cols>`` (how the interpreter asks: it knows no N or K)."""
        if not self.has_lane_layout:
            raise OpaqueLayoutError(f"{self.name}: the per-lane layout is implementation-defined; the emitter "
                                    "uses whole-matrix load/store/multiply-add and never sees lanes")
        width = lane_width if lane_width is not None else self.lane_width
        for rule in self.layouts:
            if rule.role == role and (rule.rows, rule.cols) == (rows, cols) and dtype in rule.dtypes:
                return rule.layout.resolve(width)
        raise MmaLayoutError(f"{self.name} has no layout for frag<{role},{dtype},{rows}x{cols}>; it runs: "
                             f"{self.describe_combos()}")

    def restricted_to(self, offered: tuple[MmaCombo, ...]) -> "MmaStrategy":
        """This strategy limited to the combos a device reports (for ``device_queried`` strategies)."""
        keys = {(c.shape, c.in_dtype, c.acc_dtype) for c in offered}
        return replace(self, combos=tuple(c for c in self.combos if (c.shape, c.in_dtype, c.acc_dtype) in keys))


# ---- NVIDIA mma.sync m16n8k16 (PTX ISA 9.7.14.5.8, "Matrix Fragments for mma.m16n8k16 with floating
# point type").  groupID = lane >> 2 (lane bits 2-4), threadID_in_group = lane % 4 (bits 0-1).
# a (16x16): row = groupID + 8*(i>>1 & 1), col = 2*threadID_in_group + (i & 1) + 8*(i >> 2)
# b (16x8):  row = 2*threadID_in_group + (i & 1) + 8*(i >> 1), col = groupID
# c (16x8):  row = groupID + 8*(i >> 1), col = 2*threadID_in_group + (i & 1)
_PTX_A = BitFieldLayout(16, 16, 32, 8, row_bits=("l2", "l3", "l4", "r1"), col_bits=("r0", "l0", "l1", "r2"))
_PTX_B = BitFieldLayout(16, 8, 32, 4, row_bits=("r0", "l0", "l1", "r1"), col_bits=("l2", "l3", "l4"))
_PTX_C = BitFieldLayout(16, 8, 32, 4, row_bits=("l2", "l3", "l4", "r1"), col_bits=("r0", "l0", "l1"))
#: 16x16x16 runs as two m16n8k16 on one A: b (16x16) is two b fragments side by side (registers 2-3 hold columns
#: 8-15), and the accumulator two C fragments (registers 4-7: columns 8-15, as wgmma's 16 x 16 share).
_PTX_B2 = BitFieldLayout(16, 16, 32, 8, row_bits=("r0", "l0", "l1", "r1"), col_bits=("l2", "l3", "l4", "r2"))


def _wgmma_acc(n: int) -> FragmentLayout:
    """One subgroup's 16 x N share of a ``wgmma`` m64nNk16 f32 accumulator (PTX ISA 9.7.15.5.1.1.1, "WGMMA
    .m64nNk16 register fragment layout for accumulator matrix D"): the m16n8 layout above repeated N/8
    times along the columns, register d[i] at column 8 (i >> 2) + 2 threadID_in_group + (i & 1).  A bit field
    where N / 8 is a power of two, else column blocks (the same elements)."""
    blocks = n // 8
    if blocks & (blocks - 1):
        return ColumnBlocksLayout(_PTX_C, blocks)
    extra = tuple(f"r{k}" for k in range(2, 2 + _log2(blocks, "N / 8")))
    return BitFieldLayout(16, n, 32, n // 2, row_bits=("l2", "l3", "l4", "r1"), col_bits=("r0", "l0", "l1", *extra))

CUDA_MMA_SYNC_M16N8K16 = MmaStrategy(
    name="cuda_mma_sync_m16n8k16", targets=("cuda",), archs=ArchSet(prefix="sm_", minimum=80), lane_width=32,
    combos=(
        MmaCombo(16, 8, 16, D.f16, D.f32, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
        MmaCombo(16, 8, 16, D.bf16, D.f32, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
        MmaCombo(16, 8, 16, D.f16, D.f16, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"),
        # two of the instruction, one per 8 columns of b and the accumulator
        MmaCombo(16, 16, 16, D.f16, D.f32, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
        MmaCombo(16, 16, 16, D.bf16, D.f32, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    ),
    layouts=(
        LayoutRule("a", 16, 16, (D.f16, D.bf16), _PTX_A),
        LayoutRule("b", 16, 8, (D.f16, D.bf16), _PTX_B),
        LayoutRule("b", 16, 16, (D.f16, D.bf16), _PTX_B2),
        LayoutRule("acc", 16, 8, (D.f32, D.f16), _PTX_C),
        # mma_wg's accumulators (sm_90's wgmma): each subgroup's 16 x N rows of the warpgroup's 64 x N.
        *(LayoutRule("acc", 16, n, (D.f32,), _wgmma_acc(n)) for n in WG_N),
    ),
    layout_status="normative",
    sources=("NVIDIA PTX ISA, section 9.7.14.5.8 'Matrix Fragments for mma.m16n8k16 with floating point type'",
             "NVIDIA PTX ISA, section 9.7.15.5.1.1.1 'Matrix Fragments for wgmma.mma_async.m64nNk16' (mma_wg)"),
    notes="16-bit slots pack in pairs: a is 4 .f16x2 registers, b 2, an f32 accumulator 4 .f32, an f16 one "
          "2 .f16x2.",
)

# ---- Apple simdgroup_matrix<T, 8, 8>: 32 lanes, 2 elements per lane.  Not documented by Apple; this is the
# mapping public Metal code relies on (MLX steel GEMM, BaseMMAFrag::get_coord):
# qid = lane / 4; row = (qid & 4) + (lane / 2) % 4; col = (qid & 2) * 2 + (lane % 2) * 2 + i.
_METAL_8x8 = BitFieldLayout(8, 8, 32, 2, row_bits=("l1", "l2", "l4"), col_bits=("r0", "l0", "l3"))

METAL_SIMDGROUP_8x8 = MmaStrategy(
    name="metal_simdgroup_8x8", targets=("metal",),
    # simdgroup_matrix needs the Apple7 (A14 / M1) family or Mac2; Metal code compiled offline assumes it.
    archs=ArchSet(names=("mac2",), prefix="apple", minimum=7, unknown=True), lane_width=32,
    combos=(
        MmaCombo(8, 8, 8, D.f32, D.f32, "simdgroup_multiply_accumulate(simdgroup_float8x8)"),
        MmaCombo(8, 8, 8, D.f16, D.f16, "simdgroup_multiply_accumulate(simdgroup_half8x8)"),
        MmaCombo(8, 8, 8, D.bf16, D.bf16, "simdgroup_multiply_accumulate(simdgroup_bfloat8x8)"),
        MmaCombo(8, 8, 8, D.f16, D.f32, "simdgroup_multiply_accumulate(simdgroup_half8x8 -> simdgroup_float8x8)"),
        MmaCombo(8, 8, 8, D.bf16, D.f32, "simdgroup_multiply_accumulate(simdgroup_bfloat8x8 -> simdgroup_float8x8)"),
    ),
    layouts=tuple(LayoutRule(role, 8, 8, (D.f32, D.f16, D.bf16), _METAL_8x8) for role in ROLES),
    layout_status="informational",
    sources=("Apple, Metal Shading Language Specification, 'SIMD-group matrix functions' (API, shapes, types)",
             "per-lane mapping: not documented by Apple; as used by MLX (mlx/backend/metal/kernels/steel, "
             "BaseMMAFrag<T, 8, 8>::get_coord)"),
    notes="The MSL API loads, stores and multiplies whole matrices; the emitter uses only those, so the "
          "per-lane mapping is informational: the interpreter can place fragments by it, nothing depends on it. "
          "bfloat needs MSL 3.1; half or bfloat operands may accumulate into float.",
)

# ---- Vulkan VK_KHR_cooperative_matrix: sizes and types come from the device; lanes are opaque.
_VK_CANDIDATES = tuple(MmaCombo(m, n, k, i, a, "coopMatMulAdd")
                       for (m, n, k) in MMA_SHAPES
                       for (i, a) in ((D.f16, D.f32), (D.f16, D.f16), (D.bf16, D.f32), (D.f32, D.f32)))

VULKAN_KHR_COOPERATIVE_MATRIX = MmaStrategy(
    name="vulkan_khr_cooperative_matrix", targets=("spirv",),
    # The "arch" of a Vulkan device is the capability it reports.
    archs=ArchSet(names=("khr_cooperative_matrix",)), lane_width=None,
    combos=_VK_CANDIDATES, layouts=(), layout_status="opaque", device_queried=True,
    sources=("Khronos, VK_KHR_cooperative_matrix (vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)",
             "Khronos, GLSL_KHR_cooperative_matrix (coopMatLoad, coopMatStore, coopMatMulAdd)"),
    notes="Every combo is a candidate: use it only if the device's property list has it "
          "(MmaStrategy.restricted_to); subgroup scope.",
)

# ---- AMD CDNA2 MFMA, wave64 (AMD Matrix Instruction Calculator; CDNA2 ISA, MFMA section).
# The calculator's gfx9 rule for an M x K input with one block: A[i][k] sits in lane 16*(k // 4) + i, 16-bit
# item k % 4 of a VGPR pair (B[k][j] the same with j for i); a 16x16 f32 output puts D[i][j] in VGPR i % 4
# of lane 16*(i // 4) + j.  Per lane and item i:
# a (16x16): row = lane % 16, k = 4*(lane // 16) + i        (4 halves = 2 VGPRs)
# b (16x16): k = 4*(lane // 16) + i, col = lane % 16        (4 halves = 2 VGPRs)
# c (16x16): row = 4*(lane // 16) + i, col = lane % 16      (4 floats = 4 VGPRs)
_MFMA_A = BitFieldLayout(16, 16, 64, 4, row_bits=("l0", "l1", "l2", "l3"), col_bits=("r0", "r1", "l4", "l5"))
_MFMA_B = BitFieldLayout(16, 16, 64, 4, row_bits=("r0", "r1", "l4", "l5"), col_bits=("l0", "l1", "l2", "l3"))
_MFMA_C = BitFieldLayout(16, 16, 64, 4, row_bits=("r0", "r1", "l4", "l5"), col_bits=("l0", "l1", "l2", "l3"))

AMD_MFMA_GFX90A = MmaStrategy(
    # gfx940-942 (CDNA3) run both with these layouts (the bf16 one is spelled v_mfma_f32_16x16x16_bf16 there).
    name="amd_mfma_gfx90a", targets=("hip",), archs=ArchSet(names=("gfx90a", "gfx940", "gfx941", "gfx942")),
    lane_width=64,
    combos=(
        MmaCombo(16, 16, 16, D.f16, D.f32, "v_mfma_f32_16x16x16f16"),
        MmaCombo(16, 16, 16, D.bf16, D.f32, "v_mfma_f32_16x16x16bf16_1k"),
    ),
    layouts=(
        LayoutRule("a", 16, 16, (D.f16, D.bf16), _MFMA_A),
        LayoutRule("b", 16, 16, (D.f16, D.bf16), _MFMA_B),
        LayoutRule("acc", 16, 16, (D.f32,), _MFMA_C),
    ),
    layout_status="normative",
    sources=("AMD Matrix Instruction Calculator (ROCm/amd_matrix_instruction_calculator, matrix_calculator.py, "
             "InstCalcGfx9), v_mfma_f32_16x16x16f16 and v_mfma_f32_16x16x16bf16_1k, --register-layout",
             "AMD Instinct MI200 (CDNA2) ISA reference, 'Matrix Arithmetic Instructions'"),
)

# ---- AMD RDNA3 WMMA, wave32 (RDNA3 ISA, 'Wave Matrix Multiply Accumulate'; AMD GPUOpen, "How to
# accelerate AI applications on RDNA 3 using WMMA"; the calculator's gfx11 rule: A[i][k] is 16-bit item k of
# lanes i and i + 16, D[i][j] (f32) VGPR i // 2 of lane 16*(i % 2) + j).
# a (16x16): row = lane % 16, k = i; b: k = i, col = lane % 16  (16 halves = 8 VGPRs; lanes 16-31 repeat 0-15)
# c (16x16): row = 2*i + lane // 16, col = lane % 16          (8 floats = 8 VGPRs)
_WMMA_A = BitFieldLayout(16, 16, 32, 16, row_bits=("l0", "l1", "l2", "l3"), col_bits=("r0", "r1", "r2", "r3"))
_WMMA_B = BitFieldLayout(16, 16, 32, 16, row_bits=("r0", "r1", "r2", "r3"), col_bits=("l0", "l1", "l2", "l3"))
_WMMA_C = BitFieldLayout(16, 16, 32, 8, row_bits=("l4", "r0", "r1", "r2"), col_bits=("l0", "l1", "l2", "l3"))

AMD_WMMA_RDNA3 = MmaStrategy(
    name="amd_wmma_rdna3", targets=("hip",), archs=ArchSet(names=("gfx1100", "gfx1101", "gfx1102", "gfx1103")),
    lane_width=32,
    combos=(
        MmaCombo(16, 16, 16, D.f16, D.f32, "v_wmma_f32_16x16x16_f16"),
        MmaCombo(16, 16, 16, D.bf16, D.f32, "v_wmma_f32_16x16x16_bf16"),
    ),
    layouts=(
        LayoutRule("a", 16, 16, (D.f16, D.bf16), _WMMA_A),
        LayoutRule("b", 16, 16, (D.f16, D.bf16), _WMMA_B),
        LayoutRule("acc", 16, 16, (D.f32,), _WMMA_C),
    ),
    layout_status="normative",
    sources=("AMD RDNA3 Instruction Set Architecture reference guide, 'Wave Matrix Multiply Accumulate "
             "(WMMA)'",
             "AMD Matrix Instruction Calculator (matrix_calculator.py, InstCalcGfx11), v_wmma_f32_16x16x16_f16 "
             "and v_wmma_f32_16x16x16_bf16, wave32 --register-layout",
             "AMD GPUOpen, 'How to accelerate AI applications on RDNA 3 using WMMA'"),
    notes="wave32 only; a and b are replicated: lanes 16-31 must hold the same values as lanes 0-15.",
)

# ---- Portable: no matrix unit; the emitter stages fragments through shared memory and multiplies with FMA.
_PORTABLE_DTYPES = ((D.f16, D.f32), (D.bf16, D.f32), (D.f32, D.f32), (D.f16, D.f16), (D.bf16, D.bf16))

PORTABLE = MmaStrategy(
    name="portable", targets=("cuda", "hip", "spirv", "metal", "interp"), archs=ArchSet(every=True),
    lane_width=None,
    combos=tuple(MmaCombo(m, n, k, i, a, "shared memory + fma") for (m, n, k) in MMA_SHAPES
                 for (i, a) in _PORTABLE_DTYPES),
    layouts=tuple(LayoutRule(role, *dims, (D.f16, D.bf16, D.f32), StripedLayout(*dims))
                  for role in ROLES for dims in sorted({role_dims(role, s) for s in MMA_SHAPES}
                                                       | (set(WG_ACC_SHAPES) if role == "acc" else set()))),
    layout_status="portable",
    sources=("Iron (docs/matrix-units.md)",),
    notes="Any subgroup width that divides the fragment's element count.",
)

#: Every strategy by name, in the order :func:`strategy_for` prefers them.
STRATEGIES: dict[str, MmaStrategy] = {s.name: s for s in (
    CUDA_MMA_SYNC_M16N8K16, METAL_SIMDGROUP_8x8, VULKAN_KHR_COOPERATIVE_MATRIX, AMD_MFMA_GFX90A, AMD_WMMA_RDNA3,
    PORTABLE,
)}


@dataclass(frozen=True)
class RowPlan:
    """How a subgroup combines each row of a fragment in this layout (``frag_rows``): every lane first combines
    its registers of one ``groups`` entry (they hold one row), then exchanges the result with the lanes whose
    index differs by each of ``lane_masks`` in turn (a butterfly), after which every lane of the row has it."""

    groups: tuple[tuple[int, ...], ...]
    lane_masks: tuple[int, ...]


def row_plan(layout: FragmentLayout) -> RowPlan | None:
    """The :class:`RowPlan` of ``layout`` (every one here), or None where the lanes holding a row are no XOR
    coset of one lane set, or a register group's row differs between partners (no butterfly computes it)."""
    table = layout.to_table()
    rows = table[..., 0]
    lanes = layout.lane_width
    if layout.replication != 1:
        return None
    groups = tuple(tuple(int(r) for r in np.flatnonzero(rows[0] == row)) for row in dict.fromkeys(rows[0].tolist()))
    for lane in range(lanes):
        if tuple(tuple(int(r) for r in np.flatnonzero(rows[lane] == rows[lane, g[0]])) for g in groups) != groups:
            return None
    partners = {int(q) for q in np.flatnonzero((rows == rows[0, groups[0][0]]).any(axis=1))}
    if any(a ^ b not in partners for a in partners for b in partners):
        return None  # not closed under XOR: no subspace of lane masks
    masks: list[int] = []
    span = {0}
    for q in sorted(partners):
        if q not in span:
            masks.append(q)
            span |= {x ^ q for x in span}
    for lane in range(lanes):
        for g in groups:
            if any(rows[lane ^ m, g[0]] != rows[lane, g[0]] for m in partners):
                return None
            holders = {int(q) for q in np.flatnonzero((rows == rows[lane, g[0]]).any(axis=1))}
            if holders != {lane ^ m for m in partners}:
                return None
    return RowPlan(groups, tuple(masks))


def register_moves(src: FragmentLayout, dst: FragmentLayout, col0: int) -> tuple[int, ...] | None:
    """For each register of ``dst`` (a 16 x 16 fragment), the register of ``src`` (an accumulator) holding element
    (row, ``col0`` + col) in the same lane, the same register in every lane; None where an element lies in another
    lane or the register differs between lanes (the conversion then goes through shared memory)."""
    if src.lane_width != dst.lane_width or src.replication != 1:
        return None
    owners, table = src.owner_table(), dst.to_table()
    moves = []
    for reg in range(dst.registers_per_lane):
        found = {(int(lane), *map(int, owners[r, col0 + c])) for lane, (r, c) in enumerate(table[:, reg])}
        if any(lane != held_by for lane, held_by, _ in found) or len({r for _, _, r in found}) != 1:
            return None
        moves.append(found.pop()[2])
    return tuple(moves)


def row_sources(dst: FragmentLayout, src: FragmentLayout) -> tuple[int, ...] | None:
    """For each register of ``dst``, a register of ``src`` (as many rows) holding an element of the same row in the
    same lane, the same register in every lane; None where a lane lacks some row of its ``dst`` registers."""
    if src.lane_width != dst.lane_width:
        return None
    d_rows, s_rows = dst.to_table()[..., 0], src.to_table()[..., 0]
    picks = []
    for reg in range(dst.registers_per_lane):
        shared = None
        for lane in range(dst.lane_width):
            here = {int(j) for j in np.flatnonzero(s_rows[lane] == d_rows[lane, reg])}
            shared = here if shared is None else shared & here
        if not shared:
            return None
        picks.append(min(shared))
    return tuple(picks)


def get_strategy(name: str) -> MmaStrategy:
    """The strategy called ``name``; a clear error lists the known ones."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise MmaLayoutError(f"unknown MMA strategy {name!r}; known: {', '.join(STRATEGIES)}") from None


def strategy_for(target: str, arch: str | None = None) -> MmaStrategy:
    """The strategy ``target`` uses on ``arch`` (``sm_90``, ``gfx90a``, ``apple8``, ...; None: unknown).

    The first strategy in :data:`STRATEGIES` that covers both wins, so a
    target without a matrix unit on that arch falls back to ``portable``.
    """
    get_target(target)  # an unknown target is an error, not a silent fallback
    for strategy in STRATEGIES.values():
        if strategy.applies_to(target, arch):
            return strategy
    raise MmaLayoutError(f"no MMA strategy covers target {target!r} on {arch!r}")  # unreachable: portable

"""Matrix fragments: per-lane registers (portable, or a matrix unit's layout) or whole-matrix values.

Where the profile's ``mma_strategy`` is a unit in :data:`NATIVE_UNITS`, the
fragment types of the ``mma`` ops it runs use it (:func:`native_fragment_types`):
CUDA's ``mma.sync`` keeps registers in the PTX layout and multiplies with
inline PTX; HIP's MFMA (CDNA) and WMMA (RDNA3) keep them in AMD's layouts and
multiply through clang's builtins (WMMA's ``a``/``b`` layouts replicate lanes
0-15 into 16-31, so those lanes load the same elements); Metal's
``simdgroup_matrix`` is a whole-matrix value the dialect loads, stores and
multiplies.  Everything else is portable:

A fragment (docs/ir.md, "Matrix fragments") belongs to a subgroup; here each
lane holds its share in a local ``float`` array, one slot per register of
the layout (``iron.codegen.mma``: the interpreter's ``fragment_layout``
mode reads the same objects).  Registers are f32 whatever the fragment's
dtype: f16 and bf16 values are exact in f32, conversions happen at loads and
stores, and an f16/bf16 accumulator is rounded to its dtype after every
``mma``, so the registers always hold values of the fragment's dtype.

* ``frag_fill``: every register takes the value.
* ``frag_rows``: each lane combines its registers of a row, then exchanges the result with the lanes that
  hold the rest of the row (a butterfly of XOR shuffles; ``iron.codegen.mma.row_plan`` derives both from
  the layout's table); a fragment the unit holds whole has no known rows (a capability error).
* ``frag_load`` / ``frag_store``: each lane moves its own elements,
  ``(row, col) = layout.element(lane, reg)``, from or to
  ``t[base + row*ld + col]`` (``row``) or ``t[base + col*ld + row]`` (``col``).
* ``mma``: the lanes write their ``a`` and ``b`` elements to the subgroup's
  slice of a shared scratch array, synchronise the subgroup, each lane
  computes its own accumulator elements as an f32 ``fma`` chain over K in
  order (starting from ``c``), and the subgroup synchronises again before the
  scratch can be reused.  The scratch is hoisted with the shared arrays; see
  :func:`scratch_subgroups` for how many subgroups it serves.
* ``var`` slots of fragment type are register arrays, copied element-wise.

Where the dialect packs (``packs_fragments``: CUDA), a native 16-bit ``a`` or
``b`` fragment is held as the unit takes it, slots ``2i`` and ``2i+1`` in
32-bit word ``i``; such a fragment loads from shared memory with one
``ldmatrix`` where its layout is a set of 8x8 tiles in the load's memory order
(``iron.codegen.ldmatrix``) and the base and leading dimension keep the tile
rows 16-byte aligned (checked at run time), else element by element.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...core import dtypes as D
from ...core.errors import UnsupportedOnTarget
from ...core.ir import Kernel, Op
from ...core.types import MMA_SHAPES, FragmentType, ScalarType
from ..ldmatrix import LdmatrixPlan
from ..ldmatrix import plan as ldmatrix_plan
from ..mma import (
    PORTABLE,
    BitFieldLayout,
    ColumnBlocksLayout,
    FragmentLayout,
    MmaStrategy,
    StripedLayout,
    get_strategy,
    register_moves,
    row_plan,
    row_sources,
)
from ..targets import TargetProfile

if TYPE_CHECKING:
    from .cstyle import ModuleParts, Operand



Combo = tuple[tuple[int, int, int], D.DType, D.DType]
#: ``frag_binary``'s fn as a C-like operator (``max`` and ``min`` are the dialect's f32 functions).
_FRAG_BINARY_SIGNS = {"add": "+", "sub": "-", "mul": "*"}


#: Fragment ops that need each lane's (row, col) of its registers, which a whole-matrix value (Metal's
#: ``simdgroup_matrix``, KHR cooperative matrices) does not tell: what each does, for the capability error.
_NEEDS_LANES = {"frag_rows": "the row {fn} of", "frag_scale_rows": "scaling the rows of",
                "frag_to_a": "an A fragment from", "frag_mask": "masking", "frag_unary": "elementwise '{fn}' on"}


@dataclass(frozen=True)
class NativeUnit:
    """A matrix-unit strategy this emitter drives, and the (shape, input, accumulator) combos it runs on it.

    ``whole_matrix``: the target's API loads, stores and multiplies whole
    matrices (Metal's ``simdgroup_matrix``), so a fragment is one opaque
    value and the per-lane layout is never used; otherwise fragments are
    per-lane registers in the strategy's (normative) layout.
    """

    combos: frozenset[Combo]
    whole_matrix: bool


_EIGHT = (8, 8, 8)
#: AMD's 16x16x16 units (MFMA on CDNA, WMMA on RDNA3): f16 or bf16 operands into an f32 accumulator.
_AMD_16 = frozenset({((16, 16, 16), D.f16, D.f32), ((16, 16, 16), D.bf16, D.f32)})
#: GLSL cooperative matrices hold f16 operands (bf16 needs GL_EXT_bfloat16, which Iron's glslang lacks);
#: a device runs only the combos it reports (``TargetProfile.mma_offered``).
_COOPMAT = frozenset((shape, D.f16, acc) for shape in MMA_SHAPES for acc in (D.f32, D.f16))
NATIVE_UNITS: dict[str, NativeUnit] = {
    "cuda_mma_sync_m16n8k16": NativeUnit(frozenset({((16, 8, 16), D.f16, D.f32), ((16, 8, 16), D.bf16, D.f32),
                                                    ((16, 16, 16), D.f16, D.f32), ((16, 16, 16), D.bf16, D.f32)}),
                                         whole_matrix=False),
    "metal_simdgroup_8x8": NativeUnit(frozenset({(_EIGHT, D.f32, D.f32), (_EIGHT, D.f16, D.f16),
                                                 (_EIGHT, D.bf16, D.bf16), (_EIGHT, D.f16, D.f32),
                                                 (_EIGHT, D.bf16, D.f32)}), whole_matrix=True),
    "vulkan_khr_cooperative_matrix": NativeUnit(_COOPMAT, whole_matrix=True),
    "amd_mfma_gfx90a": NativeUnit(_AMD_16, whole_matrix=False),
    "amd_wmma_rdna3": NativeUnit(_AMD_16, whole_matrix=False),
}


def fragment_layout(t: FragmentType, profile: TargetProfile) -> FragmentLayout:
    """The portable per-lane layout of a fragment of type ``t`` on ``profile``."""
    return PORTABLE.fragment_layout(t.role, t.rows, t.cols, t.dtype, profile.lane_width)


def native_strategy(profile: TargetProfile) -> MmaStrategy | None:
    """The matrix-unit strategy the profile names (``TargetProfile.mma_strategy``) when this emitter drives it."""
    return get_strategy(profile.mma_strategy) if profile.mma_strategy in NATIVE_UNITS else None


def native_combos(profile: TargetProfile) -> frozenset[Combo]:
    """The combos the profile's matrix unit runs here: the emitter's, narrowed to what the device reports."""
    strategy = native_strategy(profile)
    if strategy is None:
        return frozenset()
    combos = NATIVE_UNITS[strategy.name].combos
    if profile.mma_offered is None:
        return combos
    offered = {((m, n, k), D.by_name(i), D.by_name(a)) for m, n, k, i, a in profile.mma_offered}
    return combos & offered


def _mma_key(op: Op) -> Combo:
    a, b, c = (v.type for v in op.operands)
    return (a.rows, b.cols, a.cols), a.dtype, c.dtype


def native_fragment_types(kernel: Kernel, profile: TargetProfile) -> frozenset[FragmentType]:
    """The fragment types the matrix unit holds: those of the ``mma`` ops it runs.

    A type is all-or-nothing in a kernel (one layout for every value of it),
    so a type that also meets an ``mma`` the unit does not run (a 16x16 ``a``
    in a 16x16x16 multiply) stays portable, and so do the other operands of
    the ``mma`` ops it meets.  Fragments no ``mma`` touches stay portable.
    """
    strategy = native_strategy(profile)
    if strategy is None:
        return frozenset()
    # mma_wg's accumulators (16 x N, which no mma takes) and A fragments (its registers operand, in the layout
    # of mma's A) are the warpgroup unit's wherever it runs.
    warpgroup = {v.type for op in kernel.walk() if op.opcode == "mma_wg" for v in (op.result, *op.operands)
                 if isinstance(v.type, FragmentType)}
    if warpgroup and "wgmma" not in profile.features:
        warpgroup = set()
    combos = native_combos(profile)
    mmas = [(_mma_key(op) in combos, {op.result.type, *(v.type for v in op.operands)})
            for op in kernel.walk() if op.opcode == "mma"]
    native = set().union(*(types for ok, types in mmas if ok)) if mmas else set()
    changed = True
    while changed:
        changed = False
        for ok, types in mmas:
            if (not ok or not types <= native) and types & native:
                native -= types
                changed = True
    return frozenset(native | warpgroup)


def scratch_floats_per_subgroup(kernel: Kernel, native: frozenset[FragmentType] = frozenset()) -> int:
    """f32 slots one subgroup's scratch needs: the largest portable ``mma``'s ``a`` plus ``b`` (0: none).

    ``native``: fragment types the matrix unit holds; their ``mma`` ops need no scratch.
    """
    sizes = [a.type.rows * a.type.cols + b.type.rows * b.type.cols
             for op in kernel.walk() if op.opcode == "mma" and op.result.type not in native
             for a, b in [op.operands[:2]]]
    # an accumulator's columns as an A fragment, unless the matrix unit holds both (then registers move)
    sizes += [16 * 16 for op in kernel.walk()
              if op.opcode == "frag_to_a" and not {op.result.type, op.operands[0].type} <= native]
    # per-row factors of another layout: one value a row
    sizes += [op.result.type.rows for op in kernel.walk()
              if op.opcode == "frag_scale_rows" and not {op.result.type, op.operands[1].type} <= native]
    return max(sizes, default=0)


def scratch_subgroups(kernel: Kernel, profile: TargetProfile, other_shared_bytes: int) -> int:
    """How many subgroups a statically sized scratch serves on ``profile`` (CUDA, HIP, Metal).

    Enough for the profile's largest group, unless that would not fit the
    shared memory left beside the kernel's own arrays: then as many as fit,
    and launches of fragment kernels must keep their groups within
    ``scratch_subgroups * lane_width`` threads (docs/backends.md).  GLSL sizes
    its scratch from the pipeline's group size instead, so there the limit
    depends on the launch: the Vulkan runtime checks the arrays plus
    ``ceil(threads / lane_width)`` scratches against the device's shared
    memory before each launch (``iron.runtime.vulkan.shared_memory``).
    """
    per = scratch_floats_per_subgroup(kernel, native_fragment_types(kernel, profile)) * 4
    if per == 0:
        return 0
    wanted = -(-profile.max_threads_per_group // profile.lane_width)
    fits = (profile.max_shared_bytes - other_shared_bytes) // per
    if fits < 1:  # arrays past the static limit (CUDA opts in to more): the scratch joins them there
        fits = (profile.shared_limit - other_shared_bytes) // per
    if fits < 1:
        raise UnsupportedOnTarget(f"the mma scratch of {per} bytes per subgroup does not fit beside "
                                  f"{other_shared_bytes} bytes of shared arrays on {profile.target} ({profile.arch})",
                                  kernel.loc, "use smaller shared arrays or smaller fragments", kernel=kernel.name)
    return min(wanted, fits)


def static_scratch_floats(parts: ModuleParts, profile: TargetProfile) -> int:
    """The f32 count of a statically sized scratch (CUDA, HIP, Metal): see :func:`scratch_subgroups`."""
    scratch: Scratch = parts.extra["mma_scratch"]
    other = sum(s.count * s.dtype.itemsize for s in parts.shared)
    return scratch_subgroups(parts.kernel, profile, other) * scratch.floats_per_subgroup


def element_exprs(layout: FragmentLayout, lane: str, reg: str) -> tuple[str, str]:
    """C-like integer expressions of (row, col) held by register ``reg`` of lane ``lane`` (both non-negative ints)."""
    if isinstance(layout, StripedLayout):
        number = f"({reg} * {layout.lane_width} + {lane})"
        return f"{number} / {layout.cols}", f"{number} % {layout.cols}"
    if isinstance(layout, BitFieldLayout):
        return _gather(layout.row_bits, lane, reg), _gather(layout.col_bits, lane, reg)
    if isinstance(layout, ColumnBlocksLayout):
        per = layout.base.registers
        row, col = element_exprs(layout.base, lane, f"({reg} % {per})")
        return row, f"({col} + {layout.base.cols} * ({reg} / {per}))"
    raise TypeError(f"no closed form for {type(layout).__name__}")


def _gather(bits: tuple[str, ...], lane: str, reg: str) -> str:
    terms = []
    for j, bit in enumerate(bits):
        source, k = (lane if bit[0] == "l" else reg), int(bit[1:])
        picked = f"({source} & 1)" if k == 0 else f"(({source} >> {k}) & 1)"
        terms.append(picked if j == 0 else f"({picked} << {j})")
    return "(" + " | ".join(terms) + ")" if terms else "0"


@dataclass
class Scratch:
    """The shared scratch the ``mma`` ops of one kernel use."""

    name: str
    floats_per_subgroup: int


class FragmentPrinter:
    """Prints fragment ops and fragment slots for one :class:`~.cstyle.KernelPrinter`."""

    def __init__(self, printer: Any) -> None:
        self.p = printer
        self.d = printer.d
        self.profile: TargetProfile = printer.d.profile
        self.scratch: Scratch | None = None
        self.strategy = native_strategy(self.profile)
        self.native = native_fragment_types(printer.kernel, self.profile)
        #: Native types held as one opaque whole-matrix value (Metal) rather than per-lane registers.
        self.whole = self.native if self.strategy and NATIVE_UNITS[self.strategy.name].whole_matrix else frozenset()
        #: Native types held as packed 32-bit words of two 16-bit slots (the dialect's ``packs_fragments``).
        self.packed = frozenset(t for t in self.native - self.whole
                                if self.d.packs_fragments and t.role in ("a", "b") and t.dtype.bits == 16)

    def layout(self, t: FragmentType) -> FragmentLayout:
        """The layout values of type ``t`` have in this kernel: the matrix unit's or the portable one."""
        if t in self.native:
            assert self.strategy is not None
            return self.strategy.fragment_layout(t.role, t.rows, t.cols, t.dtype)
        return fragment_layout(t, self.profile)

    # ------------------------------------------------------------ values and slots

    def registers(self, t: FragmentType) -> int:
        """Register array entries per lane: one per slot, or one per packed pair of slots."""
        slots = self.layout(t).registers_per_lane
        return slots // 2 if t in self.packed else slots

    def declare(self, name: str, t: FragmentType) -> None:
        if t in self.whole:
            self.p.line(f"{self.d.frag_matrix_type(t)} {name};")
            return
        kind = "unsigned int" if t in self.packed else "float"
        self.p.line(f"{kind} {name}[{self.registers(t)}];")

    def copy(self, dst: str, src: str, t: FragmentType) -> None:
        if t in self.whole:
            self.p.line(f"{dst} = {src};")
            return
        self._per_register(t, lambda r: [f"{dst}[{r}] = {src}[{r}];"])

    def declare_slot(self, name: str, t: FragmentType) -> None:
        """A ``var`` slot: zero-initialised like every slot."""
        if t in self.whole:
            zero = self.d.frag_matrix_fill(t, self.d.literal(0, t.dtype))
            self.p.line(f"{self.d.frag_matrix_type(t)} {name} = {zero};")
            return
        self.declare(name, t)
        zero = "0u" if t in self.packed else "0.0f"
        self._per_register(t, lambda r: [f"{name}[{r}] = {zero};"])

    # ------------------------------------------------------------ ops

    def op(self, op: Op, args: list[Operand]) -> None:
        types = {v.type for v in [op.result, *op.operands] if v is not None and isinstance(v.type, FragmentType)}
        if types & self.whole:
            self._whole_matrix(op, args)
            return
        getattr(self, f"_{op.opcode}")(op, args)

    def _whole_matrix(self, op: Op, args: list[Operand]) -> None:
        """A fragment op on whole-matrix values: the target's own load, store, fill and multiply-add."""
        d, code = self.d, op.opcode
        if code == "frag_store":
            tensor, base, ld, frag = args
            value = frag.text
            if tensor.type.dtype != frag.type.dtype:  # an f32 accumulator narrowed to the tensor's type
                value = d.frag_matrix_convert(op, frag.type, tensor.type.dtype, frag.text)
            self.p.line(d.frag_matrix_store(value, tensor, base, ld, op.attrs["layout"] == "col") + ";")
            return
        t = op.result.type
        name = self.p.names.define(op.result)
        if code == "frag_fill":
            self.p.line(f"{d.frag_matrix_type(t)} {name} = {d.frag_matrix_fill(t, args[0].text)};")
            return
        refused = _NEEDS_LANES.get(code) or ("elementwise '{fn}' on" if code == "frag_binary" and
                                             op.attrs["fn"] not in _FRAG_BINARY_SIGNS else None)
        if refused:
            raise d.unsupported(op, f"{refused.format(**op.attrs)} a fragment the matrix unit holds whole "
                                    f"({self.strategy.name if self.strategy else 'opaque'}: no lane knows which "
                                    f"elements it holds)")
        if code == "frag_binary":
            x, y = (a.text if isinstance(a.type, FragmentType) else d.frag_matrix_fill(t, a.text) for a in args)
            self.p.line(f"{d.frag_matrix_type(t)} {name} = {d.frag_matrix_binary(op, t, x, y)};")
            return
        self.declare(name, t)
        if code == "frag_load":
            tensor, base, ld = args
            self.p.line(d.frag_matrix_load(name, tensor, base, ld, op.attrs["layout"] == "col") + ";")
        else:
            a, b, c = args
            self.p.line(d.frag_matrix_mma(name, a.text, b.text, c.text) + ";")

    def _frag_fill(self, op: Op, args: list[Operand]) -> None:
        t = op.result.type
        value = args[0]
        text = self.d.literal(value.const, D.f32) if value.is_const else self.d.frag_to_f32(value.text, t.dtype)
        name = self.p.names.define(op.result)
        self.declare(name, t)
        if t in self.packed:
            text = self.d.frag_pack(text, text, t.dtype)
        self._per_register(t, lambda r: [f"{name}[{r}] = {text};"])

    def _frag_binary(self, op: Op, args: list[Operand]) -> None:
        """Each register of the result from the same register of a fragment operand (one layout) or the scalar,
        rounded to the fragment's dtype."""
        t = op.result.type
        fn = op.attrs["fn"]
        name = self.p.names.define(op.result)
        self.declare(name, t)

        def term(a: Operand, r: str) -> str:
            if isinstance(a.type, FragmentType):
                return f"{a.text}[{r}]"
            return self.d.literal(a.const, D.f32) if a.is_const else self.d.frag_to_f32(a.text, t.dtype)

        x, y = args

        def element(r: str) -> list[str]:
            a, b = term(x, r), term(y, r)
            value = f"{a} {_FRAG_BINARY_SIGNS[fn]} {b}" if fn in _FRAG_BINARY_SIGNS else \
                f"{self.d.math(fn, D.f32)}({a}, {b})"
            return [f"{name}[{r}] = {self.d.frag_round(value, t.dtype)};"]

        self._per_register(t, element)

    def _frag_unary(self, op: Op, args: list[Operand]) -> None:
        """Each register through the dialect's f32 function, rounded to the fragment's dtype."""
        from .cstyle import Operand  # cstyle imports this module

        (x,) = args
        t = op.result.type
        name = self.p.names.define(op.result)
        self.declare(name, t)
        f32 = ScalarType(D.f32)

        def element(r: str) -> list[str]:
            value = self.d.unary(op.attrs["fn"], Operand(f"{x.text}[{r}]", f32))
            return [f"{name}[{r}] = {self.d.frag_round(value, t.dtype)};"]

        self._per_register(t, element)

    def _frag_rows(self, op: Op, args: list[Operand]) -> None:
        """Each register takes its row's max or sum: the lane's registers of the row combined, then a butterfly
        over the lanes holding the row (:func:`~iron.codegen.mma.row_plan`, from the layout's table)."""
        (x,) = args
        t = op.result.type
        fn = op.attrs["fn"]
        plan = row_plan(self.layout(t))
        if plan is None:
            raise self.d.unsupported(op, f"the row {fn} of a {t.rows} x {t.cols} fragment in this layout (its rows "
                                         f"are not held by XOR-closed lane sets; widths of 8, 16, 32, ... are)")
        name = self.p.names.define(op.result)
        self.declare(name, t)
        big = self.d.math("max", D.f32)

        def combine(a: str, b: str) -> str:
            return f"{big}({a}, {b})" if fn == "max" else f"{a} + {b}"

        for group in plan.groups:
            v = self.p.temp("row")
            self.p.line(f"float {v} = {x.text}[{group[0]}];")
            for r in group[1:]:
                self.p.line(f"{v} = {combine(v, f'{x.text}[{r}]')};")
            for mask in plan.lane_masks:
                self.p.line(f"{v} = {combine(v, self.d.frag_lane_xor(v, mask))};")
            value = v if fn == "max" else self.d.frag_round(v, t.dtype)
            for r in group:
                self.p.line(f"{name}[{r}] = {value};")

    def _frag_to_a(self, op: Op, args: list[Operand]) -> None:
        """Where the matrix unit holds both fragments, each lane moves (rounds, packs) its own registers
        (:func:`~iron.codegen.mma.register_moves`); else through the subgroup's scratch: every lane writes its
        elements of the 16 columns, the subgroup synchronises, every lane reads its A elements."""
        (x,) = args
        t, src = op.result.type, x.type
        col0 = op.attrs["col0"]
        name = self.p.names.define(op.result)
        self.declare(name, t)
        d = self.d
        if {t, src} <= self.native:
            moves = register_moves(self.layout(src), self.layout(t), col0)
            if moves is None:
                raise d.unsupported(op, f"an A fragment from columns {col0} .. {col0 + 15} of {src} (another lane "
                                        f"holds some of them; a multiple of 8 keeps them in place)")
            if t in self.packed:  # the pack rounds each value once
                held = [f"{x.text}[{j}]" for j in moves]
                for w in range(len(held) // 2):
                    self.p.line(f"{name}[{w}] = {d.frag_pack(held[2 * w], held[2 * w + 1], t.dtype)};")
            else:
                for i, text in enumerate(d.frag_round(f"{x.text}[{j}]", t.dtype) for j in moves):
                    self.p.line(f"{name}[{i}] = {text};")
            return
        with self._through_scratch(f"columns {col0} .. {col0 + 15} of the accumulator through the subgroup's "
                                   f"scratch") as (scratch, base):
            self._per_element(src, lambda r, row, col: [
                f"if (({col}) >= {col0} && ({col}) < {col0 + 16}) {{ {scratch}[{base} + ({row}) * 16 + ({col}) - "
                f"{col0}] = {x.text}[{r}]; }}"])
            self._subgroup_sync()
            at = f"{scratch}[{base} + ({{}}) * 16 + ({{}})]"
            if t in self.packed:
                def word(layout: FragmentLayout, lane: str, w: str) -> list[str]:
                    halves = [at.format(*element_exprs(layout, lane, f"(2 * {w} + {h})")) for h in range(2)]
                    return [f"{name}[{w}] = {d.frag_pack(halves[0], halves[1], t.dtype)};"]

                self._per_lane(t, word)
            else:
                self._per_element(t, lambda r, row, col: [
                    f"{name}[{r}] = {d.frag_round(at.format(row, col), t.dtype)};"])

    def _frag_scale_rows(self, op: Op, args: list[Operand]) -> None:
        """Where the matrix unit holds both, each register times a register of the same row in this lane's factors
        (:func:`~iron.codegen.mma.row_sources`); else the lanes holding column 0 of the factors write each row's
        value to the subgroup's scratch, and every lane reads its rows' values there."""
        x, factors = args
        t, ft = op.result.type, factors.type
        name = self.p.names.define(op.result)
        self.declare(name, t)
        d, p = self.d, self.p
        if {t, ft} <= self.native:
            picks = row_sources(self.layout(t), self.layout(ft))
            if picks is None:
                raise d.unsupported(op, f"scaling the rows of {t} by {ft}: a lane lacks some of its rows' factors")
            for i, j in enumerate(picks):
                p.line(f"{name}[{i}] = {d.frag_round(f'{x.text}[{i}] * {factors.text}[{j}]', t.dtype)};")
            return
        with self._through_scratch("each row's factor through the subgroup's scratch") as (scratch, base):
            self._per_element(ft, lambda r, row, col: [
                f"if (({col}) == 0) {{ {scratch}[{base} + ({row})] = {factors.text}[{r}]; }}"])
            self._subgroup_sync()
            self._per_element(t, lambda r, row, col: [
                f"{name}[{r}] = {d.frag_round(f'{x.text}[{r}] * {scratch}[{base} + ({row})]', t.dtype)};"])

    def _frag_mask(self, op: Op, args: list[Operand]) -> None:
        """Each register keeps its value or takes ``value`` by its (row, col) in this lane's layout."""
        x, value, cols, diagonal = args
        t = op.result.type
        name = self.p.names.define(op.result)
        self.declare(name, t)
        fill = self.d.literal(value.const, D.f32) if value.is_const else self.d.frag_to_f32(value.text, t.dtype)
        c, d = self._int(cols), self._int(diagonal)
        self._per_element(t, lambda r, row, col: [
            f"{name}[{r}] = ({col} >= {c} || ({col}) - ({row}) > {d}) ? {fill} : {x.text}[{r}];"])

    def _frag_load(self, op: Op, args: list[Operand]) -> None:
        t = op.result.type
        tensor, base, ld = args
        name = self.p.names.define(op.result)
        self.declare(name, t)
        if t not in self.packed:
            self._per_element(t, lambda r, row, col: [
                f"{name}[{r}] = {self.d.frag_to_f32(self._at(tensor, base, ld, row, col, op), t.dtype)};"])
            return
        tile = ldmatrix_plan(self.layout(t), op.attrs["layout"]) if tensor.type.space == "shared" else None
        if tile is None:
            self._load_pairs(name, t, tensor, base, ld, op)
            return
        p = self.p
        p.line(f"if ((({self._int(base)} | {self._int(ld)}) & 7) == 0) {{  // {tile.instruction}: "
               f"16-byte aligned tile rows")
        p.depth += 1
        self._ldmatrix(name, tile, tensor, base, ld)
        p.depth -= 1
        p.line("} else {")
        p.depth += 1
        self._load_pairs(name, t, tensor, base, ld, op)
        p.depth -= 1
        p.line("}")

    def _ldmatrix(self, name: str, tile: LdmatrixPlan, tensor: Operand, base: Operand, ld: Operand) -> None:
        """This lane addresses row ``lane % 8`` of tile ``lane / 8``; tile i lands in word i."""
        p = self.p
        lane, q = p.temp("lane"), p.temp("tile")
        p.line(f"const int {lane} = {self.d.index('lane_id', None)};")
        p.line(f"const int {q} = ({lane} >> 3) & {tile.count - 1};")

        def pick(values: list[int]) -> str:
            if len(set(values)) == 1:
                return str(values[0])
            text = str(values[-1])
            for i in reversed(range(len(values) - 1)):
                text = f"({q} == {i} ? {values[i]} : {text})"
            return text

        major = f"(({lane} & 7) + {pick([m for m, _ in tile.origins])})"
        minor = pick([n for _, n in tile.origins])
        address = f"&{tensor.text}[{self._int(base)} + {major} * {self._int(ld)} + {minor}]"
        for text in self.d.frag_ldmatrix(tile.instruction, [f"{name}[{i}]" for i in range(tile.count)], address):
            p.line(text)

    def _load_pairs(self, name: str, t: FragmentType, tensor: Operand, base: Operand, ld: Operand, op: Op) -> None:
        """A packed fragment element by element: word w from slots 2w and 2w+1."""
        def word(layout: FragmentLayout, lane: str, w: str) -> list[str]:
            halves = []
            for h in range(2):
                row, col = element_exprs(layout, lane, f"(2 * {w} + {h})")
                halves.append(self.d.frag_to_f32(self._at(tensor, base, ld, row, col, op), t.dtype))
            return [f"{name}[{w}] = {self.d.frag_pack(halves[0], halves[1], t.dtype)};"]

        self._per_lane(t, word)

    def _frag_store(self, op: Op, args: list[Operand]) -> None:
        tensor, base, ld, frag = args
        t = frag.type
        assert t not in self.packed, "frag_store takes accumulators, which are never packed"
        dt = tensor.type.dtype
        # an f32 accumulator stored to f16 / bf16 rounds each element once
        element = self.d.frag_from_f32 if dt == t.dtype else self.d.frag_narrow
        self._per_element(t, lambda r, row, col: [
            f"{self._at(tensor, base, ld, row, col, op)} = {element(f'{frag.text}[{r}]', dt)};"])

    def _mma_wg(self, op: Op, args: list[Operand]) -> None:
        """A warpgroup multiply: the dialect's instructions on this subgroup's accumulator registers."""
        out = self.p.names.define(op.result)
        self.declare(out, op.result.type)
        for text in self.d.frag_warpgroup_mma(op, out, args):
            self.p.line(text)

    def _mma(self, op: Op, args: list[Operand]) -> None:
        a, b, c = args
        m, k = a.type.rows, a.type.cols
        n = b.type.cols
        out = self.p.names.define(op.result)
        self.declare(out, op.result.type)
        if op.result.type in self.native:
            assert self.strategy is not None
            combo = self.strategy.combo((m, n, k), a.type.dtype, c.type.dtype)
            for text in self.d.frag_native_mma(combo, out, a, b, c):
                self.p.line(text)
            return
        p, d = self.p, self.d
        with self._through_scratch(f"mma {m}x{n}x{k}: a and b through the subgroup's scratch, each lane its own "
                                   f"elements") as (scratch, base):
            for operand, offset in ((a, 0), (b, m * k)):
                cols = operand.type.cols
                self._per_element(operand.type, lambda r, row, col, src=operand, off=offset, cols=cols: [
                    f"{scratch}[{base} + {off} + ({row}) * {cols} + ({col})] = {src.text}[{r}];"])
            self._subgroup_sync()
            fma = d.math("fma", D.f32)

            def dot(r: str, row: str, col: str) -> list[str]:
                i, j, s, kk = p.temp("i"), p.temp("j"), p.temp("sum"), p.temp("k")
                a_at = f"{scratch}[{base} + {i} * {k} + {kk}]"
                b_at = f"{scratch}[{base} + {m * k} + {kk} * {n} + {j}]"
                ind = d.indent
                return [f"const int {i} = {row};", f"const int {j} = {col};", f"float {s} = {c.text}[{r}];",
                        f"for (int {kk} = 0; {kk} < {k}; ++{kk}) {{", f"{ind}{s} = {fma}({a_at}, {b_at}, {s});",
                        "}", f"{out}[{r}] = {d.frag_round(s, op.result.type.dtype)};"]

            self._per_element(op.result.type, dot)

    # ------------------------------------------------------------ helpers

    @contextmanager
    def _through_scratch(self, comment: str) -> Iterator[tuple[str, str]]:
        """A block whose lanes exchange values through this subgroup's slice of the scratch: yields the scratch's
        name and the slice's first index; the subgroup synchronises at the end, before the scratch is reused."""
        scratch, p = self._scratch(), self.p
        p.line(f"{{  // {comment}")
        p.depth += 1
        base = p.temp("scratch_base")
        p.line(f"const int {base} = {self.d.index('simd_group_id', None)} * {scratch.floats_per_subgroup};")
        yield scratch.name, base
        self._subgroup_sync()
        p.depth -= 1
        p.line("}")

    def _subgroup_sync(self) -> None:
        for text in self.d.frag_subgroup_sync():
            self.p.line(text)

    def _scratch(self) -> Scratch:
        if self.scratch is None:
            self.scratch = Scratch(self.p.temp("mma_scratch"),
                                   scratch_floats_per_subgroup(self.p.kernel, self.native))
        return self.scratch

    def _at(self, tensor: Operand, base: Operand, ld: Operand, row: str, col: str, op: Op) -> str:
        major, minor = (row, col) if op.attrs["layout"] == "row" else (col, row)
        index = f"{self._int(base)} + ({major}) * {self._int(ld)} + ({minor})"
        return f"{tensor.text}[{index}]"

    def _int(self, x: Operand) -> str:
        return x.atom if x.dtype == D.i32 else f"({self.d.convert(x, x.dtype, D.i32)})"

    def _per_register(self, t: FragmentType, body: Any) -> None:
        """A loop over this lane's registers of ``t``, unrolled where the target takes the hint: a fragment's
        registers must stay registers (a loop left rolled indexes them, which puts the fragment in memory)."""
        r = self.p.temp("r")
        for text in self.d.loop_hint(self.registers(t)):
            self.p.line(text)
        self.p.line(f"for (int {r} = 0; {r} < {self.registers(t)}; ++{r}) {{")
        self.p.depth += 1
        for text in body(r):
            self.p.line(text)
        self.p.depth -= 1
        self.p.line("}")

    def _per_element(self, t: FragmentType, body: Any) -> None:
        """A loop over the registers with each one's (row, col) under this lane's layout."""
        self._per_lane(t, lambda layout, lane, r: body(r, *element_exprs(layout, lane, r)))

    def _per_lane(self, t: FragmentType, body: Any) -> None:
        """A loop over the registers in a scope that names this lane: ``body(layout, lane, r)`` gives the lines."""
        layout = self.layout(t)
        lane = self.p.temp("lane")
        self.p.line("{")
        self.p.depth += 1
        self.p.line(f"const int {lane} = {self.d.index('lane_id', None)};")
        self._per_register(t, lambda r: body(layout, lane, r))
        self.p.depth -= 1
        self.p.line("}")


__all__ = ["FragmentPrinter", "element_exprs", "fragment_layout", "scratch_floats_per_subgroup",
           "scratch_subgroups", "static_scratch_floats"]

"""Matrix fragments: one (rows, cols) matrix per subgroup, or per-lane registers laid out by an MMA strategy.

By default a fragment value is an array (total_simd_groups, rows, cols).  With
a ``fragment_layout`` (an :class:`~iron.codegen.mma.MmaStrategy`) it is what a
matrix unit holds: an array (total_simd_groups, lanes, registers) placed by
the strategy's layout.  ``frag_load`` then has each lane read its own
elements, ``mma`` and ``frag_store`` gather the matrices back by the layout,
and ``mma`` scatters its result; the arithmetic is the same in both modes, so
results are bit-identical, and every strategy's layout is exercised (and
validated: each element held exactly ``replication`` times) on the CPU.

A fragment op runs for the subgroups that have an active lane, and each of
them must have *every* lane active and give the same operands on every lane
(docs/ir.md); the interpreter checks both, whatever the checks setting,
because without them the op has no meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...codegen.mma import MmaLayoutError, MmaStrategy, get_strategy
from ...core.errors import LaunchError
from ...core import dtypes as D
from ...core.eval import eval_pure, np_dtype, round_f64
from ...core.ir import Op
from ...core.types import TILE_LAYOUTS, FragmentType, ScalarType, sw128_index
from .faults import Faults
from .mask import Mask
from .memory import Buffer, Memory
from .threads import ThreadSpace

Array = np.ndarray

#: ``fragment_layout`` values that mean the default per-subgroup matrices.
DEFAULT_LAYOUT_NAMES = ("", "none")


def fragment_strategy(choice: str | MmaStrategy | None, simd_width: int) -> MmaStrategy | None:
    """The strategy a launch places fragments by (None: per-subgroup matrices), checked against the width."""
    if choice is None or (isinstance(choice, str) and choice.strip().lower() in DEFAULT_LAYOUT_NAMES):
        return None
    try:
        strategy = choice if isinstance(choice, MmaStrategy) else get_strategy(choice)
    except MmaLayoutError as e:
        raise LaunchError(f"fragment_layout: {e}") from None
    if not strategy.has_lane_layout:
        raise LaunchError(f"fragment_layout {strategy.name!r} has no per-lane layout (it is implementation-"
                          "defined); choose a strategy with one, or None")
    if strategy.lane_width is not None and strategy.lane_width != simd_width:
        raise LaunchError(f"fragment_layout {strategy.name!r} spreads fragments over {strategy.lane_width} lanes, "
                          f"but simd_width is {simd_width}; run with simd_width={strategy.lane_width}")
    return strategy


@dataclass(frozen=True)
class _Placement:
    """One fragment type's layout as index arrays."""

    slot_rows: Array  # (lanes, registers): the row each slot holds
    slot_cols: Array
    owner_lanes: Array  # (rows, cols): the lowest lane holding each element
    owner_regs: Array


class LaneLayouts:
    """The per-lane layouts of one launch: looked up by fragment type, validated once, cached."""

    def __init__(self, strategy: MmaStrategy, lane_width: int, faults: Faults):
        self.strategy = strategy
        self.lane_width = lane_width
        self.faults = faults
        self._placements: dict[FragmentType, _Placement] = {}

    def placement(self, op: Op, t: FragmentType) -> _Placement:
        if t not in self._placements:
            name = self.strategy.name
            try:
                layout = self.strategy.fragment_layout(t.role, t.rows, t.cols, t.dtype, self.lane_width)
            except MmaLayoutError as e:
                raise self.faults.general(op, f"fragment_layout {name!r} cannot hold {t}: {e}") from None
            try:
                layout.check()
                table, owners = layout.to_table(), layout.owner_table()
            except MmaLayoutError as e:
                raise self.faults.general(op, f"fragment_layout {name!r} has an invalid layout for {t}: {e}") from None
            self._placements[t] = _Placement(table[..., 0], table[..., 1], owners[..., 0], owners[..., 1])
        return self._placements[t]

    def registers_shape(self, op: Op, t: FragmentType) -> tuple[int, int]:
        """(lanes, registers) of a ``t`` fragment."""
        return self.placement(op, t).slot_rows.shape

    def distribute(self, op: Op, t: FragmentType, per_element: Array) -> Array:
        """(n, rows, cols) -> (n, lanes, registers): each slot takes the element it holds."""
        p = self.placement(op, t)
        return per_element[:, p.slot_rows, p.slot_cols]

    def gather(self, op: Op, t: FragmentType, registers: Array) -> Array:
        """(n, lanes, registers) -> (n, rows, cols), reading each element from its lowest-lane owner."""
        p = self.placement(op, t)
        return registers[:, p.owner_lanes, p.owner_regs]

    def check_mma(self, op: Op, a: FragmentType, c: FragmentType) -> None:
        shape = (a.rows, c.cols, a.cols)
        if not self.strategy.supports(shape, a.dtype, c.dtype):
            m, n, k = shape
            raise self.faults.general(op, f"fragment_layout {self.strategy.name!r} does not run {m}x{n}x{k} "
                                          f"{a.dtype}->{c.dtype}; it runs: {self.strategy.describe_combos()}")


class Fragments:
    """Fragment ops for one launch."""

    def __init__(self, threads: ThreadSpace, faults: Faults, memory: Memory, strategy: MmaStrategy | None = None):
        self.threads = threads
        self.faults = faults
        self.memory = memory
        self.lanes = None if strategy is None else LaneLayouts(strategy, threads.simd_width, faults)
        #: Groups of warpgroup multiplies committed and not yet retired, oldest first (``mma_wg`` with
        #: ``pending``), and the multiplies issued with ``commit=False`` that the next one's group takes.
        self.in_flight: list[list[Callable[[], None]]] = []
        self.open_group: list[Callable[[], None]] = []
        #: Per in-flight multiply (by id of its result): the copies a variable's store made of its result for
        #: some subgroups, filled when it retires; and the root multiply of each such copy.
        self._copies: dict[int, list[tuple[Array, Array]]] = {}
        self._root: dict[int, int] = {}

    # ------------------------------------------------------------ participation
    def participants(self, op: Op, mask: Mask) -> Array:
        """Subgroups that run this op; raises unless each has all its lanes active."""
        t = self.threads
        active = t.to_lanes(mask.bits, fill=False)
        running = active.any(axis=1)
        partial = np.flatnonzero(running & ~active.all(axis=1))  # a missing lane is never active
        if partial.size:
            sg = int(partial[0])
            raise self.faults.subgroup_divergence(
                op, t.first_thread_of_simd_group(sg),
                f"only {int(active[sg].sum())} of its {t.simd_width} lanes are active")
        return np.flatnonzero(running)

    def uniform(self, op: Op, what: str, values: Array, subgroups: Array) -> Array:
        """The one value each participating subgroup gives for an operand (checked equal on all lanes)."""
        lanes = self.threads.to_lanes(values)[subgroups]
        bits = lanes.view(np.dtype(f"u{lanes.dtype.itemsize}"))  # bit equality: NaN fills compare equal
        differs = np.flatnonzero((bits != bits[:, :1]).any(axis=1))
        if differs.size:
            sg = int(subgroups[differs[0]])
            row = lanes[differs[0]]
            other = row[np.flatnonzero(bits[differs[0]] != bits[differs[0], 0])[0]]
            raise self.faults.subgroup_divergence(
                op, self.threads.first_thread_of_simd_group(sg),
                f"its lanes give different {what}s ({row[0]} and {other})")
        return lanes[:, 0]

    def empty(self, op: Op, t: FragmentType) -> Array:
        """A zero value of fragment type ``t`` in this launch's representation (``op`` locates errors)."""
        per_subgroup = (t.rows, t.cols) if self.lanes is None else self.lanes.registers_shape(op, t)
        return np.zeros((self.threads.total_simd_groups, *per_subgroup), dtype=np_dtype(t.dtype))

    # ------------------------------------------------------------ ops
    def fill(self, op: Op, value: Array, mask: Mask) -> Array:
        subgroups = self.participants(op, mask)
        out = self.empty(op, op.result.type)
        out[subgroups] = self.uniform(op, "fill value", value, subgroups)[:, None, None]
        return out

    def load(self, op: Op, buf: Buffer, base: Array, ld: Array, mask: Mask) -> Array:
        ft: FragmentType = op.result.type
        subgroups = self.participants(op, mask)
        index = self._indices(op, buf, base, ld, subgroups, ft.rows, ft.cols, op.attrs["layout"])
        self.memory.track_subgroups(op, buf, "read", subgroups, index.reshape(len(subgroups), -1))
        if self.lanes is not None:
            index = self.lanes.distribute(op, ft, index)  # each lane reads the elements it holds
        out = self.empty(op, ft)
        out[subgroups] = buf.data[self._flat(buf, subgroups, index)]
        return out

    def store(self, op: Op, buf: Buffer, base: Array, ld: Array, frag: Array, mask: Mask) -> None:
        ft: FragmentType = op.operands[3].type
        subgroups = self.participants(op, mask)
        index = self._indices(op, buf, base, ld, subgroups, ft.rows, ft.cols, op.attrs["layout"])
        self.memory.track_subgroups(op, buf, "write", subgroups, index.reshape(len(subgroups), -1))
        values = self._matrices(op, ft, frag[subgroups])
        if buf.dtype != ft.dtype:  # an f32 accumulator into f16 / bf16: each element rounded once
            values = round_f64(values.astype(np.float64), buf.dtype)
        buf.data[self._flat(buf, subgroups, index)] = values

    def binary(self, op: Op, x: Array, y: Array, mask: Mask) -> Array:
        """``frag_binary``: ``fn`` element by element (both fragments share a layout, so registers or whole
        matrices alike), each result rounded once to the fragment's dtype; a scalar operand must be the same on
        every lane of a subgroup (it applies to the subgroup's whole fragment).  An operand still in flight
        (a warpgroup multiply not yet waited for) holds NaN, so its misuse shows."""
        subgroups = self.participants(op, mask)
        ft: FragmentType = op.result.type
        out = self.empty(op, ft)
        shape = out[subgroups].shape

        def operand(v: Array, t: Any) -> Array:
            if isinstance(t, FragmentType):
                return v[subgroups]
            s = self.uniform(op, "scalar operand", v, subgroups)
            return np.broadcast_to(s.reshape((-1,) + (1,) * (len(shape) - 1)), shape)

        a, b = (operand(v, o.type) for v, o in zip((x, y), op.operands))
        with np.errstate(all="ignore"):
            out[subgroups] = eval_pure(op.attrs["fn"], {}, [a, b], ScalarType(ft.dtype))
        return out

    def unary(self, op: Op, x: Array, mask: Mask) -> Array:
        """``frag_unary``: ``fn`` of every element (registers or whole matrices alike), in the fragment's dtype as
        the evaluator computes it for scalars."""
        subgroups = self.participants(op, mask)
        ft: FragmentType = op.result.type
        out = self.empty(op, ft)
        with np.errstate(all="ignore"):
            out[subgroups] = eval_pure(op.attrs["fn"], {}, [x[subgroups]], ScalarType(ft.dtype))
        return out

    def scale_rows(self, op: Op, x: Array, factors: Array, mask: Mask) -> Array:
        """``frag_scale_rows``: each row times its row's value in ``factors``, rounded once to the dtype.  A row of
        ``factors`` holding two values (bitwise) is the kernel's error: targets read whichever their lane holds."""
        subgroups = self.participants(op, mask)
        ft: FragmentType = op.result.type
        f = self._matrices(op, op.operands[1].type, factors[subgroups])
        bits = f.view(np.dtype(f"u{f.dtype.itemsize}"))
        uneven = np.argwhere((bits != bits[..., :1]).any(axis=-1))
        if uneven.size:
            sg, row = (int(v) for v in uneven[0])
            raise self.faults.general(op, f"frag_scale_rows: row {row} of the factors holds different values in "
                                          f"subgroup {int(subgroups[sg])} ({f[sg, row, 0]} and "
                                          f"{f[sg, row][bits[sg, row] != bits[sg, row, 0]][0]}); give one value a "
                                          f"row, e.g. frag_row_max(s) or math on it")
        m = self._matrices(op, ft, x[subgroups]).astype(np.float64)
        with np.errstate(all="ignore"):
            result = round_f64(m * f[..., :1].astype(np.float64), ft.dtype)
        out = self.empty(op, ft)
        out[subgroups] = result if self.lanes is None else self.lanes.distribute(op, ft, result)
        return out

    def to_a(self, op: Op, x: Array, mask: Mask) -> Array:
        """``frag_to_a``: 16 columns of a 16-row accumulator as an A fragment, each element rounded once."""
        subgroups = self.participants(op, mask)
        at: FragmentType = op.result.type
        col0 = op.attrs["col0"]
        m = self._matrices(op, op.operands[0].type, x[subgroups]).astype(np.float64)
        with np.errstate(all="ignore"):
            block = round_f64(m[:, :, col0:col0 + 16], at.dtype)
        out = self.empty(op, at)
        out[subgroups] = block if self.lanes is None else self.lanes.distribute(op, at, block)
        return out

    def masked(self, op: Op, x: Array, value: Array, cols: Array, diagonal: Array, mask: Mask) -> Array:
        """``frag_mask``: ``value`` where column >= ``cols`` or column - row > ``diagonal``; each operand the same on
        every lane of a subgroup."""
        subgroups = self.participants(op, mask)
        ft: FragmentType = op.result.type
        v, c, d = (self.uniform(op, what, a, subgroups)[:, None, None] for what, a in
                   (("masked value", value), ("column bound", cols), ("diagonal", diagonal)))
        r, k = np.meshgrid(np.arange(ft.rows), np.arange(ft.cols), indexing="ij")
        m = self._matrices(op, ft, x[subgroups])
        result = np.where((k >= c) | (k - r > d), v, m).astype(m.dtype)
        out = self.empty(op, ft)
        out[subgroups] = result if self.lanes is None else self.lanes.distribute(op, ft, result)
        return out

    def rows(self, op: Op, x: Array, mask: Mask) -> Array:
        """``frag_rows``: every element replaced by its row's ``fn`` (max: maxNum, the evaluator's ``max``; sum: exact,
        rounded once to the fragment's dtype, which any order of f32 additions on a target stays within a
        tolerance of).  An operand still in flight holds NaN, which a sum keeps (and a maximum keeps where
        the whole row is in flight), so its misuse shows."""
        subgroups = self.participants(op, mask)
        ft: FragmentType = op.result.type
        m = self._matrices(op, ft, x[subgroups]).astype(np.float64)
        if op.attrs["fn"] == "sum":
            with np.errstate(all="ignore"):
                row = round_f64(m.sum(axis=-1, keepdims=True), ft.dtype)
        else:  # pairwise halving: maxNum (+0 above -0) is associative, so log2(cols) evaluator calls do
            row = m
            while row.shape[-1] > 1:
                half = row.shape[-1] // 2
                top = eval_pure("max", {}, [row[..., :half], row[..., half:2 * half]], ScalarType(D.f64))
                row = np.concatenate([top, row[..., 2 * half:]], axis=-1)
        result = np.broadcast_to(row, m.shape).astype(np.float64)
        out = self.empty(op, ft)
        out[subgroups] = result if self.lanes is None else self.lanes.distribute(op, ft, result)
        return out

    def mma(self, op: Op, a: Array, b: Array, c: Array, mask: Mask) -> Array:
        """``c + a @ b`` with exact f64 products and f64 sums, rounded once to the accumulator type."""
        subgroups = self.participants(op, mask)
        at, bt, ct = (v.type for v in op.operands)
        if self.lanes is not None:
            self.lanes.check_mma(op, at, ct)
        a, b, c = (self._matrices(op, t, x[subgroups]).astype(np.float64) for t, x in ((at, a), (bt, b), (ct, c)))
        out = self.empty(op, ct)
        with np.errstate(all="ignore"):
            result = round_f64(c + a @ b, ct.dtype)
        out[subgroups] = result if self.lanes is None else self.lanes.distribute(op, ct, result)
        return out

    def mma_wg(self, op: Op, a_buf: Buffer | Array, a_tile: Array, b_buf: Buffer, b_tile: Array, c: Array,
               mask: Mask) -> Array:
        """A warpgroup multiply (docs/ir.md): subgroup s adds rows 16 (s % 4) .. of A @ B to its accumulator.

        Exact f64 products and sums, rounded once to f32, as ``mma``.  The four subgroups of a
        warpgroup must all run it with the same tile offsets; the tiles must lie in their arrays and
        start on a 1024-byte swizzle atom.  A given as a fragment (16 x 16 per subgroup) is the subgroup's
        own 16 rows, taken when the multiply is issued.  The multiply happens when it retires (at once with
        ``pending`` 0, else at a later ``mma_wg`` or ``mma_wg_wait``): it reads the tiles then, and its
        result holds NaN until then, so a kernel that overwrites a tile or reads an accumulator still
        in flight computes wrong values here too.
        """
        subgroups = self.participants(op, mask)
        t = self.threads
        if t.simd_groups_per_group % 4:
            raise self.faults.general(op, f"mma_wg runs on warpgroups of 4 subgroups; a group has "
                                          f"{t.simd_groups_per_group}: make the group a multiple of 4 subgroups")
        at_type = op.operands[0].type
        registers = isinstance(at_type, FragmentType)
        a_at = np.zeros(len(subgroups), np.int64) if registers else \
            self.uniform(op, "A tile offset", a_tile, subgroups).astype(np.int64)
        b_at = self.uniform(op, "B tile offset", b_tile, subgroups).astype(np.int64)
        local = subgroups % t.simd_groups_per_group
        first = subgroups - local % 4  # the warpgroup's first subgroup
        warpgroups, counts = np.unique(first, return_counts=True)
        if (counts != 4).any():
            w = int(warpgroups[counts != 4][0])
            missing = next(q for q in range(w, w + 4) if q not in set(subgroups.tolist()))
            raise self.faults.subgroup_divergence(
                op, t.first_thread_of_simd_group(missing),
                "mma_wg needs all four subgroups of its warpgroup, and this one did not run it")
        # Whole warpgroups of ascending subgroups: rows of four, each one warpgroup.
        offsets = np.stack([a_at, b_at], axis=-1).reshape(-1, 4, 2)
        differs = np.flatnonzero((offsets != offsets[:, :1]).any(axis=(1, 2)))
        if differs.size:
            w = int(differs[0])
            lane = int(np.flatnonzero((offsets[w] != offsets[w, 0]).any(axis=1))[0])
            raise self.faults.subgroup_divergence(
                op, t.first_thread_of_simd_group(int(subgroups[4 * w + lane])),
                f"its warpgroup's subgroups give different tile offsets ({tuple(offsets[w, 0].tolist())} and "
                f"{tuple(offsets[w, lane].tolist())})")
        ct: FragmentType = op.operands[4].type
        k, major, block = op.attrs["k"], op.attrs["b_major"], op.attrs["b_block"]
        rows = (local % 4)[:, None, None] * 16 + np.arange(16)[None, :, None]
        kk = op.attrs.get("k0", 0) + np.arange(k)
        swizzled = TILE_LAYOUTS["sw128"]
        item = op.operands[2].type.dtype.itemsize  # 2, or 1 for 8-bit floats (128 to a row)
        a_index = a_at[:, None, None] + swizzled.index(rows, kk[None, None, :], 0, item)
        n = np.arange(ct.cols)[None, :]
        if major == "k":
            b_rel = swizzled.index(n, kk[:, None], 0, item)
        else:
            b_rel = (n // 64) * block + sw128_index(kk[:, None], n % 64)
        b_index = b_at[:, None, None] + b_rel[None]
        tiles = [(a_buf, a_at, a_index, "A")] if not registers else []
        tiles.append((b_buf, b_at, b_index, "B"))
        for buf, at, index, what in tiles:
            misaligned = np.flatnonzero((at * buf.dtype.itemsize) % 1024)
            if misaligned.size:
                sg = int(subgroups[misaligned[0]])
                raise self.faults.general(op, f"mma_wg's {what} tile starts at element {int(at[misaligned[0]])} of "
                                              f"'{buf.name}', not on a 1024-byte swizzle atom (subgroup {sg})")
            flat = index.reshape(len(subgroups), -1)
            bad = np.flatnonzero(((flat < 0) | (flat >= buf.size)).any(axis=1))
            if bad.size:
                row = flat[int(bad[0])]
                wrong = row[(row < 0) | (row >= buf.size)]
                raise self.faults.out_of_bounds(op, buf.name, int(wrong[0]), buf.size,
                                                t.first_thread_of_simd_group(int(subgroups[bad[0]])))
            self.memory.track_subgroups(op, buf, "read", subgroups, flat)
        out = self.empty(op, ct)
        out[...] = np.nan
        self._copies[id(out)], self._root[id(out)] = [], id(out)
        if registers:
            a_now = self._matrices(op, at_type, a_buf[subgroups]).astype(np.float64)
            a_of: Callable[[], Array] = lambda: a_now  # noqa: E731 - the registers as issued
        else:
            a_of = lambda: a_buf.data[self._flat(a_buf, subgroups, a_index)].astype(np.float64)  # noqa: E731
        self.open_group.append(lambda: self._multiply(op, ct, a_of, b_buf, b_index, c, out, subgroups))
        if op.attrs.get("commit", True):
            self.in_flight.append(self.open_group)
            self.open_group = []
            self.retire(op.attrs["pending"])
        return out

    def follow(self, value: Array, copy: Array, subgroups: Array) -> None:
        """``copy`` took ``value``'s fragments of ``subgroups`` (a variable's store by some subgroups): where
        ``value`` is a multiply still in flight, its result lands in ``copy`` too when it retires."""
        root = self._root.get(id(value))
        if root is not None:
            self._copies[root].append((copy, subgroups))
            self._root[id(copy)] = root

    def retire(self, pending: int, op: Op | None = None) -> None:
        """Complete the oldest groups of warpgroup multiplies until at most ``pending`` are in flight (at
        ``mma_wg_wait`` ``op``: a group left open by ``commit=False`` is a misuse, which the hardware would
        never retire)."""
        if op is not None and self.open_group:
            raise self.faults.general(op, "mma_wg_wait with a multiply issued with commit=False and no mma_wg after "
                                          "it to close its group: that multiply would never retire")
        while len(self.in_flight) > pending:
            for multiply in self.in_flight.pop(0):
                multiply()

    def _multiply(self, op: Op, ct: FragmentType, a_of: Callable[[], Array], b_buf: Buffer, b_index: Array,
                  c: Array, out: Array, subgroups: Array) -> None:
        a = a_of()
        b = b_buf.data[self._flat(b_buf, subgroups, b_index)].astype(np.float64)
        acc = self._matrices(op, ct, c[subgroups]).astype(np.float64)
        with np.errstate(all="ignore"):
            result = round_f64(acc + a @ b, ct.dtype)
        out[subgroups] = result if self.lanes is None else self.lanes.distribute(op, ct, result)
        for copy, taken in self._copies.pop(id(out)):
            copy[taken] = out[taken]
            del self._root[id(copy)]
        del self._root[id(out)]

    def _matrices(self, op: Op, t: FragmentType, values: Array) -> Array:
        """Participating subgroups' fragments as (n, rows, cols) matrices, whatever the representation."""
        return values if self.lanes is None else self.lanes.gather(op, t, values)

    # ------------------------------------------------------------ addressing
    def _indices(self, op: Op, buf: Buffer, base: Array, ld: Array, subgroups: Array, rows: int, cols: int,
                 layout: str) -> Array:
        """Element indices (subgroups, rows, cols), bounds-checked."""
        b = self.uniform(op, "base index", base, subgroups).astype(np.int64)[:, None, None]
        stride = self.uniform(op, "leading dimension", ld, subgroups).astype(np.int64)[:, None, None]
        r = np.arange(rows)[None, :, None]
        c = np.arange(cols)[None, None, :]
        index = b + r * stride + c if layout == "row" else b + c * stride + r
        bad = np.flatnonzero(((index < 0) | (index >= buf.size)).reshape(len(subgroups), -1).any(axis=1))
        if bad.size:
            k = int(bad[0])
            wrong = index[k][(index[k] < 0) | (index[k] >= buf.size)]
            raise self.faults.out_of_bounds(op, buf.name, int(wrong[0]), buf.size,
                                            self.threads.first_thread_of_simd_group(int(subgroups[k])))
        return index

    def _flat(self, buf: Buffer, subgroups: Array, index: Array) -> Array:
        if not buf.shared:
            return index
        groups = subgroups // self.threads.simd_groups_per_group
        return index + (groups * buf.size)[:, None, None]

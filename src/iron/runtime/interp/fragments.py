"""Matrix fragments: one (rows, cols) matrix per subgroup.

A fragment value is an array (total_simd_groups, rows, cols).  A fragment op
runs for the subgroups that have an active lane, and each of them must have
*every* lane active and give the same operands on every lane (docs/ir.md);
the interpreter checks both, whatever the checks setting, because without
them the op has no meaning.
"""

from __future__ import annotations

import numpy as np

from ...core.eval import np_dtype, round_f64
from ...core.ir import Op
from ...core.types import FragmentType
from .faults import Faults
from .mask import Mask
from .memory import Buffer, Memory
from .threads import ThreadSpace

Array = np.ndarray


class Fragments:
    """Fragment ops for one launch."""

    def __init__(self, threads: ThreadSpace, faults: Faults, memory: Memory):
        self.threads = threads
        self.faults = faults
        self.memory = memory

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

    def _empty(self, t: FragmentType) -> Array:
        return np.zeros((self.threads.total_simd_groups, t.rows, t.cols), dtype=np_dtype(t.dtype))

    # ------------------------------------------------------------ ops
    def fill(self, op: Op, value: Array, mask: Mask) -> Array:
        subgroups = self.participants(op, mask)
        out = self._empty(op.result.type)
        out[subgroups] = self.uniform(op, "fill value", value, subgroups)[:, None, None]
        return out

    def load(self, op: Op, buf: Buffer, base: Array, ld: Array, mask: Mask) -> Array:
        ft: FragmentType = op.result.type
        subgroups = self.participants(op, mask)
        index = self._indices(op, buf, base, ld, subgroups, ft.rows, ft.cols, op.attrs["layout"])
        self.memory.track_subgroups(op, buf, "read", subgroups, index.reshape(len(subgroups), -1))
        out = self._empty(ft)
        out[subgroups] = buf.data[self._flat(buf, subgroups, index)]
        return out

    def store(self, op: Op, buf: Buffer, base: Array, ld: Array, frag: Array, mask: Mask) -> None:
        rows, cols = frag.shape[1:]
        subgroups = self.participants(op, mask)
        index = self._indices(op, buf, base, ld, subgroups, rows, cols, op.attrs["layout"])
        self.memory.track_subgroups(op, buf, "write", subgroups, index.reshape(len(subgroups), -1))
        buf.data[self._flat(buf, subgroups, index)] = frag[subgroups]

    def mma(self, op: Op, a: Array, b: Array, c: Array, mask: Mask) -> Array:
        """``c + a @ b`` with exact f64 products and f64 sums, rounded once to the accumulator type."""
        subgroups = self.participants(op, mask)
        ct: FragmentType = op.result.type
        out = self._empty(ct)
        with np.errstate(all="ignore"):
            exact = c[subgroups].astype(np.float64) + a[subgroups].astype(np.float64) @ b[subgroups].astype(np.float64)
            out[subgroups] = round_f64(exact, ct.dtype)
        return out

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

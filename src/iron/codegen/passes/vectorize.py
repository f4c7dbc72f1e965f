"""Merge runs of scalar loads and stores of consecutive elements into vector ones.

After unrolling, a body like ``a[4*i] ... a[4*i + 3]`` holds W scalar
loads of one tensor at indices ``base + m, ..., base + m + W - 1``.  When
the first index is provably a multiple of W (the alignment ``vload`` and
``vstore`` require) they become one ``vload`` and W ``vec_extract``;
likewise W such stores become a ``vec_make`` and one ``vstore``.

The rewrite reads and writes exactly the same elements in the same threads:

* all W accesses are in one block, so the same threads run them;
* indices are ``base + constant`` of one ``base`` value, so they are
  consecutive in every thread; the first being a multiple of W (from
  :class:`iron.core.analysis.IndexAnalysis`) also means none of them wraps;
* loads move up to the first of them, stores down to the last.  An op they
  move past must not write (for loads) or touch (for stores) the elements
  they access.  Two global tensors of a launch are either one buffer passed
  twice or disjoint (the aliasing rule of ``iron.runtime.aliasing``, checked
  at every launch), so an access to any global tensor at ``base + c`` is
  fine when ``c`` differs from the moved accesses' offsets: then no element
  is shared either way (an unrolled ``out[i+k] = f(a[i+k])`` merges, also
  when ``out`` is ``a``).  Accesses at unrelated indices stop the merge.
  Shared arrays never overlap global memory or each other.  Barriers and calls stop the merge, as does
  any op with regions (a ``return`` or ``break`` inside could stop some
  threads before the later accesses);
* only one thread's own order is kept, as on GPUs: two threads touching
  one global element with no barrier between them is a race whose outcome
  no program may rely on.

Widths: the widest of 8, 4 and 2 elements that fits in 16 bytes (the widest
access GPUs make in one instruction), then narrower ones.  bool tensors are
left alone (their vectors have no portable memory layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...core.analysis import IndexAnalysis, touches_memory, walk_blocks
from ...core.dtypes import DType
from ...core.ir import Block, Kernel, Op, Value
from ...core.types import IRType, TensorType
from ._rewrite import Substitution, make_op, own

if TYPE_CHECKING:
    from ..pipeline import PassContext

#: The widest access merged, in bytes.
MAX_VECTOR_BYTES = 16


def run(kernel: Kernel, ctx: "PassContext | None" = None) -> Kernel:
    k = own(kernel, ctx)
    index = IndexAnalysis(k)
    blocks = list(walk_blocks(k.body))
    subst = Substitution()
    for b in blocks:
        _merge(b, index, subst, "load")
    if subst:
        for b in blocks:
            for op in b.ops:
                subst.rename_operands(op)
    for b in blocks:
        _merge(b, index, subst, "store")
    return k


def vector_widths(dt: DType) -> tuple[int, ...]:
    """The widths tried for ``dt``, widest first."""
    if dt.is_bool:
        return ()
    return tuple(w for w in (8, 4, 2) if w * dt.bits <= MAX_VECTOR_BYTES * 8)


@dataclass
class _Access:
    pos: int
    op: Op
    offset: int  # modulo 2**bits of the index type


@dataclass
class _Run:
    members: list[_Access]  # in offset order: members[0] holds the aligned first index

    @property
    def first(self) -> int:
        return min(m.pos for m in self.members)

    @property
    def last(self) -> int:
        return max(m.pos for m in self.members)


def _merge(b: Block, index: IndexAnalysis, subst: Substitution, kind: str) -> None:
    # Accesses of one tensor whose indices share a base (and an index type, which sets the modulus).
    groups: dict[tuple[Value, Value | None, IRType], list[_Access]] = {}
    for pos, op in enumerate(b.ops):
        if op.opcode != kind or not vector_widths(op.operands[0].type.dtype):
            continue
        idx = op.operands[1]
        base, offset = index.base_and_offset(idx)
        key = (op.operands[0], base, idx.type)
        groups.setdefault(key, []).append(_Access(pos, op, offset % (1 << idx.type.dtype.bits)))
    runs: list[_Run] = []
    for (tensor, _, _), accesses in groups.items():
        if len(accesses) >= 2:
            runs += _find_runs(b, tensor, accesses, index, kind)
    if runs:
        b.ops = _rebuild(b, runs, subst, kind)


def _find_runs(b: Block, tensor: Value, accesses: list[_Access], index: IndexAnalysis, kind: str) -> list[_Run]:
    assert isinstance(tensor.type, TensorType)
    bits = accesses[0].op.operands[1].type.dtype.bits
    taken: set[int] = set()
    runs: list[_Run] = []
    for width in vector_widths(tensor.type.dtype):
        for head in accesses:
            if head.pos in taken or not index.known_multiple(head.op.operands[1], width):
                continue
            members = [head]
            for k in range(1, width):
                want = (head.offset + k) % (1 << bits)
                nxt = next((a for a in accesses if a.offset == want and a.pos not in taken), None)
                if nxt is None:
                    break
                members.append(nxt)
            if len(members) < width:
                continue
            run = _Run(members)
            if _can_move(b, run, tensor, kind, index):
                runs.append(run)
                taken.update(m.pos for m in members)
    return runs


def _can_move(b: Block, run: _Run, tensor: Value, kind: str, index: IndexAnalysis) -> bool:
    member_pos = {m.pos for m in run.members}
    if kind == "load":
        # The vload goes where the first load is: its index must already be defined there.
        idx_owner = run.members[0].op.operands[1].owner
        if idx_owner is not None and any(op is idx_owner for op in b.ops[run.first:]):
            return False
    for pos in range(run.first + 1, run.last):
        if pos in member_pos:
            continue
        op = b.ops[pos]
        if op.regions:
            return False
        if not touches_memory(op, tensor, writes_only=(kind == "load")):
            continue
        # Loads move up past this op, stores move down past it.
        crossing = [m for m in run.members if (m.pos > pos if kind == "load" else m.pos < pos)]
        if not _disjoint(op, crossing, tensor, index):
            return False
    return True


def _disjoint(op: Op, crossing: list[_Access], tensor: Value, index: IndexAnalysis) -> bool:
    """Whether ``op`` provably touches none of the elements the ``crossing`` members access.

    Only for an access with the members' base index, to ``tensor`` itself or
    to another global tensor (one buffer or disjoint, by the launch-time
    aliasing rule): then both are ``base + constant`` in the same thread, and
    the constants tell.
    """
    if not crossing:
        return True
    if op.opcode not in ("load", "store", "vload", "vstore"):
        return False
    other = op.operands[0]
    if other is not tensor and not (_is_global(other) and _is_global(tensor)):
        return False
    idx = op.operands[1]
    member_idx = crossing[0].op.operands[1]
    if idx.type != member_idx.type:
        return False
    base, offset = index.base_and_offset(idx)
    if base is not index.base_and_offset(member_idx)[0]:
        return False
    modulus = 1 << idx.type.dtype.bits
    extent = op.attrs.get("width") or 1
    return all((m.offset - offset) % modulus >= extent for m in crossing)


def _is_global(v: Value) -> bool:
    return isinstance(v.type, TensorType) and v.type.space == "global"


def _rebuild(b: Block, runs: list[_Run], subst: Substitution, kind: str) -> list[Op]:
    at = {(run.first if kind == "load" else run.last): run for run in runs}
    dropped = {m.pos for run in runs for m in run.members}
    out: list[Op] = []
    for pos, op in enumerate(b.ops):
        run = at.get(pos)
        if run is not None and kind == "load":
            out += _vector_load(run, subst)
        if run is not None and kind == "store":
            out += _vector_store(run)
        if pos not in dropped:
            out.append(op)
    return out


def _vector_load(run: _Run, subst: Substitution) -> list[Op]:
    head = run.members[0].op
    tensor, idx = head.operands
    vload = make_op("vload", [tensor, idx], loc=head.loc, width=len(run.members))
    out = [vload]
    for lane, m in enumerate(run.members):
        extract = make_op("vec_extract", [vload.result], hint=m.op.result.hint, loc=m.op.loc, index=lane)
        subst.replace(m.op.result, extract.result)
        out.append(extract)
    return out


def _vector_store(run: _Run) -> list[Op]:
    head = run.members[0].op
    tensor, idx, _ = head.operands
    vec = make_op("vec_make", [m.op.operands[2] for m in run.members], loc=head.loc)
    return [vec, make_op("vstore", [tensor, idx, vec.result], loc=head.loc)]

"""Dead-code elimination.

Removes, until nothing more goes:

* ops after a terminator in a block (they can never run);
* ops whose result nobody uses and that have no effect: pure ops, plus
  ``var``, ``var_load`` and ``shared_alloc``, which only create or read
  private state.  Loads stay even when unused: on the interpreter an
  out-of-bounds load is an error the program must still report.  Subgroup
  ops stay too (reading an inactive lane is reported), as do fragment ops,
  which every lane of a subgroup must execute together;
* ``var`` slots that are never loaded, with every store to them;
* ``if`` ops whose two regions are empty (their condition is an SSA value,
  already computed, so nothing is lost);
* ``for`` ops whose body is empty, when the loop provably ends
  (:func:`iron.core.analysis.for_terminates`).  A ``loop`` is never removed:
  one with an empty body runs forever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.analysis import for_terminates, kernel_blocks, use_counts
from ...core.ir import Block, Kernel, Op
from ...core.ops import OPS, REMOVABLE_OPS
from ._rewrite import own

if TYPE_CHECKING:
    from ..pipeline import PassContext



def run(kernel: Kernel, ctx: "PassContext | None" = None) -> Kernel:
    k = own(kernel, ctx)
    while _sweep(k):
        pass
    return k


def _sweep(k: Kernel) -> bool:
    """One round over the whole kernel; True when something was removed."""
    bodies = [k.body, *(f.body for f in k.functions.values())]
    changed = False
    for body in bodies:
        changed |= _drop_unreachable(body)
    changed |= _drop_write_only_vars(k)
    counts = use_counts(k)
    for body in bodies:
        changed |= _sweep_block(body, counts)
    return changed


def _drop_unreachable(b: Block) -> bool:
    changed = False
    for i, op in enumerate(b.ops):
        if OPS[op.opcode].terminator and i != len(b.ops) - 1:
            del b.ops[i + 1:]
            changed = True
            break
    for op in b.ops:
        for r in op.regions:
            changed |= _drop_unreachable(r)
    return changed


def _drop_write_only_vars(k: Kernel) -> bool:
    """Remove slots that are never loaded, and their stores."""
    loaded = set()
    slots = set()
    for block in kernel_blocks(k):
        for op in block.ops:
            if op.opcode == "var":
                slots.add(op.result)
            elif op.opcode == "var_load":
                loaded.add(op.operands[0])
    dead = slots - loaded
    if not dead:
        return False
    for block in kernel_blocks(k):
        block.ops = [op for op in block.ops
                     if not ((op.opcode == "var" and op.result in dead)
                             or (op.opcode == "var_store" and op.operands[0] in dead))]
    return True


def _sweep_block(b: Block, counts: dict) -> bool:
    """Remove dead ops walking backwards, so a use is dropped before its operands are looked at."""
    changed = False
    kept: list[Op] = []
    for op in reversed(b.ops):
        for r in op.regions:
            changed |= _sweep_block(r, counts)
        if _is_dead(op, counts):
            for v in op.operands:
                counts[v] -= 1
            changed = True
            continue
        kept.append(op)
    kept.reverse()
    b.ops = kept
    return changed


def _is_dead(op: Op, counts: dict) -> bool:
    if op.result is not None:
        if counts.get(op.result, 0):
            return False
        return OPS[op.opcode].pure or op.opcode in REMOVABLE_OPS
    if op.opcode == "if":
        return not op.regions[0].ops and not op.regions[1].ops
    if op.opcode == "for":
        return not op.regions[0].ops and for_terminates(op)
    return False

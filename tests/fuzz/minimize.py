"""Shrink a failing generated program: delete statements while the same disagreement remains.

Greedy, one statement at a time, innermost blocks last; a deletion that makes the program invalid
(a name used after its definition was deleted, a race) or makes the disagreement go away is undone.
Each try compiles and runs the program again, so this takes seconds per statement.
"""

from __future__ import annotations

import copy

from .differential import Outcome, check_program
from .kernelgen import Program, Stmt


def _signature(outcome: Outcome) -> set[tuple[str, str]]:
    """What disagrees: (backend, output) pairs, and (backend, "error")."""
    return {(m.backend, m.output) for m in outcome.mismatches} | {(b, "error") for b, _ in outcome.errors}


def _blocks(stmts: list[Stmt]) -> list[list[Stmt]]:
    """Every statement list of the tree, outermost first."""
    out = [stmts]
    for s in stmts:
        for b in s.blocks:
            out += _blocks(b)
    return out


def minimize(program: Program, backends: list[str], max_tries: int = 400) -> Outcome | None:
    """The outcome of the smallest program found that keeps ``program``'s disagreement (None if it has none)."""
    first = check_program(program, backends)
    want = _signature(first)
    if not want:
        return None
    best, best_outcome = copy.deepcopy(program), first
    tries = 0
    changed = True
    while changed and tries < max_tries:
        changed = False
        for block_index in range(len(_blocks(best.body))):
            k = 0
            while tries < max_tries:
                block = _blocks(best.body)[block_index] if block_index < len(_blocks(best.body)) else None
                if block is None or k >= len(block):
                    break
                if not block[k].removable:
                    k += 1
                    continue
                trial = copy.deepcopy(best)
                del _blocks(trial.body)[block_index][k]
                tries += 1
                outcome = check_program(trial, backends)
                if not outcome.invalid and want <= _signature(outcome):
                    best, best_outcome, changed = trial, outcome, True
                else:
                    k += 1
    return best_outcome

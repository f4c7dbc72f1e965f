"""Where the kernel's Python variables live: compile-time values, SSA values or ``var`` slots.

The rule (docs/language.md, "Variables"): a variable is an IR ``var`` slot
only when it must be, because its value flows across run-time control flow.

* Entering a run-time ``if``/``for``/``while``, every variable the construct
  assigns that is already bound moves into a slot (its current value is
  stored just before the construct).
* A variable first assigned inside a run-time construct gets a slot when it
  is read anywhere outside the branch or loop body assigning it; otherwise it
  stays an SSA value, local to that body.
* Everything else (in particular every variable assigned only in
  straight-line code, including the unrolled bodies of ``static_range`` and
  the taken branch of an ``if`` that folds) is rebound directly, so
  compile-time values stay compile-time values.

This module keeps the bindings and the region stack and answers the
syntactic questions the rule asks; the lowerer creates the slots.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass, field
from typing import Union

from ..core.ir import Value
from ..core.types import IRType
from .values import FValue


@dataclass
class Region:
    """A run-time region being lowered: the function body, an ``if`` branch or a loop body."""

    kind: str  # "function", "if", "loop"
    stmts: list[ast.stmt]
    parent: "Region | None" = None
    #: Names bound (not as slots) while lowering this region, to forget when it ends.
    created: set[str] = field(default_factory=set)

    @property
    def depth(self) -> int:
        return 0 if self.parent is None else self.parent.depth + 1


@dataclass(frozen=True)
class Slot:
    """A variable living in a ``var`` slot."""

    var: Value
    elem: IRType


@dataclass(frozen=True)
class Bound:
    """A variable bound directly to a value (compile-time or SSA) in ``region``."""

    value: FValue
    region: Region


@dataclass(frozen=True)
class Unavailable:
    """A name that must not be read here (a loop variable after its loop); ``reason`` says why."""

    reason: str


Binding = Union[Slot, Bound, Unavailable]


class Env:
    """The bindings of one function being lowered, and its stack of run-time regions."""

    def __init__(self, body: list[ast.stmt]):
        self.bindings: dict[str, Binding] = {}
        self.region = Region("function", body)
        self.facts = SyntaxFacts(body)

    def get(self, name: str) -> Binding | None:
        return self.bindings.get(name)

    def bind(self, name: str, value: FValue) -> None:
        self.bindings[name] = Bound(value, self.region)
        self.region.created.add(name)

    def bind_slot(self, name: str, slot: Slot) -> None:
        self.bindings[name] = slot

    def mark_unavailable(self, name: str, reason: str) -> None:
        self.bindings[name] = Unavailable(reason)

    def enter(self, kind: str, stmts: list[ast.stmt]) -> Region:
        self.region = Region(kind, stmts, self.region)
        return self.region

    def exit(self) -> None:
        """Leave the current region, forgetting the direct bindings made in it."""
        region = self.region
        assert region.parent is not None, "left the function region"
        for name in region.created:
            b = self.bindings.get(name)
            if isinstance(b, Bound) and b.region is region:
                del self.bindings[name]
        self.region = region.parent

    @property
    def at_top(self) -> bool:
        return self.region.parent is None

    def needs_slot_at_first_assignment(self, name: str) -> bool:
        """A variable first assigned in this run-time region is read outside it."""
        if self.at_top:
            return False
        return self.facts.loads(self.facts.body)[name] > self.facts.loads(self.region.stmts)[name]


class SyntaxFacts:
    """Name facts of statement lists (memoised by list identity; the AST outlives the lowering)."""

    def __init__(self, body: list[ast.stmt]):
        self.body = body
        self._loads: dict[int, Counter[str]] = {}
        self._assigned: dict[int, set[str]] = {}

    def loads(self, stmts: list[ast.stmt]) -> Counter[str]:
        """How often each name is read in ``stmts`` (``x += 1`` reads ``x``)."""
        key = id(stmts)
        if key not in self._loads:
            c: Counter[str] = Counter()
            for s in stmts:
                for node in ast.walk(s):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                        c[node.id] += 1
                    elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                        c[node.target.id] += 1
            self._loads[key] = c
        return self._loads[key]

    def assigned(self, stmts: list[ast.stmt]) -> set[str]:
        """Names assigned in ``stmts`` (at any depth), not counting ``for`` loop variables."""
        key = id(stmts)
        if key not in self._assigned:
            out: set[str] = set()
            for s in stmts:
                for node in ast.walk(s):
                    if isinstance(node, ast.Assign):
                        for t in node.targets:
                            out |= _target_names(t)
                    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                        out |= _target_names(node.target)
            self._assigned[key] = out
        return self._assigned[key]


def _target_names(t: ast.expr) -> set[str]:
    if isinstance(t, ast.Name):
        return {t.id}
    if isinstance(t, (ast.Tuple, ast.List)):
        out: set[str] = set()
        for e in t.elts:
            out |= _target_names(e)
        return out
    return set()  # a subscript or attribute target rebinds no name

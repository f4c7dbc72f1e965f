"""Uniformity analysis: which values and which control flow may differ between the threads of a group.

Every thread of a group must reach each ``barrier`` together (docs/ir.md).
A barrier placed where only some threads go is a classic GPU bug that hangs
or corrupts on hardware; the frontend rejects the cases this analysis can
prove, before anything runs.

A value is *varying* when it may differ between the threads of one group:

* the thread-index ops (``program_id``, ``thread_id``, ``lane_id``,
  ``simd_group_id``) and every atomic (each thread sees a different old value);
* any op with a varying operand: arithmetic, loads from a varying index
  (a load from a uniform index reads one address and is uniform),
  subgroup ops on varying values (uniform within a subgroup, not across the
  group), calls with varying arguments or whose helper computes varying
  results;
* a ``var_load`` of a slot that is stored a varying value, or stored under
  varying control flow;
* a ``tuple_get`` of a varying element: a tuple's elements are tracked one by
  one (``tuple_make``, and a helper's tuple result, element by element), so a
  helper returning a thread index beside a group-wide count leaves the count
  uniform;
* the induction variable of a ``for`` with varying bounds.

Control is *varying* inside an ``if`` with a varying condition, inside a
loop with varying bounds or that some threads leave early (a ``break``
under varying control), after a ``continue`` some threads take (for the rest
of that iteration), and after a ``return`` some threads take (for the rest
of the kernel).  A ``barrier`` under varying control is reported, as is a
call under varying control of a helper that contains one.

The analysis is a fixpoint over the structured IR (slots stored late in a
loop feed loads early in the next iteration).  It is sound for what it
reports: each report names the op that makes control depend on the thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import Block, Function, Kernel, Op, Value
from .ops import ATOMIC_OPS, VARYING_INDEX_OPS



@dataclass(frozen=True)
class DivergentBarrier:
    """A barrier that only some threads of a group may reach.

    ``cause`` is the op that makes control depend on the thread (an ``if``,
    ``for``, ``loop``, or the ``if`` around a ``break``/``continue``/``return``),
    ``reason`` says how in words.  When the barrier sits in a helper called
    under divergent control, ``call`` is that call (the place to fix).
    """

    barrier: Op
    cause: Op
    reason: str
    call: Op | None = None

    @property
    def builtin(self) -> str:
        """The barrier as the kernel spells it."""
        return _SPELLED.get(self.barrier.opcode, self.barrier.opcode) + "()"


_SPELLED = {"abar_alloc": "async_barriers", "abar_wait": "barrier_wait", "warp_role": "warp_roles",
            "role_barrier": "role_barrier"}


@dataclass(frozen=True)
class _Cause:
    op: Op
    reason: str


#: Ops every thread of a group reaches together on every target: ``barrier``, making asynchronous
#: barriers (one thread initialises them, then the group meets), and splitting the group into warp roles
#: (each warpgroup sets its register budget together).
GROUP_BARRIERS = frozenset({"barrier", "abar_alloc", "warp_role"})


def find_divergent_barriers(k: Kernel, opcodes: frozenset[str] = GROUP_BARRIERS) -> list[DivergentBarrier]:
    """Every op of ``opcodes`` in ``k`` (body and helpers) that provably may be reached by only some threads.

    A target without asynchronous barriers adds ``abar_wait``, which it runs as a group barrier.
    """
    return _Walker(k.functions, set(), {}, opcodes).analyse(k.body)[0]


def varying_values(k: Kernel) -> set[Value]:
    """The values of ``k``'s body that may differ between the threads of a group."""
    w = _Walker(k.functions, set(), {}, GROUP_BARRIERS)
    w.analyse(k.body)
    return set(w.varying)


#: What a helper's walk found for one pattern of varying arguments: whether its result varies, its
#: barrier reports, and (a tuple result) which elements vary.
_Summary = tuple[bool, list[DivergentBarrier], "tuple[bool, ...] | None"]


class _Walker:
    def __init__(self, functions: dict[str, Function], varying: set[Value],
                 memo: dict[tuple[str, tuple[bool, ...]], _Summary], barriers: frozenset[str]):
        self.functions = functions
        self.barriers = barriers
        self.varying: set[Value] = set(varying)
        self.varying_vars: set[Value] = set()
        self.memo = memo
        self.reports: list[DivergentBarrier] = []
        self.result_varying = False
        #: Per-element varyingness of tuple values (a tuple varies as a whole when any element does).
        self.elements: dict[Value, tuple[bool, ...]] = {}
        self.result_elements: tuple[bool, ...] | None = None

    def _size(self) -> tuple[int, int, int]:
        return len(self.varying), len(self.varying_vars), sum(sum(e) for e in self.elements.values())

    def analyse(self, body: Block) -> tuple[list[DivergentBarrier], bool]:
        """Iterate to the fixpoint; returns the reports and whether a ``return`` operand varies
        (``result_elements`` then says which elements of a tuple result do).

        A barrier keeps the cause found in the earliest iteration: later
        iterations add consequences of it (a slot stored after a divergent
        break varies, so the loop's own exit test does too), not better
        explanations.
        """
        first: dict[int, DivergentBarrier] = {}
        while True:
            size = self._size()
            self.reports = []
            self.result_varying = False
            self.result_elements = None
            self._block(body, None)
            for r in self.reports:
                first.setdefault(_report_key(r), r)
            if self._size() == size:
                return [first[_report_key(r)] for r in _dedupe(self.reports)], self.result_varying

    # ------------------------------------------------------------ control
    def _block(self, b: Block, cv: _Cause | None) -> dict[str, _Cause]:
        """Walk ``b`` under control ``cv``; return the divergent exits (break/continue/return) leaving it."""
        exits: dict[str, _Cause] = {}
        cur = cv
        for op in b.ops:
            opc = op.opcode
            if opc == "if":
                c = cur or (_Cause(op, "inside an if whose condition depends on the thread")
                            if op.operands[0] in self.varying else None)
                inner = self._merge(self._block(op.regions[0], c), self._block(op.regions[1], c))
                cur = cur or _after_exit(inner)
                _add(exits, inner)
            elif opc in ("for", "loop"):
                cur = self._loop(op, cur, exits)
            elif opc in ("break", "continue", "return"):
                if opc == "return" and op.operands and op.operands[0] in self.varying:
                    self.result_varying = True
                if opc == "return" and op.operands and op.operands[0] in self.elements:
                    self.result_elements = self.elements[op.operands[0]]
                if cur is not None:
                    exits.setdefault(opc, _Cause(cur.op, _EXIT_REASONS[opc]))
            else:
                self._op(op, cur)
        return exits

    def _loop(self, op: Op, cur: _Cause | None, exits: dict[str, _Cause]) -> _Cause | None:
        """Walk a loop; return the control state after it."""
        c = cur
        if op.opcode == "for":
            if any(v in self.varying for v in op.operands):
                c = c or _Cause(op, "inside a loop whose bounds depend on the thread")
                self.varying.add(op.regions[0].args[0])
        inner = self._block(op.regions[0], c)
        leaving = inner.get("break") or inner.get("return")
        if leaving is not None and c is None:
            # Some threads leave early: the iteration count, so the whole body, depends on the thread.
            c = _Cause(leaving.op, "inside a loop that only some threads leave early")
            inner = self._block(op.regions[0], c)
        if "return" in inner:
            exits.setdefault("return", inner["return"])
            return cur or inner["return"]
        return cur

    @staticmethod
    def _merge(a: dict[str, _Cause], b: dict[str, _Cause]) -> dict[str, _Cause]:
        out = dict(a)
        for k, v in b.items():
            out.setdefault(k, v)
        return out

    # ------------------------------------------------------------ values
    def _op(self, op: Op, cv: _Cause | None) -> None:
        opc = op.opcode
        if opc in self.barriers:
            if cv is not None:
                self.reports.append(DivergentBarrier(op, cv.op, cv.reason))
            if op.result is None:
                return
        if opc == "var_store":
            if cv is not None or op.operands[1] in self.varying:
                self.varying_vars.add(op.operands[0])
            return
        if opc == "call":
            self._call(op, cv)
            return
        if op.result is None:
            return
        if opc == "var_load":
            vary = op.operands[0] in self.varying_vars
        elif opc == "tuple_make":
            self.elements[op.result] = tuple(v in self.varying for v in op.operands)
            vary = any(self.elements[op.result])
        elif opc == "tuple_get" and op.operands[0] in self.elements:
            vary = self.elements[op.operands[0]][op.attrs["index"]]
        else:
            vary = opc in VARYING_INDEX_OPS or opc in ATOMIC_OPS or any(v in self.varying for v in op.operands)
        if vary:
            self.varying.add(op.result)

    def _call(self, op: Op, cv: _Cause | None) -> None:
        f = self.functions.get(op.attrs["callee"])
        if f is None:
            return
        flags = tuple(v in self.varying for v in op.operands)
        key = (f.name, flags)
        if key not in self.memo:
            self.memo[key] = (False, [], None)  # a placeholder: helpers never recurse, but stay finite if one did
            inner = _Walker(self.functions, {p.value for p, vary in zip(f.params, flags) if vary}, self.memo,
                            self.barriers)
            reports, result_varying = inner.analyse(f.body)
            self.memo[key] = (result_varying, reports, inner.result_elements)
        result_varying, reports, elements = self.memo[key]
        for r in reports:
            self.reports.append(r if r.call is not None else DivergentBarrier(r.barrier, r.cause, r.reason, op))
        if cv is not None:
            barrier = _first_barrier(f.body, self.functions, set(), self.barriers)
            if barrier is not None:
                self.reports.append(DivergentBarrier(barrier, cv.op, cv.reason, op))
        if op.result is not None and elements is not None:
            # The helper ran with these arguments' varyingness: its tuple's elements are exact.
            self.elements[op.result] = elements
            if any(elements):
                self.varying.add(op.result)
        elif op.result is not None and (result_varying or any(flags)):
            self.varying.add(op.result)


_EXIT_REASONS = {
    "break": "inside a loop that only some threads leave early",
    "continue": "after a continue that only some threads take",
    "return": "after a return that only some threads take",
}


def _after_exit(exits: dict[str, _Cause]) -> _Cause | None:
    """Control after an ``if`` some of whose threads left by break/continue/return."""
    for kind in ("return", "break", "continue"):
        if kind in exits:
            return exits[kind]
    return None


def _add(into: dict[str, _Cause], new: dict[str, _Cause]) -> None:
    for k, v in new.items():
        into.setdefault(k, v)


def _first_barrier(b: Block, functions: dict[str, Function], seen: set[str], barriers: frozenset[str]) -> Op | None:
    for op in b.walk():
        if op.opcode in barriers:
            return op
        if op.opcode == "call" and op.attrs["callee"] not in seen:
            f = functions.get(op.attrs["callee"])
            if f is not None:
                found = _first_barrier(f.body, functions, seen | {f.name}, barriers)
                if found is not None:
                    return found
    return None


def _report_key(r: DivergentBarrier) -> int:
    return id(r.barrier) if r.call is None else id(r.call)


def _dedupe(reports: list[DivergentBarrier]) -> list[DivergentBarrier]:
    seen: set[int] = set()
    out = []
    for r in reports:
        key = _report_key(r)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out

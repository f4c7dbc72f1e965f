"""Random Iron kernels from a seed, for differential fuzzing of the backends (docs/fuzzing.md).

A generated program is the *source* of a DSL kernel (``fuzz_kernel``), so a mismatch is reported as
Python text that can be saved and re-run.  What it may contain is a :class:`Domain`: a list of
switches, each naming one kind of construct or one class of values, so the domain can be widened
as the backends' documented capabilities grow (docs/fuzzing.md lists them).

Every value in a program is one of two classes:

* **exact**: integer arithmetic, and float ``+ - * / sqrt fma``, ``min max abs neg``, the rounding
  functions, casts, selects, shared memory, shuffles and order-independent subgroup reductions.
  These are correctly rounded (or exact) on the interpreter, so every backend must give the same
  bits (signed zeros compared only with ``Domain.signed_zero``); they are stored to ``fo``, ``io``,
  ``uo`` and ``ho``;
* **approximate**: one transcendental function (``exp``, ``sin``, ...) applied to an exact value, on
  a domain where the function is well conditioned; stored only to ``to`` and judged with the
  tolerance :data:`APPROX` derives for that function.

Values stay finite by construction: each expression carries a static bound on its magnitude, and a
float result whose bound passes its dtype's limit (:data:`LIMIT`) is clamped; integer operations that
could overflow a signed type are computed in ``u32`` (signed overflow is undefined in CUDA C++);
divisors are ``abs(y) + 1`` or ``(y & 15) + 1``.  Loops run at most ``Domain.max_trip`` iterations.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, fields, replace

import numpy as np

#: Threads per group, groups per launch.  The grid is a whole number of groups (barriers need it).
GROUP = 64
GROUPS = 4
THREADS = GROUP * GROUPS
#: Output slots per thread in each output tensor (element ``i * SLOTS + k`` belongs to thread ``i``).
SLOTS = 8
APPROX_SLOTS = 4
#: Elements of each input tensor (a power of two: data-dependent indices are masked into it).
INPUT_SIZE = 512
#: The widest subgroup a program may assume: shuffle masks and lanes stay below the narrowest (lavapipe's 8).
MIN_SUBGROUP = 8

#: Float magnitudes are kept within these (f16: a product of two stays below f16's 65504).
LIMIT = {"f32": float(2**20), "f16": 128.0}
INT_MAX = {"i32": 2**31, "u32": 2**32 - 1}
#: Approximate functions: (source template of the argument ``{x}``, rtol, atol).  The relative part is the
#: harness's f32 allowance for GPU math libraries (two roundings' worth: docs/runner.md), the absolute part
#: covers results near a zero of the function, whose GPU error is bounded relative to the argument.
APPROX: dict[str, tuple[str, float, float]] = {
    "exp": ("exp(min(max({x}, -20.0), 20.0))", 2e-6, 0.0),
    "exp2": ("exp2(min(max({x}, -30.0), 30.0))", 2e-6, 0.0),
    # Vulkan bounds log and log2 by an absolute 2^-21 for arguments in [0.5, 2] (NVIDIA's driver on the H200:
    # log2(1 + 9.46e-6) off by 1.1e-7, fuzzer seeds 1035, 1055, 1224).
    "log": ("log(abs({x}) + 1.0)", 2e-6, 2.0**-21),
    "log2": ("log2(abs({x}) + 1.0)", 2e-6, 2.0**-21),
    "sin": ("sin(min(max({x}, -100.0), 100.0))", 2e-6, 2e-6),
    "cos": ("cos(min(max({x}, -100.0), 100.0))", 2e-6, 2e-6),
    "tanh": ("tanh(min(max({x}, -10.0), 10.0))", 2e-6, 1e-7),
    "atan": ("atan({x})", 2e-6, 1e-7),
    "erf": ("erf(min(max({x}, -5.0), 5.0))", 2e-6, 1e-7),
    "rsqrt": ("rsqrt(abs({x}) + 1.0)", 2e-6, 0.0),
}


@dataclass(frozen=True)
class Domain:
    """What generated programs may contain.  Each switch widens the domain by one kind of construct."""

    #: i32 / u32 arithmetic, bit operations, shifts, division and remainder, narrow-int round trips.
    ints: bool = True
    #: f16 values (arithmetic rounded once per operation on every backend).
    f16: bool = True
    #: Float ``/``, ``sqrt`` and ``%``: correctly rounded on the interpreter, lavapipe and CUDA; Vulkan
    #: itself promises only 2.5 ulp, so turn this off for a Vulkan driver that is not exact.
    float_division: bool = True
    #: ``for`` / ``while`` loops with at most ``max_trip`` iterations, ``break`` / ``continue``.
    loops: bool = True
    max_trip: int = 6
    max_depth: int = 2
    #: Shared memory exchanges between the threads of a group, with ``barrier()``.
    shared: bool = True
    #: Subgroup reductions, shuffles and broadcasts (in uniform control flow only).
    subgroups: bool = True
    #: Loads at data-dependent (masked, in-bounds) indices.
    gathers: bool = True
    #: Transcendental functions, judged with a tolerance (:data:`APPROX`).
    approx: bool = True
    #: ``atan`` among them (off for a backend whose atan is past the f32 allowance; lavapipe's own was ~30 ulp,
    #: the GLSL emitter now prints ``iron_atan2(x, 1.0)``, 4 ulp).
    atan: bool = True
    #: i32 arithmetic allowed to overflow (defined on the interpreter and SPIR-V; undefined in CUDA C++).
    signed_overflow: bool = False
    #: Compare the sign of zero (Vulkan does not yet request SignedZeroInfNanPreserve: issue 16, item 6).
    signed_zero: bool = False
    #: Statements per block.
    statements: tuple[int, int] = (8, 16)

    @classmethod
    def parse(cls, text: str) -> "Domain":
        """``"loops=0,max_trip=3"`` -> a Domain with those switches changed (the script's ``--domain``)."""
        d = cls()
        if not text:
            return d
        known = {f.name: f for f in fields(cls)}
        changes = {}
        for item in text.split(","):
            name, _, value = item.partition("=")
            name = name.strip()
            if name not in known or name == "statements":
                names = ", ".join(n for n in known if n != "statements")
                raise ValueError(f"unknown domain switch {name!r}; known: {names}")
            current = getattr(d, name)
            if isinstance(current, bool):
                changes[name] = value.strip().lower() in ("1", "true", "yes", "on", "")
            else:
                changes[name] = int(value)
        return replace(d, **changes)

    def describe(self) -> str:
        return ",".join(f"{f.name}={int(v) if isinstance(v, bool) else v}" for f in fields(self)
                        if (v := getattr(self, f.name)) != f.default)


@dataclass
class Var:
    name: str
    type: str          # "f32" | "f16" | "i32" | "u32"
    bound: float       # |value| <= bound
    uniform: bool      # the same value in every thread of a group
    mutable: bool = False


@dataclass
class Stmt:
    """One statement and the blocks under it (``if``/``else``/loop bodies): the unit the minimiser deletes."""

    lines: list[str]
    blocks: list[list["Stmt"]] = field(default_factory=list)
    #: The header line of each block after the first (``else:``).
    block_heads: list[str] = field(default_factory=list)
    removable: bool = True


@dataclass
class Program:
    seed: int
    domain: Domain
    prologue: list[Stmt]
    body: list[Stmt]
    uses_subgroups: bool
    #: Approximate output slot -> function name (its tolerance is APPROX[name]).
    approx: dict[int, str]

    def source(self) -> str:
        return render(self)


HEADER = """\
# Generated by tests/fuzz/kernelgen.py: seed {seed}, domain [{domain}].
# Launch: grid ({threads},), group ({group},); inputs from tests/fuzz/kernelgen.make_inputs({seed}).
from iron import In, Tensor, kernel, f16, f32, i8, i16, i32, u8, u16, u32
from iron.lang import (atan, barrier, ceil, cos, erf, exp, exp2, floor, fma, group_id, lane_id, log, log2,
                       program_id, round, rsqrt, select, shared, simd_broadcast, simd_max, simd_min,
                       simd_shuffle, simd_shuffle_xor, simd_sum, sin, sqrt, tanh, thread_id, trunc)


@kernel(fp_contract=False)
def fuzz_kernel(fa: In[f32], ha: In[f16], ia: In[i32], ua: In[u32], fo: Tensor[f32], ho: Tensor[f16],
                io: Tensor[i32], uo: Tensor[u32], to: Tensor[f32], n: int):
"""


def render(program: Program) -> str:
    out = [HEADER.format(seed=program.seed, domain=program.domain.describe() or "default", threads=THREADS,
                         group=GROUP)]
    _render_block(program.prologue + program.body, 1, out)
    return "".join(out)


def _render_block(stmts: list[Stmt], depth: int, out: list[str]) -> None:
    pad = "    " * depth
    if not stmts:
        out.append(pad + "pass\n")
    for s in stmts:
        for line in s.lines:
            out.append(pad + line + "\n")
        for k, block in enumerate(s.blocks):
            if k:
                out.append(pad + s.block_heads[k - 1] + "\n")
            _render_block(block, depth + 1, out)


def make_inputs(seed: int) -> dict[str, np.ndarray]:
    """The program's inputs and initial outputs for ``seed`` (finite; small integers and wide ones mixed)."""
    rng = np.random.default_rng([seed, 0xF022])
    fa = (rng.standard_normal(INPUT_SIZE) * rng.choice([0.25, 2.0, 30.0], INPUT_SIZE)).astype(np.float32)
    fa[rng.random(INPUT_SIZE) < 0.1] = np.float32(0.0)
    fa[rng.random(INPUT_SIZE) < 0.1] = rng.integers(-8, 9, INPUT_SIZE)[:1].astype(np.float32)
    ha = (rng.standard_normal(INPUT_SIZE) * 4).astype(np.float16)
    wide = rng.integers(-2**31 + 1, 2**31, INPUT_SIZE, dtype=np.int64)
    small = rng.integers(-40, 41, INPUT_SIZE)
    ia = np.where(rng.random(INPUT_SIZE) < 0.3, wide, small).astype(np.int32)
    ua = np.where(rng.random(INPUT_SIZE) < 0.3, rng.integers(0, 2**32, INPUT_SIZE, dtype=np.uint64),
                  rng.integers(0, 60, INPUT_SIZE)).astype(np.uint32)
    return {"fa": fa, "ha": ha, "ia": ia, "ua": ua,
            "fo": np.full(THREADS * SLOTS, -7.0, np.float32), "ho": np.full(THREADS * SLOTS, -7.0, np.float16),
            "io": np.full(THREADS * SLOTS, -7, np.int32), "uo": np.full(THREADS * SLOTS, 7, np.uint32),
            "to": np.full(THREADS * APPROX_SLOTS, -7.0, np.float32)}


ARG_ORDER = ("fa", "ha", "ia", "ua", "fo", "ho", "io", "uo", "to")
OUTPUTS = ("fo", "ho", "io", "uo", "to")


def _fconst(rng: random.Random, ty: str) -> tuple[str, float]:
    v = rng.choice([0.5, 1.5, -2.0, 3.0, 0.25, -0.75, 10.0, 0.125] + ([0.1, 1e-3, 7.0e3] if ty == "f32" else []))
    return (repr(v) if v >= 0 else f"({v!r})"), abs(v)


class Generator:
    """Builds one :class:`Program` from a seed."""

    def __init__(self, seed: int, domain: Domain | None = None):
        self.seed = seed
        self.domain = domain or Domain()
        self.rng = random.Random(seed)
        self.counter = 0
        self.uses_subgroups = False
        self.types = ["f32"] + (["f16"] if self.domain.f16 else []) + (["i32", "u32"] if self.domain.ints else [])

    # ------------------------------------------------------------------ the program
    def build(self) -> Program:
        d, rng = self.domain, self.rng
        prologue = [Stmt(["i = program_id(0)", "t = thread_id(0)", "g = group_id(0)"], removable=False)]
        scope = [Var("i", "i32", THREADS, False), Var("t", "i32", GROUP, False), Var("g", "i32", GROUPS, True),
                 Var("n", "i32", THREADS, True)]
        if d.shared:
            prologue.append(Stmt([f"sf = shared(f32, {GROUP})", f"si = shared(i32, {GROUP})"], removable=False))
        accs = [("af", "f32", "0.0"), ("ai", "i32", "0")]
        if d.f16:
            accs.append(("ah", "f16", "f16(0.0)"))
        if d.ints:
            accs.append(("au", "u32", "u32(0)"))
        accs = [a for a in accs if a[1] in self.types]
        for name, ty, init in accs:
            prologue.append(Stmt([f"{name} = {init}"], removable=False))
            # never uniform: an update in a loop body may make it differ between threads in a later iteration
            scope.append(Var(name, ty, LIMIT.get(ty, INT_MAX.get(ty, 0)), False, mutable=True))
        body = self.block(scope, depth=0, uniform=True, in_loop=False)
        body += self.epilogue(scope)
        return Program(self.seed, d, prologue, body, self.uses_subgroups, self.approx_slots)

    def epilogue(self, scope: list[Var]) -> list[Stmt]:
        """Store the accumulators and a few live values to the thread's slots; the approximate outputs."""
        rng, out = self.rng, []
        slot = {"f32": SLOTS - 1, "f16": SLOTS - 1, "i32": SLOTS - 1, "u32": SLOTS - 1}
        tensor = {"f32": "fo", "f16": "ho", "i32": "io", "u32": "uo"}
        # the accumulators, then the values computed last (thread indices only where nothing else is left)
        live = [v for v in scope if v.mutable] + [v for v in reversed(scope) if not v.mutable and v.name[0] == "v"]
        for v in live:
            if slot[v.type] >= SLOTS // 2 - 1:
                out.append(Stmt([f"{tensor[v.type]}[i * {SLOTS} + {slot[v.type]}] = {v.name}"]))
                slot[v.type] -= 1
        for ty in self.types:  # the slots left: more expressions of what is in scope
            while slot[ty] >= SLOTS // 2 - 1:
                text, _ = self.expr(ty, scope, 3)
                out.append(Stmt([f"{tensor[ty]}[i * {SLOTS} + {slot[ty]}] = {text}"]))
                slot[ty] -= 1
        self.approx_slots: dict[int, str] = {}
        if self.domain.approx:
            for k in range(APPROX_SLOTS):
                fn = rng.choice([f for f in sorted(APPROX) if f != "atan" or self.domain.atan])
                x, _ = self.expr("f32", scope, 2)
                self.approx_slots[k] = fn
                out.append(Stmt([f"to[i * {APPROX_SLOTS} + {k}] = {APPROX[fn][0].format(x=x)}"]))
        return out

    # ------------------------------------------------------------------ statements
    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def block(self, scope: list[Var], depth: int, uniform: bool, in_loop: bool) -> list[Stmt]:
        lo, hi = self.domain.statements
        count = self.rng.randint(lo, hi) if depth == 0 else self.rng.randint(1, max(2, hi // 3))
        scope = list(scope)
        out: list[Stmt] = []
        for _ in range(count):
            s = self.statement(scope, depth, uniform, in_loop)
            if s is not None:
                out.append(s)
        return out

    def statement(self, scope: list[Var], depth: int, uniform: bool, in_loop: bool) -> Stmt | None:
        d, rng = self.domain, self.rng
        kinds = ["let"] * 5 + ["update"] * 3 + ["store"] * 2
        if depth < d.max_depth:
            kinds += ["if"] * 2
            if d.loops:
                kinds += ["for", "for", "while"]
        if uniform and d.shared:
            kinds += ["exchange"] * 2
        if uniform and d.subgroups:
            kinds += ["subgroup"] * 2
        kind = rng.choice(kinds)
        if kind == "let":
            ty = rng.choice(self.types)
            text, bound, uni = self.expr_u(ty, scope, rng.randint(1, 3))
            name = self.fresh()
            scope.append(Var(name, ty, bound, uni))
            return Stmt([f"{name} = {text}"])
        if kind == "update":
            targets = [v for v in scope if v.mutable]
            v = rng.choice(targets)
            text, bound, _ = self.expr_u(v.type, scope, rng.randint(1, 3))
            return Stmt([f"{v.name} = {self.fit(text, bound, v)}"])
        if kind == "store":
            ty = rng.choice(self.types)
            tensor = {"f32": "fo", "f16": "ho", "i32": "io", "u32": "uo"}[ty]
            text, _, _ = self.expr_u(ty, scope, 2)
            return Stmt([f"{tensor}[i * {SLOTS} + {rng.randrange(SLOTS - 1)}] = {text}"])
        if kind == "if":
            cond, uni = self.cond(scope, 2)
            inner_uniform = uniform and uni
            blocks = [self.block(scope, depth + 1, inner_uniform, in_loop)]
            heads = []
            if rng.random() < 0.5:
                blocks.append(self.block(scope, depth + 1, inner_uniform, in_loop))
                heads.append("else:")
            return Stmt([f"if {cond}:"], blocks, heads)
        if kind in ("for", "while"):
            return self.loop(kind, scope, depth, uniform)
        if kind == "exchange":
            return self.exchange(scope)
        return self.subgroup(scope)

    def loop(self, kind: str, scope: list[Var], depth: int, uniform: bool) -> Stmt:
        d, rng = self.domain, self.rng
        trip = rng.randint(0, d.max_trip)
        j = self.fresh("j")
        if kind == "for":
            shape = rng.choice(["const", "const", "step", "uniform", "varying"])
            if shape == "const":
                head, uni = f"for {j} in range({trip}):", True
            elif shape == "step":
                start = rng.randint(-3, 3)
                step = rng.choice([2, 3, -1, -2])
                stop = start + step * trip
                head, uni = f"for {j} in range({start}, {stop}, {step}):", True
            elif shape == "uniform":  # a run-time bound every thread of the group agrees on
                head, uni = f"for {j} in range((n + g) % {trip + 1}):", True
            else:  # a run-time bound that differs between threads
                src, _, _ = self.expr_u("i32", scope, 1)
                head, uni = f"for {j} in range(({src}) & {max(1, 2 ** int(math.log2(max(trip, 1))) - 1)}):", False
            loop_var = Var(j, "i32", max(abs(trip) * 3 + 3, 8), uni)
            lines = [head]
        else:
            lines = [f"{j} = 0", f"while {j} < {trip}:"]
            uni = True
            loop_var = Var(j, "i32", trip + 1, True)
        exits = rng.random() < 0.3
        body_uniform = uniform and uni and not exits
        inner = scope + [loop_var]
        body = [Stmt([f"{j} += 1"], removable=False)] if kind == "while" else []
        body += self.block(inner, depth + 1, body_uniform, True)
        if exits:
            cond, _ = self.cond(inner, 1)
            at = rng.randint(0, len(body))
            if kind == "while":
                at = max(at, 1)  # after the counter's increment, or the loop would not end
            body.insert(at, Stmt([f"if {cond}:"], [[Stmt([rng.choice(["break", "continue"])])]]))
        return Stmt(lines, [body])  # a while loop's counter is declared by its first line

    def exchange(self, scope: list[Var]) -> Stmt:
        """A value through shared memory: every thread writes its slot, reads another's after a barrier."""
        rng = self.rng
        ty = rng.choice(["f32", "i32"] if self.domain.ints else ["f32"])
        arr = "sf" if ty == "f32" else "si"
        text, bound, _ = self.expr_u(ty, scope, 2)
        name = self.fresh()
        shift = rng.randrange(1, GROUP)
        read = rng.choice([f"(t + {shift}) % {GROUP}", f"{GROUP - 1} - t", f"t ^ {rng.randrange(1, GROUP)}"])
        scope.append(Var(name, ty, bound, False))
        return Stmt([f"{arr}[t] = {text}", "barrier()", f"{name} = {arr}[{read}]", "barrier()"])

    def subgroup(self, scope: list[Var]) -> Stmt:
        rng = self.rng
        self.uses_subgroups = True
        ty = rng.choice(self.types)
        text, bound, _ = self.expr_u(ty, scope, 2)
        name = self.fresh()
        op = rng.choice(["max", "min", "sum", "xor", "broadcast", "shuffle"])
        if op in ("max", "min"):
            expr, b = f"simd_{op}({text})", bound
        elif op == "sum":
            if ty in ("f32", "f16"):
                # integer values with a small sum: exact in any order of summation
                lim = 1000.0 if ty == "f32" else 16.0
                expr, b = f"simd_sum(floor(min(max({text}, -{lim}), {lim})))", lim * 64
                if ty == "f16":
                    b = 1024.0
            elif ty == "i32":
                expr, b = f"simd_sum(({text}) % 100000)", 100000 * 64
            else:
                expr, b = f"simd_sum({text})", INT_MAX["u32"]
        elif op == "xor":
            expr, b = f"simd_shuffle_xor({text}, {rng.randrange(1, MIN_SUBGROUP)})", bound
        elif op == "broadcast":
            expr, b = f"simd_broadcast({text}, {rng.randrange(MIN_SUBGROUP)})", bound
        else:
            expr, b = f"simd_shuffle({text}, (lane_id() + {rng.randrange(1, MIN_SUBGROUP)}) % {MIN_SUBGROUP})", bound
        scope.append(Var(name, ty, b, False))
        return Stmt([f"{name} = {expr}"])

    def fit(self, text: str, bound: float, v: Var) -> str:
        """``text`` made to fit variable ``v``'s declared bound."""
        if v.type in LIMIT and bound > v.bound:
            return f"min(max({text}, -{v.bound!r}), {v.bound!r})"
        return text

    # ------------------------------------------------------------------ expressions
    def expr(self, ty: str, scope: list[Var], depth: int) -> tuple[str, float]:
        text, bound, _ = self.expr_u(ty, scope, depth)
        return text, bound

    def expr_u(self, ty: str, scope: list[Var], depth: int) -> tuple[str, float, bool]:
        """(source, magnitude bound, uniform) of a random expression of type ``ty``."""
        text, bound, uni = self._expr(ty, scope, depth)
        if ty in LIMIT and bound > LIMIT[ty]:
            lim = LIMIT[ty]
            return f"min(max({text}, -{lim!r}), {lim!r})", lim, uni
        return text, bound, uni

    def leaf(self, ty: str, scope: list[Var]) -> tuple[str, float, bool]:
        rng = self.rng
        vars_ = [v for v in scope if v.type == ty]
        r = rng.random()
        if vars_ and r < 0.55:
            v = rng.choice(vars_)
            return v.name, v.bound, v.uniform
        if r < 0.85:
            arr = {"f32": "fa", "f16": "ha", "i32": "ia", "u32": "ua"}[ty]
            bound = {"f32": 1e3, "f16": 65504.0, "i32": 2.0**31, "u32": INT_MAX["u32"]}[ty]
            if ty == "f32":
                bound = float(2**14)  # make_inputs: |fa| < 30 * 7 sigma, far below this
            if ty == "f16":
                bound = 64.0
            choice = rng.random()
            if self.domain.gathers and choice < 0.3:
                idx, _, uni = self._expr("i32", scope, 0) if self.domain.ints else ("i", 0, False)
                return f"{arr}[({idx}) & {INPUT_SIZE - 1}]", bound, uni
            if choice < 0.45:
                return f"{arr}[g]", bound, True
            return f"{arr}[(i + {rng.randrange(INPUT_SIZE)}) % {INPUT_SIZE}]", bound, False
        if ty in LIMIT:
            c, b = _fconst(rng, ty)
            return (c if ty == "f32" else f"f16({c})"), b, True
        v = rng.choice([0, 1, 3, 7, 255, 1000, 65535] + ([-1, -9] if ty == "i32" else []))
        return (f"{ty}({v})" if v >= 0 else f"i32({v})"), abs(v), True

    def _expr(self, ty: str, scope: list[Var], depth: int) -> tuple[str, float, bool]:
        if depth <= 0 or self.rng.random() < 0.25:
            return self.leaf(ty, scope)
        if ty in LIMIT:
            return self._float(ty, scope, depth)
        return self._int(ty, scope, depth)

    def _float(self, ty: str, scope: list[Var], depth: int) -> tuple[str, float, bool]:
        rng, d = self.rng, self.domain
        sub = lambda: self.expr_u(ty, scope, depth - 1)
        ops = ["add", "sub", "mul", "fma", "minmax", "absneg", "round", "select", "const", "cast"]
        if d.float_division:
            ops += ["div", "sqrt", "rem"]
        op = rng.choice(ops)
        if op in ("add", "sub", "mul"):
            (a, ba, ua), (b, bb, ub) = sub(), sub()
            sym = {"add": "+", "sub": "-", "mul": "*"}[op]
            return f"({a} {sym} {b})", (ba * bb if op == "mul" else ba + bb), ua and ub
        if op == "const":
            (a, ba, ua) = sub()
            c, bc = _fconst(rng, ty)
            sym = rng.choice(["+", "-", "*"])
            return f"({a} {sym} {c})", (ba * bc if sym == "*" else ba + bc), ua
        if op == "fma":
            (a, ba, ua), (b, bb, ub), (c, bc, uc) = sub(), sub(), sub()
            return f"fma({a}, {b}, {c})", ba * bb + bc, ua and ub and uc
        if op == "minmax":
            (a, ba, ua), (b, bb, ub) = sub(), sub()
            return f"{rng.choice(['min', 'max'])}({a}, {b})", max(ba, bb), ua and ub
        if op == "absneg":
            a, ba, ua = sub()
            return (f"abs({a})" if rng.random() < 0.5 else f"(-{a})"), ba, ua
        if op == "round":
            a, ba, ua = sub()
            return f"{rng.choice(['floor', 'ceil', 'round', 'trunc'])}({a})", ba + 1, ua
        if op == "select":
            cond, uc = self.cond(scope, depth - 1)
            (a, ba, ua), (b, bb, ub) = sub(), sub()
            if rng.random() < 0.5:
                return f"select({cond}, {a}, {b})", max(ba, bb), uc and ua and ub
            return f"({a} if {cond} else {b})", max(ba, bb), uc and ua and ub
        if op == "div":
            (a, ba, ua), (b, _, ub) = sub(), sub()
            return f"({a} / (abs({b}) + 1.0))", ba, ua and ub
        if op == "rem":
            (a, ba, ua), (b, _, ub) = sub(), sub()
            return f"({a} % (abs({b}) + 1.0))", ba, ua and ub
        if op == "sqrt":
            a, ba, ua = sub()
            return f"sqrt(abs({a}))", max(1.0, math.sqrt(ba)), ua
        # casts
        others = [t for t in self.types if t != ty]
        src = rng.choice(others) if others else ty
        a, ba, ua = self.expr_u(src, scope, depth - 1)
        if src in LIMIT:  # f32 <-> f16: the narrowing one clamped into f16's range first
            if ty == "f16":
                lim = LIMIT["f16"]
                return f"f16(min(max({a}, -{lim!r}), {lim!r}))", min(ba, lim), ua
            return f"f32({a})", ba, ua
        if ty == "f16":  # an integer past f16's range would round to infinity: clamped first
            lim = int(LIMIT["f16"])
            return (f"f16(min(max({a}, -{lim}), {lim}))" if src == "i32" else f"f16(min({a}, {lim}))"), lim, ua
        return f"{ty}({a})", ba, ua  # from an integer: rounded to nearest, then clamped by the caller

    def _int(self, ty: str, scope: list[Var], depth: int) -> tuple[str, float, bool]:
        rng, d = self.rng, self.domain
        sub = lambda: self.expr_u(ty, scope, depth - 1)
        top = INT_MAX[ty]
        op = rng.choice(["add", "sub", "mul", "bit", "bit", "shl", "shr", "div", "rem", "minmax", "unary",
                         "select", "narrow", "cast", "const"])
        if op in ("add", "sub", "mul"):
            (a, ba, ua), (b, bb, ub) = sub(), sub()
            sym = {"add": "+", "sub": "-", "mul": "*"}[op]
            bound = ba * bb if op == "mul" else ba + bb
            if ty == "i32" and bound >= 2**31 - 1 and not d.signed_overflow:
                return f"i32(u32({a}) {sym} u32({b}))", top, ua and ub
            return f"({a} {sym} {b})", min(bound, top), ua and ub
        if op == "const":
            a, ba, ua = sub()
            c = rng.choice([1, 3, 7, 12, 255, 4096])
            sym = rng.choice(["+", "*", "&", "|", "^"])
            bound = {"+": ba + c, "*": ba * c}.get(sym, max(ba, c) * 2 if sym != "&" else c)
            if ty == "i32" and sym in "+*" and bound >= 2**31 - 1 and not d.signed_overflow:
                return f"i32(u32({a}) {sym} u32({c}))", top, ua
            return f"({a} {sym} {c})", min(bound, top), ua
        if op == "bit":
            (a, ba, ua), (b, bb, ub) = sub(), sub()
            sym = rng.choice(["&", "|", "^"])
            widest = 2.0 ** math.ceil(math.log2(max(ba, bb) + 1))
            bound = top if ty == "u32" else (widest if sym != "&" else max(ba, bb))
            return f"({a} {sym} {b})", min(bound, top), ua and ub
        if op == "shl":
            (a, _, ua), (b, _, ub) = sub(), sub()
            if ty == "i32" and not d.signed_overflow:
                return f"i32(u32({a}) << u32({b}))", top, ua and ub
            return f"({a} << {b})", top, ua and ub
        if op == "shr":
            (a, ba, ua), (b, _, ub) = sub(), sub()
            return f"({a} >> {b})", ba, ua and ub
        if op in ("div", "rem"):
            (a, ba, ua), (b, bb, ub) = sub(), sub()
            sym = "//" if op == "div" else "%"
            return f"({a} {sym} (({b} & 15) + 1))", (ba if op == "div" else 16), ua and ub
        if op == "minmax":
            (a, ba, ua), (b, bb, ub) = sub(), sub()
            return f"{rng.choice(['min', 'max'])}({a}, {b})", max(ba, bb), ua and ub
        if op == "unary":
            a, ba, ua = sub()
            if ty == "u32":
                return f"(~{a})", top, ua
            r = rng.random()
            if r < 0.4:
                return (f"abs({a})" if ba < 2**31 else f"abs({a} | 1)"), min(ba, 2**31 - 1), ua
            if r < 0.7:
                return (f"(-{a})" if ba < 2**31 or d.signed_overflow else f"i32(u32(0) - u32({a}))"), top, ua
            return f"(~{a})", top, ua
        if op == "select":
            cond, uc = self.cond(scope, depth - 1)
            (a, ba, ua), (b, bb, ub) = sub(), sub()
            return f"select({cond}, {a}, {b})", max(ba, bb), uc and ua and ub
        if op == "narrow":
            a, ba, ua = sub()
            via = rng.choice(["i8", "u8", "i16", "u16"] + (["u32"] if ty == "i32" else ["i32"]))
            return f"{ty}({via}({a}))", top if via in ("u32", "i32") else 65535, ua
        if op == "cast":
            src = rng.choice([t for t in self.types if t != ty])
            a, ba, ua = self.expr_u(src, scope, depth - 1)
            if src in LIMIT:  # float -> int truncates; |a| <= 2**20 fits, and u32 takes only >= 0
                return (f"i32({a})" if ty == "i32" else f"u32(abs({a}))"), ba + 1, ua
            return f"{ty}({a})", top, ua
        return self.leaf(ty, scope)

    def cond(self, scope: list[Var], depth: int) -> tuple[str, bool]:
        rng = self.rng
        ty = rng.choice(self.types)
        (a, _, ua), (b, _, ub) = self.expr_u(ty, scope, depth), self.expr_u(ty, scope, max(depth - 1, 0))
        c = f"({a} {rng.choice(['<', '<=', '>', '>=', '==', '!='])} {b})"
        r = rng.random()
        if r < 0.15:
            c2, u2 = self.cond(scope, 0)
            return f"({c} {rng.choice(['and', 'or'])} {c2})", ua and ub and u2
        if r < 0.25:
            return f"(not {c})", ua and ub
        return c, ua and ub


def flatten(blocks: list[list[Stmt]]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        for s in block:
            out += s.lines
            out += flatten(s.blocks)
    return out


def generate(seed: int, domain: Domain | None = None) -> Program:
    """The program of ``seed`` in ``domain`` (the same program for the same two, on every machine)."""
    return Generator(seed, domain).build()


__all__ = ["APPROX", "Domain", "GROUP", "Program", "Stmt", "THREADS", "generate", "make_inputs", "render"]

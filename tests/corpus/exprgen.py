"""Random expression kernels for the property tests, and an exact integer evaluator.

A generated program is a few ``let`` statements over three input tensors
``a``, ``b``, ``c`` of one dtype, ending in a value stored to ``out``; later
statements reuse earlier ones, so the programs are DAGs (which is what CSE
and the inliner care about).  :func:`render_kernel` turns a program into the
source of a DSL kernel; :func:`eval_int_program` evaluates an integer program
per element with docs/ir.md's integer semantics, independently of Iron.

Every node has the program's dtype ``D`` (comparisons excepted, which only
feed ``select``): constants are weak literals, casts are round trips through
another dtype (``f32(f16(x))``), divisions, ``log``, ``sqrt`` and ``exp`` are
kept on safe domains by construction (``x / (abs(y) + 1)``, ``x // (y | 1)``).
"""

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from iron.core import dtypes as D

from .intmath import c_div, c_rem, shl, shr, wrap


@dataclass(frozen=True)
class Node:
    """``op`` applied to ``args`` (nodes), or a leaf: ``("load", "a")``, ``("const", 3)``, ``("let", 2)``."""

    op: str
    args: tuple = ()


@dataclass(frozen=True)
class Program:
    dtype: D.DType
    lets: tuple[Node, ...]
    result: Node
    #: Generated for the contraction test: only operations continuous in their inputs.
    continuous: bool = False


INPUTS = ("a", "b", "c")

FLOAT_BINARY = ("add", "sub", "mul", "safe_div", "min", "max")
FLOAT_UNARY = ("neg", "abs", "safe_log", "safe_sqrt", "clamped_exp")
FLOAT_CAST_VIA = {"f32": ("f16", "bf16"), "f16": ("f32",), "bf16": ("f32",)}
FLOAT_DISCONTINUOUS = ("floor", "round_trip_int")
INT_BINARY = ("add", "sub", "mul", "band", "bor", "bxor", "shl", "shr", "safe_div", "safe_rem", "min", "max")
INT_UNARY = ("neg", "bnot", "abs")
INT_CAST_VIA = {"i32": ("i8", "i16", "u16", "u32"), "u32": ("u8", "i32", "u16"), "i64": ("i32", "u32"),
                "i16": ("i8", "u8", "i32")}
COMPARES = ("lt", "le", "gt", "ge", "eq", "ne")
#: ``x*y + z``, ``z + x*y``, ``x*y - z``, ``z - x*y``: what the contraction pass fuses.
MUL_ADD_SHAPES = ("mul_add", "add_mul", "mul_sub", "sub_mul")

FLOAT_CONSTS = (0.5, -1.25, 2.0, 3.0, 0.1)
INT_CONSTS = (0, 1, 3, -7, 255, 1000)


# ---------------------------------------------------------------- strategies
#
# A literal never stands alone: it is only ever the right operand of an
# arithmetic op or comparison whose left operand is computed, so it always
# takes the program's dtype (a literal on its own would be an i32 / f32).

_CONST_OK = ("add", "sub", "mul", "min", "max", "band", "bor", "bxor")


def _operand(dtype: D.DType, n_lets: int):
    """A computed leaf: an input element or an earlier let."""
    options = [st.sampled_from(INPUTS).map(lambda name: Node("load", (name,)))]
    if n_lets:
        options.append(st.integers(0, n_lets - 1).map(lambda k: Node("let", (k,))))
    return st.one_of(*options)


def _const(dtype: D.DType):
    consts = FLOAT_CONSTS if dtype.is_float else tuple(c for c in INT_CONSTS if dtype.is_signed or c >= 0)
    return st.sampled_from(consts).map(lambda v: Node("const", (v,)))


def _binary(ops, sub, const):
    with_sub = st.tuples(st.sampled_from(ops), sub, sub).map(lambda t: Node(t[0], (t[1], t[2])))
    const_ops = tuple(o for o in ops if o in _CONST_OK)
    with_const = st.tuples(st.sampled_from(const_ops), sub, const).map(lambda t: Node(t[0], (t[1], t[2])))
    return st.one_of(with_sub, with_const)


def _select(cond_operand, sub, const):
    cond = st.tuples(st.sampled_from(COMPARES), cond_operand, st.one_of(cond_operand, const))
    return st.tuples(cond, sub, sub).map(lambda t: Node("select", (Node(t[0][0], t[0][1:]), t[1], t[2])))


def _expr(dtype: D.DType, n_lets: int, continuous: bool, depth: int):
    leaf = _operand(dtype, n_lets)
    if depth == 0:
        return leaf
    sub = _expr(dtype, n_lets, continuous, depth - 1)
    const = _const(dtype)
    if dtype.is_float:
        parts = [_binary(FLOAT_BINARY, sub, const),
                 st.tuples(st.sampled_from(FLOAT_UNARY), sub).map(lambda t: Node(t[0], (t[1],))),
                 # fma written out, and the shapes the contraction pass fuses.
                 st.tuples(st.sampled_from(("fma",) + MUL_ADD_SHAPES), sub, sub, sub).map(
                     lambda t: Node(t[0], t[1:]))]
        if continuous:
            # A condition on raw inputs is exact, so the select stays continuous
            # in the computed values.
            parts.append(_select(st.sampled_from(INPUTS).map(lambda name: Node("load", (name,))), sub, const))
        else:
            parts.append(_select(sub, sub, const))
            parts.append(st.tuples(st.sampled_from(FLOAT_CAST_VIA[dtype.name]), sub).map(
                lambda t: Node("cast_via", t)))
            parts.append(st.tuples(st.sampled_from(FLOAT_DISCONTINUOUS), sub).map(lambda t: Node(t[0], (t[1],))))
        return st.one_of(leaf, *parts)
    return st.one_of(
        leaf,
        _binary(INT_BINARY, sub, const),
        st.tuples(st.sampled_from(INT_UNARY), sub).map(lambda t: Node(t[0], (t[1],))),
        st.tuples(st.sampled_from(INT_CAST_VIA[dtype.name]), sub).map(lambda t: Node("cast_via", t)),
        _select(sub, sub, const))


@st.composite
def programs(draw, dtypes: tuple[D.DType, ...], continuous: bool = False, max_lets: int = 3,
             depth: int = 3) -> Program:
    """A random program of one of ``dtypes``."""
    dtype = draw(st.sampled_from(dtypes))
    n = draw(st.integers(0, max_lets))
    lets = tuple(draw(_expr(dtype, k, continuous, depth)) for k in range(n))
    result = draw(_expr(dtype, n, continuous, depth))
    return Program(dtype, lets, result, continuous)


# ---------------------------------------------------------------- rendering

_BIN_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "band": "&", "bor": "|", "bxor": "^", "shl": "<<", "shr": ">>"}
_CMP_SYMBOL = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def render_expr(node: Node, dtype: D.DType) -> str:
    op, args = node.op, node.args
    r = lambda x: render_expr(x, dtype)
    if op == "load":
        return f"{args[0]}[i]"
    if op == "const":
        return repr(args[0]) if args[0] >= 0 else f"({args[0]!r})"
    if op == "let":
        return f"t{args[0]}"
    if op in _BIN_SYMBOL:
        return f"({r(args[0])} {_BIN_SYMBOL[op]} {r(args[1])})"
    if op in _CMP_SYMBOL:
        return f"({r(args[0])} {_CMP_SYMBOL[op]} {r(args[1])})"
    if op in ("min", "max"):
        return f"{op}({r(args[0])}, {r(args[1])})"
    if op == "safe_div":
        if dtype.is_float:
            return f"({r(args[0])} / (abs({r(args[1])}) + 1.0))"
        return f"({r(args[0])} // ({r(args[1])} | 1))"
    if op == "safe_rem":
        return f"({r(args[0])} % ({r(args[1])} | 1))"
    if op == "neg":
        return f"(-{r(args[0])})"
    if op == "bnot":
        return f"(~{r(args[0])})"
    if op == "abs":
        return f"abs({r(args[0])})"
    if op == "safe_log":
        return f"log(abs({r(args[0])}) + 1.0)"
    if op == "safe_sqrt":
        return f"sqrt(abs({r(args[0])}) + 1.0)"
    if op == "clamped_exp":
        return f"exp(min(max({r(args[0])}, -6.0), 6.0))"
    if op == "floor":
        return f"floor({r(args[0])})"
    if op == "round_trip_int":
        return f"{dtype.name}(i32(min(max({r(args[0])}, -1000.0), 1000.0)))"
    if op == "fma":
        return f"fma({r(args[0])}, {r(args[1])}, {r(args[2])})"
    if op in MUL_ADD_SHAPES:
        x, y, z = (r(a) for a in args)
        return {"mul_add": f"({x} * {y} + {z})", "add_mul": f"({z} + {x} * {y})",
                "mul_sub": f"({x} * {y} - {z})", "sub_mul": f"({z} - {x} * {y})"}[op]
    if op == "cast_via":
        return f"{dtype.name}({args[0]}({r(args[1])}))"
    if op == "select":
        cond, x, y = args
        return f"select({r(cond)}, {r(x)}, {r(y)})"
    raise ValueError(f"unknown node {op}")


def render_kernel(program: Program, name: str) -> str:
    """The source of a module defining kernel ``name`` that computes ``program`` per element."""
    d = program.dtype.name
    body = [f"        t{k} = {render_expr(node, program.dtype)}" for k, node in enumerate(program.lets)]
    body.append(f"        out[i] = {render_expr(program.result, program.dtype)}")
    lines = [
        "from iron import In, Tensor, kernel, bf16, f16, f32, i8, i16, i32, i64, u8, u16, u32",
        "from iron.lang import exp, floor, fma, log, program_id, select, sqrt",
        "",
        "",
        "@kernel",
        f"def {name}(a: In[{d}], b: In[{d}], c: In[{d}], out: Tensor[{d}], n: int):",
        "    i = program_id(0)",
        "    if i < n:",
        *body,
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- the integer reference

def eval_int_program(program: Program, inputs: dict[str, list[int]]) -> list[int]:
    """Per element, exact Python integers wrapped to the dtype after every op."""
    dt = program.dtype
    n = len(inputs["a"])
    out = []
    for e in range(n):
        env: list[int] = []
        for node in program.lets:
            env.append(_eval_int(node, dt, inputs, e, env))
        out.append(_eval_int(program.result, dt, inputs, e, env))
    return out


def _eval_int(node: Node, dt: D.DType, inputs, e: int, env: list[int]):
    op, args = node.op, node.args
    ev = lambda x: _eval_int(x, dt, inputs, e, env)
    if op == "load":
        return inputs[args[0]][e]
    if op == "const":
        return wrap(args[0], dt)
    if op == "let":
        return env[args[0]]
    if op in _CMP_SYMBOL:
        x, y = ev(args[0]), ev(args[1])
        return {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y, "ne": x != y}[op]
    if op == "select":
        return ev(args[1]) if ev(args[0]) else ev(args[2])
    if op == "cast_via":
        return wrap(wrap(ev(args[1]), D.by_name(args[0])), dt)
    vals = [ev(a) for a in args]
    if op == "add":
        return wrap(vals[0] + vals[1], dt)
    if op == "sub":
        return wrap(vals[0] - vals[1], dt)
    if op == "mul":
        return wrap(vals[0] * vals[1], dt)
    if op == "band":
        return wrap(vals[0] & vals[1], dt)
    if op == "bor":
        return wrap(vals[0] | vals[1], dt)
    if op == "bxor":
        return wrap(vals[0] ^ vals[1], dt)
    if op == "shl":
        return shl(vals[0], vals[1], dt)
    if op == "shr":
        return shr(vals[0], vals[1], dt)
    if op == "safe_div":
        return wrap(c_div(vals[0], wrap(vals[1] | 1, dt)), dt)
    if op == "safe_rem":
        return wrap(c_rem(vals[0], wrap(vals[1] | 1, dt)), dt)
    if op == "min":
        return min(vals)
    if op == "max":
        return max(vals)
    if op == "neg":
        return wrap(-vals[0], dt)
    if op == "bnot":
        return wrap(~vals[0], dt)
    if op == "abs":
        return wrap(abs(vals[0]), dt)
    raise ValueError(f"unknown integer node {op}")


# ---------------------------------------------------------------- float running error bound

def eval_float_bound(program: Program, inputs: dict[str, np.ndarray],
                     u: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Exact values of a continuous float program, and an error budget for rounded evaluations.

    Returns ``(value, budget, peak)``: any evaluation that rounds each op to
    the program's dtype (fused or not) is within about ``u * budget`` of
    ``value``, where ``u`` is the dtype's unit roundoff.  This is a running
    error analysis: each op adds its own rounding ``|result|`` to its
    operands' budgets scaled by its derivative; products also carry the
    second-order term ``u * budget_a * budget_b``, which dominates where a
    computed value should be exactly zero (``t * t`` of a cancelled ``t``).
    ``peak`` is the largest magnitude seen, so callers can skip programs
    that overflow.
    """
    peak = [0.0]
    lets: list[tuple] = []

    def ev(node: Node):
        op, args = node.op, node.args
        if op == "load":
            v = inputs[args[0]]
            return v, np.zeros_like(v)
        if op == "const":
            v = float(np.asarray(args[0], dtype=D.numpy_dtype(program.dtype)).astype(np.float64))
            return np.full_like(inputs["a"], v), np.zeros_like(inputs["a"])
        if op == "let":
            return lets[args[0]]
        if op == "select":
            cond, x, y = args
            (ca, _), (cb, _) = ev(cond.args[0]), ev(cond.args[1])
            c = {"lt": ca < cb, "le": ca <= cb, "gt": ca > cb, "ge": ca >= cb, "eq": ca == cb, "ne": ca != cb}[cond.op]
            (xv, xm), (yv, ym) = ev(x), ev(y)
            return np.where(c, xv, yv), np.where(c, xm, ym)
        vals = [ev(a) for a in args]
        v, m = _float_step(op, vals, u)
        peak[0] = max(peak[0], float(np.max(np.abs(v))) if v.size else 0.0)
        return v, m

    for node in program.lets:
        lets.append(ev(node))
    value, budget = ev(program.result)
    return value, budget, peak[0]


def _float_step(op: str, vals, u: float):
    if op in ("add", "sub"):
        (a, am), (b, bm) = vals
        v = a + b if op == "add" else a - b
        return v, am + bm + np.abs(v)
    if op == "mul":
        (a, am), (b, bm) = vals
        v = a * b
        return v, am * np.abs(b) + bm * np.abs(a) + u * am * bm + np.abs(v)
    if op == "safe_div":
        (a, am), (b, bm) = vals
        d = np.abs(b) + 1.0
        dm = bm + d
        q = a / d
        return q, am / d + dm * np.abs(q) / d + np.abs(q)
    if op in ("min", "max"):
        (a, am), (b, bm) = vals
        return (np.minimum(a, b) if op == "min" else np.maximum(a, b)), np.maximum(am, bm)
    if op in ("neg", "abs"):
        (a, am), = vals
        return (-a if op == "neg" else np.abs(a)), am
    if op == "safe_log":
        (a, am), = vals
        s = np.abs(a) + 1.0
        v = np.log(s)
        return v, (am + s) / s + np.abs(v)
    if op == "safe_sqrt":
        (a, am), = vals
        s = np.abs(a) + 1.0
        v = np.sqrt(s)
        return v, (am + s) / (2 * v) + v
    if op == "clamped_exp":
        (a, am), = vals
        inside = (a > -6.0) & (a < 6.0)
        v = np.exp(np.clip(a, -6.0, 6.0))
        return v, v * np.where(inside, am, 0.0) + v
    if op in ("fma",) + MUL_ADD_SHAPES:
        (a, am), (b, bm), (c, cm) = vals
        v = {"mul_sub": a * b - c, "sub_mul": c - a * b}.get(op, a * b + c)
        # Budget for both the fused form and a separate multiply and add.
        return v, am * np.abs(b) + bm * np.abs(a) + u * am * bm + cm + np.abs(a * b) + np.abs(v)
    raise ValueError(f"{op} is not a continuous float op")

"""Elementwise kernels: unary math, binary arithmetic with broadcasting, fma, where and clamp.

Every kernel reads T (f32, f16 or bf16), computes in f32 and rounds once to T at the store; each
thread moves one 16-byte vector (4 f32 or 8 f16/bf16 elements), the last partial vector goes
element by element.  The launch is a 2-D grid of threads (``flat_grid``) so that more than
65535 groups of 256 fit on Vulkan; the thread's flat index is ``x + y * grid_x``.

The op is a uniform run-time argument chosen among a *family* of ops fixed at compile time: the
kernel tests it once, at the top, and each branch holds its own loads, math and stores, so a
thread's registers are about its op's own (NVRTC, sm_90: at most 32, full occupancy at 256 threads,
except the pow/atan2/remainder family on f16/bf16: 39).  5 families (3 unary, 2 binary) stand for 36
ops: 15 specialisations to compile instead of 108 per-op ones, each still small (one kernel of every
op was tried: its f16 registers rose to 40 and it compiled slower than the families together).
GPUs branch on the uniform code; lavapipe (a CPU) runs every branch of the family under a mask, so
its timings of these kernels are those of the whole family.

    from iron.std import elementwise as ew
    y = ew.unary("gelu_tanh", x)        # or ew.gelu_tanh(x)
    z = ew.binary("mul", a, b_row)      # a: (rows, n), b_row: (n,)
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable

import iron.lang as il
from iron import In, T, Tensor, bf16, f16, f32, func, kernel, u8, variants
from iron.core import dtypes as D
from iron.core.errors import LaunchError
from iron.lang import grid_size, isnan, program_id, select, static_range, vec

from . import _host
from ._device import splat
from ._plans import planned

#: Threads per group; the grid is 2-D so that a row never exceeds this many groups (Vulkan's limit).
GROUP = 256
MAX_GROUPS_X = 65535
#: The largest element count a launch indexes with i32 (``i + VEC`` must not wrap).
MAX_ELEMENTS = (1 << 31) - 16

#: Unary ops by family (one compiled specialisation per family and dtype; an op's run-time code is its
#: index in its family); the hottest first.  clamp takes its bounds as p0, p1.
UNARY_FAMILIES: dict[str, tuple[str, ...]] = {
    "basic": ("exp", "relu", "abs", "neg", "square", "sqrt", "rsqrt", "reciprocal", "exp2", "floor", "ceil",
              "round", "sign", "clamp"),
    "libm": ("tanh", "erf", "log", "log2", "log1p", "expm1", "softplus", "sin", "cos"),
    "act": ("silu", "gelu_tanh", "gelu", "sigmoid"),
}
BINARY_FAMILIES: dict[str, tuple[str, ...]] = {
    "arith": ("add", "mul", "sub", "div", "maximum", "minimum"),
    "math": ("pow", "atan2", "remainder"),
}
UNARY_OPS = tuple(op for ops in UNARY_FAMILIES.values() for op in ops if op != "clamp")
BINARY_OPS = tuple(op for ops in BINARY_FAMILIES.values() for op in ops)

#: 16 bytes per thread: the (T, VEC) pairs every kernel is stamped for.
VECTORS = ({"T": f32, "VEC": 4}, {"T": f16, "VEC": 8}, {"T": bf16, "VEC": 8})

_SQRT1_2 = 0.7071067811865476
#: gelu_tanh: 1 + tanh(y) = 2 sigmoid(2y) with 2y = x (C1 + C2 x^2), C1 = 2 sqrt(2/pi), C2 = C1 * 0.044715.
_C1 = 1.5957691216057308
_C2 = 0.07135481627260025
#: softplus returns x above this (torch's threshold, beta = 1).
SOFTPLUS_THRESHOLD = 20.0


# ---------------------------------------------------------------- the math, in f32 (scalars or vectors)

@func
def _unary_math(x, OP, p0, p1):
    if OP == "relu":
        r = select(x < 0.0, 0.0, x)  # NaN < 0 is false: NaN passes through
    elif OP == "abs":
        r = il.abs(x)
    elif OP == "neg":
        r = -x
    elif OP == "square":
        r = x * x
    elif OP == "floor":
        r = il.floor(x)
    elif OP == "ceil":
        r = il.ceil(x)
    elif OP == "round":
        r = il.round(x)  # half to even
    elif OP == "sign":
        r = il.sign(x)
    elif OP == "clamp":
        r = select(isnan(x), x, il.min(il.max(x, p0), p1))  # min/max drop NaN: keep it explicitly
    elif OP == "exp":
        r = il.exp(x)
    elif OP == "exp2":
        r = il.exp2(x)
    elif OP == "sqrt":
        r = il.sqrt(x)
    elif OP == "rsqrt":
        r = il.rsqrt(x)
    elif OP == "reciprocal":
        r = il.recip(x)
    elif OP == "log":
        r = il.log(x)
    elif OP == "log2":
        r = il.log2(x)
    elif OP == "log1p":
        r = il.log1p(x)
    elif OP == "expm1":
        r = il.expm1(x)
    elif OP == "softplus":
        r = select(x > SOFTPLUS_THRESHOLD, x, il.log1p(il.exp(x)))
    elif OP == "tanh":
        r = il.tanh(x)
    elif OP == "sin":
        r = il.sin(x)
    elif OP == "cos":
        r = il.cos(x)
    elif OP == "erf":
        r = il.erf(x)
    elif OP == "silu":
        r = select(x == -math.inf, -0.0, x / (1.0 + il.exp(-x)))  # the limit at -inf, not -inf/inf
    elif OP == "gelu_tanh":
        r = select(x == -math.inf, -0.0, x / (1.0 + il.exp(-(x * (_C1 + _C2 * (x * x))))))
    elif OP == "gelu":
        r = select(x == -math.inf, -0.0, 0.5 * x * (1.0 + il.erf(x * _SQRT1_2)))
    else:
        assert OP == "sigmoid", "unknown unary op"
        r = 1.0 / (1.0 + il.exp(-x))  # exp overflows only where the result is below f32's normals
    return r


@func
def _binary_math(x, y, OP):
    if OP == "add":
        r = x + y
    elif OP == "mul":
        r = x * y
    elif OP == "sub":
        r = x - y
    elif OP == "div":
        r = x / y
    elif OP == "maximum":
        r = select(isnan(x), x, select(isnan(y), y, il.max(x, y)))  # NaN propagates (torch.maximum)
    elif OP == "minimum":
        r = select(isnan(x), x, select(isnan(y), y, il.min(x, y)))
    elif OP == "pow":
        # C: pow(-inf, y) = 1 / pow(-0, y).  Taken that way because the GLSL target's pow gives NaN for a
        # -inf base with a non-integer exponent (a workaround, reported); two selects and a reciprocal.
        minus_inf = x == -math.inf
        p = il.pow(select(minus_inf, -0.0, x), y)
        r = select(minus_inf, il.recip(p), p)
    elif OP == "atan2":
        r = il.atan2(x, y)
    else:
        assert OP == "remainder", "unknown binary op"
        m = x % y  # fmod: exact, the sign of x
        r = select(((m < 0.0) & (y > 0.0)) | ((m > 0.0) & (y < 0.0)), m + y, m)  # floor-mod: the sign of y
    return r


@func
def _flat(VEC):
    """The first element of this thread's vector: the 2-D grid read as rows of grid_size(0) threads."""
    return (program_id(0) + program_id(1) * grid_size(0)) * VEC


# ---------------------------------------------------------------- unary (and clamp)

@func
def _unary_body(x: Tensor[T], out: Tensor[T], i, n, OP, VEC, p0, p1):
    if i + VEC <= n:
        out.store(i, T(_unary_math(f32(x.load(i, width=VEC)), OP, p0, p1)))
    elif i < n:
        for k in range(VEC):
            if i + k < n:
                out[i + k] = T(_unary_math(f32(x[i + k]), OP, p0, p1))


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8], FAMILY=list(UNARY_FAMILIES)))
def unary_kernel(x: In[T], out: Tensor[T], n: int, op: int, p0: f32, p1: f32):
    """out[i] = f(x[i]) for the op ``UNARY_FAMILIES[FAMILY][op]``, computed in f32, rounded once to T.

    x, out: n contiguous elements of T (f32/f16/bf16; out may be x itself).  VEC = 16 bytes of T per
    thread (4 or 8), one vector load and store; a thread past n // VEC * VEC goes element by element.
    Grid: ceil(n / VEC) threads as ``flat_grid`` rows.  p0, p1: clamp's lo and hi (others ignore them).
    Ops: relu abs neg square floor ceil round(half to even) sign clamp exp exp2 sqrt rsqrt reciprocal
    log log2 log1p expm1 softplus(beta 1, threshold 20) tanh sin cos erf silu sigmoid
    gelu (x/2 (1 + erf(x/sqrt 2)), like torch) gelu_tanh (x sigmoid(2 sqrt(2/pi)(x + 0.044715 x^3)),
    equal to torch's tanh form without its cancellation for x < 0).
    Error: one rounding to T plus the f32 evaluation (GPU libraries: a few ulp); gelu for x < -3
    carries torch's absolute error ~|x| * 2^-24 (1 + erf cancels).
    Non-finite: NaN gives NaN (relu and clamp too); +-inf give the function's limit (silu, gelu,
    gelu_tanh at -inf give -0, where torch gives NaN); outside the domain (log(-1), sqrt(-1)) NaN.
    """
    i = _flat(VEC)
    ops = UNARY_FAMILIES[FAMILY]
    for k in static_range(len(ops)):
        if op == k:
            _unary_body(x, out, i, n, ops[k], VEC, p0, p1)


# ---------------------------------------------------------------- binary

@func
def _gather(b: Tensor[T], i, m, VEC):
    """b[(i + k) % m] for k < VEC as an f32 vector: rows whose length is no multiple of VEC."""
    if VEC == 4:
        v = vec(b[i % m], b[(i + 1) % m], b[(i + 2) % m], b[(i + 3) % m])
    else:
        v = vec(b[i % m], b[(i + 1) % m], b[(i + 2) % m], b[(i + 3) % m], b[(i + 4) % m], b[(i + 5) % m],
                b[(i + 6) % m], b[(i + 7) % m])
    return f32(v)


@func
def _binary_body(a: Tensor[T], b: Tensor[T], out: Tensor[T], s, i, n, m, OP, VEC):
    if i + VEC <= n:
        y = splat(s, VEC)  # m == 0: the scalar
        if m == n:
            y = f32(b.load(i, width=VEC))
        elif m > 0:
            if m % VEC == 0:
                y = f32(b.load(i % m, width=VEC))
            else:
                y = _gather(b, i, m, VEC)
        out.store(i, T(_binary_math(f32(a.load(i, width=VEC)), y, OP)))  # one copy of the op's code
    elif i < n:
        for k in range(VEC):
            if i + k < n:
                z = s
                if m > 0:
                    z = f32(b[(i + k) % m])
                out[i + k] = T(_binary_math(f32(a[i + k]), z, OP))


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8], FAMILY=list(BINARY_FAMILIES)))
def binary_kernel(a: In[T], b: In[T], out: Tensor[T], s: f32, n: int, m: int, op: int):
    """out[i] = a[i] OP b[i % m] (m > 0) or a[i] OP s (m == 0), in f32, rounded once to T.

    a, out: n contiguous elements of T; b: m elements, m == n (same shape), m dividing n (b repeats
    along a's last axes: a (rows, m) with b (m,)), or m == 0 (the f32 scalar s; b is unused, pass a).
    VEC elements per thread as in unary_kernel; b is vector-loaded when m == n or m % VEC == 0, else
    gathered.  OP = ``BINARY_FAMILIES[FAMILY][op]``: add mul sub div (IEEE, one f32 rounding), maximum
    minimum (NaN propagates like torch.maximum), pow atan2 (C's, f32 library), remainder (floor-mod:
    fmod, exact, then + b when the signs differ, one rounding; the result has b's sign, like torch).
    Non-finite: IEEE arithmetic on the f32 values; pow/atan2 follow C's special cases.
    """
    i = _flat(VEC)
    ops = BINARY_FAMILIES[FAMILY]
    for k in static_range(len(ops)):
        if op == k:
            _binary_body(a, b, out, s, i, n, m, ops[k], VEC)


# ---------------------------------------------------------------- fma, where

@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8]))
def fma_kernel(a: In[T], b: In[T], c: In[T], out: Tensor[T], n: int):
    """out[i] = a[i] * b[i] + c[i] as one f32 fma (one rounding), then one rounding to T.

    a, b, c, out: n contiguous elements of T; VEC per thread with a scalar tail.  The f16/bf16
    products are exact in f32, so f16/bf16 results are off by at most 2^-24 relative before their
    own rounding.  Non-finite: IEEE (inf * 0 + c is NaN).
    """
    i = _flat(VEC)
    if i + VEC <= n:
        out.store(i, T(il.fma(f32(a.load(i, width=VEC)), f32(b.load(i, width=VEC)), f32(c.load(i, width=VEC)))))
    elif i < n:
        for k in range(VEC):
            if i + k < n:
                out[i + k] = T(il.fma(f32(a[i + k]), f32(b[i + k]), f32(c[i + k])))


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8]))
def where_kernel(cond: In[u8], a: In[T], b: In[T], out: Tensor[T], n: int):
    """out[i] = a[i] if cond[i] != 0 else b[i]: a selection, no arithmetic (bit-exact, NaN kept).

    cond: n bytes (a bool array viewed as u8); a, b, out: n contiguous elements of T; VEC elements
    per thread (VEC bytes of cond, 16 bytes of each of a, b, out), a scalar tail.
    """
    i = _flat(VEC)
    if i + VEC <= n:
        out.store(i, select(cond.load(i, width=VEC) != 0, a.load(i, width=VEC), b.load(i, width=VEC)))
    elif i < n:
        for k in range(VEC):
            if i + k < n:
                out[i + k] = a[i + k] if cond[i + k] != 0 else b[i + k]


# ---------------------------------------------------------------- host side

def flat_grid(threads: int) -> tuple[int, int]:
    """``(x, y)`` threads covering ``threads``: one row while it fits ``MAX_GROUPS_X`` groups, else
    rows of exactly that many (the kernels index ``x + y * grid_x`` and check the bound)."""
    row = MAX_GROUPS_X * GROUP
    if threads <= row:
        return (max(threads, 1), 1)
    return (row, _host.ceil_div(threads, row))


def op_code(op: Any, families: dict[str, tuple[str, ...]], what: str) -> tuple[str, int]:
    """``(family, index)``: the specialisation and the run-time code of ``op``; a LaunchError otherwise."""
    for family, ops in families.items():
        if op in ops:
            return family, ops.index(op)
    known = ", ".join(o for ops in families.values() for o in ops if o != "clamp")
    raise LaunchError(f"{what}: unknown op {op!r}; the ops: {known}")


def _prepare(x: Any, out: Any, what: str, fn: str, reads: dict[str, Any]) -> tuple[D.DType, int, Any]:
    """The dtype and size of ``x`` and the output (allocated like ``x`` unless given, then checked: ``out``
    may be any one input of the same shape, in place, as each thread reads its elements before writing them)."""
    dt = _host.check_float(x, what)
    n = _host.size_of(x)
    if n > MAX_ELEMENTS:
        raise LaunchError(f"{what}: {n} elements; the kernels index at most {MAX_ELEMENTS}")
    return dt, n, _host.output(fn, out, x, _host.shape_of(x), dt, reads, in_place=tuple(reads))


def _same(x: Any, dt: D.DType, shape: tuple[int, ...], what: str) -> None:
    got = _host.check_float(x, what)
    if got != dt:
        raise LaunchError(f"{what}: expected {dt.name} like the first operand, got {got.name}")
    _host.check_shape(x, shape, what)


def _launch_unary(op: str, x: Any, out: Any, backend: str | None, p0: float = 0.0, p1: float = 0.0) -> Any:
    """:func:`unary` (with clamp's bounds p0, p1) for other host functions, as :func:`_launch_binary`."""
    family, index = op_code(op, UNARY_FAMILIES, "unary")
    dt, n, out = _prepare(x, out, "x", op, {"x": x})
    if n:
        vw = _host.vector_width(dt)
        unary_kernel.variant(T=dt, VEC=vw, FAMILY=family).launch(
            x, out, n, index, f32_scalar(p0), f32_scalar(p1), grid=flat_grid(_host.ceil_div(n, vw)),
            group=(GROUP, 1), backend=backend)
    return out


def f32_scalar(v: float) -> Any:
    """``v`` as a numpy f32 scalar: how a launch binds an ``f32`` parameter (the CUDA device packs one as it
    is)."""
    return _F32(v)


_F32 = D.numpy_dtype(f32).type


@planned
def unary(op: str, x: Any, out: Any = None, backend: str | None = None) -> Any:
    """``op(x)`` elementwise (``UNARY_OPS``), in f32, one rounding to x's dtype; returns ``out``."""
    if op == "clamp":
        raise LaunchError("unary: clamp takes bounds: call clamp(x, lo, hi)")
    return _launch_unary(op, x, out, backend, 0.0, 0.0)


@planned
def clamp(x: Any, lo: float | None = None, hi: float | None = None, out: Any = None,
          backend: str | None = None) -> Any:
    """``min(max(x, lo), hi)`` with NaN kept (torch.clamp); a missing bound is unbounded."""
    if lo is None and hi is None:
        raise LaunchError("clamp: give lo, hi or both")
    lo_v = -math.inf if lo is None else float(lo)
    hi_v = math.inf if hi is None else float(hi)
    return _launch_unary("clamp", x, out, backend, lo_v, hi_v)


def _is_scalar(b: Any) -> bool:
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        return True
    np = sys.modules.get("numpy")
    return np is not None and (isinstance(b, np.generic) or (isinstance(b, np.ndarray) and b.ndim == 0))


def _broadcast_size(a_shape: tuple[int, ...], b: Any, dt: D.DType) -> int:
    """m: b's elements, when b's shape (leading 1s dropped) ends a's shape."""
    got = _host.check_float(b, "b")
    if got != dt:
        raise LaunchError(f"b: expected {dt.name} like a, got {got.name}: cast one operand first")
    b_shape = _host.shape_of(b)
    core = b_shape[next((k for k, s in enumerate(b_shape) if s != 1), len(b_shape)):]
    if len(core) > len(a_shape) or (core and a_shape[len(a_shape) - len(core):] != core):
        raise LaunchError(f"b: shape {b_shape} does not broadcast against a's {a_shape}: b must be a's shape "
                          f"or end it (a (rows, n) with b (n,))")
    return _host.size_of(b)


@planned
def binary(op: str, a: Any, b: Any, out: Any = None, backend: str | None = None) -> Any:
    """``a op b`` elementwise (``BINARY_OPS``): b is a's shape, ends it (broadcast) or a scalar."""
    return _launch_binary(op, a, b, out, backend)


def _launch_binary(op: str, a: Any, b: Any, out: Any, backend: str | None) -> Any:
    """:func:`binary` for other host functions (a planned function inside another one's plan would plan twice)."""
    family, index = op_code(op, BINARY_FAMILIES, "binary")
    dt, n, out = _prepare(a, out, "a", op, {"a": a} if _is_scalar(b) else {"a": a, "b": b})
    if _is_scalar(b):
        m, s, b_arg = 0, float(b), a
    else:
        m, s, b_arg = _broadcast_size(_host.shape_of(a), b, dt), 0.0, b
        if m == 0 and n:
            raise LaunchError("b: empty, a is not")
    if n:
        vw = _host.vector_width(dt)
        binary_kernel.variant(T=dt, VEC=vw, FAMILY=family).launch(
            a, b_arg, out, f32_scalar(s), n, m, index, grid=flat_grid(_host.ceil_div(n, vw)), group=(GROUP, 1),
            backend=backend)
    return out


@planned
def fma(a: Any, b: Any, c: Any, out: Any = None, backend: str | None = None) -> Any:
    """``a * b + c`` with one f32 rounding (then one to the dtype); a, b, c of one shape and dtype."""
    dt, n, out = _prepare(a, out, "a", "fma", {"a": a, "b": b, "c": c})
    shape = _host.shape_of(a)
    _same(b, dt, shape, "b")
    _same(c, dt, shape, "c")
    if n:
        vw = _host.vector_width(dt)
        fma_kernel.variant(T=dt, VEC=vw).launch(a, b, c, out, n, grid=flat_grid(_host.ceil_div(n, vw)),
                                                group=(GROUP, 1), backend=backend)
    return out


def _as_bytes(cond: Any) -> Any:
    """``cond`` as u8 (a bool array viewed in place: one byte per element either way)."""
    dt = _host.dtype_of(cond, "cond")
    if dt == D.u8:
        return cond
    if dt != D.bool_:
        raise LaunchError(f"cond: expected a bool or u8 array, got {dt.name}")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(cond, torch.Tensor):
        return _host.view(cond, _torch_bytes)
    return _host.view(cond, _numpy_bytes)


def _torch_bytes(cond: Any) -> Any:
    return cond.view(sys.modules["torch"].uint8)


def _numpy_bytes(cond: Any) -> Any:
    import numpy as np

    return cond.view(np.uint8)


@planned
def where(cond: Any, a: Any, b: Any, out: Any = None, backend: str | None = None) -> Any:
    """``a`` where ``cond`` else ``b`` (torch.where); cond bool or u8, all of one shape."""
    dt, n, out = _prepare(a, out, "a", "where", {"cond": cond, "a": a, "b": b})
    shape = _host.shape_of(a)
    _same(b, dt, shape, "b")
    c = _as_bytes(cond)
    _host.check_shape(c, shape, "cond")
    if n:
        vw = _host.vector_width(dt)
        where_kernel.variant(T=dt, VEC=vw).launch(c, a, b, out, n, grid=flat_grid(_host.ceil_div(n, vw)),
                                                  group=(GROUP, 1), backend=backend)
    return out


# ---------------------------------------------------------------- one function per op

def _unary_fn(op: str) -> Callable[..., Any]:
    @planned
    def fn(x: Any, out: Any = None, backend: str | None = None) -> Any:
        return unary(op, x, out=out, backend=backend)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"``unary({op!r}, x)``: see unary_kernel's contract."
    return fn


def _binary_fn(op: str) -> Callable[..., Any]:
    @planned
    def fn(a: Any, b: Any, out: Any = None, backend: str | None = None) -> Any:
        return binary(op, a, b, out=out, backend=backend)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"``binary({op!r}, a, b)``: see binary_kernel's contract."
    return fn


# Module attributes named like Python's abs/round/pow too (ew.abs(x)); the kernels above reach the
# builtins through ``il.`` only, so these names never shadow them there.
for _op in UNARY_OPS:
    globals()[_op] = _unary_fn(_op)
for _op in BINARY_OPS:
    globals()[_op] = _binary_fn(_op)
del _op

__all__ = ["BINARY_FAMILIES", "BINARY_OPS", "GROUP", "UNARY_FAMILIES", "UNARY_OPS", "VECTORS", "binary",
           "binary_kernel", "clamp", "flat_grid", "fma", "fma_kernel", "op_code", "unary", "unary_kernel", "where",
           "where_kernel", *(op for op in UNARY_OPS + BINARY_OPS if op not in ("abs", "round", "pow"))]

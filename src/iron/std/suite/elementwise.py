"""Tests and benches of iron.std.elementwise: every op on f32/f16/bf16 against float64 numpy.

One test per op (``std/elementwise/<op>``) on shapes 1, 7, 255 and 4099 (tails, partial vectors,
partial groups); binary ops also on broadcast rows (``RxC``: b has C elements, C = 7 and 130 are
no multiple of the vector width, 64 and 200 are) and with a scalar operand (``scalar=N``).  Cases
of 8 elements or more start with NaN, +-inf and +-0 (binary: mixed with finite partners), so
every backend checks the non-finite contract too.

Tolerances follow the rounding chain (docs/runner.md): ``Depth(1, k)`` is the rounding to T
after k f32 steps, a GPU library call (exp, erf, ...) counting as one.  Three ops amplify their f32
error beyond that and say so in their ``Expect`` scale (``_mixed``): gelu's 1 + erf cancels for
x < 0 (the error is relative to the terms, as in torch), gelu_tanh's exponent w carries a
relative error that the result feels times |w| sigmoid(-w), pow's y log2 x the same times |y ln x|.
On Vulkan the ops whose GLSL calls the driver's exp, log or tanh add the bounds of Vulkan's precision
table (``VULKAN_BOUNDS``), which are far looser than CUDA's few ulp.

Benches (the H200 set, N = 16M; 4M on Vulkan): exp, gelu_tanh, silu, add, mul with a broadcast
row (4096 x 4096), where.  The casts are benched in suite/cast.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from iron import Case, Depth, Expect, Setup, Tolerance, bench, test_kernel
from iron.core import dtypes as D
from iron.harness.tolerance import BASE_RTOL
from iron.jit.device import device_traits
from iron.std import elementwise as ew

TEST_SHAPES = [1, 7, 255, 4099]
#: Same shape (ints), broadcast rows (R, C) and the scalar form.
BINARY_SHAPES = [1, 7, 4099, (1, 1), (3, 7), (5, 64), (3, 130), (9, 200), {"scalar": 7}, {"scalar": 4099}]
BENCH_SHAPES = {"interp": [1 << 16], "vulkan": [1 << 22], "*": [1 << 24]}
BCAST_BENCH_SHAPES = {"interp": [(64, 1024)], "vulkan": [(2048, 2048)], "*": [(4096, 4096)]}
EXACT = Tolerance(exact=True)
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])


def _bindings(op: str, families: dict[str, tuple[str, ...]]) -> list[dict[str, Any]]:
    """The three (T, VEC) points of ``op``'s family."""
    family = ew.op_code(op, families, "bindings")[0]
    return [{**v, "FAMILY": family} for v in ew.VECTORS]


def _np(T: D.DType) -> np.dtype:
    return D.numpy_dtype(T)


def _launch(n: int, vec: int) -> dict[str, Any]:
    return {"grid": ew.flat_grid(max(1, -(-n // vec))), "group": (ew.GROUP, 1)}


def _mixed(want: np.ndarray, f32_part: np.ndarray, T: D.DType) -> np.ndarray:
    """|want| (the rounding to T) plus ``f32_part``, the scale of the f32 evaluation's error, weighed so
    that rtol (BASE[T] * steps + BASE[f32] * f32_steps) applies BASE[f32] to it (docs/runner.md)."""
    part = np.where(np.isfinite(f32_part), np.abs(f32_part), 0.0)
    return np.abs(want) + part * (BASE_RTOL["f32"] / BASE_RTOL[T.name])


def _plant(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` written over the first elements of cases of 8 or more (the vector path on every dtype)."""
    if x.size >= 8:
        x.reshape(-1)[:values.size] = values
    return x


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))


_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def _limit_at_minus_inf(x: np.ndarray, value: np.ndarray) -> np.ndarray:
    """The contract's -0 at -inf, where x * (something -> 0) is NaN in float64 too."""
    return np.where(x == -np.inf, -0.0, value)


def _gelu(x: np.ndarray) -> np.ndarray:
    # x * Phi(x) with Phi from erfc: accurate where the kernel's 1 + erf cancels.
    return _limit_at_minus_inf(x, x * 0.5 * _erfc(-x / math.sqrt(2.0)).astype(np.float64))


def _gelu_tanh_w(x: np.ndarray) -> np.ndarray:
    return 2.0 * math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    # 0.5 x (1 + tanh(w / 2)) == x sigmoid(w), evaluated without cancellation.
    return _limit_at_minus_inf(x, x * _sigmoid(_gelu_tanh_w(x)))


# ---------------------------------------------------------------- Vulkan's precision (the driver's functions)

#: f32's spacing relative to a value, at most: one ulp.
_ULP = 2.0 ** -23


def _vk_exp_ulps(arg: np.ndarray) -> np.ndarray:
    """Vulkan lets exp/exp2 be 3 + 2|arg| ulp off (the GLSL target calls the driver's)."""
    return (3.0 + 2.0 * np.abs(arg)) * _ULP


def _vk_log(x: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Vulkan: log/log2 within 2^-21 absolute on [0.5, 2], 3 ulp elsewhere."""
    return np.where((x >= 0.5) & (x <= 2.0), 2.0 ** -21, 3 * _ULP * np.abs(want))


def _vk_pow(a: np.ndarray, b: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Vulkan: pow inherits exp2(b log2 a): exp2's ulps at z = b log2 a, and log2's error times |b| ln 2."""
    z = b * np.log2(np.abs(a))
    log2_err = np.abs(b) * _vk_log(np.abs(a), np.log2(np.abs(a)))
    return np.abs(want) * (_vk_exp_ulps(z) + math.log(2.0) * log2_err)


#: Absolute error bounds of the f32 evaluation where the GLSL target uses the driver's exp, log or tanh
#: (Vulkan's precision table, far looser than CUDA's few ulp; lavapipe stays well inside them).  Each
#: result below depends on the exp through e / (1 + e) <= 1 (or sigmoid(-w)), so the exp's relative
#: error carries over; expm1 = exp(x) - 1 for |x| >= 0.5 multiplies it by at most e^x / (e^x - 1) < 2.6;
#: tanh inherits (e^x - e^-x) / (e^x + e^-x), whose numerator's error is absolute.
VULKAN_BOUNDS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "exp": lambda x, w: np.abs(w) * _vk_exp_ulps(x),
    "exp2": lambda x, w: np.abs(w) * _vk_exp_ulps(x),
    "expm1": lambda x, w: np.where(np.abs(x) >= 0.5, 2.6 * np.abs(w) * _vk_exp_ulps(x), 0.0),
    "softplus": lambda x, w: np.abs(w) * _vk_exp_ulps(x),
    "sigmoid": lambda x, w: np.abs(w) * _vk_exp_ulps(x),
    "silu": lambda x, w: np.abs(w) * _vk_exp_ulps(x),
    "gelu_tanh": lambda x, w: np.abs(w) * _sigmoid(-_gelu_tanh_w(x)) * _vk_exp_ulps(_gelu_tanh_w(x)),
    "log": _vk_log,
    "log2": _vk_log,
    "tanh": lambda x, w: _vk_exp_ulps(x) + 3 * _ULP * np.abs(w),
}


def _expect(want: np.ndarray, f32_part: np.ndarray | None, vulkan: np.ndarray | None, T: D.DType) -> Any:
    """The oracle's answer: ``want`` alone, or with the scale of its bound: the f32 part of the error
    (the op's own roundings in f32) plus, on Vulkan, the driver math's allowance (VULKAN_BOUNDS)."""
    if f32_part is None and vulkan is None:
        return want
    part = np.zeros_like(want) if f32_part is None else np.abs(f32_part)
    if vulkan is not None:
        part = np.where(np.isfinite(part), part, 0.0) + _in_f32_units(vulkan)
    return Expect(want, scale=_mixed(want, part, T))


def _rounding(spec: Any) -> dict[str, Any]:
    """Setup's depth and tolerance for an op: exact where it has no f32 steps, else one T rounding after them."""
    return {"depth": Depth(1, spec.f32_steps or 0), "tolerance": EXACT if spec.f32_steps is None else None}


def _in_f32_units(bound: np.ndarray) -> np.ndarray:
    """An absolute error bound as an f32 scale part: rtol (>= BASE[f32] for it) times it covers the bound."""
    return bound / BASE_RTOL["f32"]


# ---------------------------------------------------------------- unary ops: inputs, oracle, error model

@dataclass(frozen=True)
class UnaryOp:
    draw: Callable[[np.random.Generator, int], np.ndarray]
    oracle: Callable[[np.ndarray], np.ndarray]
    #: f32 steps before the rounding to T; None: the result is exact (a selection or exact in T).
    f32_steps: int | None = 1
    #: The scale of the f32 error where it is not |want| (see the module docstring).
    f32_part: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    flops: int = 1


def _normal(s: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, n: rng.standard_normal(n) * s


def _lognormal(s: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, n: np.exp(rng.standard_normal(n) * s)


def _halves(rng: np.random.Generator, n: int) -> np.ndarray:
    """Normal values, a third of them exact halves (round's ties, floor/ceil's boundaries)."""
    x = rng.standard_normal(n) * 4
    ties = rng.integers(-9, 9, n) + 0.5
    return np.where(rng.random(n) < 1 / 3, ties, x)


def _near_zero(hi: float, lo: float = -0.9) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Magnitudes 1e-6 .. |hi| of both signs (log1p/expm1's cancellation region) and a spread up to hi."""
    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        small = np.sign(rng.standard_normal(n)) * 10.0 ** rng.uniform(-6, -0.5, n)
        return np.where(rng.random(n) < 0.5, small, rng.uniform(lo, hi, n))
    return draw


def _gelu_terms(x: np.ndarray, want: np.ndarray) -> np.ndarray:
    return 0.5 * np.abs(x) * (1.0 + np.abs(_erf(x * math.sqrt(0.5)).astype(np.float64)))


def _gelu_tanh_amplified(x: np.ndarray, want: np.ndarray) -> np.ndarray:
    w = _gelu_tanh_w(x)
    return np.abs(want) * np.abs(w) * _sigmoid(-w)


def _gelu_tanh_torch_terms(x: np.ndarray, want: np.ndarray) -> np.ndarray:
    """torch's 0.5 x (1 + tanh(y)): the f32 error is relative to 0.5 |x| (1 + |tanh y|), times y's |y|."""
    y = 0.5 * _gelu_tanh_w(x)
    t = np.tanh(y)
    return 0.5 * np.abs(x) * (1.0 + np.abs(t)) * (1.0 + np.abs(y) * (1.0 - np.abs(t)))


UNARY: dict[str, UnaryOp] = {
    "relu": UnaryOp(_normal(3), lambda x: np.where(x < 0, 0.0, x), None),
    "abs": UnaryOp(_normal(3), np.abs, None),
    "neg": UnaryOp(_normal(3), np.negative, None),
    "square": UnaryOp(_normal(3), np.square, 1),   # one rounding (exact in f32 for f16/bf16)
    "floor": UnaryOp(_halves, np.floor, None),
    "ceil": UnaryOp(_halves, np.ceil, None),
    "round": UnaryOp(_halves, np.rint, None),      # half to even
    "sign": UnaryOp(_normal(3), np.sign, None),
    "exp": UnaryOp(_normal(3), np.exp),            # one library call, then the rounding to T
    "exp2": UnaryOp(_normal(4), np.exp2),
    "sqrt": UnaryOp(_lognormal(3), np.sqrt),
    "rsqrt": UnaryOp(_lognormal(3), lambda x: 1.0 / np.sqrt(x)),
    "reciprocal": UnaryOp(_normal(3), lambda x: 1.0 / x),
    "log": UnaryOp(_lognormal(3), np.log),
    "log2": UnaryOp(_lognormal(3), np.log2),
    "log1p": UnaryOp(_near_zero(5.0), np.log1p),
    "expm1": UnaryOp(_near_zero(8.0, -8.0), np.expm1),
    "softplus": UnaryOp(_normal(10), lambda x: np.logaddexp(0.0, x), 2, flops=3),  # exp, log1p
    "tanh": UnaryOp(_normal(2), np.tanh),
    "sin": UnaryOp(lambda rng, n: rng.uniform(-10, 10, n), np.sin),
    "cos": UnaryOp(lambda rng, n: rng.uniform(-10, 10, n), np.cos),
    "erf": UnaryOp(_normal(1.5), lambda x: _erf(x).astype(np.float64)),
    "silu": UnaryOp(_normal(4), lambda x: _limit_at_minus_inf(x, x * _sigmoid(x)), 3, flops=4),  # exp add div
    # x*c, erf, 1 + erf, the product: relative to the terms of 1 + erf
    "gelu": UnaryOp(_normal(2), _gelu, 5, _gelu_terms, flops=5),
    # w: 5 roundings (x*x, *C2, C1+, *x, the constants) amplified; then exp, add, div
    "gelu_tanh": UnaryOp(_normal(2), _gelu_tanh, 5, _gelu_tanh_amplified, flops=8),
    "sigmoid": UnaryOp(_normal(4), _sigmoid, 3, flops=3),  # exp, add, div
}
assert set(UNARY) == set(ew.UNARY_OPS)


def unary_setup(op: str, planted: bool = True, f32_part: Callable[..., Any] | None = None
                ) -> Callable[[Case], Setup]:
    spec = UNARY[op]
    index = ew.op_code(op, ew.UNARY_FAMILIES, "unary")[1]
    part = f32_part or spec.f32_part

    def setup(case: Case) -> Setup:
        n, T = case.n, case.T
        with np.errstate(over="ignore"):  # a draw past f16's range is +-inf: part of the contract
            x = spec.draw(case.rng, n).astype(_np(T))
        if planted:
            _plant(x, SPECIALS.astype(_np(T)))

        vulkan = VULKAN_BOUNDS.get(op) if device_traits(case.backend).loose_math else None

        def oracle(x, out, n, op, p0, p1):
            with np.errstate(all="ignore"):
                want = spec.oracle(x).astype(np.float64)
                return _expect(want, None if part is None else part(x, want),
                               None if vulkan is None else vulkan(x, want), T)

        return Setup(args=[x, case.empty(n), n, index, np.float32(0), np.float32(0)], **_launch(n, case["VEC"]),
                     oracle=oracle, **_rounding(spec), flops=spec.flops * n)
    setup.__name__ = f"{op}_setup"
    return setup


for _op in ew.UNARY_OPS:
    test_kernel(ew.unary_kernel, shapes=TEST_SHAPES, bindings=_bindings(_op, ew.UNARY_FAMILIES),
                name=f"std/elementwise/{_op}")(
        unary_setup(_op))


def clamp_setup(case: Case) -> Setup:
    n, T = case.n, case.T
    x = _plant(case.randn(n, scale=2.0), SPECIALS.astype(_np(T)))
    lo, hi = -0.75, 1.25  # exact in every T: the result is an input or a bound, compared exactly

    def oracle(x, out, n, op, p0, p1):
        return np.where(np.isnan(x), x, np.minimum(np.maximum(x, p0), p1))

    return Setup(args=[x, case.empty(n), n, ew.op_code("clamp", ew.UNARY_FAMILIES, "clamp")[1], np.float32(lo),
                       np.float32(hi)], **_launch(n, case["VEC"]), oracle=oracle, tolerance=EXACT)


test_kernel(ew.unary_kernel, shapes=TEST_SHAPES, bindings=_bindings("clamp", ew.UNARY_FAMILIES),
            name="std/elementwise/clamp")(
    clamp_setup)


# ---------------------------------------------------------------- binary ops

@dataclass(frozen=True)
class BinaryOp:
    draw: Callable[[np.random.Generator, int, int], tuple[np.ndarray, np.ndarray]]
    oracle: Callable[[np.ndarray, np.ndarray], np.ndarray]
    f32_steps: int | None = 1
    f32_part: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    #: Partners of the planted specials in a (b's first elements).
    partners: tuple[float, ...] = (1.5, -2.0, np.nan, np.inf, -0.0)


def _pair(sa: float, sb: float) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    return lambda rng, n, m: (rng.standard_normal(n) * sa, rng.standard_normal(m) * sb)


def _pow_draw(rng: np.random.Generator, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Positive bases with real exponents in [-3, 3]; a quarter of each: negative bases, integer exponents."""
    a = np.where(rng.random(n) < 0.25, -np.exp(rng.standard_normal(n)), np.exp(rng.standard_normal(n)))
    b = np.where(rng.random(m) < 0.25, rng.integers(-3, 4, m).astype(np.float64), rng.uniform(-3, 3, m))
    return a, b


def _pow_amplified(a: np.ndarray, b: np.ndarray, want: np.ndarray) -> np.ndarray:
    # pow(a, b) = exp2(b log2 a): log2's relative error reaches the result times |b ln a|.
    return np.abs(want) * np.abs(b * np.log(np.abs(a)))


BINARY: dict[str, BinaryOp] = {
    "add": BinaryOp(_pair(1, 1), np.add),             # one f32 rounding (relative to the result), then T's
    "mul": BinaryOp(_pair(1, 1), np.multiply),
    "sub": BinaryOp(_pair(1, 1), np.subtract),
    "div": BinaryOp(_pair(1, 1), np.divide),
    "maximum": BinaryOp(_pair(1, 1), np.maximum, None),  # NaN propagates, like np.maximum
    "minimum": BinaryOp(_pair(1, 1), np.minimum, None),
    "pow": BinaryOp(_pow_draw, np.power, 4, _pow_amplified, partners=(0.0, 2.0, -1.0, np.nan, -3.0)),
    "atan2": BinaryOp(_pair(1, 1), np.arctan2, 2),     # CUDA atan2f 3 ulp, iron_atan2 4
    "remainder": BinaryOp(_pair(5, 2), np.remainder, partners=(1.5, -2.0, 0.0, np.inf, -np.inf)),
}
assert set(BINARY) == set(ew.BINARY_OPS)


def _form(case: Case) -> tuple[str, int, int]:
    """("same" | "bcast" | "scalar", n, m) from the case's shape."""
    if isinstance(case.shape, dict):
        return "scalar", case.n, 0
    if isinstance(case.shape, tuple):
        return "bcast", case.n, case.dims[-1]
    return "same", case.n, case.n


def binary_setup(op: str, planted: bool = True, f32_part: Callable[..., Any] | None = None
                 ) -> Callable[[Case], Setup]:
    spec = BINARY[op]
    index = ew.op_code(op, ew.BINARY_FAMILIES, "binary")[1]
    part = f32_part or spec.f32_part

    def setup(case: Case) -> Setup:
        T = case.T
        form, n, m = _form(case)
        a, b = spec.draw(case.rng, n, max(m, 1))
        a, b = a.astype(_np(T)).reshape(case.dims), b.astype(_np(T))
        s = np.float32(b[0])  # the scalar form's operand (f32, as the kernel takes it)
        if planted:
            _plant(a, SPECIALS.astype(_np(T)))
            if b.size >= 8:
                b[:len(spec.partners)] = np.array(spec.partners).astype(_np(T))

        vulkan = _vk_pow if op == "pow" and device_traits(case.backend).loose_math else None

        def oracle(a, b, out, s, n, m, op):
            a, bb = a.reshape(-1), np.float64(s) * np.ones(n) if m == 0 else np.tile(b.reshape(-1), n // m)
            with np.errstate(all="ignore"):
                want = spec.oracle(a, bb).astype(np.float64)
                return _expect(want, None if part is None else part(a, bb, want),
                               None if vulkan is None else vulkan(a, bb, want), T)

        bytes_moved = (2 * n + m) * T.itemsize
        return Setup(args=[a, a if m == 0 else b, case.empty(*case.dims), s, n, m, index], **_launch(n, case["VEC"]),
                     oracle=oracle, **_rounding(spec), flops=n, bytes_moved=bytes_moved)
    setup.__name__ = f"{op}_setup"
    return setup


for _op in ew.BINARY_OPS:
    test_kernel(ew.binary_kernel, shapes=BINARY_SHAPES, bindings=_bindings(_op, ew.BINARY_FAMILIES),
                name=f"std/elementwise/{_op}")(
        binary_setup(_op))


# ---------------------------------------------------------------- fma, where

@test_kernel(ew.fma_kernel, shapes=TEST_SHAPES, bindings=list(ew.VECTORS), name="std/elementwise/fma")
def fma_setup(case: Case) -> Setup:
    n, T = case.n, case.T
    a = _plant(case.randn(n), SPECIALS.astype(_np(T)))
    # One rounding of the exact a*b + c (f32, then T): relative to the result even where it cancels,
    # which a multiply-then-add would not meet.
    return Setup(args=[a, case.randn(n), case.randn(n), case.empty(n), n], **_launch(n, case["VEC"]),
                 oracle=lambda a, b, c, out, n: a * b + c, depth=Depth(1, 1), flops=2 * n)


def where_setup(any_byte: bool) -> Callable[[Case], Setup]:
    """cond true as any nonzero byte (the contract), or as 1 only (a bool tensor's bytes: the bench)."""
    def setup(case: Case) -> Setup:
        n, T = case.n, case.T
        cond = (case.rng.random(n) < 0.5).astype(np.uint8)
        if any_byte:
            cond *= case.rng.integers(1, 256, n).astype(np.uint8)
        a = _plant(case.randn(n), SPECIALS.astype(_np(T)))
        b = _plant(case.randn(n), SPECIALS[::-1].astype(_np(T)))
        return Setup(args=[cond, a, b, case.empty(n), n], **_launch(n, case["VEC"]),
                     oracle=lambda cond, a, b, out, n: np.where(cond != 0, a, b), tolerance=EXACT)
    return setup


test_kernel(ew.where_kernel, shapes=TEST_SHAPES, bindings=list(ew.VECTORS), name="std/elementwise/where")(
    where_setup(any_byte=True))


# ---------------------------------------------------------------- benches (the H200 set)

def _ref_unary_torch(op: str) -> Callable[..., Any]:
    def ref(x, out, n, op_index, p0, p1):
        import torch
        import torch.nn.functional as F

        if op == "exp":
            return torch.exp(x)
        if op == "silu":
            return F.silu(x)
        return F.gelu(x, approximate="tanh")
    return ref


def _ref_unary_numpy(op: str) -> Callable[..., Any]:
    def ref(x, out, n, op_index, p0, p1):
        v = x.astype(np.float32)
        with np.errstate(all="ignore"):
            if op == "exp":
                r = np.exp(v)
            elif op == "silu":
                r = v / (np.float32(1) + np.exp(-v))
            else:
                r = v / (np.float32(1) + np.exp(-(v * (np.float32(ew._C1) + np.float32(ew._C2) * v * v))))
        return r.astype(out.dtype)
    return ref


for _op in ("exp", "gelu_tanh", "silu"):
    # torch's gelu_tanh cancels in 1 + tanh(y) for x < 0: its check needs the terms' scale.
    bench(ew.unary_kernel, shapes=BENCH_SHAPES, bindings=_bindings(_op, ew.UNARY_FAMILIES),
          name=f"std/elementwise/{_op}",
          reference={"cuda": _ref_unary_torch(_op), "*": _ref_unary_numpy(_op)})(
        unary_setup(_op, planted=False, f32_part=_gelu_tanh_torch_terms if _op == "gelu_tanh" else None))


def _ref_binary(fn_torch: str, fn_numpy: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    def torch_ref(a, b, out, s, n, m, op):
        import torch

        return getattr(torch, fn_torch)(a, b)

    def numpy_ref(a, b, out, s, n, m, op):
        return fn_numpy(a.astype(np.float32), b.astype(np.float32)).astype(out.dtype)
    return {"cuda": torch_ref, "*": numpy_ref}


bench(ew.binary_kernel, shapes=BENCH_SHAPES, bindings=_bindings("add", ew.BINARY_FAMILIES), name="std/elementwise/add",
      reference=_ref_binary("add", np.add))(binary_setup("add", planted=False))
bench(ew.binary_kernel, shapes=BCAST_BENCH_SHAPES, bindings=_bindings("mul", ew.BINARY_FAMILIES),
      name="std/elementwise/mul",
      reference=_ref_binary("mul", np.multiply))(binary_setup("mul", planted=False))


def _where_torch(cond, a, b, out, n):
    import torch

    return torch.where(cond.view(torch.bool) if cond.dtype == torch.uint8 else cond, a, b)


def _where_numpy(cond, a, b, out, n):
    return np.where(cond != 0, a, b)


bench(ew.where_kernel, shapes=BENCH_SHAPES, bindings=list(ew.VECTORS), name="std/elementwise/where",
      reference={"cuda": _where_torch, "*": _where_numpy})(where_setup(any_byte=False))

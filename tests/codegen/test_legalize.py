"""Legalisation rewrites: each one leaves a kernel's results unchanged, bit for bit, on the interpreter.

The GLSL/HIP bf16 path is checked against ml_dtypes exhaustively (decode:
every bf16 pattern; encode: every rounding case), and against the
interpreter's exact casts for the round-to-odd paths (i32, u32, f64).
"""

import ml_dtypes
import numpy as np
import pytest
from corpus import CASES, Run, binding_label, harness
from emit_testing import TARGETS, has_fragments, optimized

from iron import In, Tensor, bf16, f16, f32, f64, i32, kernel, u32
from iron.codegen import legalize as L
from iron.codegen.backends import get_target
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.core import dtypes as D
from iron.core.ops import OPS
from iron.core.types import ScalarType, TensorType, VarType, VectorType
from iron.lang import program_id
from iron.runtime import interp

BF16 = np.dtype(ml_dtypes.bfloat16)


def _as_legal_args(legal, args):
    """The original launch's arguments as the legalised kernel takes them (same bytes, new dtypes)."""
    out = []
    for p, a in zip(legal.params, args):
        if isinstance(a, np.ndarray) and isinstance(p.type, TensorType):
            out.append(a.view(D.numpy_dtype(p.type.dtype)))
        elif isinstance(p.type, ScalarType) and p.type.dtype == D.f32 and not isinstance(a, np.ndarray):
            out.append(np.float32(a))  # a bf16 scalar travels as the f32 of the same value
        else:
            out.append(a)
    return out


def _raw(outputs):
    return [np.ascontiguousarray(o).view(np.uint8) for o in outputs]


#: Ops whose f16/bf16 result is rounded twice after promotion (computed in f32, not exactly):
#: they may differ from the interpreter's single rounding by one unit in the last place.
ROUNDED_TWICE = frozenset({"exp", "exp2", "log", "log2", "log1p", "expm1", "rsqrt", "sin", "cos", "tan", "asin",
                           "acos", "atan", "sinh", "cosh", "tanh", "erf", "pow", "atan2"})


def _rounds_twice(ir) -> bool:
    return any(op.opcode in ROUNDED_TWICE and op.operands[0].type.dtype in (D.f16, D.bf16) for op in ir.walk())


def _ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many representable 16-bit floats lie between ``a`` and ``b`` (same bits: 0)."""
    def ordered(x):
        bits = x.view(np.int16).astype(np.int32)
        return np.where(bits < 0, -(bits & 0x7FFF), bits)
    return np.abs(ordered(a) - ordered(b))


POINTS = [(c, b) for c in CASES for b in c.bindings if not c.name.startswith("mma")]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case,binding", POINTS, ids=[f"{c.name}[{binding_label(b)}]" for c, b in POINTS])
def test_legalised_corpus_kernel_gives_identical_bits(case, binding, target, seed):
    run = Run(case.sizes[min(2, len(case.sizes) - 1)], binding, 8 if case.subgroup else 32)
    ir = optimized(case.name, binding, target)
    if has_fragments(ir):
        pytest.skip("fragments are not legalised (not emitted yet)")
    legal = L.legalize(ir, target, min_lane_width=8, exact_only=True)
    pristine = harness.make_inputs(case, run, seed.value)
    want = harness.execute(ir, case, run, harness.fresh_args(case, pristine))
    got = harness.fresh_args(case, pristine)
    grid, group = case.launch(run)
    interp.run(legal, _as_legal_args(legal, harness.ir_args(ir, case, got)), grid, group,
               simd_width=run.simd_width)
    one_ulp = _rounds_twice(ir)
    for i, (a, b) in enumerate(zip(harness.outputs_of(case, run, want), harness.outputs_of(case, run, got))):
        if one_ulp and a.dtype in (np.dtype(np.float16), BF16):
            assert _ulps_apart(a, b).max(initial=0) <= 1, f"output {i} is over 1 ulp off for {target} ({seed})"
        else:
            assert np.array_equal(*_raw([a, b])), f"output {i} differs after legalisation for {target} ({seed})"


def _types_in(k):
    for p in k.params:
        yield p.type
    for op in k.walk():
        if op.result is not None:
            yield op.result.type
        if op.opcode == "var":
            yield op.attrs["type"]


@pytest.mark.parametrize("target", TARGETS)
def test_no_narrow_float_or_vector_arithmetic_survives(target):
    ir = optimized("unary_chain", {"T": bf16}, target)
    legal = L.legalize(L.scalarize_vectors(ir), target)
    for op in legal.walk():
        if OPS[op.opcode].category in ("unary", "binary", "compare") or op.opcode == "fma":
            t = op.operands[0].type
            assert not isinstance(t, VectorType), op
            assert t.dtype not in (D.f16, D.bf16), f"{op.opcode} on {t} left for {target}"
    if "lower_bf16_to_bits" in get_target(target).legalize:
        for t in _types_in(legal):
            elem = t.elem if isinstance(t, VarType) else t
            assert getattr(elem, "dtype", None) != D.bf16, f"bf16 type {t} left for {target}"


# ---------------------------------------------------------------- bf16 as bits, against ml_dtypes

@kernel
def to_bf16(a: In[f32], out: Tensor[bf16]):
    i = program_id(0)
    out[i] = bf16(a[i])


@kernel
def from_bf16(a: In[bf16], out: Tensor[f32]):
    i = program_id(0)
    out[i] = f32(a[i])


def _run_bits(k, a: np.ndarray, out_dtype) -> np.ndarray:
    """Run ``k``'s GLSL-legalised IR on the interpreter; bf16 buffers travel as u16 bits."""
    legal = L.legalize(run_pipeline(k.ir(), PassContext.for_target("spirv")), "spirv")
    out = np.zeros(a.size, dtype=out_dtype)
    args = _as_legal_args(legal, [a, out])
    interp.run(legal, args, (a.size,), (64,))
    return args[1]


def _to_bf16(bits: np.ndarray) -> np.ndarray:
    """ml_dtypes' f32 -> bf16 of these f32 bit patterns (NaN inputs are part of the point)."""
    with np.errstate(invalid="ignore"):
        return bits.view(np.float32).astype(BF16)


def _encode_cases(rng) -> np.ndarray:
    """f32 bit patterns covering every rounding case of f32 -> bf16, specials and random bits."""
    high = np.arange(0, 1 << 16, 97, dtype=np.uint32) << 16
    lows = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32)
    ties = (high[:, None] | lows[None, :]).ravel()
    specials = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FBFFFFF, 0x7F7FFFFF,
                         0xFF7FFFFF, 0x7F7F8000, 0x00000001, 0x80000001, 0x00008000, 0x80000000, 0],
                        dtype=np.uint32)
    return np.concatenate([ties, specials, rng.integers(0, 1 << 32, 20000, dtype=np.uint32)])


def test_f32_to_bf16_bits_match_ml_dtypes(seed):
    bits = _encode_cases(seed.rng())
    got = _run_bits(to_bf16, bits.view(np.float32), BF16)
    want = _to_bf16(bits)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16)), seed


def test_bf16_to_f32_matches_ml_dtypes_for_every_pattern():
    every = np.arange(1 << 16, dtype=np.uint16).view(BF16)
    got = _run_bits(from_bf16, every, np.float32)
    assert np.array_equal(got.view(np.uint32), every.astype(np.float32).view(np.uint32))


def test_a_truncating_encoder_fails_the_same_check(monkeypatch, seed):
    """The check above has teeth: an encoder that drops the rounding is caught."""
    def truncating(e, x, hint=None):
        u = e.op("bitcast", x, to=D.u32)
        return e.cast(e.op("shr", u, e.const(16, D.u32)), D.u16, hint=hint)

    monkeypatch.setattr(L, "encode_bf16", truncating)
    bits = _encode_cases(seed.rng())
    got = _run_bits(to_bf16, bits.view(np.float32), BF16)
    assert not np.array_equal(got.view(np.uint16), _to_bf16(bits).view(np.uint16))


@kernel
def int_to_bf16(a: In[i32], b: In[u32], c: In[f64], oa: Tensor[bf16], ob: Tensor[bf16], oc: Tensor[bf16]):
    i = program_id(0)
    oa[i] = bf16(a[i])
    ob[i] = bf16(b[i])
    oc[i] = bf16(c[i])


def test_i32_u32_f64_to_bf16_round_once(seed):
    """The round-to-odd paths equal the interpreter's single rounding (ml_dtypes rounds f64 twice)."""
    rng = seed.rng()
    n = 4096
    # bf16 ties (8 significant bits and a half) nudged by less than half an f32 ulp: rounding
    # through f32 first lands exactly on the tie and then rounds to even, the wrong way half the time.
    m = rng.integers(1 << 7, 1 << 8, n).astype(np.int64)
    k = rng.integers(18, 24, n)
    nudge = rng.choice([-1, 1], n)
    ties = (m << k) | (np.int64(1) << (k - 1))
    a = (np.where(rng.random(n) < 0.5, -1, 1) * (ties + nudge)).astype(np.int32)
    b = ((ties << 1) + nudge).astype(np.uint32)
    c = (m + 0.5 + nudge * 2.0 ** -30) * np.exp2(rng.integers(-100, 100, n).astype(np.float64))
    c[:8] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 3.4e38, -3.4e38, 1e-45]
    ir = run_pipeline(int_to_bf16.ir(), PassContext.for_target("spirv"))
    want = [np.zeros(n, BF16) for _ in range(3)]
    interp.run(ir, [a, b, c, *want], (n,), (64,))
    legal = L.legalize(ir, "spirv")
    got = [np.zeros(n, BF16) for _ in range(3)]
    interp.run(legal, _as_legal_args(legal, [a, b, c, *got]), (n,), (64,))
    for name, g, w in zip(("i32", "u32", "f64"), got, want):
        assert np.array_equal(g.view(np.uint16), w.view(np.uint16)), f"{name} -> bf16 ({seed})"


@kernel
def half_fma(a: In[f16], b: In[f16], c: In[f16], out: Tensor[f16]):
    i = program_id(0)
    out[i] = a[i] * b[i] + c[i]


def test_narrow_fma_rounds_once(seed):
    """f16 fma through f32 rounds to odd first, so it equals the exactly rounded fma on hard cases."""
    rng = seed.rng()
    n = 1 << 15
    a, b, c = (rng.standard_normal(n).astype(np.float16) for _ in range(3))
    ir = run_pipeline(half_fma.ir(), PassContext.for_target("cuda", fp_contract=True))
    assert any(op.opcode == "fma" for op in ir.walk())
    want, got = np.zeros(n, np.float16), np.zeros(n, np.float16)
    interp.run(ir, [a, b, c, want], (n,), (64,))
    interp.run(L.legalize(ir, "cuda"), [a, b, c, got], (n,), (64,))
    assert np.array_equal(want.view(np.uint16), got.view(np.uint16)), seed

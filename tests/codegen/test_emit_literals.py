"""Literals and operator spellings of each dialect: exact values, the IR's integer and float rules."""

import numpy as np
import pytest

from iron.codegen.emit.cstyle import Operand
from iron.codegen.emit.cxx import CudaDialect, HipDialect
from iron.codegen.emit.glsl import GlslDialect
from iron.codegen.emit.msl import MslDialect
from iron.codegen.targets import default_profile
from iron.core import dtypes as D
from iron.core.types import ScalarType

DIALECTS = {"cuda": CudaDialect, "hip": HipDialect, "spirv": GlslDialect, "metal": MslDialect}


def dialect(target: str):
    return DIALECTS[target](default_profile(target), "k")


def var(name: str, dt: D.DType) -> Operand:
    return Operand(name, ScalarType(dt))


def const(value, dt: D.DType, target: str) -> Operand:
    return Operand(dialect(target).literal(value, dt), ScalarType(dt), value, True)


def _number(text: str) -> str:
    """The decimal inside a float literal: ``1.5f`` -> ``1.5``, ``half(0.5f)`` -> ``0.5``."""
    inner = text.split("(")[-1].rstrip(")")
    return inner.rstrip("fhlF") if not inner.endswith("e") else inner


@pytest.mark.parametrize("target", DIALECTS)
def test_f32_literals_read_back_as_the_same_bits(target, seed):
    d = dialect(target)
    bits = seed.rng().integers(0, 0x7F800000, 5000, dtype=np.uint32)
    values = np.concatenate([bits.view(np.float32), -bits[:100].view(np.float32),
                             np.array([0.1, 1.0, 3.4028235e38, 1e-45, 16777217.0], dtype=np.float32)])
    for v in values:
        text = d.literal(float(v), D.f32)
        assert np.float32(_number(text)).view(np.uint32) == v.view(np.uint32), (text, v)


@pytest.mark.parametrize("target,inf,nan,neg_zero", [
    ("cuda", "__uint_as_float(0x7f800000u)", "__uint_as_float(0x7fc00000u)", "-0.0f"),
    ("spirv", "uintBitsToFloat(0x7f800000u)", "uintBitsToFloat(0x7fc00000u)", "-0.0"),
    ("metal", "as_type<float>(0x7f800000u)", "as_type<float>(0x7fc00000u)", "-0.0f"),
])
def test_non_finite_and_signed_zero_literals_keep_their_bits(target, inf, nan, neg_zero):
    d = dialect(target)
    assert d.literal(float("inf"), D.f32) == inf
    assert d.literal(float("nan"), D.f32) == nan
    assert d.literal(-0.0, D.f32) == neg_zero
    assert "0xff800000" in d.literal(float("-inf"), D.f32)


@pytest.mark.parametrize("target,expected", [
    ("cuda", ["(-2147483647 - 1)", "4294967295u", "(-9223372036854775807LL - 1LL)", "18446744073709551615ULL",
              "(signed char)-128", "__float2half_rn(0.5f)", "__float2bfloat16_rn(0.5f)", "0.5"]),
    ("hip", ["(-2147483647 - 1)", "4294967295u", "(-9223372036854775807LL - 1LL)", "18446744073709551615ULL",
             "(signed char)-128", "(_Float16)0.5f", None, "0.5"]),
    ("spirv", ["(-2147483647 - 1)", "4294967295u", "(-9223372036854775807l - 1l)", "18446744073709551615ul",
               "int8_t(-128)", "0.5hf", None, "0.5lf"]),
    ("metal", ["(-2147483647 - 1)", "4294967295u", "(-9223372036854775807l - 1l)", "18446744073709551615ul",
               "char(-128)", "half(0.5f)", "bfloat(0.5f)", None]),
])
def test_typed_literals(target, expected):
    d = dialect(target)
    cases = [(-2**31, D.i32), (2**32 - 1, D.u32), (-2**63, D.i64), (2**64 - 1, D.u64), (-128, D.i8),
             (0.5, D.f16), (0.5, D.bf16), (0.5, D.f64)]
    for (value, dt), want in zip(cases, expected):
        if want is not None:
            assert d.literal(value, dt) == want, (value, dt)


@pytest.mark.parametrize("target", DIALECTS)
def test_shift_counts_are_taken_modulo_the_width(target):
    d = dialect(target)
    a, b = var("a", D.i32), var("b", D.i32)
    assert d.binary("shl", a, b) == "a << (b & 31)"
    assert d.binary("shr", var("x", D.u32), var("n", D.u32)) == f"x >> (n & {d.literal(31, D.u32)})"
    assert d.binary("shl", a, const(33, D.i32, target)) == "a << 1"  # folded: 33 mod 32


def test_glsl_signed_remainder_truncates_like_c():
    d = dialect("spirv")
    assert d.binary("rem", var("a", D.i32), var("b", D.i32)) == "a - (a / b) * b"
    assert d.binary("rem", var("a", D.u32), var("b", D.u32)) == "a % b"
    assert dialect("cuda").binary("rem", var("a", D.i32), var("b", D.i32)) == "a % b"


def test_float_min_max_ignore_nan_on_every_target():
    assert dialect("cuda").binary("min", var("a", D.f32), var("b", D.f32)) == "fminf(a, b)"
    assert dialect("metal").binary("max", var("a", D.f32), var("b", D.f32)) == "fmax(a, b)"
    glsl = dialect("spirv")
    assert glsl.binary("min", var("a", D.f32), var("b", D.f32)) == "iron_fmin(a, b)"
    assert "isnan(a)" in glsl.helpers["iron_fmin"]  # GLSL's own min is undefined on NaN


@pytest.mark.parametrize("target", DIALECTS)
def test_casts_to_bool_compare_with_zero_and_round_is_half_even(target):
    d = dialect(target)
    assert d.convert(var("x", D.f32), D.f32, D.bool_) == f"x != {d.literal(0, D.f32)}"
    assert d.unary("round", var("x", D.f32)) in ("rintf(x)", "roundEven(x)", "rint(x)")


def test_cuda_narrow_conversions_round_once():
    d = dialect("cuda")
    assert d.convert(var("i", D.i32), D.i32, D.f16) == "__int2half_rn(i)"
    assert d.convert(var("i", D.i8), D.i8, D.bf16) == "__short2bfloat16_rn((short)i)"
    assert d.convert(var("h", D.f16), D.f16, D.i32) == "(int)__half2float(h)"
    assert d.convert(var("h", D.f16), D.f16, D.bf16) == "__float2bfloat16_rn(__half2float(h))"

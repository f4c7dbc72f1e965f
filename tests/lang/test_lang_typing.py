"""The promotion and folding rules of docs/language.md, read off the IR the frontend emits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iron import In, Tensor, bf16, bool_, f16, f32, f64, i16, i32, i64, kernel, u8, u32, variants
from iron.core.errors import KernelTypeError
from iron.core.types import ScalarType, VectorType
from iron.lang import floor, shared, sqrt, static_range, vec


def result_of(k, opcode: str, **binding):
    """The single op ``opcode`` of the kernel's IR."""
    (op,) = [op for op in k.ir(**binding).walk() if op.opcode == opcode]
    return op


def casts(k, **binding) -> list[tuple[str, str]]:
    return [(str(op.operands[0].type), str(op.result.type)) for op in k.ir(**binding).walk() if op.opcode == "cast"]


@kernel
def mixed(x: f16, y: bf16, a: i32, b: u32, c: i64, d: u8, e: i16, out: Tensor[f32]):
    out[0] = f32(x + y)
    out[1] = f32(a + b)
    out[2] = f32(a + c)
    out[3] = f32(d + e)
    out[4] = f32(x + a)


def test_two_typed_operands_meet_at_the_promoted_type() -> None:
    adds = [str(op.result.type) for op in mixed.ir().walk() if op.opcode == "add"]
    # f16+bf16 -> f32; i32+u32 -> u32 (unsigned wins at one width); i32+i64 -> i64;
    # u8+i16 -> i16 (wider wins); f16+i32 -> f16 (float beats int)
    assert adds == ["f32", "u32", "i64", "i16", "f16"]
    assert ("f16", "f32") in casts(mixed) and ("bf16", "f32") in casts(mixed)


@kernel
def weak_literals(h: f16, n: i32, out: Tensor[f16], iout: Tensor[i32], fout: Tensor[f32]):
    out[0] = h * 2 + 0.5
    iout[0] = n * 3
    fout[0] = n * 0.5
    fout[1] = n / 2
    iout[1] = n // 2 + n % 3


def test_weak_literals_take_the_other_operands_type() -> None:
    k = weak_literals.ir()
    consts = [(op.attrs["value"], str(op.result.type)) for op in k.walk() if op.opcode == "const"]
    assert (2.0, "f16") in consts and (0.5, "f16") in consts and (3, "i32") in consts
    # a float literal with an int operand: f32, the int converted
    assert ("i32", "f32") in casts(weak_literals)
    (div_f,) = [op for op in k.walk() if op.opcode == "div" and op.result.type == ScalarType(f32)]
    assert div_f.operands[0].owner.opcode == "cast"  # n / 2 is true division in f32
    int_ops = [op.opcode for op in k.walk() if op.opcode in ("div", "rem") and op.result.type == ScalarType(i32)]
    assert int_ops == ["div", "rem"]


@kernel
def float_floor_div_and_powers(x: f32, n: i32, out: Tensor[f32], iout: Tensor[i32]):
    out[0] = x // 2.0
    out[1] = x ** 2
    out[2] = x ** 0.5
    iout[0] = n ** 3


def test_floor_division_on_floats_and_small_powers() -> None:
    k = float_floor_div_and_powers.ir()
    ops = [op.opcode for op in k.walk()]
    assert ops.count("floor") == 1 and ops.count("pow") == 1
    # x ** 2 is one multiply, n ** 3 two (by squaring), exactly wrapping like any integer op.
    assert ops.count("mul") == 3


@kernel
def folds(iout: Tensor[i64], fout: Tensor[f64], bout: Tensor[bool_]):
    iout[0] = -7 // 2
    iout[1] = -7 % 2
    iout[2] = 7 // -2
    iout[3] = 2 ** 10
    iout[4] = 1 << 4 | 3
    fout[0] = -7.0 // 2
    fout[1] = -7.5 % 2
    fout[2] = 1.0 / 0.0
    fout[3] = 7 / 2
    bout[0] = (3 > 2) and (2 > 1)


def test_constant_folding_follows_kernel_semantics() -> None:
    """Integer // and % truncate (C), float % is fmod, division by zero is IEEE: as at run time."""
    stored = {}
    for op in folds.ir().walk():
        if op.opcode == "store":
            stored[(op.operands[0].hint, op.operands[1].owner.attrs["value"])] = op.operands[2].owner.attrs["value"]
    assert stored == {
        ("iout", 0): -3, ("iout", 1): -1, ("iout", 2): -3, ("iout", 3): 1024, ("iout", 4): 19,
        ("fout", 0): -4.0, ("fout", 1): -1.5, ("fout", 2): math.inf, ("fout", 3): 3.5, ("bout", 0): True,
    }


def test_static_int_expressions_size_shared_arrays() -> None:
    k = sized.ir(BLOCK=256)
    (alloc,) = [op for op in k.walk() if op.opcode == "shared_alloc"]
    assert alloc.attrs["shape"] == (128, 3)


@kernel(variants(BLOCK=[256]))
def sized(out: Tensor[f32]):  # BLOCK comes from variants(...)
    s = shared(f32, (BLOCK // 2, int(math.sqrt(9))))  # noqa: F821 - a variant parameter
    out[0] = s[0, 0]


HALF = np.float32(0.5)
SCALE = 3


@kernel
def globals_fold(out: Tensor[f16], x: f16):
    out[0] = x * HALF + SCALE * math.pi


def test_globals_numpy_scalars_and_math_constants_fold() -> None:
    k = globals_fold.ir()
    consts = [op.attrs["value"] for op in k.walk() if op.opcode == "const" and op.result.type == ScalarType(f16)]
    assert consts == [0.5, float(np.float16(3 * math.pi))]


@kernel
def stores(a: Tensor[u8], b: Tensor[f16], x: f32):
    a[0] = 200
    b[0] = 1.5
    b[1] = f16(x)


def test_stores_convert_weak_literals_only() -> None:
    k = stores.ir()
    consts = [(op.attrs["value"], str(op.result.type)) for op in k.walk() if op.opcode == "const"]
    assert (200, "u8") in consts and (1.5, "f16") in consts


@kernel
def annotated(out: Tensor[f16], x: f32):
    y: f16 = x
    z: f16 = 2
    out[0] = y + z


def test_annotated_assignment_casts() -> None:
    k = annotated.ir()
    assert casts(annotated) == [("f32", "f16")]
    assert [op.attrs["value"] for op in k.walk() if op.opcode == "const" and op.result.type == ScalarType(f16)] \
        == [2.0]


@kernel
def vectors(a: In[f32], out: Tensor[f32]):
    v = a.load(0, width=4)
    w = v * 2 + vec(1, 2, 3, 4)
    out[0] = w[0] + w[3] + sqrt(w)[1]


def test_vector_arithmetic_is_elementwise_with_splatted_scalars() -> None:
    k = vectors.ir()
    mul = next(op for op in k.walk() if op.opcode == "mul")
    assert mul.result.type == VectorType(f32, 4) and mul.operands[1].owner.attrs["value"] == (2.0,) * 4
    made = next(op for op in k.walk() if op.opcode == "vec_make")
    assert made.result.type == VectorType(i32, 4)  # vec() of int literals is an i32 vector...
    assert ("i32x4", "f32x4") in casts(vectors)  # ...which the f32 vector promotes
    assert [op.attrs["index"] for op in k.walk() if op.opcode == "vec_extract"] == [0, 3, 1]


@kernel
def math_on_ints(n: i32, out: Tensor[f32]):
    out[0] = floor(n) + sqrt(4)


def test_float_math_converts_ints_and_folds_constants() -> None:
    k = math_on_ints.ir()
    assert casts(math_on_ints) == [("i32", "f32")]
    assert 2.0 in [op.attrs["value"] for op in k.walk() if op.opcode == "const"]


@kernel
def static_loop_folds(out: Tensor[i32]):
    stride = 1
    for _ in static_range(4):
        stride *= 2
    out[0] = stride


def test_rebinding_in_straight_line_and_static_loops_keeps_constants() -> None:
    k = static_loop_folds.ir()
    assert [op.opcode for op in k.walk()] == ["const", "const", "store"]
    assert [op.attrs["value"] for op in k.walk() if op.opcode == "const"] == [0, 16]


@kernel
def out_of_range_literal_store(a: Tensor[u8]):
    a[0] = 256


def test_literal_stored_must_fit() -> None:
    with pytest.raises(KernelTypeError, match="the constant 256 does not fit"):
        out_of_range_literal_store.ir()


"""``@iron.func`` helpers: specialisation, mangled names, tuple results, folding, nesting, launches."""

from __future__ import annotations

import numpy as np
import pytest
from lang_support import assert_located

import iron
from iron import In, T, Tensor, f16, f32, i32, kernel, variants
from iron.core.errors import ArityError, KernelTypeError, UnsupportedSyntaxError
from iron.core.types import ScalarType, TupleType
from iron.lang import KernelOnlyError, program_id

HERE = __file__


@iron.func
def square_and_cube(x):
    sq = x * x
    return sq, sq * x


@iron.func
def scaled(x: T, k):
    return x * k


@iron.func
def twice(n):
    return n * 2


@iron.func
def poly(x):
    s, c = square_and_cube(x)
    return s + c + scaled(x, 2)


@kernel(variants(T=[f32, f16]))
def uses_helpers(a: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        s, c = square_and_cube(a[i])
        out[i] = scaled(s, 3) + c + T(twice(4)) + poly(a[i])


def test_helpers_become_functions_named_after_their_types() -> None:
    k = uses_helpers.ir(T=f16)
    assert sorted(k.functions) == ["poly__f16", "scaled__f16__2", "scaled__f16__3", "square_and_cube__f16"]
    f = k.functions["square_and_cube__f16"]
    assert f.result_type == TupleType((ScalarType(f16), ScalarType(f16)))
    assert [op.opcode for op in f.body.ops][-2:] == ["tuple_make", "return"]
    calls = [op.attrs["callee"] for op in k.walk() if op.opcode == "call"]
    assert calls == ["square_and_cube__f16", "scaled__f16__3", "poly__f16"]
    assert [op.result.hint for op in k.walk() if op.opcode == "tuple_get"] == ["s", "c"]


def test_compile_time_results_fold_at_the_call_site() -> None:
    k = uses_helpers.ir(T=f32)
    assert not any(name.startswith("twice") for name in k.functions)
    assert 8.0 in [op.attrs["value"] for op in k.walk() if op.opcode == "const"]


def test_helpers_specialise_per_argument_type() -> None:
    assert "square_and_cube__f32" in uses_helpers.ir(T=f32).functions
    assert "square_and_cube__f16" in uses_helpers.ir(T=f16).functions


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_helpers_compute_the_right_values(dtype) -> None:
    x = np.linspace(-2, 2, 37).astype(dtype)
    out = np.zeros_like(x)
    uses_helpers[x.size](x, out, x.size)
    xd = x.astype(np.float64)
    expected = 3 * xd**2 + xd**3 + 8 + (xd**2 + xd**3 + 2 * xd)
    tol = 1e-5 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(out.astype(np.float64), expected, rtol=tol, atol=tol)


@iron.func
def store_pair(t, i, v):
    t[i] = v
    t[i + 1] = v


@kernel
def helper_with_tensor(a: Tensor[i32]):
    store_pair(a, 2 * program_id(0), program_id(0))


def test_helpers_take_tensors_and_report_access_through_calls() -> None:
    k = helper_with_tensor.ir()
    assert k.params[0].access == "write"
    a = np.zeros(8, np.int32)
    helper_with_tensor[4](a)
    assert a.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


@iron.func
def typed_param(x: f32):
    return x + 1.0


@kernel
def wrong_helper_type(a: Tensor[i32]):
    a[0] = i32(typed_param(a[1]))


@kernel
def wrong_helper_arity(a: Tensor[f32]):
    a[0] = typed_param(a[1], 2)


def test_helper_annotations_and_arity_are_checked() -> None:
    with pytest.raises(KernelTypeError) as info:
        wrong_helper_type.ir()
    assert "typed_param() parameter 'x' is f32, got i32" in info.value.message
    assert_located(info.value, HERE, "typed_param(a[1]))")
    with pytest.raises(ArityError) as info2:
        wrong_helper_arity.ir()
    assert "wrong arguments for typed_param(): too many positional arguments; expected typed_param(x)" \
        in info2.value.message


@iron.func
def ping(x):
    return pong(x)


@iron.func
def pong(x):
    return ping(x)


@kernel
def mutual_recursion(a: Tensor[f32]):
    a[0] = ping(a[0])


def test_recursion_is_rejected_with_the_chain() -> None:
    with pytest.raises(UnsupportedSyntaxError) as info:
        mutual_recursion.ir()
    assert "recursive call of helper 'ping' (ping -> pong -> ping)" in info.value.message
    assert_located(info.value, HERE, "return ping(x)", at="ping(x)")


@iron.func
def two_exits(x):
    if x > 0.0:
        return x  # the early exit
    return -x


@kernel
def calls_two_exits(a: Tensor[f32]):
    a[0] = two_exits(a[0])


def test_helper_must_return_once_at_its_end() -> None:
    with pytest.raises(UnsupportedSyntaxError) as info:
        calls_two_exits.ir()
    assert "helper 'two_exits' returns before its end" in info.value.message
    assert "return that variable after the if" in info.value.hint
    assert_located(info.value, HERE, "return x  # the early exit")


def test_helpers_cannot_run_as_python() -> None:
    with pytest.raises(KernelOnlyError, match="can only be called from a kernel"):
        twice(3)


def test_helper_ops_point_into_the_helper_source() -> None:
    f = uses_helpers.ir(T=f32).functions["square_and_cube__f32"]
    with open(HERE, encoding="utf-8") as src:
        lines = src.read().splitlines()
    for op in f.body.walk():
        assert op.loc is not None and op.loc.file == HERE
        assert "sq" in lines[op.loc.line - 1]  # `sq = x * x` and `return sq, sq * x`
    assert f.body.ops[-1].opcode == "return" and lines[f.body.ops[-1].loc.line - 1].strip() == "return sq, sq * x"

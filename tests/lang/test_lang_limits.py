"""The frontend's limits: long generated expressions compile, huge unroll requests and misplaced indexing are
clear kernel errors at the user's line with a hint that says what to do."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
from lang_support import assert_located, compile_error

from iron import Tensor, f32, kernel
from iron.core.errors import KernelTypeError, UnsupportedSyntaxError
from iron.lang import local, program_id, shared, thread_id
from iron.lang.lower_stmt import MAX_UNROLL

HERE = __file__
TABLE = np.arange(8, dtype=np.float32)


# ---------------------------------------------------------------- long expressions

def _load_module(tmp_path, name: str, source: str):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


@pytest.mark.parametrize("terms", [2000])
def test_a_generated_expression_of_thousands_of_terms_compiles_and_runs(tmp_path, terms):
    coefficients = [(k % 7 + 1) * 0.25 for k in range(terms)]
    poly = " + ".join(f"{c} * x" for c in coefficients)
    module = _load_module(tmp_path, "long_poly", (
        "from iron import Tensor, f32, kernel\nfrom iron.lang import program_id\n\n@kernel\n"
        "def long_poly(a: Tensor[f32], out: Tensor[f32]):\n    i = program_id(0)\n    x = a[i]\n"
        f"    out[i] = {poly}\n"))
    a = np.array([1.0, -0.5, 3.0, 0.0], np.float32)
    out = np.zeros_like(a)
    module.long_poly[a.size](a, out)
    want = np.zeros_like(a)
    for c in coefficients:  # f32, left to right, as the kernel's chain
        want = want + np.float32(c) * a
    assert out.tolist() == want.tolist()
    ir = module.long_poly.ir()
    assert sum(1 for op in ir.walk() if op.opcode == "add") == terms - 1


@kernel
def left_to_right(a: Tensor[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = a[i] - a[i + 1] * 2.0 - a[i + 2] / 4.0 + a[i + 3]


def test_a_chain_is_lowered_left_to_right_with_precedence_intact():
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    out = np.zeros(1, np.float32)
    left_to_right[1](a, out)
    assert out.tolist() == [1.0 - 2.0 * 2.0 - 3.0 / 4.0 + 4.0]
    loads = [op for op in left_to_right.ir().walk() if op.opcode == "load"]
    assert [op.loc.col for op in loads] == sorted(op.loc.col for op in loads)


# ---------------------------------------------------------------- unroll requests

@kernel
def huge_unroll(a: Tensor[f32], out: Tensor[f32]):
    s = 0.0
    for j in range(16000, unroll=16000):
        s += a[j]
    out[program_id(0)] = s


@kernel
def largest_unroll(a: Tensor[f32], out: Tensor[f32]):
    s = 0.0
    for j in range(a.size, unroll=1024):
        s += a[j]
    out[program_id(0)] = s


def test_an_unroll_request_over_the_limit_is_a_kernel_error_at_its_line():
    err = compile_error(huge_unroll, KernelTypeError)
    assert f"unroll=16000 is over the limit of {MAX_UNROLL} copies of the loop body" in err.message
    assert "4 to 16 is typical" in err.hint
    assert_located(err, HERE, "unroll=16000)", at="16000):")


def test_an_unroll_request_at_the_limit_compiles():
    a = np.arange(10, dtype=np.float32)
    out = np.zeros(1, np.float32)
    largest_unroll[1](a, out)
    assert out.tolist() == [45.0]
    assert MAX_UNROLL == 1024


# ---------------------------------------------------------------- indexing hints

@kernel
def two_indices_on_a_flat_tensor(a: Tensor[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    out[i] = a[i, 0]


@kernel
def three_indices_on_a_2d_shared_array(out: Tensor[f32]):
    s = shared(f32, (4, 8))
    t = thread_id(0)
    out[t] = s[t, 0, 1]


@kernel
def reads_a_global_numpy_array(out: Tensor[f32]):
    i = program_id(0)
    out[i] = TABLE[i]


@kernel
def writes_a_global_numpy_array(out: Tensor[f32]):
    i = program_id(0)
    TABLE[i] = out[i]


@kernel
def constant_lookup_in_a_global_numpy_array(out: Tensor[f32]):
    out[program_id(0)] = TABLE[3] + f32(len(local(f32, 2)))


def test_two_indices_on_a_flat_tensor_say_it_is_flat_not_to_cast():
    err = compile_error(two_indices_on_a_flat_tensor, KernelTypeError)
    assert "the tensor 'a' (tensor<f32>) takes one flat index, got 2" in err.message
    assert "cast" not in err.hint and "a[i * ncols + j]" in err.hint and "flat" in err.hint
    assert_located(err, HERE, "out[i] = a[i, 0]", at="a[i, 0]")


def test_wrong_index_count_on_a_shared_array_names_its_dimensions():
    err = compile_error(three_indices_on_a_2d_shared_array, KernelTypeError)
    assert "has 2 dimensions (4, 8), got 3 indices" in err.message
    assert "cast" not in err.hint and "2 indices" in err.hint
    assert_located(err, HERE, "s[t, 0, 1]")


@pytest.mark.parametrize("k,cls,snippet,at", [
    (reads_a_global_numpy_array, KernelTypeError, "out[i] = TABLE[i]", "TABLE[i]"),
    (writes_a_global_numpy_array, UnsupportedSyntaxError, "TABLE[i] = out[i]", None),
])
def test_indexing_a_global_numpy_array_says_to_pass_it_as_an_argument(k, cls, snippet, at):
    err = compile_error(k, cls)
    assert "host array (ndarray of shape (8,)) from outside the kernel" in err.message
    assert "cast" not in err.hint and "pass the array as an argument" in err.hint
    assert_located(err, HERE, snippet, at=at)


def test_a_constant_index_into_a_global_numpy_array_still_folds():
    out = np.zeros(2, np.float32)
    constant_lookup_in_a_global_numpy_array[2](out)
    assert out.tolist() == [5.0, 5.0]

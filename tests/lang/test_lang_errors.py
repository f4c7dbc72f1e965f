"""Every class of user mistake: the exception class, its message, the exact file/line/column, the source line
and the hint.  Each broken kernel lives in this file, so the expected positions are found in it by text."""

from __future__ import annotations

import numpy as np
import pytest
from lang_support import assert_located, compile_error, where

import iron
from iron import Constexpr, In, Tensor, f16, f32, i32, kernel, u8
from iron.core.errors import (
    ArityError,
    DivergentBarrierError,
    IronCompileError,
    KernelTypeError,
    ReadOnlyStoreError,
    RegisterIndexError,
    SharedShapeError,
    StaticAssertionError,
    UnknownNameError,
    UnsupportedSyntaxError,
)
from iron.lang import atomic_add, barrier, exp, group_id, local, program_id, shared, store, thread_id

HERE = __file__


# ---------------------------------------------------------------- unknown names

@kernel
def misspelled_builtin(a: Tensor[f32]):
    i = program_id(0)
    a[i] = exq(a[i])  # noqa: F821


def test_unknown_name_suggests_the_close_builtin() -> None:
    err = compile_error(misspelled_builtin, UnknownNameError)
    assert "name 'exq' is not defined" in err.message
    assert err.hint == "did you mean 'exp'?"
    assert err.kernel == "misspelled_builtin" and "(in kernel 'misspelled_builtin')" in str(err)
    assert_located(err, HERE, "exq(a[i])")


@kernel
def loop_variable_after_loop(a: Tensor[f32], n: int):
    for j in range(n):
        a[j] = 0.0
    a[0] = f32(j)  # noqa: F821


def test_loop_variable_is_not_available_after_its_loop() -> None:
    err = compile_error(loop_variable_after_loop, UnknownNameError)
    assert "loop variable 'j' is not available after its loop" in err.message
    assert "copy the value" in err.hint
    assert_located(err, HERE, "j)  # noqa: F821")


@kernel
def assigned_only_in_branch_read_before(a: Tensor[f32], n: int):
    i = program_id(0)
    a[i] = late_value  # noqa: F821
    late_value = 1.0  # noqa: F841


def test_use_before_assignment_names_the_variable() -> None:
    err = compile_error(assigned_only_in_branch_read_before, UnknownNameError)
    assert "'late_value' has no value here" in err.message
    assert "assign it before" in err.hint
    assert_located(err, HERE, "late_value  # noqa: F821")


# ---------------------------------------------------------------- unsupported syntax

@kernel
def uses_comprehension(a: Tensor[f32]):
    xs = [k * 2 for k in range(3)]  # noqa: F841


@kernel
def uses_with(a: Tensor[f32]):
    with open("x"):
        pass


@kernel
def returns_a_value(a: Tensor[f32]):
    return 1


@kernel
def iterates_a_list(a: Tensor[f32]):
    for v in [1, 2]:
        a[0] = v


@pytest.mark.parametrize("k, snippet, message, hint", [
    (uses_comprehension, "[k * 2 for k in range(3)]", "a list comprehension is not supported",
     "static_range"),
    (uses_with, 'with open("x"):', "the 'With' statement is not supported", "context managers"),
    (returns_a_value, "return 1", "a kernel returns no value", "store results into an output tensor"),
    (iterates_a_list, "[1, 2]:", "iterates over range(...) or static_range(...)", "for i in range(n)"),
], ids=["comprehension", "with", "return-value", "for-over-list"])
def test_unsupported_syntax(k, snippet: str, message: str, hint: str) -> None:
    err = compile_error(k, UnsupportedSyntaxError)
    assert message in err.message and hint in err.hint
    assert_located(err, HERE, snippet)


# ---------------------------------------------------------------- type errors

@kernel
def store_f32_into_f16(a: In[f32], b: Tensor[f16]):
    i = program_id(0)
    b[i] = a[i] * 2.0


def test_store_of_another_type_needs_a_cast() -> None:
    err = compile_error(store_f32_into_f16, KernelTypeError)
    assert err.message == "'b' holds f16; the stored value is f32"
    assert err.hint == "convert explicitly: b[i] = f16(value)"
    assert_located(err, HERE, "a[i] * 2.0")


@kernel
def bool_arithmetic(a: Tensor[f32]):
    i = program_id(0)
    flag = i > 0
    a[i] = f32(flag + 1)


def test_bool_takes_no_part_in_arithmetic() -> None:
    err = compile_error(bool_arithmetic, KernelTypeError)
    assert "'+' on bool" in err.message and "i32(flag)" in err.hint
    assert_located(err, HERE, "flag + 1")


@kernel
def int_accumulator_gets_floats(a: In[f32], out: Tensor[f32], n: int):
    total = 0
    for j in range(n):
        total += a[j]
    out[0] = f32(total)


def test_variable_keeps_the_type_of_its_first_value() -> None:
    err = compile_error(int_accumulator_gets_floats, KernelTypeError)
    assert err.message == "variable 'total' holds i32; this assigns f32"
    assert "0.0 instead of 0" in err.hint
    assert_located(err, HERE, "total += a[j]")


@kernel
def literal_too_wide(a: Tensor[u8]):
    i = program_id(0)
    a[i] = a[i] + 300


def test_weak_literal_must_fit_the_other_operand() -> None:
    err = compile_error(literal_too_wide, KernelTypeError)
    assert "the constant 300 does not fit u8" in err.message
    assert_located(err, HERE, "a[i] + 300")


@kernel
def float_index(a: Tensor[f32]):
    x = a[0]
    a[x] = 1.0


def test_index_must_be_an_integer() -> None:
    err = compile_error(float_index, KernelTypeError)
    assert "the index must be an integer, got a value of type f32" in err.message
    assert err.hint == "convert it with i32(x)"
    assert_located(err, HERE, "a[x] = 1.0")


# ---------------------------------------------------------------- arity

@kernel
def too_many_axes(a: Tensor[f32]):
    a[0] = f32(program_id(0, 1))


@kernel
def store_without_value(a: Tensor[f32]):
    store(a, 1)


@kernel
def range_with_four_args(a: Tensor[f32]):
    for k in range(0, 8, 2, 1):
        a[k] = 0.0


@pytest.mark.parametrize("k, snippet, message", [
    (too_many_axes, "program_id(0, 1)", "wrong arguments for program_id(): too many positional arguments; "
                                        "expected program_id(axis=0)"),
    (store_without_value, "store(a, 1)", "expected store(a[i], v) or store(a, i, v)"),
    (range_with_four_args, "range(0, 8, 2, 1)", "range() takes 1 to 3 arguments, got 4"),
], ids=["program_id", "store", "range"])
def test_arity_names_the_builtin_and_its_signature(k, snippet: str, message: str) -> None:
    err = compile_error(k, ArityError)
    assert message in err.message
    assert_located(err, HERE, snippet)


def test_arity_hint_is_the_builtins_usage_and_documentation() -> None:
    err = compile_error(too_many_axes, ArityError)
    assert err.hint.startswith("program_id(axis=0): The thread's global index along axis")


# ---------------------------------------------------------------- read-only tensors

@kernel
def writes_input(a: In[f32]):
    a[program_id(0)] = 1.0


@kernel
def atomic_on_input(a: In[i32]):
    atomic_add(a, 0, 1)


@iron.func
def write_first(t, v):
    t[0] = v


@kernel
def writes_input_through_helper(a: In[f32]):
    write_first(a, 2.0)


@pytest.mark.parametrize("k, snippet, message", [
    (writes_input, "a[program_id(0)] = 1.0", "cannot store to 'a': it is declared In[f32] (read-only)"),
    (atomic_on_input, "atomic_add(a, 0, 1)", "cannot apply atomic_add() to 'a'"),
    (writes_input_through_helper, "t[0] = v", "cannot store to 't'"),
], ids=["store", "atomic", "through-helper"])
def test_store_to_read_only_tensor(k, snippet: str, message: str) -> None:
    err = compile_error(k, ReadOnlyStoreError)
    assert message in err.message
    assert "Tensor[...]" in err.hint
    assert_located(err, HERE, snippet)


# ---------------------------------------------------------------- shared arrays and register arrays

@kernel
def shared_of_runtime_size(a: Tensor[f32], rows_at_runtime: int):
    s = shared(f32, rows_at_runtime)
    s[0] = 1.0


def test_shared_shape_must_be_constant() -> None:
    err = compile_error(shared_of_runtime_size, SharedShapeError)
    assert "a shared-array dimension must be a compile-time int, got a value of type i32" in err.message
    assert "known at compile time" in err.hint
    assert_located(err, HERE, "rows_at_runtime)")


@kernel
def register_index_at_run_time(a: Tensor[f32], n: int):
    r = local(f32, 4)
    a[0] = r[n]


def test_register_array_needs_a_constant_index() -> None:
    err = compile_error(register_index_at_run_time, RegisterIndexError)
    assert "register array 'r' index must be a compile-time int" in err.message
    assert "static_range" in err.hint
    assert_located(err, HERE, "r[n]")


# ---------------------------------------------------------------- barriers in divergent control flow

@kernel
def barrier_under_thread_condition(a: Tensor[f32], n: int):
    i = program_id(0)
    if i < n:
        barrier()


@kernel
def barrier_after_early_return(a: Tensor[f32], n: int):
    i = program_id(0)
    if i >= n:
        return
    barrier()


@kernel
def barrier_in_thread_dependent_loop(a: Tensor[f32]):
    for _ in range(thread_id(0)):
        barrier()


@kernel
def barrier_in_loop_left_early(a: Tensor[f32], n: int):
    k = 0
    while k < n:
        if a[program_id(0)] > 0.0:
            break
        barrier()
        k += 1


@kernel
def barrier_before_a_divergent_break(a: Tensor[f32], n: int):
    for _ in range(n):
        barrier()  # in the next iteration, the threads that broke out are missing
        if a[program_id(0)] > 1.0:
            break


@iron.func
def sync_helper(x):
    barrier()
    return x


@kernel
def helper_barrier_under_condition(a: Tensor[f32]):
    if thread_id(0) == 0:
        a[0] = sync_helper(a[0])


@pytest.mark.parametrize("k, snippet, reason, cause", [
    (barrier_under_thread_condition, "barrier()", "inside an if whose condition depends on the thread",
     "if i < n:"),
    (barrier_after_early_return, "barrier()", "after a return that only some threads take", "if i >= n:"),
    (barrier_in_thread_dependent_loop, "barrier()", "inside a loop whose bounds depend on the thread",
     "for _ in range(thread_id(0)):"),
    (barrier_in_loop_left_early, "barrier()", "inside a loop that only some threads leave early",
     "if a[program_id(0)] > 0.0:"),
    (barrier_before_a_divergent_break, "barrier()  # in the next iteration", "inside a loop that only some "
     "threads leave early", "if a[program_id(0)] > 1.0:"),
    (helper_barrier_under_condition, "sync_helper(a[0])", "inside an if whose condition depends on the thread",
     "if thread_id(0) == 0:"),
], ids=["if", "early-return", "loop-bounds", "break", "barrier-before-break", "helper-call"])
def test_divergent_barrier(k, snippet: str, reason: str, cause: str) -> None:
    err = compile_error(k, DivergentBarrierError)
    cause_line, _ = where(HERE, cause)
    assert reason in err.message and f"(line {cause_line})" in err.message
    assert "every thread of a group must reach each barrier()" in err.hint
    # The barrier (or the call that reaches one) of this kernel: the nearest one around the cause.
    occurrence = 1
    while where(HERE, snippet, occurrence)[0] < cause_line - 1:
        occurrence += 1
    assert_located(err, HERE, snippet, occurrence)


@kernel
def barrier_under_uniform_conditions(a: Tensor[f32], n: int):
    s = shared(f32, 64)
    if group_id(0) < n:
        barrier()
    flag = a[0]
    for _ in range(n):
        if flag > 0.0:
            barrier()
    s[thread_id(0)] = 1.0


def test_barrier_under_uniform_control_is_accepted() -> None:
    ir = barrier_under_uniform_conditions.ir()
    assert sum(op.opcode == "barrier" for op in ir.walk()) == 2


# ---------------------------------------------------------------- static asserts and internal errors

@kernel
def needs_multiple_of_four(a: Tensor[f32], K: Constexpr[int]):
    assert K % 4 == 0, "K must be a multiple of 4"
    a[0] = f32(K)


def test_static_assert_reports_its_message() -> None:
    err = compile_error(needs_multiple_of_four, StaticAssertionError, K=6)
    assert err.message == "K must be a multiple of 4"
    assert_located(err, HERE, 'assert K % 4 == 0, "K must')
    assert needs_multiple_of_four.ir(K=8).params[0].name == "a"


@kernel
def plain_exp(a: Tensor[f32]):
    i = program_id(0)
    a[i] = exp(a[i])


def test_unexpected_exception_becomes_a_located_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from iron.lang.lower_call import HANDLERS

    def broken(lw, args):
        raise ZeroDivisionError("planted")

    monkeypatch.setitem(HANDLERS, "exp", broken)
    err = compile_error(plain_exp, IronCompileError)
    assert type(err) is IronCompileError
    assert "internal error" in err.message and "ZeroDivisionError: planted" in err.message
    assert isinstance(err.__cause__, ZeroDivisionError)
    assert "bug in Iron" in err.hint
    assert_located(err, HERE, "a[i] = exp(a[i])")


def test_errors_are_not_cached_and_fixed_code_compiles() -> None:
    """A failed specialisation leaves nothing behind: asking again fails again the same way."""
    first = compile_error(store_f32_into_f16, KernelTypeError)
    second = compile_error(store_f32_into_f16, KernelTypeError)
    assert (first.line, first.col, first.message) == (second.line, second.col, second.message)


def test_launch_reports_compile_errors_too() -> None:
    with pytest.raises(KernelTypeError):
        store_f32_into_f16[4](np.zeros(4, np.float32), np.zeros(4, np.float16))


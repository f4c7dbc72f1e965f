"""Where variables live (docs/language.md, "Variables"): a ``var`` slot only when a value crosses
run-time control flow; SSA values and compile-time constants otherwise."""

from __future__ import annotations

from iron import In, Tensor, f16, f32, i32, kernel, variants
from iron.lang import local, program_id, shared, static_range


def slots(k) -> list[str]:
    return sorted(op.result.hint for op in k.walk() if op.opcode == "var")


@kernel
def branch_local_temporaries(a: In[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    if i < n:
        t = a[i] * 2.0
        out[i] = t
    for k in range(n):
        u = a[k]
        out[k] = u + 1.0


def test_values_used_only_where_assigned_stay_ssa() -> None:
    assert slots(branch_local_temporaries.ir()) == []


@kernel
def assigned_in_branch_read_after(a: In[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    if i < n:
        y = a[i]
    else:
        y = 0.0
    out[0] = y


def test_value_flowing_out_of_a_branch_gets_a_slot() -> None:
    k = assigned_in_branch_read_after.ir()
    assert slots(k) == ["y"]
    if_op = next(op for op in k.walk() if op.opcode == "if")
    assert [op.opcode for op in if_op.regions[0].ops][-1] == "var_store"
    assert [op.opcode for op in if_op.regions[1].ops][-1] == "var_store"


@kernel
def spilled_before_branch(a: In[f32], out: Tensor[f32], n: int):
    x = a[0]
    if program_id(0) < n:
        x = x + 1.0
    out[0] = x


def test_variable_bound_before_a_branch_is_stored_before_it() -> None:
    k = spilled_before_branch.ir()
    assert slots(k) == ["x"]
    body = [op.opcode for op in k.body.ops]
    assert body.index("var_store") < body.index("if")


@kernel(variants(T=[f16, f32]))
def folded_branch_keeps_constants(a: Tensor[T], n: int):  # noqa: F821 - T comes from variants(...)
    if T == f16:  # noqa: F821
        eps = 1e-3
        size = 32
    else:
        eps = 1e-6
        size = 64
    s = shared(f32, size)
    s[0] = 1.0
    a[0] = a[0] + eps


def test_assignments_in_a_folded_branch_stay_compile_time() -> None:
    k = folded_branch_keeps_constants.ir(T=f16)
    assert slots(k) == []
    consts = [(op.attrs["value"], str(op.result.type)) for op in k.walk() if op.opcode == "const"]
    assert (0.0010004043579101562, "f16") in consts  # the weak literal took the tensor's type
    (alloc,) = [op for op in k.walk() if op.opcode == "shared_alloc"]
    assert alloc.attrs["shape"] == (32,)


@kernel
def register_arrays(a: In[f32], out: Tensor[f32]):
    i = program_id(0)
    acc = local(f32, 3)
    weights = [1.0, 2.0, 0.5]
    for k in static_range(3):
        acc[k] += a[i + k] * weights[k]
    out[i] = acc[0] + acc[1] + acc[2]


def test_register_arrays_are_slots_indexed_at_compile_time() -> None:
    k = register_arrays.ir()
    assert slots(k) == ["acc_0", "acc_1", "acc_2", "weights_0", "weights_1", "weights_2"]
    loads = [op.result.hint for op in k.walk() if op.opcode == "var_load"]
    assert loads.count("acc_0") == 2 and loads.count("weights_2") == 1


@kernel
def zeroed_each_iteration(a: In[f32], out: Tensor[f32], n: int):
    for j in range(n):
        r = local(f32, 2)
        r[0] += a[j]
        out[j] = r[0]


def test_register_array_made_in_a_loop_is_zeroed_there() -> None:
    k = zeroed_each_iteration.ir()
    (for_op,) = [op for op in k.walk() if op.opcode == "for"]
    assert [op.opcode for op in for_op.regions[0].ops][:3] == ["const", "var_store", "var_store"]


@kernel
def counter(out: Tensor[i32], n: int):
    count = 0
    i = 0
    while i < n:
        i += 1
        if i % 3 == 0:
            continue
        count += i
    out[0] = count


def test_while_loop_variables() -> None:
    k = counter.ir()
    assert slots(k) == ["count", "i"]
    (loop,) = [op for op in k.walk() if op.opcode == "loop"]
    assert "continue" in [op.opcode for op in loop.walk()]

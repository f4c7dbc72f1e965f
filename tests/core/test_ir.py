"""The IR core: type rules, printer stability, verifier, content hash, cloning."""

import pytest

from iron.core import dtypes as D
from iron.core.builder import Builder, new_kernel, tensor
from iron.core.errors import IRVerificationError
from iron.core.hashing import kernel_hash
from iron.core.ir import Op, Value, clone_kernel
from iron.core.ops import OPS, OpTypeError, infer_type
from iron.core.printer import print_kernel
from iron.core.types import FragmentType, ScalarType, TensorType, VarType, VectorType
from iron.core.verifier import verify

F32, I32, BOOL = ScalarType(D.f32), ScalarType(D.i32), ScalarType(D.bool_)


def exp_kernel(name="iron_exp"):
    k, b = new_kernel(name, [("a", tensor(D.f32, True)), ("out", tensor(D.f32))], {"variant": {"T": D.f32}})
    a, out = (p.value for p in k.params)
    idx = b.op("program_id", axis=0, hint="idx")
    n = b.op("tensor_size", [a], hint="n")
    cond = b.op("lt", [idx, n])
    branch = b.if_(cond)
    with b.at(branch.regions[0]):
        x = b.op("load", [a, idx], hint="x")
        b.op("store", [out, idx, b.op("exp", [x])])
    return k


def test_printer_is_stable_and_readable():
    text = print_kernel(exp_kernel())
    assert text == print_kernel(exp_kernel())
    assert text == (
        "kernel @iron_exp(%a: tensor<f32 readonly>, %out: tensor<f32>) [T = f32] {\n"
        "  %idx = program_id {axis = 0} : i32\n"
        "  %n = tensor_size %a : i32\n"
        "  %0 = lt %idx, %n : bool\n"
        "  if %0 {\n"
        "    %x = load %a, %idx : f32\n"
        "    %1 = exp %x : f32\n"
        "    store %out, %idx, %1\n"
        "  }\n"
        "}\n")


def test_hash_is_stable_and_sensitive_to_code_and_variant():
    h = kernel_hash(exp_kernel())
    assert h == kernel_hash(exp_kernel())
    assert h != kernel_hash(exp_kernel("other"))
    k = exp_kernel()
    k.meta["variant"] = {"T": D.f16}
    assert kernel_hash(k) != h
    k = exp_kernel()
    k.meta["source_line"] = 999  # where the source sits does not change the code
    assert kernel_hash(k) == h


def test_clone_is_deep_and_fresh():
    k = exp_kernel()
    c = clone_kernel(k)
    assert print_kernel(c) == print_kernel(k)
    old = {op.result for op in k.walk() if op.result is not None}
    new = {op.result for op in c.walk() if op.result is not None}
    assert not old & new
    c.body.ops.clear()
    assert len(k.body.ops) == 4


@pytest.mark.parametrize("opcode, types, attrs, match", [
    ("add", [F32, I32], {}, "differ"),
    ("exp", [I32], {}, "float"),
    ("band", [F32, F32], {}, "integer or bool"),
    ("add", [BOOL, BOOL], {}, "bool"),
    ("select", [I32, F32, F32], {}, "bool"),
    ("vload", [TensorType(D.f32), I32], {"width": 3}, "2, 4 or 8"),
    ("store", [TensorType(D.f32, readonly=True), I32, F32], {}, "read-only"),
    ("store", [TensorType(D.f32), I32, ScalarType(D.f16)], {}, "holds f32"),
    ("shared_alloc", [], {"dtype": D.f32, "shape": (0,)}, "positive"),
    ("mma", [FragmentType("a", D.f16, 16, 16), FragmentType("b", D.f16, 16, 8),
             FragmentType("acc", D.f32, 16, 16)], {}, "do not fit"),
    ("frag_fill", [F32], {"role": "a", "dtype": D.f32, "rows": 5, "cols": 5}, "no mma shape"),
    ("var_store", [VarType(F32), I32], {}, "storing i32"),
    ("bitcast", [F32], {"to": D.f16}, "different sizes"),
])
def test_type_rules_reject_bad_operands(opcode, types, attrs, match):
    with pytest.raises(OpTypeError, match=match):
        infer_type(opcode, types, attrs)


def test_type_rules_accept_and_infer():
    assert infer_type("lt", [F32, F32], {}) == BOOL
    assert infer_type("add", [VectorType(D.f16, 4)] * 2, {}) == VectorType(D.f16, 4)
    assert infer_type("cast", [F32], {"to": D.bf16}) == ScalarType(D.bf16)
    assert infer_type("vload", [TensorType(D.f16), I32], {"width": 8}) == VectorType(D.f16, 8)
    assert infer_type("mma", [FragmentType("a", D.bf16, 16, 16), FragmentType("b", D.bf16, 16, 8),
                              FragmentType("acc", D.f32, 16, 8)], {}) == FragmentType("acc", D.f32, 16, 8)


def test_every_op_has_a_category_and_rule():
    for name, info in OPS.items():
        assert info.name == name and info.category and callable(info.rule)


def _expect_invalid(k, match):
    with pytest.raises(IRVerificationError, match=match):
        verify(k, "test")


def test_verifier_rejects_use_before_definition():
    k = exp_kernel()
    k.body.ops[0], k.body.ops[1] = k.body.ops[1], k.body.ops[0]
    k.body.ops[0], k.body.ops[1] = k.body.ops[1], k.body.ops[0]
    verify(k)
    k.body.ops.insert(0, k.body.ops.pop(2))  # the compare now precedes its operands
    _expect_invalid(k, "not defined before this use")


def test_verifier_rejects_values_escaping_their_region():
    k = exp_kernel()
    inner = k.body.ops[3].regions[0].ops[0].result  # %x, defined inside the if
    b = Builder(k.body)
    b.op("exp", [inner])
    _expect_invalid(k, "not defined before this use")


def test_verifier_rejects_misplaced_terminators():
    k = exp_kernel()
    k.body.ops.insert(0, Op("return", []))
    _expect_invalid(k, "terminator must be the last")
    k = exp_kernel()
    k.body.ops.append(Op("break", []))
    _expect_invalid(k, "outside a loop")


def test_verifier_rejects_a_wrong_result_type():
    k = exp_kernel()
    op = k.body.ops[1]
    op.result.type = F32
    _expect_invalid(k, "result type")


def test_verifier_rejects_duplicate_definitions():
    k = exp_kernel()
    k.body.ops.append(k.body.ops[0])
    _expect_invalid(k, "defined twice")


def test_for_loop_region_argument():
    k, b = new_kernel("loop", [("out", tensor(D.i32))])
    lo, hi, one = b.const(0, D.i32), b.const(10, D.i32), b.const(1, D.i32)
    f = b.for_(lo, hi, one, unroll=2, hint="i")
    with b.at(f.regions[0]):
        b.op("store", [k.params[0].value, f.regions[0].args[0], f.regions[0].args[0]])
    verify(k)
    assert "for %i = %0 to %1 step %2 {unroll = 2} {" in print_kernel(k)
    f.regions[0].args[0] = Value(ScalarType(D.i64), "i")
    _expect_invalid(k, "induction variable|not defined")


def test_constants_are_normalised_to_their_type():
    k, b = new_kernel("c", [])
    assert b.op("const", value=1.1, type=ScalarType(D.f16)) is not None
    c = b.const(300, D.i8).owner
    assert c.attrs["value"] == 44
    h = b.const(0.1, D.f16).owner
    assert h.attrs["value"] == 0.0999755859375
    assert b.const(3, VectorType(D.f32, 2)).owner.attrs["value"] == (3.0, 3.0)


def test_verifier_keeps_sibling_regions_apart():
    """A value of an if's first region is not in scope in its second (the walk's one scope set is restored)."""
    k = exp_kernel()
    if_op = k.body.ops[3]
    then_value = if_op.regions[0].ops[0].result
    assert if_op.opcode == "if" and len(if_op.regions) == 2
    Builder(if_op.regions[1]).op("exp", [then_value])
    _expect_invalid(k, "not defined before this use")

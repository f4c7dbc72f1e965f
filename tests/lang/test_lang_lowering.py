"""What the frontend emits: printed IR of small kernels, op by op where it matters."""

from __future__ import annotations

import textwrap

import iron
from iron import Constexpr, In, T, Tensor, bf16, f16, f32, i32, kernel, variants
from iron.core import print_kernel
from iron.core.types import ScalarType, TensorType
from iron.lang import (
    atomic_add,
    atomic_cas,
    barrier,
    exp,
    frag_a,
    frag_acc,
    frag_b,
    frag_store,
    load,
    mma,
    program_id,
    shared,
    simd_shuffle_xor,
    simd_sum,
    static_range,
    store,
    thread_id,
    vec,
    vload,
    vstore,
)

HERE = __file__


def opcodes(k) -> list[str]:
    return [op.opcode for op in k.walk()]


@kernel(variants(T=[f32, f16, bf16]))
def iron_exp(a: Tensor[T], out: Tensor[T]):
    idx = program_id(0)
    store(out[idx], exp(load(a[idx])))


def test_seed_kernel_ir_reads_like_the_source() -> None:
    assert print_kernel(iron_exp.ir(T=bf16)) == textwrap.dedent("""\
        kernel @iron_exp(%a: tensor<bf16>, %out: tensor<bf16>) [T = bf16] {
          %idx = program_id {axis = 0} : i32
          %0 = load %a, %idx : bf16
          %1 = exp %0 : bf16
          store %out, %idx, %1
        }
        """)


def test_ir_metadata_access_and_locations() -> None:
    k = iron_exp.ir(T=f32)
    assert k.meta["variant"] == {"T": f32}
    assert k.meta["source_file"] == HERE
    with open(HERE, encoding="utf-8") as f:
        assert f.read().splitlines()[k.meta["source_line"] - 1] == "def iron_exp(a: Tensor[T], out: Tensor[T]):"
    assert [(p.name, p.access) for p in k.params] == [("a", "read"), ("out", "write")]
    lines = {op.opcode: op.loc.line for op in k.walk()}
    assert lines["program_id"] == k.meta["source_line"] + 1
    assert lines["load"] == lines["exp"] == lines["store"] == k.meta["source_line"] + 2
    assert all(op.loc is not None and op.loc.file == HERE for op in k.walk())


@kernel
def accumulate(a: In[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    total = 0.0
    for k in range(n, unroll=4):
        total += a[i * n + k]
    out[i] = total


def test_loop_carried_variable_becomes_a_slot() -> None:
    assert print_kernel(accumulate.ir()) == textwrap.dedent("""\
        kernel @accumulate(%a: tensor<f32 readonly>, %out: tensor<f32>, %n: i32) {
          %total = var f32 : var<f32>
          %i = program_id {axis = 0} : i32
          %0 = const 0 : i32
          %1 = const 1 : i32
          %2 = const 0.0 : f32
          var_store %total, %2
          for %k = %0 to %n step %1 {unroll = 4} {
            %total.1 = var_load %total : f32
            %3 = mul %i, %n : i32
            %4 = add %3, %k : i32
            %5 = load %a, %4 : f32
            %6 = add %total.1, %5 : f32
            var_store %total, %6
          }
          %total.2 = var_load %total : f32
          store %out, %i, %total.2
        }
        """)


@kernel
def straight_line(a: Tensor[f32]):
    x = a[0]
    x = x * 2.0
    x = x + 1.0
    a[1] = x


def test_straight_line_reassignment_stays_ssa() -> None:
    k = straight_line.ir()
    assert "var" not in opcodes(k)
    assert [op.result.hint for op in k.walk() if op.opcode in ("mul", "add")] == ["x", "x"]


BLOCK_SIZE = 64


@kernel(variants(BLOCK=[128, 32]))
def folded_branches(a: Tensor[f32]):
    if BLOCK > BLOCK_SIZE:  # noqa: F821 - BLOCK is a variant parameter
        half = BLOCK // 2  # noqa: F821
    else:
        half = BLOCK  # noqa: F821
    s = shared(f32, half)
    s[thread_id(0) % half] = 1.0
    a[0] = s[0]


def test_constant_condition_selects_a_branch_at_compile_time() -> None:
    for block, size in ((128, 64), (32, 32)):
        k = folded_branches.ir(BLOCK=block)
        assert "if" not in opcodes(k)
        (alloc,) = [op for op in k.walk() if op.opcode == "shared_alloc"]
        assert alloc.attrs["shape"] == (size,)


@kernel
def unrolled(a: Tensor[f32], K: Constexpr[int]):
    i = program_id(0)
    for k in static_range(K):
        a[i * K + k] = f32(k)


def test_static_range_unrolls_with_constant_indices() -> None:
    k = unrolled.ir(K=3)
    assert "for" not in opcodes(k) and opcodes(k).count("store") == 3
    assert [op.attrs["value"] for op in k.walk() if op.opcode == "const" and op.result.type == ScalarType(f32)] \
        == [0.0, 1.0, 2.0]
    assert [p.name for p in k.params] == ["a"] and k.meta["variant"] == {"K": 3}
    stores = [op for op in k.walk() if op.opcode == "store"]
    # i * K + 0 is i * K itself; the other copies add their constant offset
    assert [s.operands[1].owner.opcode for s in stores] == ["mul", "add", "add"]


@kernel
def countdown(a: Tensor[i32], n: int):
    for k in range(n, 0, -2):
        a[k] = k
    j = 1
    while j < n:
        j *= 2
    a[0] = j


def test_loops_lower_to_for_and_loop() -> None:
    k = countdown.ir()
    (for_op,) = [op for op in k.walk() if op.opcode == "for"]
    step = for_op.operands[2].owner
    assert step.opcode == "const" and step.attrs["value"] == -2
    (loop_op,) = [op for op in k.walk() if op.opcode == "loop"]
    body = [op.opcode for op in loop_op.regions[0].ops]
    assert body == ["var_load", "lt", "lnot", "if", "var_load", "const", "mul", "var_store"]
    assert [op.opcode for op in loop_op.regions[0].ops[3].regions[0].ops] == ["break"]


@kernel
def short_circuits(a: In[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    if i < n and a[i] > 0.0:
        out[i] = 1.0
    if 0 <= i < n:
        out[i] = 2.0
    out[0] = 3.0 if n > 4 else 4.0


def test_and_with_a_load_short_circuits_but_pure_conditions_do_not() -> None:
    k = short_circuits.ir()
    first_if = next(op for op in k.body.ops if op.opcode == "if")
    # i < n is stored to a slot; the load happens only inside the if on it.
    assert [op.opcode for op in first_if.regions[0].ops] == ["load", "const", "gt", "var_store"]
    assert "load" not in [op.opcode for op in k.body.ops[: k.body.ops.index(first_if)]]
    assert opcodes(k).count("land") == 1  # the chained 0 <= i < n
    assert opcodes(k).count("select") == 1


@kernel
def tile_2d(a: In[f32], out: Tensor[f32]):
    s = shared(f32, (4, 16))
    r = thread_id(0) // 16
    c = thread_id(0) % 16
    s[r, c] = a[program_id(0)]
    barrier()
    out[program_id(0)] = s[c % 4, r] + f32(s.size) + f32(len(s))


def test_shared_arrays_index_row_major() -> None:
    k = tile_2d.ir()
    (store_s,) = [op for op in k.walk() if op.opcode == "store" and op.operands[0].type.space == "shared"]
    flat = store_s.operands[1].owner
    assert flat.opcode == "add" and flat.operands[1].hint == "c"
    scaled = flat.operands[0].owner
    assert scaled.opcode == "mul" and scaled.operands[0].hint == "r" and scaled.operands[1].owner.attrs["value"] == 16
    assert "tensor_size" not in opcodes(k)  # a shared array's size is static: 64
    assert 64.0 in [op.attrs.get("value") for op in k.walk() if op.opcode == "const"]


@kernel
def memory_forms(a: Tensor[f32], counts: Tensor[i32]):
    i = program_id(0)
    a[i] += 1.0
    v = a.load(i * 4, width=4)
    a.store(i * 4, v * 2.0)
    vstore(a, 0, vload(a, 4, 4) + vec(1.0, 2.0, 3.0, 4.0))
    old = atomic_add(counts, 0, 1) + atomic_add(counts[1], 2)
    atomic_cas(counts[2], 0, old)
    counts[3] = simd_sum(old) + simd_shuffle_xor(old, 1) + a.size + len(counts)


def test_memory_builtins_in_both_forms() -> None:
    k = memory_forms.ir()
    ops = opcodes(k)
    assert ops.count("vload") == 2 and ops.count("vstore") == 2
    assert ops.count("atomic_add") == 2 and ops.count("atomic_cas") == 1
    assert ops.count("tensor_size") == 2
    assert [(p.name, p.access) for p in k.params] == [("a", "readwrite"), ("counts", "readwrite")]


@kernel(variants(T=[f16]))
def tiny_mma(a: In[T], b: In[T], c: Tensor[f32], K: int):
    acc = frag_acc(f32, 16, 16)
    for k in range(0, K, 16):
        acc = mma(frag_a(a, k, K, 16, 16), frag_b(b, k * 16, 16, 16, 16), acc)
    frag_store(c, 0, 16, acc)


def test_fragment_accumulator_lives_in_a_slot_across_the_loop() -> None:
    text = print_kernel(tiny_mma.ir())
    assert "%acc = var frag<acc,f32,16x16> : var<frag<acc,f32,16x16>>" in text
    assert "mma %" in text and "frag_store %c" in text


def test_parameter_types_follow_annotations() -> None:
    k = accumulate.ir()
    assert [p.type for p in k.params] == [TensorType(f32, readonly=True), TensorType(f32), ScalarType(i32)]


def test_resolution_through_module_attributes_and_aliases() -> None:
    k = via_module.ir()
    assert opcodes(k).count("exp") == 2 and opcodes(k).count("sqrt") == 1


e2 = iron.exp


@kernel
def via_module(a: Tensor[f32]):
    i = iron.lang.program_id(0)
    a[i] = e2(iron.exp(a[i])) + iron.lang.sqrt(a[i])

"""dce: unused pure ops, unreachable ops, write-only slots, empty branches and finite empty loops go."""

from __future__ import annotations

import numpy as np
import pytest

from iron.codegen.passes import dce
from iron.core import dtypes as D
from iron.core.builder import new_kernel, tensor
from iron.core.errors import OutOfBoundsError
from iron.core.ir import Op
from iron.core.types import ScalarType

from pass_harness import I32, apply_pass, check_preserves, count_ops, run_kernel


def _kernel():
    k, b = new_kernel("dce", [("a", tensor(D.i32)), ("out", tensor(D.i32))])
    a, out = (p.value for p in k.params)
    pid = b.op("program_id", axis=0, hint="pid")
    return k, b, a, out, pid


def test_unused_pure_chains_go_but_effects_stay():
    k, b, a, out, pid = _kernel()
    dead = b.op("mul", [b.op("add", [pid, pid]), b.const(3, D.i32)])
    b.op("neg", [dead])
    b.op("load", [a, pid])  # unused, but may fault: stays
    b.op("simd_sum", [pid])  # subgroup op: stays
    b.op("atomic_add", [out, pid, b.const(1, D.i32)])
    b.op("store", [out, pid, pid])
    cleaned = check_preserves(dce.run, k, [np.zeros(8, np.int32), np.zeros(8, np.int32)], 8)
    assert {op.opcode for op in cleaned.walk()} == {"program_id", "const", "load", "simd_sum", "atomic_add", "store"}
    assert count_ops(cleaned, "const") == 1  # the atomic's operand


def test_an_unused_load_out_of_bounds_is_still_reported():
    k, b, a, out, pid = _kernel()
    b.op("load", [a, b.op("add", [pid, b.const(100, D.i32)])])
    cleaned = apply_pass(dce.run, k)
    with pytest.raises(OutOfBoundsError):
        run_kernel(cleaned, [np.zeros(8, np.int32), np.zeros(8, np.int32)], 8)


def test_ops_after_a_terminator_are_removed():
    k, b, a, out, pid = _kernel()
    loop = b.loop()
    with b.at(loop.regions[0]):
        b.op("store", [out, pid, pid])
        b.op("break")
    # Build an invalid tail by hand (the builder would not check it): ops after break.
    loop.regions[0].ops.append(Op("store", [out, pid, pid]))
    k.body.ops.append(Op("return", []))
    k.body.ops.append(Op("store", [a, pid, pid]))
    cleaned = dce.run(k, None)
    assert loop.regions[0].ops[-1].opcode == "store"  # input untouched
    assert cleaned.body.ops[-1].opcode == "return"
    assert cleaned.body.ops[-2].regions[0].ops[-1].opcode == "break"
    assert count_ops(cleaned, "store") == 1


def test_slots_that_are_never_loaded_go_with_their_stores():
    k, b, a, out, pid = _kernel()
    dead_slot = b.op("var", [], type=I32)
    live_slot = b.op("var", [], type=I32)
    expensive = b.op("mul", [pid, pid])
    b.op("var_store", [dead_slot, expensive])
    b.op("var_store", [live_slot, pid])
    branch = b.if_(b.op("lt", [pid, b.const(3, D.i32)]))
    with b.at(branch.regions[0]):
        b.op("var_store", [dead_slot, b.const(1, D.i32)])
    b.op("store", [out, pid, b.op("var_load", [live_slot])])
    cleaned = check_preserves(dce.run, k, [np.zeros(8, np.int32), np.zeros(8, np.int32)], 8)
    assert count_ops(cleaned, "var") == 1 and count_ops(cleaned, "var_store") == 1
    assert count_ops(cleaned, "mul") == 0 and count_ops(cleaned, "if") == 0  # the if emptied, then went


def test_empty_if_goes_and_its_condition_with_it():
    k, b, a, out, pid = _kernel()
    b.if_(b.op("lt", [pid, b.const(3, D.i32)]))
    b.op("store", [out, pid, pid])
    cleaned = apply_pass(dce.run, k)
    assert count_ops(cleaned, "if") == 0 and count_ops(cleaned, "lt") == 0


@pytest.mark.parametrize("lo, hi, step, removed", [
    (0, 10, 1, True),               # constant, finite
    (0, 2 ** 31 - 1, 2, False),      # the induction variable wraps: the loop never ends
    (None, None, 1, True),           # run-time bounds, step 1: ends
    (None, None, 3, False),          # run-time bound near the maximum could wrap: keep
    (10, 0, -1, True),
])
def test_empty_for_goes_only_when_it_provably_ends(lo, hi, step, removed):
    k, b, a, out, pid = _kernel()
    lo_v = b.const(lo, D.i32) if lo is not None else pid
    hi_v = b.const(hi, D.i32) if hi is not None else b.op("load", [a, pid])
    loop = b.for_(lo_v, hi_v, b.const(step, D.i32))
    with b.at(loop.regions[0]):
        b.op("add", [loop.regions[0].args[0], pid])  # dead: the body empties
    cleaned = apply_pass(dce.run, k)
    assert (count_ops(cleaned, "for") == 0) == removed


def test_empty_loop_is_kept():
    k, b, a, out, pid = _kernel()
    b.loop()
    cleaned = apply_pass(dce.run, k)
    assert count_ops(cleaned, "loop") == 1


def test_unused_var_loads_and_shared_allocs_go():
    k, b, a, out, pid = _kernel()
    slot = b.op("var", [], type=ScalarType(D.f32))
    b.op("var_load", [slot])
    b.op("shared_alloc", [], dtype=D.f32, shape=(16,))
    b.op("store", [out, pid, pid])
    cleaned = apply_pass(dce.run, k)
    assert {op.opcode for op in cleaned.walk()} == {"program_id", "store"}

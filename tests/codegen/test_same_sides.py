"""An ``if`` whose two sides are the same code (the ping-pong prefill writes each consumer warpgroup's loop as its own
side, so the interpreter can run them as fibers) is emitted as that code once, with no branch, for every compiled
target; sides that differ in one constant keep their branch, and the interpreter runs both forms the same."""

from __future__ import annotations

import numpy as np
import pytest

from iron import In, Tensor, f32, kernel
from iron.codegen.emit import emit_kernel
from iron.core.analysis import same_code
from iron.lang import program_id


@kernel
def twins(x: In[f32], o: Tensor[f32], n: int):
    i = program_id(0)
    if i < n:
        if i % 3 == 0:
            y = x[i] * 2.0
            o[i] = y + 1.0
        else:
            y = x[i] * 2.0
            o[i] = y + 1.0


@kernel
def cousins(x: In[f32], o: Tensor[f32], n: int):
    i = program_id(0)
    if i < n:
        if i % 3 == 0:
            y = x[i] * 2.0
            o[i] = y + 1.0
        else:
            y = x[i] * 2.0
            o[i] = y + 3.0


def _inner_if(compiled):
    (outer,) = [op for op in compiled.body.ops if op.opcode == "if"]
    (inner,) = [op for op in outer.regions[0].walk() if op.opcode == "if"]
    return inner


def test_same_code_sees_through_value_names_and_not_past_a_constant():
    inner = _inner_if(twins.variant().compiled("cuda"))
    assert same_code(*inner.regions)
    other = _inner_if(cousins.variant().compiled("cuda"))
    assert not same_code(*other.regions)


@pytest.mark.parametrize("target", ["cuda", "hip", "spirv", "metal"])
def test_identical_sides_lose_their_branch_and_different_ones_keep_it(target):
    merged = emit_kernel(twins.variant().compiled(target), target).source
    kept = emit_kernel(cousins.variant().compiled(target), target).source
    assert merged.count("if (") == kept.count("if (") - 1
    assert "both sides of an if" in merged and "both sides of an if" not in kept


def test_the_interpreter_runs_both_forms():
    x = np.arange(10, dtype=np.float32)
    for kern, odd in ((twins, 1.0), (cousins, 3.0)):
        o = np.zeros(10, np.float32)
        kern.launch(x, o, 9, grid=(10,), group=(1,), backend="interp")
        want = np.where(np.arange(10) % 3 == 0, 2 * x + 1, 2 * x + odd)
        want[9] = 0
        assert np.array_equal(o, want)

"""Shuffles are never emitted where only some lanes would run them.

Found on the H200: the int simd_max/simd_min helpers put __shfl_xor_sync inside a ternary's second
arm, which only the lanes taking that arm executed (undefined for a sync shuffle naming all lanes),
and broadcast_max_min [T=i32] came out wrong. Every shuffle must be a statement of its own or a plain
initialiser, on every C++ target.
"""

import re

import pytest
from corpus import case_named

from iron.codegen.emit import emit_kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.core import dtypes as D

SHUFFLE = re.compile(r"__shfl\w*\(")


@pytest.mark.parametrize("target", ["cuda", "hip"])
@pytest.mark.parametrize("dtype", [D.i32, D.f32])
def test_no_shuffle_inside_a_conditional_expression(target, dtype):
    kernel = case_named("broadcast_max_min").kernel
    ir = run_pipeline(kernel.ir(T=dtype), PassContext.for_target(target))
    source = emit_kernel(ir, target).source
    lines = [line for line in source.splitlines() if SHUFFLE.search(line)]
    assert lines, "the kernel reduces over the subgroup, so shuffles must appear"
    for line in lines:
        assert "?" not in line and "&&" not in line and "||" not in line, f"shuffle under a condition: {line}"

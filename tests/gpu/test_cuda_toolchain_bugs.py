"""Miscompiles of NVIDIA's toolchain that the differential fuzzer found (docs/cuda.md "Known toolchain bugs").

Each test runs the reduced kernel on the GPU against the interpreter.  Where the NVRTC in use is one the bug
is known in, the test is an expected failure (strict: a toolchain that computes it right turns the test into
an unexpected pass, which says the note in docs/cuda.md can go).
"""

from __future__ import annotations

import numpy as np
import pytest

from iron import Tensor, i32, kernel, u16, u32
from iron.lang import program_id, thread_id


def _nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return major, minor


@kernel
def min_of_negated_scalar(ia: Tensor[i32], io: Tensor[i32], n: int):
    """Fuzzer seed 1098, reduced: ptxas fuses the two mins into one three-way VIMNMX3 and drops the negation
    of ``n`` (SASS reads ``n`` where it should read ``-n``)."""
    i = program_id(0)
    io[i] = min((n & i32(u32(0) - u32(ia[i]))), min(i32(u16(thread_id(0))), i32(u32(0) - u32(n))))


def test_min_of_a_negated_scalar(cuda, request):
    if _nvrtc_version() < (13, 5):
        request.applymarker(pytest.mark.xfail(strict=True, reason="NVRTC 13.0's ptxas drops the negation "
                                              "(fixed in 13.5: SASS negates n first); docs/cuda.md"))
    ia = np.arange(8, dtype=np.int32) * 37
    want = np.full(8, 7, np.int32)
    got = np.full(8, 7, np.int32)
    min_of_negated_scalar.launch(ia, want, 256, grid=(8,), group=(8,), backend="interp")
    min_of_negated_scalar.launch(ia, got, 256, grid=(8,), group=(8,), backend="cuda")
    np.testing.assert_array_equal(want, -256)
    np.testing.assert_array_equal(got, want)

"""The whole kernel corpus on the ``cuda`` device (emitter, NVRTC, driver) on a real GPU, against its oracles.

Runs only where a CUDA driver answers (the H200 through the device tool); elsewhere it skips: CI has
no GPU, and the corpus is compile-checked for sm_90 there (tests/codegen/test_compile_corpus.py).
"""

from __future__ import annotations

import pytest
from corpus import CASES, Run, binding_label, harness


def _matrix():
    for case in CASES:
        for binding in case.bindings:
            size = case.sizes[-1]
            yield pytest.param(case, binding, size, id=f"{case.name}-{binding_label(binding)}-n{size}")


@pytest.mark.parametrize(("case", "binding", "size"), list(_matrix()))
def test_matches_oracle_on_cuda(cuda, case, binding, size, seed) -> None:
    run = Run(size, binding, 32)
    pristine = harness.make_inputs(case, run, seed.value)
    args = harness.fresh_args(case, pristine)
    ir = harness.optimized_ir(harness.frontend_ir(case, run, args), "cuda")
    grid, group = case.launch(run)
    cuda.launch(ir, harness.ir_args(ir, case, args), grid, group)
    problems = harness.verdict(case, run, pristine, args)
    assert not problems, harness.describe(case, run, seed) + "\n  " + "\n  ".join(problems)

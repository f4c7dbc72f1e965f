"""Every std module's registered test rows on the interpreter and on lavapipe, and every specialisation
they run emitted and compiled for CUDA, HIP, SPIR-V and Metal with the real toolchains.

gemm and attention choose their own runs and compile points (tests/std/test_gemm.py, test_attention.py);
each module's own file keeps its mutants, host-function checks and non-finite policies.
"""

import pytest

from std_testing import TOOLCHAIN_OF, assert_rows_pass, compile_for, compile_params, run_entry, suite

MODULES = ("cast", "conv", "elementwise", "gemv", "gguf", "norms", "quant_gemv", "reduce", "rope", "softmax",
           "transpose")


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
@pytest.mark.parametrize("entry", [e for m in MODULES for e in suite(m)], ids=lambda e: e.name)
def test_registered_rows_pass(entry, backend, seed):
    assert_rows_pass(run_entry(entry, backend, seed), seed)


@pytest.mark.parametrize("target,launch", [p for m in MODULES for p in compile_params(m)])
def test_compiles(target, launch, require_toolchain):
    require_toolchain(TOOLCHAIN_OF[target])
    compile_for(target, launch)

"""Every std module's registered test rows on the interpreter and on lavapipe, and the specialisations they
run emitted and compiled for CUDA, HIP, SPIR-V and Metal with the real toolchains: all of them, except that
a kernel with more than ``COVER_ABOVE`` specialisations compiles a covering subset, every value of each of its
variant parameters at least once (dwconv2d_nchw_k's 18 and dwconv2d_nhwc_k's 12 become 3 each: their
specialisations are one template unrolled to other sizes; the interpreter and lavapipe run them all), which
keeps CI's time.

gemm and attention choose their own runs and compile points (tests/std/test_gemm.py, test_attention.py);
each module's own file keeps its mutants, host-function checks and non-finite policies.
"""

import pytest

from std_testing import TOOLCHAIN_OF, assert_rows_pass, compile_for, compile_params, run_entry, suite

MODULES = ("cast", "conv", "elementwise", "gemv", "gguf", "norms", "quant_gemv", "reduce", "rope", "softmax",
           "transpose")
COVER_ABOVE = 8


def covering(params: list) -> list:
    """Per kernel with more than COVER_ABOVE specialisations, a greedy subset in which every value of each
    variant parameter occurs (on every target: each target keeps the same points)."""
    by_kernel: dict[str, list] = {}
    for p in params:
        by_kernel.setdefault(p.values[1].kernel.name, []).append(p)
    kept = []
    for group in by_kernel.values():
        launches = {id(p.values[1]): p.values[1] for p in group}
        if len(launches) <= COVER_ABOVE:
            kept += group
            continue

        def values(launch) -> set:
            return {(k, repr(v)) for k, v in launch.binding.items()}

        todo = set().union(*(values(x) for x in launches.values()))
        chosen: set[int] = set()
        while todo:
            best = max(launches, key=lambda key: len(values(launches[key]) & todo))
            chosen.add(best)
            todo -= values(launches[best])
        kept += [p for p in group if id(p.values[1]) in chosen]
    return kept


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
@pytest.mark.parametrize("entry", [e for m in MODULES for e in suite(m)], ids=lambda e: e.name)
def test_registered_rows_pass(entry, backend, seed):
    assert_rows_pass(run_entry(entry, backend, seed), seed)


@pytest.mark.parametrize("target,launch", covering([p for m in MODULES for p in compile_params(m)]))
def test_compiles(target, launch, require_toolchain):
    require_toolchain(TOOLCHAIN_OF[target])
    compile_for(target, launch)

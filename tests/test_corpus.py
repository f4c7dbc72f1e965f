"""Every corpus kernel, at each variant binding and size, on the interpreter vs its oracle.

Kernels run through the full optimising pipeline for the interpreter (what a
launch does); subgroup kernels also run at subgroup widths 8 and 64, where
their results differ (scans, butterflies) or their tails land elsewhere.  A
second test launches each specialisation through the public entry points
(``k[grid, group](...)``, ``k.variant(...).launch(...)``), which must give
the same verdict.  Inputs are fresh each run: a failure prints the seed.
"""

import pytest

from corpus import CASES, CorpusCase, Run, binding_label, harness
from iron.core import dtypes as D


def _matrix():
    for case in CASES:
        widths = harness.SIMD_WIDTHS if case.subgroup else (32,)
        for binding in case.bindings:
            for width in widths:
                for size in case.sizes:
                    yield pytest.param(case, Run(size, binding, width),
                                       id=f"{case.name}-{binding_label(binding)}-n{size}-w{width}")


@pytest.mark.parametrize(("case", "run"), list(_matrix()))
def test_matches_oracle(case: CorpusCase, run: Run, seed) -> None:
    harness.check(case, run, seed, ir=harness.cached_optimized_ir(case, run))


def _launch_points():
    for case in CASES:
        for binding in case.bindings:
            yield pytest.param(case, binding, id=f"{case.name}-{binding_label(binding)}")


@pytest.mark.parametrize(("case", "binding"), list(_launch_points()))
def test_public_launch_matches_oracle(case: CorpusCase, binding, seed) -> None:
    """The user's entry points pick the same specialisation and give the oracle's answer."""
    run = Run(case.sizes[len(case.sizes) // 2], binding)
    pristine = harness.make_inputs(case, run, seed.value)
    args = harness.fresh_args(case, pristine)
    grid, group = case.launch(run)
    if all(isinstance(v, D.DType) for v in binding.values()):
        # Only dtype variables: the launch binds them from the arguments.
        case.kernel[grid, group](*args)
    else:
        case.kernel.variant(**binding).launch(*args, grid=grid, group=group, backend="interp")
    problems = harness.verdict(case, run, pristine, args)
    assert not problems, harness.describe(case, run, seed, "public launch") + "\n  " + "\n  ".join(problems)


def test_corpus_is_broad() -> None:
    """The corpus keeps its breadth: 30+ kernels, odd sizes, every float dtype, subgroup kernels."""
    kernels = {id(c.kernel) for c in CASES}
    assert len(kernels) >= 30
    sizes = {s for c in CASES for s in c.sizes}
    assert {1, 7, 255, 1000, 4099} <= sizes
    dtypes = {b.get("T") for c in CASES for b in c.bindings}
    assert {D.f32, D.f16, D.bf16, D.i32} <= dtypes
    assert sum(c.subgroup for c in CASES) >= 6

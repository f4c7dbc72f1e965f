"""Every pass preserves the meaning of every corpus kernel.

For each case, binding and one or two sizes, the frontend IR and the IR after
*each* stage of the pipeline run on the interpreter with the same inputs:

* every stage must verify;
* with contraction off, every stage's outputs are bitwise identical to the
  frontend's (NaN matching NaN: poisoned elements stay poisoned);
* with contraction on (``fp_contract=True``, as for CUDA), the stages before
  ``fma_contract`` are still bitwise identical, and from ``fma_contract`` on
  integer outputs stay bitwise identical while float outputs must meet the
  case's oracle within its tolerance (a fused multiply-add rounds once where
  the kernel rounded twice, so the bits may move, never the accuracy).

A stage whose printed IR equals the previous stage's is not run again.
"""

import numpy as np
import pytest

from corpus import CASES, CorpusCase, Run, binding_label, harness
from corpus.case import is_exact_dtype
from iron.core import print_kernel, verify


def _sizes(case: CorpusCase) -> tuple[int, ...]:
    """A small odd size and a mid-sized one (each case lists its sizes ascending)."""
    sizes = sorted(case.sizes)
    small = sizes[1] if len(sizes) > 1 else sizes[0]
    mid = [s for s in sizes if s <= 255][-1]
    return tuple(sorted({small, mid}))


def _points():
    for case in CASES:
        for binding in case.bindings:
            yield pytest.param(case, binding, id=f"{case.name}-{binding_label(binding)}")


def bitwise_diff(a: np.ndarray, b: np.ndarray) -> int:
    """How many elements differ in their bits (two NaNs count as equal)."""
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    if is_exact_dtype(a.dtype):
        return int(np.count_nonzero(a != b))
    bits = np.dtype(f"u{a.dtype.itemsize}")
    same = a.view(bits) == b.view(bits)
    both_nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return int(np.count_nonzero(~(same | both_nan)))


class _Runner:
    """Runs IRs of one case on fixed inputs, remembering results by IR text."""

    def __init__(self, case: CorpusCase, run: Run, seed):
        self.case, self.run, self.seed = case, run, seed
        self.pristine = harness.make_inputs(case, run, seed.value)
        self.results: dict[str, list] = {}

    def outputs(self, ir) -> list:
        text = print_kernel(ir)
        if text not in self.results:
            args = harness.fresh_args(self.case, self.pristine)
            harness.execute(ir, self.case, self.run, args)
            self.results[text] = args
        return self.results[text]


@pytest.mark.parametrize(("case", "binding"), list(_points()))
def test_every_stage_preserves_outputs(case: CorpusCase, binding, seed) -> None:
    width = 8 if case.subgroup else 32  # the narrowest subgroups stress cross-lane rewrites most
    for size in _sizes(case):
        run = Run(size, binding, width)
        runner = _Runner(case, run, seed)
        frontend = harness.frontend_ir(case, run, harness.fresh_args(case, runner.pristine))
        verify(frontend, stage="frontend")
        reference = harness.outputs_of(case, run, runner.outputs(frontend))
        for contract in (False, True):
            fused = False
            for name, ir in harness.stages(frontend, fp_contract=contract)[1:]:
                verify(ir, stage=name)
                fused = fused or (contract and name == "fma_contract")
                after = runner.outputs(ir)
                where = harness.describe(case, run, seed, f"{name} (fp_contract={contract})")
                got = harness.outputs_of(case, run, after)
                for index, want, have in zip(case.outputs, reference, got):
                    if fused and not is_exact_dtype(np.asarray(have).dtype):
                        continue  # judged against the oracle below
                    diff = bitwise_diff(want, have)
                    assert diff == 0, f"{where}: output #{index} differs from the frontend's in {diff} element(s)"
                if fused:
                    problems = harness.verdict(case, run, runner.pristine, after)
                    assert not problems, where + "\n  " + "\n  ".join(problems)


def test_contraction_happens_somewhere() -> None:
    """The fp_contract=True runs above are not vacuous: the pass fuses in many corpus kernels."""
    fused = []
    for case in CASES:
        run = Run(case.sizes[0], case.bindings[0])
        ir = harness.frontend_ir(case, run, harness.fresh_args(case, harness.make_inputs(case, run, 0)))
        before = print_kernel(ir).count(" = fma ")
        if print_kernel(harness.optimized_ir(ir, fp_contract=True)).count(" = fma ") > before:
            fused.append(case.name)
    assert len(fused) >= 10, f"only {fused} contract a*b+c"


def test_most_stages_change_the_ir() -> None:
    """The per-stage runs are not vacuous: across the corpus, every pass rewrites some kernel."""
    changed: set[str] = set()
    for case in CASES:
        run = Run(case.sizes[0], case.bindings[0])
        ir = harness.frontend_ir(case, run, harness.fresh_args(case, harness.make_inputs(case, run, 0)))
        previous = print_kernel(ir)
        for name, k in harness.stages(ir, fp_contract=True)[1:]:
            text = print_kernel(k)
            if text != previous:
                changed.add(name)
            previous = text
    from iron.codegen.passes import PASSES

    assert changed == set(PASSES), f"passes that never changed a corpus kernel: {set(PASSES) - changed}"

"""The kernel corpus (tests/corpus) registered as ``@test_kernel`` items, so ``iron test`` runs it.

    iron test -m tests/harness/corpus_suite.py --backend vulkan

Each corpus case becomes one registration named ``corpus/<case>``: its sizes are the shapes, its
variant bindings (which name their own ``T``) the bindings, and its generator, oracle, outputs,
poisoned outputs, tolerance, launch shape and canonicalisation pass straight through; this is
also the proof that the registry can say everything the corpus says.  (Subgroup cases run at the
backend's own subgroup width here; the pytest corpus adds the interpreter's other widths.)
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the `corpus` package lives in tests/

from corpus import CASES, CorpusCase, Run  # noqa: E402

from iron import Expect, Setup, Tolerance, test_kernel  # noqa: E402


def _expect(value):
    if hasattr(value, "value"):
        return Expect(value.value, getattr(value, "scale", None))
    return Expect(value)


def _setup_for(case: CorpusCase):
    names = None

    def setup(c):
        nonlocal names
        run = Run(int(c.shape), dict(c.binding), c.simd_width)
        args = case.make_args(run, c.rng)
        pristine = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        expected = {i: _expect(v) for i, v in case.oracle(pristine, run).items() if i in case.outputs}
        grid, group = case.launch(run)
        tol = case.tolerance(run)
        canonicalize = None
        if case.canonicalize is not None:
            if names is None:
                import inspect

                names = list(inspect.signature(case.kernel.fn).parameters)

            def canonicalize(outputs, run=run):
                full = [outputs.get(n) for n in names]
                case.canonicalize(full, run)
                for n, v in zip(names, full):
                    if n in outputs:
                        outputs[n] = v
        return Setup(args=args, grid=grid, group=group, oracle=lambda *_: expected, outputs=list(case.outputs),
                     poison=list(case.poisoned_outputs), canonicalize=canonicalize,
                     tolerance=Tolerance(rtol=tol.rtol, atol=tol.atol, exact=tol.exact))
    setup.__name__ = f"corpus_{case.name}"
    return setup


for _case in CASES:
    test_kernel(_case.kernel, shapes=list(_case.sizes), bindings=[dict(b) for b in _case.bindings],
                name=f"corpus/{_case.name}")(_setup_for(_case))

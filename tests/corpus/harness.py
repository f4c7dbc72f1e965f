"""Running corpus cases: inputs, lowering, the pass pipeline, the interpreter, the verdict.

The suites (test_corpus, test_pass_preservation, the planted-fault tests)
share these steps so that every one of them runs a case the same way:

1. :func:`make_inputs` draws the arguments from the case's generator;
2. :func:`fresh_args` copies them and poisons the write-only outputs;
3. :func:`frontend_ir` specialises the DSL kernel (variant binding, constexpr
   values) and returns the frontend's IR; :func:`optimized_ir` and
   :func:`stages` run the pass pipeline on it;
4. :func:`execute` runs an IR on the interpreter;
5. :func:`verdict` compares the outputs to the oracle.
"""

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from iron.codegen.pipeline import PassContext, pipeline_stages, run_pipeline
from iron.core.ir import Kernel
from iron.runtime import interp

from .case import CorpusCase, Run, binding_label, compare, poison

#: The subgroup widths the interpreter simulates.
SIMD_WIDTHS = (8, 32, 64)


def make_inputs(case: CorpusCase, run: Run, seed: int) -> list:
    """The case's arguments for ``run``, drawn from ``seed``."""
    return case.make_args(run, np.random.default_rng(seed))


def fresh_args(case: CorpusCase, pristine: Sequence[Any]) -> list:
    """Copies of ``pristine`` (arrays copied, scalars shared) with the write-only outputs poisoned."""
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in pristine]
    for i in case.poisoned_outputs:
        poison(args[i])
    return args


# ---------------------------------------------------------------- lowering and passes

def specialization(case: CorpusCase, run: Run) -> Any:
    """The launchable kernel object for ``run``'s variant binding."""
    return case.kernel.variant(**run.binding) if run.binding else case.kernel


def frontend_ir(case: CorpusCase, run: Run, args: Sequence[Any]) -> Kernel:
    """The frontend's IR of the kernel specialised for ``run`` and these arguments."""
    return specialization(case, run).lower(*args)


def context(target: str = "interp", **overrides: Any) -> PassContext:
    return PassContext.for_target(target, **overrides)


def optimized_ir(ir: Kernel, target: str = "interp", **overrides: Any) -> Kernel:
    """``ir`` after the full pass pipeline of ``target``."""
    return run_pipeline(ir, context(target, **overrides))


def stages(ir: Kernel, target: str = "interp", **overrides: Any) -> list[tuple[str, Kernel]]:
    """``[("frontend", ir), (pass name, kernel after it), ...]``."""
    return pipeline_stages(ir, context(target, **overrides))


def ir_args(ir: Kernel, case: CorpusCase, args: Sequence[Any]) -> list:
    """The arguments the IR takes: constexpr parameters are folded into it and dropped."""
    names = case_param_names(case)
    keep = {p.name for p in ir.params}
    return [a for name, a in zip(names, args) if name in keep]


def case_param_names(case: CorpusCase) -> list[str]:
    """The kernel's parameter names, in order (constexpr ones included)."""
    return list(inspect.signature(case.kernel.fn).parameters)


# ---------------------------------------------------------------- running and judging

def execute(ir: Kernel, case: CorpusCase, run: Run, args: list, checks: bool = True) -> list:
    """Run ``ir`` on ``args`` (updated in place) with the case's launch shape; returns ``args``."""
    grid, group = case.launch(run)
    interp.run(ir, ir_args(ir, case, args), grid, group, simd_width=run.simd_width, checks=checks)
    return args


def outputs_of(case: CorpusCase, run: Run, args: list) -> list[np.ndarray]:
    """The compared outputs, canonicalised (copies)."""
    out = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    if case.canonicalize is not None:
        case.canonicalize(out, run)
    return [out[i] for i in case.outputs]


def verdict(case: CorpusCase, run: Run, pristine: Sequence[Any], after: list) -> list[str]:
    """One line per output that disagrees with the oracle (empty when all agree)."""
    expected = case.oracle(pristine, run)
    tol = case.tolerance(run)
    got = outputs_of(case, run, after)
    problems = []
    for index, value in zip(case.outputs, got):
        msg = compare(value, expected[index], tol)
        if msg is not None:
            problems.append(f"output #{index} ({case_param_names(case)[index]}): {msg}")
    return problems


def describe(case: CorpusCase, run: Run, seed: Any, stage: str = "") -> str:
    where = f" after {stage}" if stage else ""
    return (f"{case.name} [{binding_label(run.binding)}] size={run.size} simd_width={run.simd_width}{where}, "
            f"{seed}")


def check(case: CorpusCase, run: Run, seed: Any, ir: Kernel | None = None) -> None:
    """Run the case (optimised IR unless ``ir`` is given) and assert it matches its oracle.

    ``seed`` is an int or the suites' ``TestSeed`` (whose text says how to replay it).
    """
    pristine = make_inputs(case, run, int(getattr(seed, "value", seed)))
    args = fresh_args(case, pristine)
    if ir is None:
        ir = optimized_ir(frontend_ir(case, run, args))
    execute(ir, case, run, args)
    problems = verdict(case, run, pristine, args)
    assert not problems, describe(case, run, seed) + "\n  " + "\n  ".join(problems)


_OPTIMIZED: dict[tuple, Kernel] = {}


def cached_optimized_ir(case: CorpusCase, run: Run) -> Kernel:
    """The optimised IR of ``case`` at ``run``'s binding, lowered once per session.

    The specialisation depends on the binding and on constexpr arguments,
    which the corpus fixes per case, not on sizes or input values; it is
    lowered from the arguments of a run at the smallest size of the same binding.
    """
    key = (case.name, binding_label(run.binding))
    if key not in _OPTIMIZED:
        probe = Run(case.sizes[0], run.binding, run.simd_width)
        args = fresh_args(case, make_inputs(case, probe, 0))
        _OPTIMIZED[key] = optimized_ir(frontend_ir(case, probe, args))
    return _OPTIMIZED[key]

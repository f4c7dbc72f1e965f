"""Lowering corpus kernels for the emitter tests: frontend IR, then the target's full pipeline.

The pass context is pinned (contraction at the target's default, full
optimisation), so emitted source does not depend on the configuration.
"""

from functools import cache
from typing import Any

from corpus import CASES, Run, binding_label, case_named, harness

from iron.codegen.backends import EMITTING
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.core.ir import Kernel

TARGETS = tuple(b.target for b in EMITTING)
FRAGMENT_OPS = frozenset({"frag_fill", "frag_load", "frag_store", "mma"})


def pinned_context(target: str) -> PassContext:
    return PassContext(target=target, fp_contract=None, unroll_max=64, opt_level=2, verify=True)


@cache
def _frontend(case_name: str, label: str) -> Kernel:
    case = case_named(case_name)
    binding = next(b for b in case.bindings if binding_label(b) == label)
    run = Run(case.sizes[0], binding)
    return harness.frontend_ir(case, run, harness.fresh_args(case, harness.make_inputs(case, run, 0)))


def optimized(case_name: str, binding: dict[str, Any], target: str) -> Kernel:
    """The corpus kernel ``case_name`` at ``binding`` after ``target``'s pipeline."""
    return run_pipeline(_frontend(case_name, binding_label(binding)), pinned_context(target))


def corpus_points() -> list[tuple[str, dict[str, Any]]]:
    """Every (case name, binding) of the corpus."""
    return [(c.name, dict(b)) for c in CASES for b in c.bindings]


def has_fragments(kernel: Kernel) -> bool:
    return any(op.opcode in FRAGMENT_OPS for op in kernel.walk())

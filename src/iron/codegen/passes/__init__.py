"""The optimisation passes, registered in one table.

A pass is a function ``(kernel, ctx) -> kernel`` that never changes its input
(each starts from :func:`iron.core.ir.clone_kernel`) and returns a new kernel,
unless ``ctx.in_place``: then it rewrites its input (``_rewrite.own``), which
:func:`iron.codegen.pipeline.run_pipeline` uses on a copy of its own.  ``ctx`` is the :class:`iron.codegen.pipeline.PassContext`; most
passes ignore it, and ``None`` stands for the default context (the
interpreter target) when a pass is run on its own.
:mod:`iron.codegen.pipeline` decides the order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ...core.ir import Kernel
from ...core.verifier import verify
from . import const_fold, cse, dce, fma_contract, forward_vars, inline, simplify, unroll, vectorize

if TYPE_CHECKING:
    from ..pipeline import PassContext


@dataclass(frozen=True)
class Pass:
    """A named kernel-to-kernel transformation."""

    name: str
    fn: Callable[[Kernel, Any], Kernel]
    summary: str
    #: Whether the result computes the same bits as the input on the interpreter (a precision substitution
    #: such as legalisation's ``small_int_powers`` does not).
    exact: bool = True

    def __call__(self, kernel: Kernel, ctx: Any) -> Kernel:
        return self.fn(kernel, ctx)


def run_passes(kernel: Kernel, passes: Sequence[Pass], ctx: Any, verify_mode: str, *, stage: str = "",
               dump: Callable[[str, Kernel], None] | None = None) -> Kernel:
    """Run ``passes`` in order: the one pass manager of the optimisation and legalisation pipelines.

    ``verify_mode`` "each" verifies after every pass (a failure names it, prefixed by ``stage``), "end"
    once after the last, "off" never; ``dump(stage + name, kernel)`` is called after every pass.
    """
    k = kernel
    for p in passes:
        k = p(k, ctx)
        if verify_mode == "each":
            verify(k, stage=f"{stage}{p.name}")
        if dump is not None:
            dump(f"{stage}{p.name}", k)
    if verify_mode == "end" and passes:
        what = stage.rstrip(":") or "the passes"
        verify(k, stage=f"{what} ({passes[-1].name} last; IRON_VERIFY=each names the pass that broke it)")
    return k


PASSES: dict[str, Pass] = {p.name: p for p in (
    Pass("inline", inline.run, "splice helper calls into the kernel; fold tuples away"),
    Pass("forward_vars", forward_vars.run, "replace loads of local slots by the value last stored"),
    Pass("const_fold", const_fold.run, "evaluate ops on constants; settle constant branches and empty loops"),
    Pass("simplify", simplify.run, "algebraic identities that are exact for every input"),
    Pass("cse", cse.run, "reuse the result of an identical dominating pure op"),
    Pass("dce", dce.run, "remove unused pure ops, unreachable ops, write-only slots, empty branches and loops"),
    Pass("unroll", unroll.run, "unroll short constant loops fully and hinted loops by their factor"),
    Pass("vectorize", vectorize.run, "merge aligned consecutive scalar loads/stores into vector ones"),
    Pass("fma_contract", fma_contract.run, "fuse a*b+c into fma when the target contracts"),
)}


def get_pass(name: str) -> Pass:
    """The registered pass called ``name``; KeyError lists the known ones."""
    try:
        return PASSES[name]
    except KeyError:
        raise KeyError(f"unknown pass {name!r}; known: {', '.join(PASSES)}") from None


__all__ = ["Pass", "PASSES", "get_pass", "run_passes"]

"""The pass manager: which passes run, in what order, with what checks.

Order at ``opt_level`` 2, and why:

1. ``inline``: every later pass (and every backend) wants call-free IR;
   it runs at every level.
2. ``forward_vars``: turns the frontend's slot traffic into plain values,
   which the cleanups below can see through.
3. ``const_fold``, ``simplify``, ``cse``, ``dce``: shrink the kernel before
   unrolling multiplies it, and fold the bounds that decide what unrolls.
4. ``unroll``: the copies carry constant induction values ...
5. ``forward_vars``, ``const_fold``, ``simplify``, ``cse``: ... which fold
   into the index arithmetic, so the copies' indices become
   ``base + constant`` of one shared ``base``.
6. ``vectorize``: needs exactly that shape (and the CSE'd bases).
7. ``fma_contract``: last of the rewrites, so no later pass has to look
   through ``fma`` (simplify's rules are about mul/add), and it sees the
   vector ops ``vectorize`` made.
8. ``dce``: sweeps the multiplies fused away and the slots, loads' index
   arithmetic and constants left unused.

``opt_level`` 1 runs the cleanups once (inline, forward_vars, const_fold,
simplify, cse, dce); ``opt_level`` 0 only inlines.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from .. import config
from ..config import verify_mode
from ..core.ir import Kernel, clone_kernel
from .backends import get_target
from .passes import PASSES, Pass, run_passes

_LEVELS: dict[int, tuple[str, ...]] = {
    0: ("inline",),
    1: ("inline", "forward_vars", "const_fold", "simplify", "cse", "dce"),
    2: ("inline", "forward_vars", "const_fold", "simplify", "cse", "dce",
        "unroll", "forward_vars", "const_fold", "simplify", "cse",
        "vectorize", "fma_contract", "dce"),
}

#: The PassContext fields that fall back to an ``iron.config`` option of the same name.
_CONFIGURED = ("fp_contract", "unroll_max", "opt_level", "verify")


@dataclass(frozen=True)
class PassContext:
    """What the passes may assume about the target and what they are allowed to do."""

    target: str = "interp"  # interp | cuda | hip | spirv | metal
    fp_contract: bool | None = None  # None: the target's compiler default (targets.py)
    unroll_max: int = 64
    opt_level: int = 2  # 0 none, 1 cleanups only, 2 full
    verify: str = "end"  # each | end | off (iron.config's verify option; a bool reads as each / off)
    #: The passes may change their input kernel instead of a copy (run_pipeline owns a copy already).
    in_place: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        get_target(self.target)  # a clear error for an unknown target
        object.__setattr__(self, "verify", verify_mode(self.verify))
        if self.opt_level not in _LEVELS:
            raise ValueError(f"opt_level must be one of {', '.join(map(str, _LEVELS))}, got {self.opt_level!r}")
        if self.unroll_max < 0:
            raise ValueError(f"unroll_max must be >= 0, got {self.unroll_max}")

    @classmethod
    def for_target(cls, target: str, **overrides: Any) -> "PassContext":
        """A context for ``target``; fields not given come from ``iron.config``."""
        known = [f for f in cls.__dataclass_fields__ if f not in ("target", "in_place")]
        unknown = sorted(set(overrides) - set(known))
        if unknown:
            raise TypeError(f"unknown PassContext field(s): {', '.join(unknown)}; known: {', '.join(known)}")
        values = {name: config.get(name) for name in _CONFIGURED if name not in overrides}
        return cls(target=target, **values, **overrides)

    @property
    def passes_key(self) -> tuple[bool, int, int, str]:
        """What the passes read.  They see the target only through ``contract``, so targets that agree on it
        get the same optimised kernel and may share one run (``iron build`` runs the pipeline once for CUDA,
        HIP and Metal); tests/passes/test_pipeline.py holds the passes to it."""
        return (self.contract, self.unroll_max, self.opt_level, self.verify)

    @property
    def contract(self) -> bool:
        """Whether ``a*b + c`` may become ``fma``: ``fp_contract``, else the target's default."""
        if self.fp_contract is not None:
            return self.fp_contract
        return get_target(self.target).fp_contract


def default_passes(ctx: PassContext) -> list[Pass]:
    """The passes ``ctx.opt_level`` runs, in order."""
    return [PASSES[name] for name in _LEVELS[ctx.opt_level]]


def run_pipeline(kernel: Kernel, ctx: PassContext, dump: Callable[[str, Kernel], None] | None = None) -> Kernel:
    """Run the default passes on ``kernel`` (which stays unchanged) and return the result.

    ``ctx.verify`` "each" verifies the IR after every pass (a failure names the
    pass), "end" once after the last (about a quarter less of the passes' time on
    a large kernel; a failure says to run with ``IRON_VERIFY=each``), "off" never;
    ``dump(name, kernel)`` is called after every pass.  Without a
    ``dump`` the pipeline copies the kernel once and the passes rewrite that
    copy in place (a copy per pass was about a quarter of a large kernel's
    compile time); with one, each stage is a kernel of its own.
    """
    k = kernel
    if dump is None:
        k = clone_kernel(kernel)
        ctx = replace(ctx, in_place=True)
    k = run_passes(k, default_passes(ctx), ctx, ctx.verify, dump=dump)
    if k.meta.get("contract") != ctx.contract:
        # Whether a*b + c may fuse travels with the IR: a backend whose compiler fuses on its own (NVRTC's
        # --fmad) must be told not to when the pipeline did not contract (it is part of the content hash).
        k = clone_kernel(k) if k is kernel else k
        k.meta["contract"] = ctx.contract
    return k


def pipeline_stages(kernel: Kernel, ctx: PassContext, legalise: bool = False,
                    lane_width: int | None = None) -> list[tuple[str, Kernel]]:
    """``[("frontend", kernel), (first pass, its result), ...]``, for ``iron inspect --passes``.  With
    ``legalise``, a target that emits source adds its legalisation passes (``legalize:NAME``, for subgroups
    of ``lane_width`` lanes, by default its default profile's)."""
    from .legalize import legalize
    from .targets import default_profile

    stages: list[tuple[str, Kernel]] = [("frontend", kernel)]
    optimized = run_pipeline(kernel, ctx, dump=lambda name, k: stages.append((name, k)))
    if legalise and get_target(ctx.target).emits:
        width = lane_width or default_profile(ctx.target).lane_width
        legalize(optimized, ctx.target, width, dump=lambda name, k: stages.append((name, k)))
    return stages

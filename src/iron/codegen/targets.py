"""The code-generation targets and the defaults the pass pipeline takes from them.

Floating-point contraction (fusing ``a*b + c`` into one ``fma``, rounded
once instead of twice) changes results in the last bit, so each target
follows what its own compiler does to hand-written C-like code by default.
A kernel then gives the same bits through Iron as through the vendor's
compiler, and ``fp_contract`` (``iron.config``) overrides it either way.

* ``cuda``: NVCC and NVRTC default to ``--fmad=true``: a multiply feeding an
  add becomes an FFMA.
* ``hip``: clang (hence hipcc) defaults to ``-ffp-contract=fast`` for CUDA
  and HIP sources, ``fast-honor-pragmas`` in current releases: contraction
  across statements unless a pragma forbids it.
* ``metal``: the Metal compiler compiles with fast math on unless told
  otherwise, and fast math licenses contraction.
* ``spirv``: GLSL lets a driver fuse unless the result is ``precise``, and
  some do; since that is the driver's choice, not a rule, the pipeline does
  not contract on its own.
* ``interp``: the interpreter runs exactly the operations the kernel wrote,
  so there is no contraction: it is the reference the other targets are
  compared against.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import IronError


class UnknownTargetError(IronError, ValueError):
    """A target name the code generator does not know."""


@dataclass(frozen=True)
class Target:
    name: str
    #: Whether the target's own compiler contracts a*b+c into fma by default.
    fp_contract: bool
    description: str


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("interp", False, "the numpy interpreter (reference semantics)"),
    Target("cuda", True, "CUDA C++ through NVRTC/NVCC (--fmad=true by default)"),
    Target("hip", True, "HIP through clang/hipcc (-ffp-contract=fast-honor-pragmas by default)"),
    Target("spirv", False, "GLSL compiled to SPIR-V for Vulkan (no contraction unless the driver chooses it)"),
    Target("metal", True, "Metal Shading Language (fast math, which licenses contraction, by default)"),
)}


def get_target(name: str) -> Target:
    """The target called ``name``; a clear error lists the known ones."""
    try:
        return TARGETS[name]
    except KeyError:
        raise UnknownTargetError(f"unknown target {name!r}; known targets: {', '.join(TARGETS)}") from None

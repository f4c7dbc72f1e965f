"""GLSL's loop guard: shaders that report whether a driver cut their loops short, for lavapipe.

lavapipe (Mesa's gallivm) keeps one count of loop passes for each SIMD vector of invocations (8 on a
256-bit build) and, once it reaches 65,535 (each run of a loop also spends one on its exit test), ends the
loop in progress and every later loop after its first pass, silently (``iron.runtime.vulkan.loop_limit``).
Two things that look simpler do not work: a pass counter per invocation misses that the count is shared by
the vector's invocations (lane 0 looping 40,000 times and then lane 1 40,000 times in another loop cuts
lane 1), and testing a loop's condition after it is folded away by the compilers, which know a loop ends
only when its test fails.

So every way out of ``main`` (each ``return`` and the end) calls :data:`LOOP_CHECK`: a loop of
``iron_loop_trips`` passes (2, read from the status buffer, so that no compiler can fold or unroll it),
which runs in full exactly when the vector's count had 2 passes left: when none of its loops, the
emitter's own included, was cut (within 3 passes of the limit, exit tests included, it reports a cut,
conservatively).  An
invocation that saw a cut counts itself in ``iron_loop_cut``; the runtime reads it after the launch and
raises instead of returning results.  The check costs 3 loop passes per SIMD vector, none per pass of
the kernel's loops; it is emitted only on request (``emit_kernel(loop_guard=True)``, which the Vulkan
runtime asks for on a device whose probe found a limit, for launches whose loops it cannot bound), and only
into shaders that run loops.
"""

from __future__ import annotations

from ...core.ir import Kernel, Op
from ...core.ops import FRAGMENT_OPS

#: The status buffer's block: ``iron_loop_trips`` in (the check loop's trip count, 2), ``iron_loop_cut`` out
#: (how many invocations saw a loop cut short).
STATUS_BLOCK = "IronLoopStatus { uint iron_loop_trips; uint iron_loop_cut; }"

LOOP_CHECK_NAME = "iron_check_loops"
#: A while loop: a do-while ended 2 passes after the count ran out (the compilers peel its first pass).
LOOP_CHECK = """\
// Counts this invocation in the loop status if the driver cut a loop of it short: once the driver's pass
// count has run out, this loop of iron_loop_trips (2) passes ends after 1.
void iron_check_loops() {
  uint trips = iron_loop_trips;
  uint n = 0u;
  while (n < trips) {
    ++n;
  }
  if (n != trips) {
    atomicAdd(iron_loop_cut, 1u);
  }
}"""


def writes_loops(kernel: Kernel) -> bool:
    """Whether GLSL for ``kernel`` runs a loop: its own ``for`` / ``loop``, or one the emitter writes."""
    return any(op.opcode in ("for", "loop") or writes_loops_of_its_own(op) for op in kernel.walk())


def writes_loops_of_its_own(op: Op) -> bool:
    """Whether the GLSL emitter writes ``op`` with a loop of its own."""
    code = op.opcode
    if code in FRAGMENT_OPS:  # the portable fragments' per-register and dot-product loops
        return True
    if code == "rem" and op.result.type.dtype.is_float:  # iron_fmod's long division
        return True
    return code in ("atomic_max", "atomic_min") and op.operands[0].type.dtype.is_float  # compare-and-swap


def loop_guard_globals(binding: int) -> list[str]:
    """The status buffer's declaration, at ``binding`` (after the kernel's tensors)."""
    return [f"layout(std430, set = 0, binding = {binding}) buffer {STATUS_BLOCK};"]


def check_unguarded(kernel: Kernel, lines: list[str]) -> None:
    """:func:`writes_loops` said ``kernel`` has no loop, so no line may start one: a loop here would run
    unguarded, an emitter bug (an op the GLSL emitter writes with a loop belongs in :func:`writes_loops_of_its_own`)."""
    looping = [line.strip() for line in lines if line.strip().startswith(("for (", "while (", "do {"))]
    if looping:
        raise AssertionError(f"kernel '{kernel.name}': a GLSL loop that glsl_loops.writes_loops misses, "
                             f"so no loop guard: {looping[0]}")

"""Drivers that end long loops early: measured once per driver, and launches that meet it refused.

Mesa's lavapipe (gallivm) keeps one count of loop passes for each SIMD vector of invocations (8 on a 256-bit
build: its subgroup) and, once the count reaches 65,535, ends the loop in progress and every later loop at
its first pass: ``for j in range(100000): s += 1`` gives 65535, and an endless loop "finishes".  Each run of
a loop also costs one pass for its exit test, and the count is shared by every loop of the shader
(measured on Mesa 22.3: two loops of 50,000 in a row give 65,534 passes; a 100,000 x 1 nest runs 21,845
outer passes) and by the invocations of a vector (lane 0 looping 40,000 times and then lane 1 40,000 times
in another loop leaves lane 1 at 25,534), so splitting a loop into a nest cannot get past it.  Instead:

* :func:`measure` runs a probe shader at device creation: one invocation counting to 70,000.  A device
  whose count falls short has ``loop_limit`` set to what it reached (None where the loop finished);
  the result is kept per driver build for the process.
* Before a launch, :func:`loop_passes` bounds from below the passes a kernel's invocation makes with the
  launch's scalar values and tensor sizes (loops whose bounds are constants, scalar parameters, tensor
  sizes or arithmetic on them; a branch counts as its costlier side, since some thread may take it), and
  the device refuses a launch whose bound is over :func:`usable_passes`: nothing runs.
* :func:`loop_passes_at_most` bounds the same from above for a whole SIMD vector; a launch within the limit
  runs the plain shader.  Every other launch (loops whose trip counts come from memory or thread indices,
  ``while`` loops, the emitter's own loops) runs the variant with a loop guard
  (``emit_kernel(loop_guard=True)``, :mod:`iron.codegen.emit.glsl_loops`): on its way out, each invocation
  runs a check loop of 2 passes, which ends early exactly when its vector's count ran out, and counts
  itself in a status buffer (:func:`status_buffer`) bound after the kernel's tensors.  The device reads it
  before copying results back and raises :func:`cut_error`.  A device without a limit emits and runs no
  guard.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable

import numpy as np

from ...codegen.abi import KernelABI, TensorArg
from ...core import dtypes as D
from ...core.errors import LaunchError
from ...core.ir import Block, Kernel, Op, Value

#: The probe's trip count: past lavapipe's 65,535.
PROBE_TRIPS = 70_000

PROBE_GLSL = """#version 450
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, set = 0, binding = 0) buffer Out { int count[]; };
layout(push_constant) uniform Params { int trips; } p;
void main() {
  int s = 0;
  for (int j = 0; j < p.trips; ++j) {
    s += 1;
  }
  count[0] = s;
}
"""

_measured: dict[tuple[Any, ...], int | None] = {}
_lock = threading.Lock()


def measure(driver_key: tuple[Any, ...], run: Callable[[bytes, int], int]) -> int | None:
    """The loop limit of the driver build ``driver_key``, probing with ``run(spirv, trips) -> count`` once."""
    with _lock:
        if driver_key in _measured:
            return _measured[driver_key]
    from ...codegen.toolchains.spirv import compile_glsl

    count = run(compile_glsl(PROBE_GLSL, name="iron_loop_probe.comp").binary, PROBE_TRIPS)
    limit = None if count >= PROBE_TRIPS else int(count)
    with _lock:
        _measured[driver_key] = limit
    return limit


def probe_launch(trips: int) -> tuple[Any, list[np.ndarray], bytes]:
    """(ABI, buffers, parameter block) that run :data:`PROBE_GLSL` for ``trips`` passes on one thread."""
    from ...codegen.abi import kernel_abi, pack_params
    from ...core.builder import new_kernel, tensor
    from ...core.types import ScalarType

    k, _ = new_kernel("iron_loop_probe", [("count", tensor(D.i32)), ("trips", ScalarType(D.i32))])
    k.params[0].access = "write"
    abi = kernel_abi(k)
    return abi, [np.zeros(1, np.int32)], pack_params(abi, {"trips": trips}, (1,), {})


# ------------------------------------------------------------------ after the launch: the loop guard

#: The loop guard's check loop runs this many passes (the first u32 of the status buffer).
CHECK_TRIPS = 2


def usable_passes(limit: int) -> int:
    """The loop passes (exit tests included) a guarded kernel's invocation may make under ``limit``: the
    check needs the last :data:`CHECK_TRIPS` to tell a cut loop from a finished one."""
    return limit - CHECK_TRIPS


def status_buffer() -> np.ndarray:
    """A fresh status buffer: the check loop's trip count in, the threads that saw a loop cut short out."""
    return np.array([CHECK_TRIPS, 0], np.uint32)


def status_abi(abi: KernelABI, binding: int) -> KernelABI:
    """``abi`` with the status buffer bound at ``binding`` after its tensors (for ``run_spirv``)."""
    status = TensorArg("iron_loop_status", D.u32, binding, "readwrite")
    return dataclasses.replace(abi, tensors=(*abi.tensors, status))


def cut_error(kernel: Kernel, status: np.ndarray, limit: int, device_name: str) -> LaunchError | None:
    """The error for a launch whose status buffer says a loop was cut short; None if none was."""
    threads = int(status[1])
    if not threads:
        return None
    return LaunchError(f"kernel '{kernel.name}': this launch ran a loop past the {limit:,}-pass limit per invocation "
                       f"of '{device_name}' (seen by {threads} thread(s): the driver ends every loop once a SIMD "
                       f"vector of threads has made {limit:,} loop passes in all, exit tests included; Iron's check "
                       f"of that takes the last {CHECK_TRIPS}), so its results would be wrong and none were copied "
                       f"back: split the work over more threads (fewer loop passes each), or run it on another "
                       f"backend (docs/vulkan.md, Loop limit)")


# ------------------------------------------------------------------ bounds on loop passes, before the launch

_ARITH = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "min": min, "max": max}


def loop_passes(kernel: Kernel, scalars: dict[str, Any], sizes: dict[str, int] | None = None) -> int:
    """Loop passes one invocation makes at least on its costliest path (each loop run costs its trips
    plus one exit test), counting only loops whose bounds are known at launch (constants, scalar
    arguments, tensor sizes and arithmetic on them)."""
    return _block(kernel.body, _launch_values(kernel, scalars, sizes or {}))


def loop_passes_at_most(kernel: Kernel, scalars: dict[str, Any], sizes: dict[str, int] | None = None) -> int | None:
    """Loop passes (exit tests included) a SIMD vector of the kernel's invocations makes at most, or None
    where that is not known at launch: a loop bounded by memory or a thread index, a ``loop``, or a loop
    the GLSL emitter writes itself.  Both sides of a branch count, since the vector's threads may take both.
    A launch within the limit cannot meet it, so it needs no loop guard."""
    try:
        return _most(kernel.body, _launch_values(kernel, scalars, sizes or {}))
    except _Unbounded:
        return None


def _launch_values(kernel: Kernel, scalars: dict[str, Any], sizes: dict[str, int]) -> dict[Value, int]:
    known: dict[Value, int] = {}
    for p in kernel.params:
        value = sizes.get(p.name) if p.is_tensor else scalars.get(p.name)
        try:
            if value is not None:
                known[p.value] = int(value)  # a tensor's entry: its size, for tensor_size
        except (TypeError, ValueError, OverflowError):
            pass
    return known


def _block(block: Block, known: dict[Value, int]) -> int:
    total = 0
    for op in block.ops:
        total += _op(op, known)
    return total


def _value(op: Op, known: dict[Value, int]) -> bool:
    """Record the integer ``op`` computes from known values in ``known``; whether ``op`` is such an op."""
    code = op.opcode
    if code == "const":
        value = op.attrs.get("value")
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            known[op.result] = int(value)
        return True
    if code == "tensor_size":
        if op.operands[0] in known:
            known[op.result] = known[op.operands[0]]
        return True
    if code == "cast" and op.operands[0] in known and getattr(op.result.type, "dtype", None) is not None \
            and op.result.type.dtype.is_int:
        known[op.result] = known[op.operands[0]]
        return True
    if code in _ARITH and op.result is not None and all(v in known for v in op.operands):
        known[op.result] = _ARITH[code](*(known[v] for v in op.operands))
        return True
    return False


def _trips(op: Op, known: dict[Value, int]) -> int | None:
    lo, hi, step = (known.get(v) for v in op.operands)
    if lo is None or hi is None or not step:
        return None
    return max(0, -(-(hi - lo) // step))


def _op(op: Op, known: dict[Value, int]) -> int:
    if _value(op, known):
        return 0
    code = op.opcode
    if code == "if":
        return max((_block(r, known) for r in op.regions), default=0)
    if code == "for":
        body = _block(op.regions[0], known)
        trips = _trips(op, known)
        if trips is None:
            return 0  # an unknown trip count: nothing proven
        return trips * (1 + body) + 1
    # other regions (a `loop` whose trips are unknown): whatever runs inside at least once is not proven
    return 0


class _Unbounded(Exception):
    pass


def _most(block: Block, known: dict[Value, int]) -> int:
    from ...codegen.emit.glsl_loops import writes_loops_of_its_own

    total = 0
    for op in block.ops:
        if _value(op, known):
            continue
        if op.opcode == "loop" or writes_loops_of_its_own(op):
            raise _Unbounded
        if op.opcode == "for":
            trips = _trips(op, known)
            if trips is None:
                raise _Unbounded
            total += trips * (1 + _most(op.regions[0], known)) + 1
        else:
            total += sum(_most(r, known) for r in op.regions)
    return total

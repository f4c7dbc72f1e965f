"""Reference implementations measured beside Iron: numpy on the host, PyTorch on a CUDA device.

A bench's ``reference`` maps a backend to a function; ``"cuda"`` (and ``"hip"``) functions get
torch tensors on the GPU, every other one numpy arrays.  A reference takes the kernel's arguments
in order and returns the outputs (one array, a tuple, or a dict by output name), or returns None
after writing into the output arguments.  It is timed like Iron: CUDA events for torch, the host
clock for numpy, with the same warm-up, repetitions and input rotation.

Both sides time the device alone.  A reference is a Python function that issues one or more torch
ops; on an idle GPU a start event fires at once, so its time would include the host's cost of
issuing them (on the H200: 5-12 us for one torch op, up to 44 us for several) while Iron's, whose
start event goes in right before ``cuLaunchKernel`` after a spin kernel, does not.  So each timed reference call is
preceded by ``torch.cuda._sleep`` long enough (twice the measured host cost, at least
:data:`LEAD_MIN_S`) that the whole call is queued before its start event fires.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ..harness import timing
from ..harness.cases import Setup
from ..harness.registry import Item, pick
from ..harness.tolerance import Expect
from .execute import Launch, SetupError, expectations

#: Backends whose reference functions run on PyTorch tensors on the GPU.
TORCH_BACKENDS = ("cuda", "hip")


@dataclass(frozen=True)
class Reference:
    name: str
    fn: Callable[..., Any]
    on_torch: bool


def choose(item: Item, setup: Setup, backend: str) -> Reference | None:
    """The reference for ``backend`` (the setup's table first, then the bench's), or None."""
    table = setup.reference if setup.reference is not None else item.entry.reference
    if not table:
        return None
    fn = pick(table, backend)
    if fn is None:
        return None
    on_torch = backend in TORCH_BACKENDS and backend in table
    lib = "torch" if on_torch else "numpy"
    name = getattr(fn, "__name__", "<lambda>")
    return Reference(lib if name == "<lambda>" else f"{lib}.{name}", fn, on_torch)


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise SetupError("this bench's cuda reference needs PyTorch: pip install torch") from None
    return torch


#: ml_dtypes' 8-bit float names -> torch's (the same formats).
_TORCH_F8 = {"float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}


def to_torch(value: Any) -> Any:
    """A numpy array as a torch tensor on the GPU (bf16 through its bits); other values unchanged."""
    if not isinstance(value, np.ndarray):
        return value.item() if isinstance(value, np.generic) else value
    torch = _torch()
    a = np.ascontiguousarray(value)
    if a.dtype == np.dtype(ml_dtypes.bfloat16):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).to("cuda")
    if a.dtype.name in _TORCH_F8:
        return torch.from_numpy(a.view(np.uint8)).view(getattr(torch, _TORCH_F8[a.dtype.name])).to("cuda")
    return torch.from_numpy(a).to("cuda")


def to_host(value: Any) -> Any:
    """A torch tensor back as a numpy array (bf16 through its bits); numpy values unchanged."""
    if type(value).__module__.startswith("torch"):
        torch = _torch()
        t = value.detach().cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        name = str(t.dtype).removeprefix("torch.")
        if name in _TORCH_F8.values():
            return t.view(torch.uint8).numpy().view(getattr(ml_dtypes, name))
        return t.numpy()
    return value


def arguments(ref: Reference, args: Sequence[Any]) -> list[Any]:
    """The reference's own copy of ``args``: torch tensors on the GPU, or numpy copies."""
    if ref.on_torch:
        return [to_torch(a) for a in args]
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def outputs(ref: Reference, launch: Launch) -> tuple[dict[int, Expect], list[Any]]:
    """Run the reference once on fresh arguments: its outputs (as Expects) and the host arguments after."""
    args = arguments(ref, launch.setup.args)
    result = ref.fn(*args)
    host = [to_host(a) for a in args]
    if result is None:
        return {i: Expect(host[i]) for i in launch.outputs}, host
    if isinstance(result, dict):
        result = {k: to_host(v) for k, v in result.items()}
    elif isinstance(result, (tuple, list)):
        result = tuple(to_host(v) for v in result)
    else:
        result = to_host(result)
    return expectations(launch, result, "reference"), host


#: The GPU is kept busy at least this long before each timed torch reference call.
LEAD_MIN_S = 50e-6
#: ``torch.cuda._sleep`` counts SM clock cycles; at this rate (above any current GPU's clock) a count
#: lasts at least the time it was made for.
SLEEP_CYCLES_PER_S = 2.5e9
#: The lead never exceeds this (a reference that synchronises inside cannot be helped by one).
LEAD_MAX_S = 20e-3


def lead_cycles(host_seconds: float) -> int:
    """``torch.cuda._sleep`` cycles that outlast a call whose host side takes ``host_seconds``."""
    return int(SLEEP_CYCLES_PER_S * min(LEAD_MAX_S, max(LEAD_MIN_S, 2.0 * host_seconds)))


def host_cost(torch: Any, fn: Callable[..., Any], args: Sequence[Any], calls: int = 3) -> float:
    """The longest host time of issuing ``fn(*args)`` (not waiting for it) over a few calls, in seconds."""
    worst = 0.0
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(*args)
        worst = max(worst, time.perf_counter() - t0)
    torch.cuda.synchronize()
    return worst


def measure(ref: Reference, launch: Launch, policy: timing.Policy, copies: int) -> timing.Stats:
    """Time the reference with the same policy and the same number of rotated argument sets; a torch
    reference's calls each after a ``torch.cuda._sleep`` lead (see the module's docstring)."""
    sets = [arguments(ref, launch.setup.args) for _ in range(copies)]
    if not ref.on_torch:
        return timing.measure(lambda i: _untimed(ref.fn, sets[i % copies]), policy)
    torch = _torch()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    sleep = getattr(torch.cuda, "_sleep", None)
    cycles = lead_cycles(host_cost(torch, ref.fn, sets[0])) if sleep is not None else 0

    def run(i: int) -> float:
        if cycles:
            sleep(cycles)
        start.record()
        ref.fn(*sets[i % copies])
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))

    torch.cuda.synchronize()
    return timing.measure(run, policy)


def call_us(ref: Reference, launch: Launch) -> float:
    """The reference's host wall time per call, back to back, one synchronisation at the end."""
    args = arguments(ref, launch.setup.args)
    sync = _torch().cuda.synchronize if ref.on_torch else None
    return timing.call_us(lambda: ref.fn(*args), sync)


def _untimed(fn: Callable[..., Any], args: Sequence[Any]) -> None:
    fn(*args)
    return None


__all__ = ["Reference", "arguments", "call_us", "choose", "measure", "outputs", "to_host", "to_torch"]

"""Call plans: a host function's first call with one signature of arguments is recorded, later ones replay it.

A std host function checks its arguments, derives shapes, tile sizes and variants from them, allocates
outputs and scratch, and launches kernels.  Everything but the allocations and the launches depends only on
the arguments' signature: each array's type, dtype, shape, device, layout and address modulo 128 (the
vector paths test alignment), which arrays are the same object, the values of every other argument, and
the options' generation.  So the first call with a signature runs the function as written while the
plan records, in order, each output it made (``_host.output``: kept as the call, so a given ``out`` is
checked again on every call, overlaps included), each scratch array (``_host.empty_like``) and each launch
(``iron.jit.kernel.traced_launches``).  A later call with the same signature replays those steps on its own
arrays: the checks that depend on memory, the allocations, the launches.

A call whose steps touch an array the plan cannot name (a view made inside the function, a table computed
on the host) is not planned: it runs as written every time.  Errors are raised by the recording call, so
a signature that fails is never planned.  Option ``call_plans`` (``IRON_CALL_PLANS``) turns plans off.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from .. import config
from ..jit.kernel import run_traced, traced_launches
from ..lang.numpy_compat import array_element_type

#: The plan being recorded in this context (None: none).
_RECORDING: ContextVar["Recording | None"] = ContextVar("iron_std_recording", default=None)
#: Plans kept per host function before the oldest are dropped.
MAX_PLANS = 128
#: iron.std._host, bound by the decorator (it imports this module, so not at import time).
_host: Any = None


def recording() -> "Recording | None":
    return _RECORDING.get()


# ---------------------------------------------------------------- the signature of a call
def _torch_signature(t: Any) -> tuple:
    # A contiguous tensor's strides follow from its shape; any other's are part of what a call may depend on.
    layout = True if t.is_contiguous() else t.stride()
    return (t.dtype, t.shape, t.device, layout, t.data_ptr() & 127)


def _numpy_signature(a: Any) -> tuple:
    flags = a.flags
    layout = True if flags.c_contiguous else a.strides
    return (a.dtype, a.shape, layout, flags.writeable, a.ctypes.data & 127)


def _interface_signature(a: Any) -> tuple:
    iface = a.__cuda_array_interface__
    ordinal = getattr(getattr(a, "device", None), "id", getattr(a, "ordinal", 0))
    return (iface["typestr"], tuple(iface["shape"]), iface.get("strides"), ordinal, iface["data"][0] & 127)


def _signature_reader(x: Any) -> Callable[[Any], tuple] | None:
    np = sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        return _numpy_signature
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return _torch_signature
    if hasattr(x, "__cuda_array_interface__"):
        return _interface_signature
    return None


_readers: dict[type, Callable[[Any], tuple] | None] = {}


def _reader(v: Any) -> Callable[[Any], tuple] | None:
    """The signature reader of ``v``'s type, None when ``v`` is no array (decided once per type)."""
    t = type(v)
    reader = _readers.get(t, _readers)
    if reader is _readers:
        reader = _readers[t] = _signature_reader(v) if array_element_type(v) is not None else None
    return reader
_SCALARS = (type(None), bool, int, float, str)


def signature(values: list[Any]) -> tuple[tuple | None, list[Any]]:
    """(key, arrays): the call's key, None when it cannot have one (an unhashable value, an array of a kind
    with no reader), and its arrays in order (those inside tuples and lists included)."""
    arrays: list[Any] = []
    parts: list[Any] = []
    for v in values:
        part = _part(v, arrays)
        if part is None:
            return None, arrays
        parts.append(part)
    parts.append(config.generation())
    return tuple(parts), arrays


def _part(v: Any, arrays: list[Any]) -> Any:
    t = type(v)
    if t in _SCALARS:
        return (t, v)
    reader = _reader(v)
    if reader is not None:
        same = -1
        for i, a in enumerate(arrays):
            if a is v:
                same = i
                break
        arrays.append(v)
        return (t, reader(v), same)
    if t in (tuple, list):
        inner = [_part(e, arrays) for e in v]
        return None if any(p is None for p in inner) else (t, tuple(inner))
    try:
        hash(v)
    except TypeError:
        return None
    return (t, v)


# ---------------------------------------------------------------- recording
class Unplannable(Exception):
    """A step touched an array the plan cannot name."""


class Recording:
    """The steps of one call, by index into the call's arrays (inputs first, then what the steps made)."""

    def __init__(self, arrays: list[Any]):
        self.arrays = list(arrays)
        self.index = {id(a): i for i, a in reversed(list(enumerate(arrays)))}
        self.steps: list[tuple] = []
        self.ok = True

    def ref(self, obj: Any) -> int:
        i = self.index.get(id(obj))
        if i is None:
            raise Unplannable
        return i

    def _made(self, obj: Any) -> int:
        i = len(self.arrays)
        self.arrays.append(obj)
        self.index.setdefault(id(obj), i)
        return i

    def _value(self, v: Any) -> tuple[bool, Any]:
        """(True, index) for an array, (False, v) for anything else (numpy scalars included)."""
        if type(v) in _SCALARS or _reader(v) is None:
            return False, v
        return True, self.ref(v)

    def output(self, fn: str, out: Any, like: Any, shape: Any, dtype: Any, reads: dict[str, Any],
               in_place: Any, name: str, made: Any) -> None:
        if not self.ok:
            return
        from ._host import allocator

        try:
            step = ("output", fn, None if out is None else self.ref(out), self.ref(like), tuple(shape), dtype,
                    tuple((n, self._value(x)) for n, x in reads.items()), tuple(in_place), name,
                    allocator(like, shape, dtype))
        except Unplannable:
            self.ok = False
            return
        self.steps.append(step)
        self._made(made)

    def scratch(self, like: Any, shape: Any, dtype: Any, made: Any) -> None:
        if not self.ok:
            return
        from ._host import allocator

        try:
            self.steps.append(("scratch", self.ref(like), allocator(like, shape, dtype)))
        except Unplannable:
            self.ok = False
            return
        self._made(made)

    def finish(self, launches: list[tuple], result: Any) -> "Plan | None":
        """The plan, or None when a step or the result names an array the plan cannot.  Its outputs and scratch
        come before its launches: a host function's checks read no data, so making every array first is the
        same call."""
        if not self.ok:
            return None
        try:
            steps = list(self.steps)
            for kernel, args, kwargs, grid, group, backend in launches:
                if kwargs:
                    return None
                steps.append(("launch", kernel, tuple(self._value(a) for a in args), grid, group, backend))
            shape = self._result(result)
        except Unplannable:
            return None
        return Plan(steps, shape)

    def _result(self, result: Any) -> Any:
        if isinstance(result, tuple):
            return tuple(self._result(r) for r in result)
        if result is None:
            return None
        return self.ref(result)


class Plan:
    """Replays a recorded call on the arrays of a call with the same signature."""

    __slots__ = ("steps", "result")

    def __init__(self, steps: list[tuple], result: Any):
        self.steps = steps
        self.result = result

    def replay(self, arrays: list[Any]) -> Any:
        arrays = list(arrays)
        for step in self.steps:
            kind = step[0]
            if kind == "launch":
                _, kernel, args, grid, group, backend = step
                run_traced(kernel, [arrays[v] if is_ref else v for is_ref, v in args], grid, group, backend)
            elif kind == "output":
                _, fn, out, like, shape, dtype, reads, in_place, name, allocate = step
                if out is None:
                    arrays.append(allocate(arrays[like]))
                    continue
                given = arrays[out]
                # The signature holds out's kind, device, dtype, shape and layout and which inputs it is; what
                # memory it shares with the inputs it is not is all that can differ: the full check if it does.
                for _, (is_ref, v) in reads:
                    if is_ref and arrays[v] is not given and _host.overlaps(given, arrays[v]):
                        read = {n: arrays[i] if r else i for n, (r, i) in reads}
                        _host._output(fn, given, arrays[like], shape, dtype, read, in_place, name)
                        break
                arrays.append(given)
            else:
                _, like, allocate = step
                arrays.append(allocate(arrays[like]))
        return _rebuild(self.result, arrays)


def _rebuild(shape: Any, arrays: list[Any]) -> Any:
    if isinstance(shape, tuple):
        return tuple(_rebuild(s, arrays) for s in shape)
    return None if shape is None else arrays[shape]


# ---------------------------------------------------------------- the decorator
def planned(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with call plans (see the module docstring)."""
    global _host
    from . import _host

    params = list(inspect.signature(fn).parameters.values())
    names = {p.name: i for i, p in enumerate(params)}
    defaults = [p.default for p in params]
    required = sum(p.default is inspect.Parameter.empty for p in params)
    plans: dict[tuple, Plan | None] = {}

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if _RECORDING.get() is not None or len(args) > len(defaults):
            return fn(*args, **kwargs)  # inside another host function's recording: its steps are the plan
        values = list(defaults)
        values[:len(args)] = args
        for name, v in kwargs.items():
            i = names.get(name)
            if i is None:
                return fn(*args, **kwargs)  # the function says what is wrong
            values[i] = v
        if len(args) < required and any(v is inspect.Parameter.empty for v in values):
            return fn(*args, **kwargs)
        try:
            key, arrays = signature(values)
        except Exception:  # an array whose address cannot be read (a meta or fake tensor): the function says why
            return fn(*args, **kwargs)
        if key is None:
            return fn(*args, **kwargs)
        plan = plans.get(key, plans)
        if plan is not plans:
            return fn(*args, **kwargs) if plan is None else plan.replay(arrays)
        if not config.get("call_plans"):
            return fn(*args, **kwargs)
        record = Recording(arrays)
        token = _RECORDING.set(record)
        try:
            with traced_launches() as launches:
                result = fn(*args, **kwargs)
        finally:
            _RECORDING.reset(token)
        if len(plans) >= MAX_PLANS:
            plans.clear()
        plans[key] = record.finish(launches, result)
        return result

    call.plans = plans  # type: ignore[attr-defined]
    return call

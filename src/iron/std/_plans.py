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
from pathlib import Path
from typing import Any

from .. import config
from ..core.native import NativeModule
from ..jit.kernel import bind_traced, run_traced, traced_launches
from ..lang.numpy_compat import array_element_type

#: The plan being recorded in this context (None: none).
_RECORDING: ContextVar["Recording | None"] = ContextVar("iron_std_recording", default=None)
#: Plans kept per host function before the oldest are dropped.
MAX_PLANS = 128
#: iron.std._host, bound by the decorator (it imports this module, so not at import time).
_host: Any = None


class Tuning(dict):
    """A host function's table of tuned choices (tile plans, thresholds): a dict whose every change bumps the
    options' generation, so no call plan recorded under the old choices is replayed under the new ones (a tuner
    or a test that changes an entry between two calls of one signature gets the new choice)."""

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        config.touch()

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        config.touch()

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        config.touch()

    def pop(self, *args: Any) -> Any:
        value = super().pop(*args)
        config.touch()
        return value

    def clear(self) -> None:
        super().clear()
        config.touch()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        value = super().setdefault(key, default)
        config.touch()
        return value

    def popitem(self) -> tuple[Any, Any]:
        item = super().popitem()
        config.touch()
        return item

    def __ior__(self, other: Any) -> "Tuning":
        self.update(other)
        return self


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
        if type(x) is torch.Tensor and _native_module is not None:
            _native_module.configure(_reader, torch.Tensor)  # read in C from now on
        return _torch_signature
    if getattr(type(x), "iron_device_array", False):  # Iron's CudaArray
        return _cuda_array_signature
    if hasattr(x, "__cuda_array_interface__"):
        return _interface_signature
    return None


def _cuda_array_signature(a: Any) -> tuple:
    # Always C-contiguous; ptr 0 (a freed array) is refused by every launch.
    return (a.dtype, a.shape, a.ordinal, a.ptr & 127)


_readers: dict[type, Callable[[Any], tuple] | None] = {}


def _reader(v: Any) -> Callable[[Any], tuple] | None:
    """The signature reader of ``v``'s type, None when ``v`` is no array (decided once per type)."""
    t = type(v)
    reader = _readers.get(t, _readers)
    if reader is _readers:
        reader = _readers[t] = _signature_reader(v) if array_element_type(v) is not None else None
    return reader


_SCALARS = (type(None), bool, int, float, str)


def signature_py(values: list[Any], generation: Any) -> tuple[tuple | None, list[Any]]:
    """(key, arrays): the call's key, None when it cannot have one (an unhashable value, an array of a kind
    with no reader), and its arrays in order (those inside tuples and lists included).  ``generation`` (the
    options') ends the key.  The native module builds the same in C (``native/plans.c``)."""
    arrays: list[Any] = []
    parts: list[Any] = []
    for v in values:
        part = _part(v, arrays)
        if part is None:
            return None, arrays
        parts.append(part)
    parts.append(generation)
    return tuple(parts), arrays


SIGNATURE = NativeModule(Path(__file__).with_name("native") / "plans.c", "iron_native_plans",
                         "native_plans")
_native_module: Any = None
#: The native module's ``(replay, MISS)``: ``replay(state, args, kwargs)`` is a planned call's whole hot path,
#: MISS what it returns when the Python path must run (None: all in Python).
_hot: tuple[Callable[..., Any], Any] | None = None
_chosen: tuple[Any, Callable[[list[Any], Any], tuple[tuple | None, list[Any]]]] | None = None


def signature_function(generation: Any) -> Callable[[list[Any], Any], tuple[tuple | None, list[Any]]]:
    """The signature builder for these options: the native one (:data:`SIGNATURE`) where it can be had, else
    :func:`signature_py`."""
    global _chosen, _native_module, _hot
    if _chosen is None or _chosen[0] != generation:
        _native_module = SIGNATURE.load()
        if _native_module is not None:
            _readers.clear()  # a torch.Tensor seen again configures the module to read it (_signature_reader)
            _native_module.configure(_reader, None)
        _hot = None if _native_module is None else (_native_module.replay, _native_module.MISS)
        _chosen = (generation, signature_py if _native_module is None else _native_module.signature)
    return _chosen[1]


def signature(values: list[Any]) -> tuple[tuple | None, list[Any]]:
    """(key, arrays) of a call's values under the current options (:func:`signature_py`)."""
    generation = config.generation()
    return signature_function(generation)(values, generation)


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

    def view(self, like: Any, make: Callable[[Any], Any], made: Any) -> None:
        """``made = make(like)``, a view at ``like``'s address."""
        if not self.ok:
            return
        try:
            self.steps.append(("view", self.ref(like), make))
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
            steps, bound = list(self.steps), []
            for kernel, args, kwargs, grid, group, backend, went in launches:
                if kwargs:
                    return None
                steps.append(("launch", kernel, tuple(self._value(a) for a in args), grid, group, backend))
                bound.append(bind_traced(went, args))
            shape = self._result(result)
        except Unplannable:
            return None
        return Plan(steps, shape, self.arrays, bound)

    def _result(self, result: Any) -> Any:
        if isinstance(result, tuple):
            return tuple(self._result(r) for r in result)
        if result is None:
            return None
        return self.ref(result)


class Plan:
    """Replays a recorded call on the arrays of a call with the same signature.

    ``run(arrays)`` is a function written for the plan (:func:`_compile`): the allocations, the ``out=``
    overlap checks on addresses, and each launch through the device's launcher bound to it
    (:func:`iron.jit.kernel.bind_traced`), which takes the new addresses alone.  :meth:`replay` is the same
    call step by step, through the full checks and launch paths: what ``run`` falls back to."""

    __slots__ = ("steps", "result", "run")

    def __init__(self, steps: list[tuple], result: Any, arrays: list[Any] | None = None,
                 bound: list[Callable[..., bool] | None] | None = None):
        self.steps = steps
        self.result = result
        self.run = self.replay if arrays is None else _compile(self, arrays, bound or [])

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
            else:  # scratch or view
                _, like, make = step
                arrays.append(make(arrays[like]))
        return _rebuild(self.result, arrays)


# ---------------------------------------------------------------- a plan written out as one function
#: How a device array's address is read: the source a plan's function uses (``{}`` is the array) and the same
#: as a function, by kind.
_ADDRESSES: dict[str, tuple[str, Callable[[Any], int]]] = {
    "torch": ("{}.data_ptr()", lambda a: a.data_ptr()),
    "iron": ("{}.ptr", lambda a: a.ptr),
    "cupy": ("{}.data.ptr", lambda a: a.data.ptr),
}


def _device_kind(a: Any) -> str | None:
    """"torch" (a CUDA tensor), "iron" (a CudaArray) or "cupy" for a device array whose address a plan can read,
    None for anything else."""
    torch = sys.modules.get("torch")
    if torch is not None and type(a) is torch.Tensor:
        return "torch" if a.is_cuda else None
    if getattr(type(a), "iron_device_array", False):
        return "iron"
    cupy = sys.modules.get("cupy")
    if cupy is not None and type(a) is cupy.ndarray:
        return "cupy"
    return None


def _address(a: Any) -> str | None:
    """The source reading a device array's address (``{}`` is the array), None for anything else."""
    kind = _device_kind(a)
    return None if kind is None else _ADDRESSES[kind][0]


def _compile(plan: Plan, arrays: list[Any], bound: list[Callable[..., bool] | None]) -> Callable[[list], Any]:
    """``run(arrays)``: ``plan``'s steps written out for the recorded call's ``arrays`` (every array's kind,
    layout and extent is fixed by the signature), so a replay costs its allocations and launches.  An ``out``
    whose bytes may overlap an input's, or a launch its device's bound launcher refuses, goes the full way
    (:meth:`Plan.replay`, :func:`run_traced`), which explains or launches."""
    inputs = len(arrays) - sum(step[0] != "launch" for step in plan.steps)
    env: dict[str, Any] = {"SLOW": plan.replay, "OVERLAPS": _host.overlaps}
    names = [f"a{i}" for i in range(inputs)]
    lines = [f"{', '.join(names)}{',' if inputs == 1 else ''} = A" if inputs else "pass"]
    read: dict[int, str] = {}

    def address(i: int) -> str | None:
        if i not in read:
            source = _address(arrays[i])
            if source is None:
                return None
            lines.append(f"p{i} = {source.format(names[i])}")
            read[i] = f"p{i}"
        return read[i]

    launch = 0
    for step in plan.steps:
        kind = step[0]
        if kind == "launch":
            _, kernel, args, grid, group, backend = step
            env[f"RUN{launch}"] = functools.partial(_run_step, kernel, args, grid, group, backend)
            go = bound[launch] if launch < len(bound) else None
            pointers = [address(v) for is_ref, v in args if is_ref] if go is not None else [None]
            if go is not None and None not in pointers:
                env[f"GO{launch}"] = go
                lines += [f"if not GO{launch}({', '.join(pointers)}):",  # type: ignore[arg-type]
                          f"    RUN{launch}([{', '.join(names)}])"]
            else:
                lines.append(f"RUN{launch}([{', '.join(names)}])")
            launch += 1
            continue
        made = len(names)
        if kind == "output" and step[2] is not None:
            out = step[2]
            for _, (is_ref, v) in step[6]:
                if is_ref and v != out:
                    lines += _overlap_check(out, v, arrays, names, address)
            names.append(names[out])
            if out in read:
                read[made] = read[out]
            continue
        if kind == "view":  # made where an array is needed (the full path); its address is like's
            env[f"AL{made}"] = step[2]
            names.append(f"AL{made}({names[step[1]]})")
            viewed = address(step[1])
            if viewed is not None:
                read[made] = viewed
            continue
        like, allocate = (step[3], step[9]) if kind == "output" else (step[1], step[2])
        env[f"AL{made}"] = allocate
        names.append(f"a{made}")
        lines.append(f"a{made} = AL{made}({names[like]})")
    lines.append(f"return {_result_source(plan.result, names)}")
    source = "def run(A):\n" + "\n".join("    " + line for line in lines) + "\n"
    exec(compile(source, "<iron std call plan>", "exec"), env)
    run = env["run"]
    run.source = source
    return run


def _overlap_check(out: int, other: int, arrays: list[Any], names: list[str],
                   address: Callable[[int], str | None]) -> list[str]:
    """The lines that hand a call whose ``out`` may share bytes with input ``other`` to the full replay."""
    spans = [_host._span(arrays[out]), _host._span(arrays[other])]
    if spans[0] is None or spans[1] is None:
        return []  # an empty array shares nothing (the same shape, so the same on every call)
    if spans[0][0] != spans[1][0]:
        return []  # different devices or memories
    pa, pb = address(out), address(other)
    if pa is None or pb is None:
        return [f"if OVERLAPS({names[out]}, {names[other]}):", "    return SLOW(A)"]
    (la, ha), (lb, hb) = [(s[1] - _recorded_address(arrays[i]), s[2] - _recorded_address(arrays[i]))
                          for s, i in zip(spans, (out, other))]
    return [f"if {pa} + {la} < {pb} + {hb} and {pb} + {lb} < {pa} + {ha}:", "    return SLOW(A)"]


def _recorded_address(a: Any) -> int:
    """The address :func:`_address`'s source reads, for the recorded array ``a``."""
    return int(_ADDRESSES[_device_kind(a)][1](a))  # type: ignore[index]


def _run_step(kernel: Any, args: tuple, grid: Any, group: Any, backend: Any, arrays: list[Any]) -> None:
    run_traced(kernel, [arrays[v] if is_ref else v for is_ref, v in args], grid, group, backend)


def _result_source(shape: Any, names: list[str]) -> str:
    if isinstance(shape, tuple):
        return "(" + "".join(f"{_result_source(s, names)}, " for s in shape) + ")"
    return "None" if shape is None else names[shape]


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
    state = (names, defaults, required, plans, config.generation, _RECORDING, inspect.Parameter.empty)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        hot = _hot
        if hot is not None:  # the same steps as below, in C, as far as running a plan found for the call
            result = hot[0](state, args, kwargs)
            if result is not hot[1]:
                return result
        return python_call(args, kwargs)

    def python_call(args: tuple, kwargs: dict[str, Any]) -> Any:
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
        generation = config.generation()
        try:
            key, arrays = signature_function(generation)(values, generation)
        except Exception:  # an array whose address cannot be read (a meta or fake tensor): the function says why
            return fn(*args, **kwargs)
        if key is None:
            return fn(*args, **kwargs)
        plan = plans.get(key, plans)
        if plan is not plans:
            return fn(*args, **kwargs) if plan is None else plan.run(arrays)
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

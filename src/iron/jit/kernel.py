"""The kernel object: ``@iron.kernel``, specialisation, and launching (the ``jit`` layer, above the runtime).

``@kernel`` parses the function when decorated and lowers it lazily, once
per binding (variant values, type variables, constexprs); the verified
frontend IR and the per-target pipeline output are cached per binding.
``k[grid](*args)`` / ``k.launch(*args, grid=...)`` pick the binding from the
arguments, compile for the device's target and run.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from contextvars import ContextVar
from typing import Any, Callable, Iterator

from .. import config
from ..core.dtypes import DType
from ..core.errors import LaunchError
from ..core.ir import Kernel
from ..lang.annotations import Variants, binding_key, format_binding, rule_text
from ..lang.binding import BindingResolver
from ..lang.frontend import lower_kernel
from ..lang.numpy_compat import arg_signature, data_device, element_signature, is_numpy_integer
from ..lang.params import ParamSpec, check_signature, kernel_params
from ..lang.source import parse_function


class KernelFunction:
    """A Python function compiled as a GPU kernel (what ``@iron.kernel`` returns)."""

    __iron_kernel__ = True

    def __init__(self, fn: Callable[..., Any], variants: Variants | None = None, fp_contract: bool | None = None,
                 name: str | None = None):
        self.fn = fn
        self.parsed = parse_function(fn, "kernel")
        check_signature(self.parsed, "kernel")
        self.name = name or fn.__name__
        self.fp_contract = fp_contract
        self._variants = variants or Variants({})
        self._resolver: BindingResolver | None = None
        self._irs: dict[tuple, Kernel] = {}
        #: ``variant(**binding)`` results by the binding as given (values with their types).
        self._specialized: dict[tuple, SpecializedKernel] = {}
        self._compiled: dict[tuple, Kernel] = {}
        #: Call signature -> (binding key, binding): the launch fast path.
        self._calls: dict[tuple, tuple[tuple, dict[str, Any]]] = {}
        self._mask: tuple[bool, ...] | None = None
        self._names: tuple[str, ...] | None = None
        self._all_runtime = False
        self._launchers: dict[Any, Launcher] = {}
        #: (call signature, grid, group, backend, options generation) -> (device name, device, IR, grid, group)
        self._fast: dict[tuple, tuple[str, Any, Kernel, tuple[int, ...], tuple[int, ...]]] = {}
        #: ``launch(...)``'s last launch (:func:`remember`), and whether it may be relaunched directly.
        self._last: tuple | None = None
        self._unbound_fixed: bool | None = None
        functools.update_wrapper(self, fn)

    # ------------------------------------------------------------ specialisation
    @property
    def params(self) -> list[ParamSpec]:
        return self.resolver.specs

    @property
    def resolver(self) -> BindingResolver:
        if self._resolver is None:
            dtype_vars = [n for n, vs in self._variants.params.items() if all(isinstance(v, DType) for v in vs)]
            specs = kernel_params(self.parsed, self.name, dtype_vars)
            self._resolver = BindingResolver(self.name, specs, self._variants)
        return self._resolver

    @property
    def variants(self) -> list[dict[str, Any]]:
        """Every valid binding of the declared variant parameters: the cartesian product less what the
        rules of ``variants(where=...)`` reject."""
        return self._variants.bindings() if self._variants.params else []

    @property
    def variant_values(self) -> dict[str, tuple[Any, ...]]:
        """Each variant parameter's values that some valid binding takes, in the order declared."""
        return self._variants.values() if self._variants.params else {}

    def variant(self, **binding: Any) -> "SpecializedKernel":
        """This kernel with some variant values, type variables or constexprs fixed.

        Checked once per distinct binding (a library calls ``variant(...)`` on every call): the value's type
        is part of the key, so ``VEC=1`` and ``VEC=True`` are checked apart."""
        try:
            key: tuple | None = tuple((k, type(v), v) for k, v in binding.items())
            hit = self._specialized.get(key)  # type: ignore[arg-type]
        except TypeError:  # an unhashable constexpr value: checked every time
            key, hit = None, None
        if hit is not None:
            return hit
        checked = self.resolver.check_partial(binding)
        self._check_rules(checked)
        spec = SpecializedKernel(self, checked)
        if key is not None and len(self._specialized) < 4096:
            self._specialized[key] = spec
        return spec

    def _check_rules(self, binding: dict[str, Any]) -> None:
        """A LaunchError when ``binding`` sets every variant parameter to a combination a rule rejects."""
        try:
            rule = self._variants.broken_rule(binding)
        except ValueError as e:
            raise LaunchError(f"kernel '{self.name}': {e}") from None
        if rule is not None:
            values = format_binding({n: binding[n] for n in self._variants.params})
            raise LaunchError(f"kernel '{self.name}' has no variant {values}: its rule {rule_text(rule)!r} "
                              f"excludes that combination (it is not built, and cannot run); "
                              f"{len(self.variants)} combinations are valid")

    def ir(self, **binding: Any) -> Kernel:
        """The verified frontend IR for ``binding`` (unlisted variant parameters take their first value)."""
        return self.variant(**binding).ir

    def lower(self, *args: Any, **kwargs: Any) -> Kernel:
        """The frontend IR the launch ``k[...](*args, **kwargs)`` would run."""
        return self._ir_for(*self._binding_for({}, args, kwargs))

    def ir_for_binding(self, binding: dict[str, Any]) -> Kernel:
        complete = self.resolver.complete(binding)
        return self._ir_for(binding_key(complete), complete)

    def _ir_for(self, key: tuple, binding: dict[str, Any]) -> Kernel:
        k = self._irs.get(key)
        if k is None:
            self._check_rules(binding)
            meta = {} if self.fp_contract is None else {"fp_contract": self.fp_contract}
            k = lower_kernel(self.parsed, self.params, binding, self.name, meta)
            self._irs[key] = k
        return k

    def _compiled_for(self, key: tuple, binding: dict[str, Any], target: str) -> Kernel:
        """The optimised IR of ``binding`` for ``target``: the compile driver's first stage, kept per binding and
        pass context (the driver shares it between targets whose pipelines agree)."""
        from ..codegen.compiler import CompileOptions, compile as compile_kernel  # the passes load on first use
        from ..codegen.pipeline import PassContext

        overrides = {} if self.fp_contract is None else {"fp_contract": self.fp_contract}
        ctx = PassContext.for_target(target, **overrides)
        ckey = (key, ctx)
        k = self._compiled.get(ckey)
        if k is None:
            artifact = compile_kernel(self._ir_for(key, binding), target, CompileOptions(passes=ctx, stop="optimise"))
            k = self._compiled[ckey] = artifact.kernel
        return k

    # ------------------------------------------------------------ launching
    def __getitem__(self, key: Any) -> "Launcher":
        # A launcher holds only the kernel and the geometry: the same k[grid] reuses one (a hot path).
        try:
            hit = self._launchers.get(key)
        except TypeError:  # a geometry given as a list
            hit = None
        if hit is None:
            grid, group = split_launch_key(key)
            hit = Launcher(self, {}, grid, group)
            try:
                if len(self._launchers) < 256:
                    self._launchers[key] = hit
            except TypeError:
                pass
        return hit

    def launch(self, *args: Any, grid: Any, group: Any = None, backend: str | None = None, **kwargs: Any) -> None:
        """Run the kernel over ``grid`` threads (groups of ``group``); numpy arrays are updated in place."""
        if self._unbound_fixed is None:
            self._unbound_fixed = self.binding_is_fixed({})
        _launch_remembered(self, self, {}, None, self._unbound_fixed, args, kwargs, grid, group, backend)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise LaunchError(f"kernel '{self.name}' is launched with a grid: {self.name}[grid](...) or "
                          f"{self.name}.launch(..., grid=...)")

    def _binding_for(self, fixed: dict[str, Any], args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict]:
        binding, _ = self.resolver.resolve(fixed, args, kwargs)
        return binding_key(binding), binding

    def _launch(self, fixed: dict[str, Any], args: tuple, kwargs: dict[str, Any], grid: Any, group: Any,
                backend: str | None, fixed_key: tuple | None = None) -> tuple | None:
        """``fixed_key``: ``binding_key(fixed)`` when the caller holds it (a variant's, computed once).  Returns
        where the launch went: (device name, device, compiled IR, grid, group)."""
        runtime_mask = self._runtime_mask()
        if self._all_runtime and not kwargs:  # the same summary as _call_signature's, computed faster
            if fixed_key is None:
                fixed_key = binding_key(fixed) if fixed else ()
            call: tuple | None = (fixed_key,) + element_signature(args)
        else:
            call = _call_signature(fixed, args, kwargs, runtime_mask)
        fast_key = None
        generation = config.generation()
        if call is not None:
            # Everything a launch derives from the argument types and places (the call summary holds each
            # array's device), the geometry and the options, resolved once: a repeated launch is a dictionary
            # hit and the device's own launch.
            fast_key = (call, grid, group, backend, generation)
            try:
                fast = self._fast.get(fast_key)
            except TypeError:  # a geometry given as a list: not hashable, take the slow path
                fast, fast_key = None, None
            if fast is not None:
                device_name, device, compiled, grid_t, group_t = fast
                if _DEVICES.get(device_name) is device:  # the same device object still serves that backend
                    runtime = args if self._all_runtime else tuple(a for a, keep in zip(args, runtime_mask) if keep)
                    device.launch(compiled, runtime, grid_t, group_t)
                    return fast
        rt = _runtime()
        hit = self._calls.get(call) if call is not None else None
        if hit is not None:
            key, binding = hit
            runtime = [a for a, keep in zip(args, runtime_mask) if keep]
        else:
            binding, runtime = self.resolver.resolve(fixed, args, kwargs)
            key = binding_key(binding)
            if call is not None:
                self._calls[call] = (key, binding)
        grid_t = normalize_grid(grid, "grid")
        group_t = None if group is None else normalize_grid(group, "group")
        data = self._data_device(args, kwargs, backend, generation)
        device_name = rt.resolve_backend(backend, data)
        device = rt.get_device(device_name)
        if device_name not in _ANNOUNCED:
            _ANNOUNCED.add(device_name)
            _log.debug("kernel '%s' runs on %s (backend %s%s)", self.name, device_name, backend or "option",
                       f"; its arrays live on {data}" if data else "")
        compiled = self._compiled_for(key, binding, device.target)
        group_t = group_t or device.default_group(grid_t)
        device.launch(compiled, runtime, grid_t, group_t)
        entry = (device_name, device, compiled, grid_t, group_t)
        if fast_key is not None:
            self._fast[fast_key] = entry
        return entry

    def _data_device(self, args: tuple, kwargs: dict[str, Any], backend: str | None, generation: int) -> str | None:
        """The device holding this launch's arrays, where the backend follows the data (``auto``, or one with
        device indices such as ``cuda``); None otherwise or for host data.  Arrays on two devices raise."""
        follows = _FOLLOWS.get((backend, generation))
        if follows is None:
            if len(_FOLLOWS) > 256:  # entries of earlier option generations
                _FOLLOWS.clear()
            follows = _FOLLOWS[(backend, generation)] = _follows_data(backend)
        if not follows:
            return None
        names = self._names
        if names is None:
            names = self._names = tuple(s.name for s in self.params)
        if kwargs:
            return data_device((*args, *kwargs.values()), (*names[:len(args)], *kwargs), f"kernel '{self.name}'")
        return data_device(args, names, f"kernel '{self.name}'")

    def binding_is_fixed(self, fixed: dict[str, Any]) -> bool:
        """Whether ``fixed`` alone decides what a launch compiles: every type variable a parameter uses is fixed
        and no parameter is a constexpr, so the arguments can change nothing but the values passed."""
        specs = self.params
        if any(s.kind == "constexpr" for s in specs):
            return False
        return all(s.type_var is None or s.type_var.name in fixed for s in specs)

    def _runtime_mask(self) -> tuple[bool, ...]:
        """For each parameter position, whether it is a run-time argument (not a constexpr)."""
        mask = self._mask
        if mask is None:
            mask = self._mask = tuple(s.kind != "constexpr" for s in self.params)
            self._all_runtime = all(mask)
        return mask

    def __repr__(self) -> str:
        return f"<iron.kernel {self.name}>"


class SpecializedKernel:
    """A kernel with some bindings fixed (``k.variant(T=f16)``); launched with the same arguments."""

    def __init__(self, kernel: KernelFunction, fixed: dict[str, Any]):
        self.kernel = kernel
        self.binding = fixed
        self._key = binding_key(fixed) if fixed else ()  # the launch fast path's part of the call summary
        self._fixed = kernel.binding_is_fixed(fixed)
        self._last: tuple | None = None

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def fn(self) -> Callable[..., Any]:
        return self.kernel.fn

    @property
    def ir(self) -> Kernel:
        """The verified frontend IR (every type variable and constexpr must be bound)."""
        return self.kernel.ir_for_binding(self.binding)

    def lower(self, *args: Any, **kwargs: Any) -> Kernel:
        return self.kernel._ir_for(*self.kernel._binding_for(self.binding, args, kwargs))

    def compiled(self, target: str) -> Kernel:
        """The IR after the pass pipeline of ``target`` (cached)."""
        complete = self.kernel.resolver.complete(self.binding)
        return self.kernel._compiled_for(binding_key(complete), complete, target)

    def __getitem__(self, key: Any) -> "Launcher":
        grid, group = split_launch_key(key)
        return Launcher(self.kernel, self.binding, grid, group, self._key)

    def launch(self, *args: Any, grid: Any, group: Any = None, backend: str | None = None, **kwargs: Any) -> None:
        _launch_remembered(self, self.kernel, self.binding, self._key, self._fixed, args, kwargs, grid, group, backend)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise LaunchError(f"kernel '{self.name}' is launched with a grid: k[grid](...) or k.launch(..., grid=...)")

    def __repr__(self) -> str:
        return f"<iron.kernel {self.name} [{format_binding(self.binding)}]>"


class Launcher:
    """``k[grid]`` or ``k[grid, group]``: call it with the kernel's arguments."""

    __slots__ = ("kernel", "fixed", "grid", "group", "fixed_key", "_is_fixed", "_last")

    def __init__(self, kernel: KernelFunction, fixed: dict[str, Any], grid: Any, group: Any,
                 fixed_key: tuple | None = None):
        self.kernel = kernel
        self.fixed = fixed
        self.grid = grid
        self.group = group
        self.fixed_key = fixed_key
        self._is_fixed = kernel.binding_is_fixed(fixed)
        self._last: tuple | None = None

    def __call__(self, *args: Any, backend: str | None = None, **kwargs: Any) -> None:
        _launch_remembered(self, self.kernel, self.fixed, self.fixed_key, self._is_fixed, args, kwargs, self.grid,
                           self.group, backend)


# ---------------------------------------------------------------- tracing launches
#: The launches made in this context while :func:`traced_launches` is active (None: not tracing).
_TRACED: ContextVar[list | None] = ContextVar("iron_traced_launches", default=None)


@contextlib.contextmanager
def traced_launches() -> Iterator[list[tuple]]:
    """Collect every launch made in this context (thread, task) inside the block, launched as usual:
    ``(kernel object, args, kwargs, grid, group, backend, went)``, the kernel object being what was called
    (a ``KernelFunction``, a ``SpecializedKernel`` or a ``Launcher``) and ``went`` where the launch went when
    a later one may go there directly (for :func:`bind_traced`), else None.  iron.std's call plans record
    with it."""
    seen: list[tuple] = []
    token = _TRACED.set(seen)
    try:
        yield seen
    finally:
        _TRACED.reset(token)


def run_traced(kernel: Any, args: Any, grid: Any, group: Any, backend: str | None) -> None:
    """Launch again what :func:`traced_launches` recorded (with new arguments)."""
    if isinstance(kernel, Launcher):
        kernel(*args, backend=backend)
    else:
        kernel.launch(*args, grid=grid, group=group, backend=backend)


def bind_traced(went: tuple | None, args: Any) -> Callable[..., bool] | None:
    """``go(*addresses) -> bool``: the launch :func:`traced_launches` saw go to ``went``, again with ``args``'
    scalars and new tensor addresses, for a caller that proved everything else about the arguments unchanged
    (iron.std's call plans, whose signature holds the options generation too); None when the device offers
    no such launcher.  ``go`` returns False, launching nothing, when that device no longer serves the
    backend (then :func:`run_traced`)."""
    if went is None:
        return None
    name, device, compiled, grid, group = went[4:]
    bind = getattr(device, "bind", None)
    return None if bind is None else bind(compiled, args, grid, group, _DEVICES, name)


# ---------------------------------------------------------------- relaunching where the last launch went
def _launch_remembered(holder: Any, kernel: KernelFunction, fixed: dict[str, Any], fixed_key: tuple | None,
                       is_fixed: bool, args: tuple, kwargs: dict[str, Any], grid: Any, group: Any,
                       backend: str | None) -> None:
    """A launch through ``holder`` (a kernel, variant or launcher, keeping ``_last``): traced when tracing,
    relaunched where the last one went when nothing that decided it changed, else resolved by ``kernel``."""
    last = holder._last
    went = False
    if last is not None and not kwargs:
        # Relaunch where the last launch went when nothing that decided it changed: the request (a geometry numpy
        # would compare elementwise is not the same), the options, the device serving that name, and the arguments'
        # kinds, dtypes, devices and layout, which the device's generated launcher checks (it refuses, launching
        # nothing, on any difference; then the full path runs).  Inline: a call is a tenth of a microsecond here.
        try:
            same = bool(last[0] == grid and last[1] == group and last[2] == backend)
        except (TypeError, ValueError):
            same = False
        went = (same and last[3] == config.generation() and _DEVICES.get(last[4]) is last[5]
                and last[5].relaunch(last[6], args, last[7], last[8]))
    if not went:
        holder._last = remember(is_fixed and not kwargs, (grid, group, backend),
                                kernel._launch(fixed, args, kwargs, grid, group, backend, fixed_key))
    traced = _TRACED.get()
    if traced is not None:
        traced.append((holder, args, kwargs, grid, group, backend, holder._last))


def remember(fixed: bool, request: tuple, entry: tuple | None) -> tuple | None:
    """What a variant or launcher keeps of its last launch, to try first next time: the request (grid, group,
    backend), the options generation and where it went, when the binding is ``fixed`` (cannot depend on the
    arguments) and the device can relaunch through its own argument checks."""
    if not fixed or entry is None or not hasattr(entry[1], "relaunch"):
        return None
    return (*request, config.generation(), *entry)


def split_launch_key(key: Any) -> tuple[Any, Any]:
    """``k[grid]`` -> (grid, None); ``k[grid, group]`` -> (grid, group).

    A multi-axis grid alone is written ``k[(nx, ny),]`` (``k[nx, ny]`` means
    grid ``nx`` in groups of ``ny``).
    """
    if isinstance(key, tuple):
        if len(key) == 1:
            return key[0], None
        if len(key) == 2:
            return key
        raise LaunchError(f"k[...] takes a grid, or a grid and a group, got {len(key)} items {key!r}; write a "
                          "multi-axis grid as a tuple: k[(nx, ny)] is grid nx in groups of ny, k[(nx, ny),] is a "
                          "2-D grid, k[(nx, ny), (gx, gy)] gives both")
    return key, None


@functools.cache
def _runtime() -> Any:
    """``iron.runtime``, imported on first launch (``import iron`` does not import devices up front)."""
    global _DEVICES
    from .. import runtime

    _DEVICES = runtime._devices
    return runtime


#: iron.runtime's table of live devices once a launch imported it (the fast path checks against it).
_DEVICES: dict[str, Any] = {}

#: (backend argument, options generation) -> whether that launch's device follows its data.
_FOLLOWS: dict[tuple[str | None, int], bool] = {}
#: Devices a launch has run on, each said once at debug level (logger "iron.launch").
_ANNOUNCED: set[str] = set()
_log = logging.getLogger("iron.launch")


def _follows_data(backend: str | None) -> bool:
    """Whether a launch with ``backend`` runs where its arrays live: ``auto`` (the argument, else the option),
    or a backend whose devices take an index (``cuda`` with tensors on GPU 1 runs on GPU 1)."""
    from ..codegen.backends import UnknownTargetError, get_backend

    name = backend or str(config.get("backend"))
    if name == "auto":
        return True
    try:
        return get_backend(name.partition(":")[0]).device_ordinals and ":" not in name
    except UnknownTargetError:
        return False


def normalize_grid(value: Any, what: str) -> tuple[int, ...]:
    """An int or a tuple of 1 to 3 positive ints, as a tuple."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(items) <= 3 or not all(_positive_int(v) for v in items):
        raise LaunchError(f"{what} must be a positive int or a tuple of 1 to 3 positive ints, got {value!r}")
    return tuple(int(v) for v in items)


def _positive_int(v: Any) -> bool:
    return (type(v) is int or is_numpy_integer(v)) and v > 0


def _call_signature(fixed: dict[str, Any], args: tuple, kwargs: dict[str, Any],
                    runtime_mask: tuple[bool, ...]) -> tuple | None:
    """A hashable summary of a call that determines its binding (None when it cannot be cached).

    Arrays contribute their dtype and place, other run-time arguments their
    type and constexpr arguments their value: two calls with equal summaries
    resolve to the same binding and, with ``backend="auto"``, the same device.
    """
    if kwargs or len(args) > len(runtime_mask):
        return None
    parts: list[Any] = [binding_key(fixed) if fixed else ()]
    constexprs = False
    for a, is_runtime in zip(args, runtime_mask):
        if not is_runtime:
            parts.append((type(a), a))
            constexprs = True
            continue
        parts.append(arg_signature(a))  # numpy, torch, CuPy, device arrays: dtype (the binding) and place
    summary = tuple(parts)
    if constexprs:  # a constexpr's value may be unhashable (then the call is not cached)
        try:
            hash(summary)
        except TypeError:
            return None
    return summary


def kernel(*args: Any, fp_contract: bool | None = None, name: str | None = None) -> Any:
    """Compile a Python function as a kernel: ``@kernel``, ``@kernel(variants(...))``, ``@kernel(..., name=)``."""
    if len(args) == 1 and callable(args[0]) and not isinstance(args[0], Variants):
        return KernelFunction(args[0], None, fp_contract, name)
    if len(args) > 1 or (args and not isinstance(args[0], Variants)):
        raise TypeError("@iron.kernel takes at most one variants(...) and the keywords fp_contract= and name=")
    declared = args[0] if args else None

    def decorate(fn: Callable[..., Any]) -> KernelFunction:
        return KernelFunction(fn, declared, fp_contract, name)
    return decorate

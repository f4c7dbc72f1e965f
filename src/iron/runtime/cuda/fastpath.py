"""A launcher generated per kernel for the argument kinds it is first launched with: the fast path.

Relaunching a kernel with device arrays (torch tensors, CuPy arrays,
CudaArrays) and scalars should cost little more than ``cuLaunchKernel``
itself.  For such a launch, :func:`build` writes a Python function with
everything known in advance folded in as constants (the function handle,
the argument buffer, the expected dtypes, which pairs of tensors the
aliasing rule compares) and the per-argument work written out inline: a
few attribute reads per tensor, one ``struct.pack_into`` and the launch.
Anything it does not expect (another kind or dtype, a strided or foreign
array, an unseen geometry, a possible overlap, a value the block cannot
hold) makes it return False before launching, and the device takes the
general path (:mod:`.binding`), which handles the case or raises the
proper error.  The generated source is kept on the function
(``fast.source``) for inspection.
"""

from __future__ import annotations

import math
import struct
import sys
from typing import Any, Callable

from ..interp.args import MAX_TENSOR_ELEMENTS
from . import interop
from .plan import KernelPlan

#: Argument kinds the fast path handles.
FAST_KINDS = frozenset({"torch", "cupy", "iron", "scalar"})


def eligible(kinds: tuple[str, ...]) -> bool:
    """Whether a launch whose arguments are of ``kinds`` can use a generated launcher."""
    tensor_kinds = {k for k in kinds if k != "scalar"}
    return set(kinds) <= FAST_KINDS and len(tensor_kinds - {"iron"}) <= 1


def build(plan: KernelPlan, kinds: tuple[str, ...], ordinal: int, launch: Callable[..., Any],
          order: Any, failed: Callable[[Any], None], native: Callable[..., int] | None = None) -> Callable[..., bool]:
    """``fast(args, grid, group, forced_stream) -> bool`` for ``plan`` and arguments of ``kinds``.

    ``launch`` is ``cuLaunchKernel``; ``order`` a :class:`.streams.StreamOrder`; ``failed(err)`` raises
    for a failed launch, or returns False to hand it to the general path (no context current on this
    thread).  ``forced_stream`` (a raw handle or None) overrides the producer's stream.  ``native``: the
    native module's ``launch`` (:mod:`.native`), called with raw ints instead of ``launch``.
    """
    sig = plan.signature
    env: dict[str, Any] = {"GEOMS": plan.geometries, "PACK": plan.args.struct.pack_into, "BUF": plan.args.buffer,
                           "PARAMS": plan.args.params_address, "FUNC": plan.function, "LAUNCH": launch,
                           "ORDER": order, "FAILED": failed, "ORD": ordinal, "MAXN": MAX_TENSOR_ELEMENTS,
                           "PACK_ERRORS": (struct.error, OverflowError)}
    names = [f"a{i}" for i in range(len(sig.params))]
    body = ["geo = GEOMS.get((grid, group))",
            f"if geo is None or len(args) != {len(names)}:", "    return False",
            f"{', '.join(names)}{',' if len(names) == 1 else ''} = args" if names else "pass"]
    pointer, count, sizes = {}, {}, {}
    producer = None
    for i, (spec, kind) in enumerate(zip(sig.params, kinds)):
        a = names[i]
        if kind == "scalar":
            env[f"C{i}"] = plan.converters[spec.name]
            body.append(f"s{i} = C{i}({a})")
            continue
        body += _tensor_guard(i, a, kind, spec.dtype, env)
        pointer[spec.name], count[spec.name] = f"p{i}", f"n{i}"
        sizes[spec.name] = spec.dtype.itemsize
        producer = producer or (kind if kind in ("torch", "cupy") else None)
    if count:
        body += [f"if {' or '.join(f'{n} > MAXN' for n in count.values())}:", "    return False"]
    body += _overlap_checks(sig, pointer, count, sizes)
    names_of = [p.name for p in sig.params]
    scalar = {n: f"s{names_of.index(n)}" for n in names_of}
    body += _map_lines(plan, env, pointer, scalar, count)
    values = _values(plan, pointer, scalar, count, "g[{}]")
    body += ["g = geo.grid", "b = geo.blocks", "t = geo.threads", "try:",
             f"    PACK(BUF, 0, {', '.join(values)})", "except PACK_ERRORS:", "    return False"]
    body += _stream_choice(producer, env, native is not None)
    body += _launch_lines(plan, env, native, "b[{}]", "t[{}]") + ["if err:", "    return FAILED(err)", "return True"]
    return _define("fast", "args, grid, group, forced", body, env, f"<iron fast launcher {plan.module.entry}>")


def build_bound(plan: KernelPlan, args: Any, grid: Any, group: Any, ordinal: int, launch: Callable[..., Any],
                order: Any, failed: Callable[[Any], None], native: Callable[..., int] | None, dispatch: Any,
                lock: Any, still: str, names: dict[str, Any]) -> Callable[..., bool] | None:
    """``go(*addresses) -> bool``: a launch of ``plan`` at (``grid``, ``group``) like the one of ``args``, with
    everything but the tensors' addresses fixed (for a caller that has proved the rest the same: a std call
    plan, :mod:`iron.std._plans`), or None when ``args`` are not all device tensors of this GPU and scalars.

    ``go`` takes one address per tensor argument, in order, and returns False, launching nothing, when
    ``still`` (a Python expression over ``env``'s names, the caller's check that this device still serves
    it; ``names`` binds its names) is false, when an address is 0 (a freed array) or written memory
    overlaps another argument's: the caller then takes the full path, which explains or launches.  Element
    counts and scalars are those of ``args``; the stream is chosen per call like the fast launcher's;
    ``dispatch`` gives the forced stream and the capture to count in; ``lock`` is the device's.
    """
    sig = plan.signature
    geo = plan.geometries.get((grid, group))
    if geo is None or len(args) != len(sig.params):
        return None
    env: dict[str, Any] = {"PACK": plan.args.struct.pack_into, "BUF": plan.args.buffer,
                           "PARAMS": plan.args.params_address, "FUNC": plan.function, "LAUNCH": launch,
                           "ORDER": order, "FAILED": failed, "ORD": ordinal, "DISPATCH": dispatch, "LOCK": lock,
                           **names}
    pointer, count, sizes, scalars, guards = {}, {}, {}, {}, []
    producer = None
    for i, (spec, arg) in enumerate(zip(sig.params, args)):
        if not spec.is_tensor:
            scalars[spec.name] = _constant_source(plan.converters[spec.name](arg), env, f"S{i}")
            continue
        kind = interop.kind_of(arg)
        n = _count_of(arg, kind, spec.dtype, ordinal)
        if n is None:
            return None
        pointer[spec.name], count[spec.name], sizes[spec.name] = f"p{i}", str(n), spec.dtype.itemsize
        guards.append(f"not p{i}")
        producer = producer or (kind if kind in ("torch", "cupy") else None)
    overlap = _overlap_checks(sig, pointer, count, sizes)
    values = _values(plan, pointer, scalars, count, lambda axis: str(geo.grid[axis]))
    maps = ["    " + line for line in _map_lines(plan, env, pointer, scalars, count)]
    if plan.chained:  # made for chained launches: once the driver refused one (the plan unchained), never try again
        env["PLAN"] = plan
        guards.insert(0, "not PLAN.chained")
    body = [f"if not ({still}) or {' or '.join(guards) or 'False'}:", "    return False", *overlap,
            "with LOCK:", *maps, f"    PACK(BUF, 0, {', '.join(values)})", "    forced = DISPATCH.forced"]
    body += ["    " + line for line in _stream_choice(producer, env, native is not None)]
    blocks, threads = geo.blocks, geo.threads
    launch = _launch_lines(plan, env, native, lambda a: str(blocks[a]), lambda a: str(threads[a]))
    body += ["    " + line for line in launch]
    body += ["    if err:", "        return FAILED(err)", "    if DISPATCH.capture.active:",
             "        DISPATCH.capture.launches += 1", "return True"]
    params = ", ".join(pointer.values())
    return _define("go", params, body, env, f"<iron bound launcher {plan.module.entry}>")


def _constant_source(value: Any, env: dict[str, Any], name: str) -> str:
    """``value`` as source: its repr when that reads back as the same value, else a name bound in ``env``."""
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return repr(value)
    env[name] = value
    return name


def _count_of(arg: Any, kind: str, dtype: Any, ordinal: int) -> int | None:
    """The element count of a device tensor the fast launcher would take for ``dtype`` on ``ordinal``; None for
    anything else."""
    if kind == "torch":
        torch_dtype = next((t for t, d in interop.torch_dtypes().items() if d == dtype), None)
        ok = arg.dtype is torch_dtype and arg.get_device() == ordinal and arg.is_contiguous()
        n = arg.numel()
    elif kind == "cupy":
        from ...core import dtypes as D

        ok = arg.dtype == D.numpy_dtype(dtype) and arg.flags.c_contiguous and arg.device.id == ordinal
        n = arg.size
    elif kind == "iron":
        ok, n = arg.dtype is dtype and arg.ordinal == ordinal and bool(arg.ptr), arg.size
    else:
        return None
    return int(n) if ok and n <= MAX_TENSOR_ELEMENTS else None


def _values(plan: KernelPlan, pointer: dict[str, str], scalar: dict[str, str], count: dict[str, str],
            grid: Any) -> list[str]:
    """The source of each value of the argument buffer, in its order (:meth:`ArgBuffer.order`)."""
    values = []
    maps = 0
    for kind, what in plan.args.order():
        if kind == "tensormap":
            values.append(f"t{maps}")  # :func:`_map_lines`
            maps += 1
        elif kind == "pointer":
            values.append(pointer[what])
        elif kind == "param":
            values.append(scalar[what])
        elif kind == "grid":
            values.append(grid(what) if callable(grid) else grid.format(what))
        else:
            values.append(count[what])
    return values


def _map_lines(plan: KernelPlan, env: dict[str, Any], pointer: dict[str, str], scalar: dict[str, str],
               count: dict[str, str]) -> list[str]:
    """Each tensor map's bytes in ``t<k>``: the encoder's for this launch's address, size and scalars (a
    dictionary lookup), else encoded there (checked: a LaunchError for an address or extent TMA refuses)."""
    if not plan.abi.maps:
        return []
    enc = plan.maps
    env["MAPS"], env["ENCODE_MAP"], env["KNAME"] = enc.launches, enc.encode_key, plan.signature.kernel  # type: ignore
    lines = []
    for k, m in enumerate(plan.abi.maps):
        env[f"M{k}"] = m
        names = enc.key_names(m)  # type: ignore[union-attr]
        key = ", ".join([str(id(m)), pointer[m.tensor], count[m.tensor], *(scalar[n] for n in names)])
        lines += [f"k{k} = ({key})", f"t{k} = MAPS.get(k{k})", f"if t{k} is None:",
                  f"    t{k} = ENCODE_MAP(KNAME, M{k}, k{k})"]
    return lines


def _launch_lines(plan: KernelPlan, env: dict[str, Any], native: Callable[..., int] | None, block: Any,
                  thread: Any) -> list[str]:
    """The driver call, its result in ``err``; ``block`` and ``thread`` give each axis's source."""
    b = [block(a) if callable(block) else block.format(a) for a in range(3)]
    t = [thread(a) if callable(thread) else thread.format(a) for a in range(3)]
    shared = plan.module.dynamic_shared_bytes
    if native is not None:
        env["NATIVE"], env["FUNCI"] = native, int(plan.function)
        return [f"err = NATIVE(FUNCI, {', '.join(b)}, {', '.join(t)}, {shared}, h, PARAMS)"]
    return [f"err, = LAUNCH(FUNC, {', '.join(b)}, {', '.join(t)}, {shared}, stream, PARAMS, 0)"]


def _define(name: str, params: str, body: list[str], env: dict[str, Any], filename: str) -> Callable[..., Any]:
    source = f"def {name}({params}):\n" + "\n".join("    " + line for line in body) + "\n"
    exec(compile(source, filename, "exec"), env)
    made = env[name]
    made.source = source
    return made


def _tensor_guard(i: int, a: str, kind: str, dtype: Any, env: dict[str, Any]) -> list[str]:
    if kind == "torch":
        torch = sys.modules["torch"]
        env["TT"] = torch.Tensor
        env[f"DT{i}"] = next(t for t, d in interop.torch_dtypes().items() if d == dtype)
        return [(f"if type({a}) is not TT or {a}.dtype is not DT{i} or {a}.get_device() != ORD "
                 f"or not {a}.is_contiguous():"), "    return False",
                f"p{i} = {a}.data_ptr()", f"n{i} = {a}.numel()"]
    if kind == "cupy":
        cupy = sys.modules["cupy"]
        from ...core import dtypes as D

        env["CT"] = cupy.ndarray
        env[f"DT{i}"] = D.numpy_dtype(dtype)
        return [(f"if type({a}) is not CT or {a}.dtype != DT{i} or not {a}.flags.c_contiguous "
                 f"or {a}.device.id != ORD:"), "    return False",
                f"p{i} = {a}.data.ptr", f"n{i} = {a}.size"]
    from .array import CudaArray

    env["IT"] = CudaArray
    env[f"DT{i}"] = dtype
    return [f"if type({a}) is not IT or {a}.dtype is not DT{i} or {a}.ordinal != ORD or not {a}.ptr:",
            "    return False", f"p{i} = {a}.ptr", f"n{i} = {a}.size"]


def _overlap_checks(sig: Any, pointer: dict[str, str], count: dict[str, str], sizes: dict[str, int]) -> list[str]:
    """Give up (to the general path, which raises) on any overlap between a written tensor and another."""
    tensors = [p for p in sig.params if p.is_tensor]
    out = []
    for i, p in enumerate(tensors):
        for q in tensors[i + 1:]:
            if not (p.written or q.written):
                continue
            pa, na, pb, nb = pointer[p.name], count[p.name], pointer[q.name], count[q.name]
            if na.isdigit() and nb.isdigit():  # counts fixed in advance (a bound launcher): folded
                if not (int(na) and int(nb)):
                    continue
                ea, eb = f"{pa} + {int(na) * sizes[p.name]}", f"{pb} + {int(nb) * sizes[q.name]}"
                same = f"{pa} != {pb}" if int(na) * sizes[p.name] == int(nb) * sizes[q.name] else "True"
                out += [f"if {pa} < {eb} and {pb} < {ea} and {same}:", "    return False"]
                continue
            ea, eb = f"{pa} + {na} * {sizes[p.name]}", f"{pb} + {nb} * {sizes[q.name]}"
            out += [f"if {na} and {nb} and {pa} < {eb} and {pb} < {ea} and ({pa} != {pb} or {ea} != {eb}):",
                    "    return False"]
    return out


def _stream_choice(producer: str | None, env: dict[str, Any], raw: bool = False) -> list[str]:
    """The lines that pick the stream ``h`` (a raw handle) and order it after the previous launch's stream;
    ``raw``: the launch takes ``h`` itself, else the ``CUstream`` object ``stream``."""
    if producer == "torch":
        env["CURRENT"] = _torch_current()
        handle = "CURRENT(ORD)"
    elif producer == "cupy":
        env["CUPY_STREAM"] = sys.modules["cupy"].cuda.get_current_stream
        handle = "CUPY_STREAM().ptr"
    else:
        env["OWN"] = env["ORDER"].own_handle
        handle = "OWN"
    choose = f"h = {handle} if forced is None else forced"
    if raw:
        return [choose, "if h != ORDER.last:", "    ORDER.enter(h)"]
    return [choose, "stream = ORDER.enter(h) if h != ORDER.last else ORDER.stream(h)"]


def _torch_current() -> Callable[[int], int]:
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw if raw is not None else (lambda ordinal: interop.torch_stream(ordinal))

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
    values = []
    for kind, what in plan.args.order():
        if kind == "pointer":
            values.append(pointer[what])
        elif kind == "param":
            values.append(f"s{[p.name for p in sig.params].index(what)}")
        elif kind == "grid":
            values.append(f"g[{what}]")
        else:
            values.append(count[what])
    body += ["g = geo.grid", "b = geo.blocks", "t = geo.threads", "try:",
             f"    PACK(BUF, 0, {', '.join(values)})", "except PACK_ERRORS:", "    return False"]
    body += _stream_choice(producer, env, native is not None)
    shared = plan.module.dynamic_shared_bytes
    if native is not None:
        env["NATIVE"], env["FUNCI"] = native, int(plan.function)
        body.append(f"err = NATIVE(FUNCI, b[0], b[1], b[2], t[0], t[1], t[2], {shared}, h, PARAMS)")
    else:
        body.append(f"err, = LAUNCH(FUNC, b[0], b[1], b[2], t[0], t[1], t[2], {shared}, stream, PARAMS, 0)")
    body += ["if err:", "    return FAILED(err)", "return True"]
    source = "def fast(args, grid, group, forced):\n" + "\n".join("    " + line for line in body) + "\n"
    exec(compile(source, f"<iron fast launcher {plan.module.entry}>", "exec"), env)
    fast = env["fast"]
    fast.source = source
    return fast


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

"""Binding one launch's arguments to a kernel's signature: device views, host arrays, scalar values.

The general path of every launch (the fast path in :mod:`.fastpath` falls
back here for anything unusual, and this is where its errors come from).
The checks are the interpreter's: the argument count, each tensor's dtype,
contiguity, writability and 32-bit element count, each scalar's type and
range, and the aliasing rule (:mod:`iron.runtime.aliasing`): two tensor
arguments of a launch that writes either are the very same buffer or do
not overlap; here applied to device pointers as well as host arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ...core.errors import LaunchError
from ..interp.args import MAX_TENSOR_ELEMENTS
from . import interop
from .interop import DeviceView
from .signature import Signature


@dataclass
class Bound:
    """A launch's arguments, ready for the parameter block."""

    #: Per tensor parameter name: a DeviceView (already on this GPU) or a host numpy array (to be copied).
    tensors: dict[str, DeviceView | np.ndarray] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    scalars: dict[str, int | float] = field(default_factory=dict)
    #: The producers' streams (raw handles), first-seen order, no repeats.
    streams: list[int] = field(default_factory=list)
    #: The kind of each argument (interop.kind_of), in call order.
    kinds: list[str] = field(default_factory=list)

    def host_arrays(self) -> list[tuple[str, np.ndarray]]:
        return [(n, t) for n, t in self.tensors.items() if isinstance(t, np.ndarray)]


def bind(sig: Signature, args: Sequence[Any], ordinal: int, converters: dict[str, Callable[[Any], Any]],
         ordinal_of: Callable[[int], int], own_stream: int) -> Bound:
    """Check and bind ``args`` (call order) to ``sig``; LaunchError names the kernel and argument at fault."""
    if len(args) != len(sig.params):
        raise LaunchError(f"kernel '{sig.kernel}' takes {len(sig.params)} argument(s) ({sig.names()}), "
                          f"got {len(args)}")
    out = Bound()
    for spec, arg in zip(sig.params, args):
        where = f"kernel '{sig.kernel}', argument '{spec.name}'"
        if not spec.is_tensor:
            out.kinds.append("scalar")
            out.scalars[spec.name] = converters[spec.name](arg)
            continue
        kind = interop.kind_of(arg)
        out.kinds.append(kind)
        if kind == "host":
            array = interop.host_array(arg, spec.dtype, spec.written, where)
            out.tensors[spec.name] = array
            count = array.size
        elif kind == "other":
            raise LaunchError(f"{where}: expects an array of {spec.dtype.name} (a numpy array, a torch tensor, a "
                              f"CuPy array or a CudaArray), got {type(arg).__name__}")
        else:
            view = interop.device_view(arg, kind, spec.dtype, ordinal, where, ordinal_of, own_stream, spec.written)
            out.tensors[spec.name] = view
            count = view.count
            if view.stream is not None and view.stream not in out.streams:
                out.streams.append(view.stream)
        if count > MAX_TENSOR_ELEMENTS:
            raise LaunchError(f"{where}: {count} elements; kernels index tensors with 32-bit ints, so a tensor "
                              f"holds at most {MAX_TENSOR_ELEMENTS} elements: split the work into several launches")
        out.counts[spec.name] = count
    check_overlaps(sig, out)
    return out


def span(t: DeviceView | np.ndarray) -> tuple[str, int, int]:
    """(memory space, start, bytes) of a bound tensor."""
    if isinstance(t, np.ndarray):
        return "host", t.__array_interface__["data"][0], t.nbytes
    return "device", t.ptr, t.nbytes


def check_overlaps(sig: Signature, bound: Bound) -> None:
    """The aliasing rule over every pair of tensor arguments of which at least one is written."""
    tensors = [(p, span(bound.tensors[p.name])) for p in sig.params if p.is_tensor]
    for i, (p, (space_a, a, na)) in enumerate(tensors):
        for q, (space_b, b, nb) in tensors[i + 1:]:
            if not (p.written or q.written) or na == 0 or nb == 0 or space_a != space_b:
                continue
            if a < b + nb and b < a + na and (a, na) != (b, nb):
                raise LaunchError(
                    f"kernel '{sig.kernel}': arguments '{p.name}' and '{q.name}' overlap without being the same "
                    f"buffer; a kernel that writes a tensor needs every other tensor argument to be that very "
                    f"buffer or to not overlap it (pass a copy, e.g. np.array(x[1:]))")

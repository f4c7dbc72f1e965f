"""What a test's or bench's setup callback receives and returns: :class:`Case` and :class:`Setup`.

A setup callback is an ordinary function ``setup(case) -> Setup``: the case says which point of
the matrix to build (shape, dtype, variant binding, backend) and carries a seeded random
generator; the setup returns the launch arguments and how to judge and measure the launch.  The
same callback can be registered as a test and as a bench (docs/runner.md).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core import dtypes as D
from ..core.dtypes import DType
from .tolerance import Depth, Tolerance

#: A problem size: an int (elements), a tuple of extents, or named extents ``{"M": 64, "N": 128}``.
Shape = int | tuple[int, ...] | Mapping[str, int]


#: Arrays of at least this many elements are drawn in DRAW_PARTS pieces, each from its own generator spawned
#: from the case's, on threads (numpy fills without the GIL): the bench shapes, 16M-537M elements, took
#: seconds each.  The pieces do not depend on the machine's cores: a seed gives the same values anywhere.
PARALLEL_DRAW = 1 << 22
DRAW_PARTS = 8


def draw_f32(rng: np.random.Generator, shape: tuple[int, ...], fill: Callable[..., Any]) -> np.ndarray:
    """f32 samples of ``shape`` from ``fill(generator, out)`` (e.g. ``Generator.standard_normal`` with
    ``dtype=np.float32``): ``rng`` itself below PARALLEL_DRAW elements, else spawned generators in pieces."""
    out = np.empty(shape, np.float32)
    flat = out.reshape(-1)
    if flat.size < PARALLEL_DRAW:
        fill(rng, flat)
        return out
    kids = rng.spawn(DRAW_PARTS)
    step = -(-flat.size // DRAW_PARTS)
    with ThreadPoolExecutor(min(DRAW_PARTS, os.cpu_count() or 1)) as pool:
        list(pool.map(lambda i: fill(kids[i], flat[i * step:(i + 1) * step]), range(DRAW_PARTS)))
    return out


def compact(n: int) -> str:
    """``16M`` for 16 * 2**20, ``4K`` for 4096, otherwise the number itself."""
    for suffix, unit in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def shape_label(shape: Shape) -> str:
    """``N=16M``, ``128x64`` or ``M=64,N=128``: how rows name their problem size."""
    if isinstance(shape, Mapping):
        return ",".join(f"{k}={compact(int(v))}" for k, v in shape.items())
    if isinstance(shape, tuple):
        return "x".join(compact(int(v)) for v in shape)
    return f"N={compact(int(shape))}"


@dataclass(frozen=True)
class Case:
    """One point of a registered matrix, handed to the setup callback.

    ``rng`` is seeded from the run's seed and the item's id, so a failure replays with the same
    inputs (``iron test --seed N``).  The array helpers draw values already rounded to the dtype,
    so the float64 oracle sees exactly what the kernel sees.
    """

    shape: Any
    dtype: DType | None
    binding: Mapping[str, Any]
    rng: np.random.Generator
    backend: str = "interp"
    #: Threads per subgroup on the device that runs the case (an oracle of a subgroup kernel needs it).
    simd_width: int = 32

    @property
    def n(self) -> int:
        """The number of elements of the shape (the product of its extents)."""
        if isinstance(self.shape, Mapping):
            return math.prod(int(v) for v in self.shape.values())
        if isinstance(self.shape, tuple):
            return math.prod(int(v) for v in self.shape)
        return int(self.shape)

    @property
    def dims(self) -> tuple[int, ...]:
        """The shape as array extents (named extents in their order)."""
        if isinstance(self.shape, Mapping):
            return tuple(int(v) for v in self.shape.values())
        if isinstance(self.shape, tuple):
            return tuple(int(v) for v in self.shape)
        return (int(self.shape),)

    @property
    def T(self) -> DType:
        """The case's dtype (f32 when the matrix has none)."""
        return self.dtype or D.f32

    def __getitem__(self, key: str) -> Any:
        """A named extent of the shape, else a value of the binding (``case["BLOCK"]``)."""
        if isinstance(self.shape, Mapping) and key in self.shape:
            return self.shape[key]
        if key in self.binding:
            return self.binding[key]
        raise KeyError(f"the case has no extent or binding named {key!r} (shape {self.shape!r}, "
                       f"binding {dict(self.binding)!r})")

    def _np(self, dtype: DType | None) -> np.dtype:
        return D.numpy_dtype(dtype or self.T)

    def _extent(self, dims: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(int(d) for d in dims) if dims else self.dims

    def randn(self, *dims: int, scale: float = 1.0, shift: float = 0.0, dtype: DType | None = None) -> np.ndarray:
        """Normal samples (default extent: the case's shape) rounded to ``dtype`` (default: the case's)."""
        target = self._np(dtype)
        if target.itemsize <= 4 and D.is_float_numpy(target):
            # drawn in f32 (twice as fast as f64 for the 64M-element bench shapes), then rounded once
            values = draw_f32(self.rng, self._extent(dims),
                              lambda g, out: g.standard_normal(dtype=np.float32, out=out))
            values *= np.float32(scale)
            values += np.float32(shift)
            return values if target == np.float32 else values.astype(target)
        return (self.rng.standard_normal(self._extent(dims)) * scale + shift).astype(target)

    def uniform(self, *dims: int, low: float = -1.0, high: float = 1.0, dtype: DType | None = None) -> np.ndarray:
        """Uniform samples in ``[low, high)`` rounded to ``dtype``."""
        target = self._np(dtype)
        if target.itemsize <= 4 and D.is_float_numpy(target):
            values = draw_f32(self.rng, self._extent(dims), lambda g, out: g.random(dtype=np.float32, out=out))
            values *= np.float32(high - low)
            values += np.float32(low)
            np.minimum(values, np.nextafter(np.float32(high), np.float32(low)), out=values)  # f32 rounding: stay < high
            return values if target == np.float32 else values.astype(target)
        return self.rng.uniform(low, high, self._extent(dims)).astype(target)

    def randint(self, *dims: int, low: int | None = None, high: int | None = None,
                dtype: DType | None = None) -> np.ndarray:
        """Integers in ``[low, high]`` (default: the dtype's whole range; dtype default i32)."""
        dt = dtype or D.i32
        lo = D.min_value(dt) if low is None else low
        hi = D.max_value(dt) if high is None else high
        return self.rng.integers(lo, hi, size=self._extent(dims), endpoint=True, dtype=np.int64).astype(
            D.numpy_dtype(dt))

    def empty(self, *dims: int, dtype: DType | None = None) -> np.ndarray:
        """An output buffer; the runner poisons write-only outputs before every run."""
        return np.zeros(self._extent(dims), dtype=self._np(dtype))

    def scalar(self, value: Any, dtype: DType | None = None) -> Any:
        """A numpy scalar of ``dtype``: how a launch learns the dtype of a scalar parameter."""
        return np.asarray(value, dtype=self._np(dtype))[()]


#: A reference implementation per backend: ``{"cuda": torch_fn, "*": numpy_fn}``.
References = Mapping[str, Callable[..., Any]]


@dataclass(frozen=True)
class Then:
    """A launch that follows the setup's own, as a pipeline's second pass does (the combine of a split).

    ``kernel`` is a kernel with its variant bound (``k.variant(T=f16)``); each of ``args`` is a value,
    or the name of one of the setup kernel's parameters, which passes that argument (the same array, so
    the steps share their buffers).  Tests launch every step in order and check the outputs after the
    last; benches time every step (the sum of their device times).
    """

    kernel: Any
    args: Sequence[Any]
    grid: Any
    group: Any = None


@dataclass
class Setup:
    """A launch and how to judge it (tests) and measure it (benches).

    ``args`` are the kernel's arguments in parameter order (constexpr ones included).
    ``oracle(*args)`` gets float arrays widened to float64 (exactly) and every array copied as
    generated, before the run; it returns one array (the single output), a tuple (the outputs in
    order) or a dict by output name or position, each value an array or an :class:`Expect`.
    ``outputs`` default to every tensor the kernel writes; ``poison`` to the write-only ones.
    The tolerance is derived per output from its dtype and ``depth`` unless ``tolerance`` is given
    (``out_dtype`` replaces the output's own dtype in that derivation).  ``canonicalize(outputs)``
    may rewrite the outputs (a dict name -> array) in place before the comparison, for results
    whose order legally varies.  Benches also use ``bytes_moved`` (default: every tensor argument
    once, outputs read-and-written twice), ``flops`` (default: none, a memory-bound kernel) and
    ``matrix`` (the FLOPs run on the matrix unit); ``reference`` overrides the bench's references.
    ``then`` lists launches that run after the kernel's, on the same arguments (:class:`Then`).
    """

    args: Sequence[Any]
    grid: Any
    group: Any = None
    oracle: Callable[..., Any] | None = None
    outputs: Sequence[str | int] | None = None
    poison: Sequence[str | int] | None = None
    depth: Depth | int = 1
    tolerance: Tolerance | None = None
    out_dtype: DType | None = None
    binding: Mapping[str, Any] = field(default_factory=dict)
    canonicalize: Callable[[dict[str, np.ndarray]], None] | None = None
    bytes_moved: int | None = None
    flops: int | None = None
    #: The FLOPs run on the matrix unit (tensor cores): the roofline compares them with its peak.
    matrix: bool = False
    reference: References | None = None
    then: Sequence[Then] = ()


#: The seed's names for the two kinds of setup: one class serves both.
TestSetup = Setup
BenchSetup = Setup

__all__ = ["BenchSetup", "Case", "References", "Setup", "Shape", "TestSetup", "Then", "compact", "shape_label"]

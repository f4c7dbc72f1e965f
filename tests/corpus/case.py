"""What a corpus case is, how its inputs are made, and how its outputs are judged.

A :class:`CorpusCase` bundles one DSL kernel with everything needed to run it
on fresh random inputs and judge the result against an independent float64
(or exact integer) oracle: the argument generator, the oracle, the launch
shape for a problem size, the sizes to try and the variant bindings to run.

Tolerances
----------
Floating-point outputs are compared as ``|got - want| <= rtol * scale + atol``
where ``scale`` is the magnitude the error is proportional to (``|want|`` by
default; ``sum |term|`` for a sum, whose error bound is relative to the terms,
not to a possibly cancelled result).  ``rtol`` follows from the arithmetic:

* A correctly rounded op (``+ - * / sqrt fma`` and every rounding cast) adds a
  relative error of at most the unit roundoff ``u = 2**-p``: f32 ``5.96e-8``,
  f16 ``4.88e-4``, bf16 ``3.91e-3``.  A value that went through ``d`` such
  roundings in one dtype is off by at most ``d * u`` times its scale (first
  order); a sequential sum of ``n`` terms counts ``n - 1`` roundings, a tree
  or butterfly sum ``ceil(log2 n)``.
* The per-dtype base is two roundings' worth where every op is correctly
  rounded: f16 ``1e-3 ~ 2 u``, bf16 ``8e-3 ~ 2 u``.  f32 gets ``1e-6 ~ 16 u``
  because on GPU targets its transcendentals (``exp``, ``tanh``, ...) come
  from math libraries faithful only to a few ulp (the interpreter rounds them
  correctly and sits well inside); f16/bf16 math is done in f32 and rounded
  once, so a library's error is invisible at their precision.
* ``rtol = BASE[dtype] * max(1, depth / 2)`` for the ``depth`` roundings done in
  the output dtype, plus ``BASE[f32] * max(1, f32_depth / 2)`` for the
  roundings of an f32 accumulator inside an f16/bf16 kernel.
* ``atol`` is the smallest normal number of the output dtype, which absorbs
  the absolute (not relative) error of results that underflow to subnormals.

Integer and boolean outputs are compared exactly, and so are the float
outputs of cases marked ``exact`` (made only of exact operations: casts,
``min``/``max``, ``select``, rounding functions, data movement).

Poisoning: every write-only output is filled with NaN (floats) or a sentinel
(the dtype's minimum for signed ints, maximum for unsigned) before each run,
so an element the kernel forgot to write fails the comparison; where an oracle
expects an element to stay unwritten it expects the poison.  For 8-bit
outputs the sentinel can coincide with a correct value by chance, so for them
poisoning catches a missed write only with high probability.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from iron.core import dtypes as D
from iron.harness.tolerance import (  # noqa: F401 - shared with `iron test`; corpus modules import them from here
    BASE_RTOL, EXACT, Depth, Expect, Tolerance, derive_tolerance, finfo, log2_ceil, poison, poison_value)
from iron.harness.tolerance import compare as judge

#: Variant bindings of one specialisation: ``{"T": f16, "BLOCK": 128}``.
Binding = Mapping[str, Any]
#: ``(grid, group)`` in threads per axis.
LaunchShape = tuple[tuple[int, ...], tuple[int, ...]]

#: The sizes every elementwise case tries: 1 and values that are no multiple of
#: any group size or vector width used in the corpus.
ODD_SIZES = (1, 7, 255, 1000, 4099)


@dataclass(frozen=True)
class Run:
    """One point of a case's test matrix: problem size, variant binding, subgroup width."""

    size: int
    binding: Binding
    simd_width: int = 32

    def __getitem__(self, key: str) -> Any:
        return self.binding[key]

    @property
    def T(self) -> D.DType:
        """The binding's ``T`` (f32 when the kernel has no such variant)."""
        t = self.binding.get("T")
        return t if isinstance(t, D.DType) else D.f32


def _one_step(run: Run) -> Depth:
    return Depth()


@dataclass(frozen=True)
class CorpusCase:
    """One corpus kernel and everything needed to check it.

    ``make_args(run, rng)`` returns the launch arguments in parameter order
    (numpy arrays and scalars); outputs listed in ``poisoned`` are overwritten
    with poison by the harness, so the generator may leave them empty.
    ``oracle(args, run)`` gets the arguments as generated (before the run) and
    returns an :class:`Expect` (or a bare array) for each index in
    ``outputs``.  ``launch(run)`` gives ``(grid, group)``.  ``canonicalize``
    (optional) rewrites the outputs after the run into an order-independent
    form, for kernels whose result order legally varies (atomic tickets).
    """

    name: str
    kernel: Any
    make_args: Callable[[Run, np.random.Generator], list]
    oracle: Callable[[Sequence[Any], Run], Mapping[int, Expect | np.ndarray]]
    outputs: tuple[int, ...]
    launch: Callable[[Run], LaunchShape]
    sizes: tuple[int, ...] = ODD_SIZES
    bindings: tuple[Binding, ...] = ({},)
    #: Outputs filled with poison before a run (default: every output).
    poisoned: tuple[int, ...] | None = None
    depth: Callable[[Run], Depth] = _one_step
    #: Uses subgroup operations: run at every simulated subgroup width.
    subgroup: bool = False
    #: Every output is the result of exact operations (compare bitwise).
    exact: bool = False
    #: The dtype of the float outputs when it is not the binding's ``T`` (or a function of the run giving it).
    out_dtype: D.DType | Callable[[Run], D.DType] | None = None
    canonicalize: Callable[[list, Run], None] | None = None

    @property
    def poisoned_outputs(self) -> tuple[int, ...]:
        return self.outputs if self.poisoned is None else self.poisoned

    def tolerance(self, run: Run) -> Tolerance:
        if self.exact:
            return EXACT
        out = self.out_dtype if self.out_dtype is None or isinstance(self.out_dtype, D.DType) else self.out_dtype(run)
        return derive_tolerance(out or run.T, self.depth(run))


def binding_label(binding: Binding) -> str:
    """``T=f16,BLOCK=64``: a stable, readable test id."""
    if not binding:
        return "plain"
    return ",".join(f"{k}={v}" for k, v in binding.items())


def np_dtype(dt: D.DType) -> np.dtype:
    return D.numpy_dtype(dt)


def randn(rng: np.random.Generator, n: int, dt: D.DType, scale: float = 1.0, shift: float = 0.0) -> np.ndarray:
    """Normal samples rounded to ``dt`` (the oracle then sees exactly what the kernel sees)."""
    return (rng.standard_normal(n) * scale + shift).astype(np_dtype(dt))


def randint(rng: np.random.Generator, n: int, dt: D.DType, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """Integers in ``[lo, hi]`` (default: the dtype's full range)."""
    lo = D.min_value(dt) if lo is None else lo
    hi = D.max_value(dt) if hi is None else hi
    return rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64).astype(np_dtype(dt))


def empty(n: int, dt: D.DType) -> np.ndarray:
    """An output buffer; the harness poisons it before the run."""
    return np.zeros(n, dtype=np_dtype(dt))


def scalar(value: Any, dt: D.DType) -> Any:
    """A numpy scalar of ``dt``: how a launch learns the dtype of a scalar parameter."""
    return np.asarray(value, dtype=np_dtype(dt))[()]


def f64(a: Any) -> np.ndarray:
    """An input as float64, exactly (every Iron float dtype widens exactly)."""
    return np.asarray(a).astype(np.float64)


def poisoned_like(n: int, dt: np.dtype) -> np.ndarray:
    out = np.empty(n, dtype=dt)
    poison(out)
    return out


# ---------------------------------------------------------------- launch shapes

def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return ceil_div(a, b) * b


def launch_1d(group: int = 64, pad: bool = True, per_thread: int = 1) -> Callable[[Run], LaunchShape]:
    """One thread per ``per_thread`` elements of ``size``.

    ``pad`` rounds the grid up to whole groups, so the kernel's tail guard
    matters; without it the grid is exact and the last group is partial.
    """

    def shape(run: Run) -> LaunchShape:
        threads = ceil_div(run.size, per_thread)
        return ((round_up(threads, group) if pad else threads,), (group,))

    return shape


def fixed_depth(steps: int = 1, f32_steps: int = 0) -> Callable[[Run], Depth]:
    def depth(run: Run) -> Depth:
        return Depth(steps, f32_steps)

    return depth


# ---------------------------------------------------------------- judging

def is_exact_dtype(dt: np.dtype) -> bool:
    return not (dt.kind == "f" or dt.name == "bfloat16")


def compare(got: np.ndarray, expect: Expect | np.ndarray, tol: Tolerance) -> str | None:
    """None when ``got`` matches, else a short report of the worst mismatches (``iron.harness.tolerance``:
    the same judge ``iron test`` uses; NaN matches NaN, an element the oracle expects unwritten)."""
    verdict = judge(got, expect, tol)
    return None if verdict.ok else verdict.message

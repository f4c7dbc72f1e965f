"""Atomic corpus kernels: global max/min, a lock-free max through compare-and-swap, compaction.

Atomics apply in an order a GPU does not fix, so each oracle states an
order-independent result (compaction sorts the written prefix first).
"""

import numpy as np

from iron import In, T, Tensor, f32, i32, kernel, u32, variants
from iron.core import dtypes as D
from iron.lang import atomic_add, atomic_cas, atomic_max, atomic_min, atomic_xchg, program_id

from .case import CorpusCase, Run, empty, launch_1d, np_dtype, poison_value, randint, randn


# ---------------------------------------------------------------- atomic max / min

@kernel(variants(T=[i32, u32, f32]))
def global_extrema(a: In[T], res: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        v = a[i]
        atomic_max(res, 0, v)
        atomic_min(res[1], v)


def _extrema_args(run: Run, rng: np.random.Generator) -> list:
    a = randn(rng, run.size, f32, scale=1e3) if run.T == f32 else randint(rng, run.size, run.T)
    lowest, highest = D.min_value(run.T), D.max_value(run.T)
    return [a, np.array([lowest, highest], dtype=np_dtype(run.T)), run.size]


EXTREMA = CorpusCase(
    name="atomic_max_min", kernel=global_extrema, make_args=_extrema_args,
    oracle=lambda args, run: {1: np.array([args[0].max(), args[0].min()])},
    outputs=(1,), poisoned=(), launch=launch_1d(), bindings=({"T": i32}, {"T": u32}, {"T": f32}), exact=True)


# ---------------------------------------------------------------- lock-free max through atomic_cas

@kernel
def cas_max(a: In[i32], best: Tensor[i32], n: int):
    i = program_id(0)
    if i < n:
        v = a[i]
        seen = best[0]
        while seen < v:
            prev = atomic_cas(best, 0, seen, v)
            if prev == seen:
                break
            seen = prev


def _cas_args(run: Run, rng: np.random.Generator) -> list:
    return [randint(rng, run.size, i32, -10**6, 10**6), np.array([-10**5], dtype=np.int32), run.size]


CAS_MAX = CorpusCase(
    name="atomic_cas_max_loop", kernel=cas_max, make_args=_cas_args,
    oracle=lambda args, run: {1: np.array([max(int(args[0].max()), int(args[1][0]))])},
    outputs=(1,), poisoned=(), launch=launch_1d(), sizes=(1, 7, 255, 1000), exact=True)


# ---------------------------------------------------------------- compaction through atomic tickets

@kernel
def compact_positive(a: In[f32], out: Tensor[f32], count: Tensor[i32], n: int):
    i = program_id(0)
    if i < n:
        v = a[i]
        if v > 0.0:
            slot = atomic_add(count, 0, 1)
            out[slot] = v


def _compact_oracle(args, run: Run):
    kept = np.sort(args[0][args[0] > 0])
    out = np.full(run.size, poison_value(np.dtype(np.float32)), dtype=np.float32)
    out[: kept.size] = kept
    return {1: out, 2: np.array([kept.size])}


def _sort_written(args: list, run: Run) -> None:
    """Tickets are handed out in any order on a GPU: compare the written prefix sorted."""
    count = int(args[2][0])
    if 0 <= count <= args[1].size:
        args[1][:count] = np.sort(args[1][:count])


COMPACT = CorpusCase(
    name="atomic_ticket_compaction", kernel=compact_positive,
    make_args=lambda run, rng: [randn(rng, run.size, f32), empty(run.size, f32), np.zeros(1, np.int32), run.size],
    oracle=_compact_oracle, outputs=(1, 2), poisoned=(1,), launch=launch_1d(), exact=True,
    canonicalize=_sort_written)


# ---------------------------------------------------------------- exchange chain

@kernel
def exchange_chain(slot: Tensor[i32], previous: Tensor[i32], n: int):
    i = program_id(0)
    if i < n:
        previous[i] = atomic_xchg(slot, 0, i)


XCHG_START = -7


def _sort_exchanges(args: list, run: Run) -> None:
    """In any order, the values handed back plus the last one stored are the start value and every id."""
    everything = np.sort(np.concatenate([args[1], args[0]]))
    args[1][:] = everything[: run.size]
    args[0][:] = everything[run.size:]


def _xchg_oracle(args, run: Run):
    everything = np.sort(np.concatenate([np.arange(run.size), [XCHG_START]]))
    return {0: everything[run.size:], 1: everything[: run.size]}


XCHG = CorpusCase(
    name="atomic_xchg_chain", kernel=exchange_chain,
    make_args=lambda run, rng: [np.array([XCHG_START], dtype=np.int32), empty(run.size, i32), run.size],
    oracle=_xchg_oracle, outputs=(0, 1), poisoned=(1,), launch=launch_1d(), exact=True, canonicalize=_sort_exchanges)


CASES = [EXTREMA, CAS_MAX, COMPACT, XCHG]

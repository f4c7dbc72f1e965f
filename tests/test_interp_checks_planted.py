"""Planted mistakes: the interpreter's checks and the corpus oracles must catch each one.

The first half plants the faults GPUs leave undefined (a missing barrier, an
off-by-one overrun, a barrier only some threads reach) in DSL kernels and
asserts that the interpreter names them precisely: kernel, tensor, index and
threads.  A barrier under a condition the frontend can see depends on the
thread is refused at compile time instead.

The second half proves the corpus tests' strength: small mutations of corpus
kernels (a dropped element, a dropped term, a missing reduction step) run
against the unmutated case's inputs and oracle and must fail it.
"""

import dataclasses

import numpy as np
import pytest

from corpus import Run, case_named, harness
from iron import In, T, Tensor, f16, f32, i32, kernel, variants
from iron.core.errors import BarrierDivergenceError, DivergentBarrierError, OutOfBoundsError, SharedMemoryRaceError
from iron.lang import (barrier, exp, program_id, shared, simd_shuffle_xor, simd_size, simd_sum, sqrt, tanh,
                       thread_id)
from iron.runtime import interp

GROUP = 64


def _launch(k, args, grid=GROUP, group=GROUP) -> None:
    k[(grid,), (group,)](*args)


# ---------------------------------------------------------------- a missing barrier

@kernel
def tree_sum_missing_barrier(a: In[f32], out: Tensor[f32]):
    buf = shared(f32, 64)
    t = thread_id(0)
    buf[t] = a[program_id(0)]
    barrier()
    s = 32
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        s = s // 2
    if t == 0:
        out[0] = buf[0]


@kernel
def tree_sum_with_barrier(a: In[f32], out: Tensor[f32]):
    buf = shared(f32, 64)
    t = thread_id(0)
    buf[t] = a[program_id(0)]
    barrier()
    s = 32
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        barrier()
        s = s // 2
    if t == 0:
        out[0] = buf[0]


def test_missing_barrier_is_a_race_naming_threads_and_address() -> None:
    a = np.arange(64, dtype=np.float32)
    with pytest.raises(SharedMemoryRaceError) as info:
        _launch(tree_sum_missing_barrier, [a, np.zeros(1, np.float32)])
    err = info.value
    # The second step reads buf[t + 16], which thread t + 16 wrote in the first
    # step with no barrier in between.
    assert err.tensor == "buf"
    assert 16 <= err.index < 32
    threads = {err.thread.thread_id[0], err.other_thread.thread_id[0]}
    assert threads == {err.index - 16, err.index}, str(err)
    assert f"[{err.index}]" in str(err) and "tree_sum_missing_barrier" in str(err)
    assert str(err.thread) in str(err) and str(err.other_thread) in str(err)


def test_the_same_reduction_with_its_barrier_is_clean() -> None:
    a = np.arange(64, dtype=np.float32)
    out = np.zeros(1, np.float32)
    _launch(tree_sum_with_barrier, [a, out])
    assert out[0] == a.sum()


# ---------------------------------------------------------------- an off-by-one overrun

@kernel
def copy_off_by_one(a: In[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    if i <= n:
        out[i] = a[i]


def test_overrun_names_kernel_tensor_index_and_thread() -> None:
    n = 40
    with pytest.raises(OutOfBoundsError) as info:
        _launch(copy_off_by_one, [np.ones(n, np.float32), np.zeros(n, np.float32), n])
    err = info.value
    assert (err.kernel, err.tensor, err.index, err.size) == ("copy_off_by_one", "a", n, n)
    assert err.thread.global_id == (n,)
    text = str(err)
    for fact in ("copy_off_by_one", "'a'", str(n), str(err.thread)):
        assert fact in text, f"{fact!r} missing from: {text}"
    assert err.loc is not None and err.loc.file == __file__


# ---------------------------------------------------------------- barriers only some threads reach

def _run_at_width_32(k, args, grid: int, group: int = GROUP) -> None:
    """Launch the interpreter's compiled kernel at subgroup width 32, whatever the configuration."""
    interp.run(k.variant().compiled("interp"), args, (grid,), (group,), simd_width=32)


@kernel
def barrier_if_subgroup_full(out: Tensor[i32]):
    active = simd_sum(1)
    if active == simd_size():
        barrier()
    out[program_id(0)] = active


def test_barrier_only_full_subgroups_reach_fails_at_run_time() -> None:
    """A condition the frontend takes for uniform (a subgroup sum of a constant) that is not.

    ``simd_sum(1)`` counts a subgroup's active lanes: in a group of 40 threads
    the second subgroup of 32 is partial, so only the full subgroup reaches
    the barrier.  The frontend does not reject this, so the interpreter must.
    (The textbook example, a condition loaded from a thread-dependent index,
    the frontend already rejects at compile time; a grid ending inside a
    group, the other way to a partial subgroup, is refused at launch.)
    """
    grid = 40  # one group of 40: subgroup 0 has 32 active lanes, subgroup 1 has 8
    with pytest.raises(BarrierDivergenceError) as info:
        _run_at_width_32(barrier_if_subgroup_full, [np.zeros(grid, np.int32)], grid, group=grid)
    err = info.value
    assert err.thread.thread_id[0] < 32 <= err.missing_thread.thread_id[0] < grid
    assert "barrier_if_subgroup_full" in str(err)
    assert str(err.thread) in str(err) and str(err.missing_thread) in str(err)


def test_the_same_barrier_is_fine_when_every_subgroup_is_full() -> None:
    out = np.zeros(GROUP, np.int32)
    _run_at_width_32(barrier_if_subgroup_full, [out], GROUP)
    assert (out == 32).all()


def _thread_branch_barrier():
    @kernel
    def barrier_in_thread_branch(out: Tensor[i32]):
        t = thread_id(0)
        if t < 16:
            barrier()
        out[t] = t

    return barrier_in_thread_branch


def _thread_loop_barrier():
    @kernel
    def barrier_in_thread_loop(out: Tensor[i32]):
        t = thread_id(0)
        for k in range(t):
            barrier()
        out[t] = t

    return barrier_in_thread_loop


@pytest.mark.parametrize("make", [_thread_branch_barrier, _thread_loop_barrier], ids=["if", "for"])
def test_provably_divergent_barrier_is_a_compile_error(make) -> None:
    with pytest.raises(DivergentBarrierError) as info:
        _launch(make(), [np.zeros(GROUP, np.int32)])
    err = info.value
    assert err.file == __file__
    assert "barrier()" in err.source_line
    assert err.hint


# ---------------------------------------------------------------- the corpus tests can fail

@kernel(variants(T=[f32]))
def unary_chain_drops_last(a: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    if i < n - 1:
        x = a[i]
        out[i] = exp(-abs(x)) * sqrt(abs(x) + 1.0) + tanh(abs(x))


@kernel(variants(T=[f32]))
def row_sum_drops_last_term(a: In[T], out: Tensor[T], rows: int, cols: int):
    r = program_id(0)
    if r < rows:
        acc = 0.0
        for c in range(r % 3, cols - 1):
            acc += f32(a[r * cols + c])
        out[r] = T(acc)


@kernel(variants(T=[f32, i32]))
def butterfly_skips_last_step(a: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    v = T(0)
    if i < n:
        v = a[i]
    m = simd_size() // 2
    while m > 1:
        v += simd_shuffle_xor(v, m)
        m = m // 2
    if i < n:
        out[i] = v


@kernel(variants(T=[f32]))
def laplace5_misses_right_edge(a: In[T], out: Tensor[T], h: int, w: int):
    x = program_id(0)
    y = program_id(1)
    if x < w and y < h:
        i = y * w + x
        acc = 4.0 * f32(a[i])
        if x > 0:
            acc -= f32(a[i - 1])
        if x < w - 2:
            acc -= f32(a[i + 1])
        if y > 0:
            acc -= f32(a[i - w])
        if y < h - 1:
            acc -= f32(a[i + w])
        out[i] = T(acc)


@kernel(variants(T=[f16]))
def saxpy_rounds_twice(alpha: T, x: In[T], y: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        out[i] = alpha * x[i] + y[i]


@dataclasses.dataclass(frozen=True)
class Mutant:
    """A broken copy of a corpus kernel, and where its case's oracle must catch it.

    ``attempts`` fresh inputs are tried per size: a mutation that only shows
    on some inputs (a second rounding matters under cancellation only) must
    be caught by at least one of them.
    """

    case: str
    kernel: object
    binding: dict
    sizes: tuple[int, ...]
    attempts: int = 1


MUTANTS = {
    "drop_last_element": Mutant("unary_chain", unary_chain_drops_last, {"T": f32}, (1, 255)),
    "drop_last_term": Mutant("row_sum_runtime_bounds", row_sum_drops_last_term, {"T": f32}, (7,)),
    "skip_reduction_step": Mutant("shuffle_xor_butterfly", butterfly_skips_last_step, {"T": i32}, (255,)),
    "lt_for_le_at_edge": Mutant("stencil_2d", laplace5_misses_right_edge, {"T": f32}, (7, 33)),
    # The tolerance is tight enough to tell one rounding from two: a 4099-element
    # run catches it about 94% of the time, so six runs miss once in ~10**7.
    "unfused_multiply_add": Mutant("saxpy_fma", saxpy_rounds_twice, {"T": f16}, (4099,), attempts=6),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutated_corpus_kernel_fails_its_oracle(name: str, seed) -> None:
    mutant = MUTANTS[name]
    original = case_named(mutant.case)
    broken = dataclasses.replace(original, kernel=mutant.kernel)
    for size in mutant.sizes:
        run = Run(size, mutant.binding)
        caught = []
        for attempt in range(mutant.attempts):
            inputs_seed = seed.value + attempt
            harness.check(original, run, inputs_seed)  # the original passes on these very inputs ...
            try:
                harness.check(broken, run, inputs_seed)  # ... and the mutant must not
            except AssertionError as failure:
                caught.append(str(failure))
                break
        assert caught and "elements differ" in caught[0], f"{name} survived size {size}, {seed}"

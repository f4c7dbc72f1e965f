"""The opt-in global-memory race check (interp_global_races): what lock step hides and a GPU does not."""

from __future__ import annotations

import numpy as np
import pytest

from iron import Tensor, config, f32, i32, kernel
from iron.core.errors import InterpError
from iron.lang import atomic_add, barrier, group_id, program_id, thread_id
from iron.runtime.interp import GlobalMemoryRaceError


def line_of(snippet: str) -> int:
    with open(__file__, encoding="utf-8") as f:
        return next(n for n, line in enumerate(f, start=1) if snippet in line)


@kernel
def transpose(x: Tensor[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    j = program_id(1)
    if i < n and j < n:
        out[j * n + i] = x[i * n + j]


@kernel
def shift_left(x: Tensor[i32]):
    i = program_id(0)
    v = x[i + 1]
    x[i] = v


@kernel
def shift_left_with_barrier(x: Tensor[i32]):
    i = program_id(0)
    v = x[i + 1]
    barrier()
    x[i] = v


@kernel
def add_one(x: Tensor[i32]):
    i = program_id(0)
    x[i] += 1


@kernel
def count_and_peek(counts: Tensor[i32], seen: Tensor[i32], peek: bool):
    atomic_add(counts, 0, 1)
    if peek and thread_id(0) == 0:
        seen[group_id(0)] = counts[0]


@kernel
def broadcast(x: Tensor[f32], out: Tensor[f32]):
    out[program_id(0)] = x[0] * 2.0


@pytest.fixture
def races_on():
    config.set_option("interp_global_races", True)
    yield
    config.clear_overrides()


def test_transpose_in_place_is_reported_naming_both_threads_and_lines(races_on):
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    with pytest.raises(GlobalMemoryRaceError) as info:
        transpose.launch(x, x, 8, grid=(8, 8), group=(4, 4), backend="interp")
    err = info.value
    assert isinstance(err, InterpError)
    text = str(err)
    assert "global-memory race on 'out'[4] (the same array as 'x')" in text
    assert "write by thread (4, 0) (group (1, 0), thread_id (0, 0))" in text
    assert "read by thread (0, 4) (group (0, 1), thread_id (0, 0))" in text
    assert "in different groups" in text and "write the result to another tensor" in text
    store_line = line_of("out[j * n + i] = x[i * n + j]")
    assert err.loc.line == store_line and err.other_loc.line == store_line
    assert err.thread.global_id == (4, 0) and err.other_thread.global_id == (0, 4)


def test_transpose_into_another_array_is_fine(races_on):
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    out = np.zeros_like(x)
    transpose.launch(x, out, 8, grid=(8, 8), group=(4, 4), backend="interp")
    assert (out == x.T).all()


def test_threads_of_one_group_race_without_a_barrier_between(races_on):
    x = np.arange(65, dtype=np.int32)
    with pytest.raises(GlobalMemoryRaceError, match=r"race on 'x'\[1\]: write by thread 1 .* and read by thread 0 "
                                                    r".*in group 0 with no barrier between them"):
        shift_left.launch(x, grid=(64,), group=(64,), backend="interp")


def test_a_barrier_orders_the_threads_of_one_group(races_on):
    x = np.arange(65, dtype=np.int32)
    shift_left_with_barrier.launch(x, grid=(64,), group=(64,), backend="interp")
    assert x[:64].tolist() == list(range(1, 65))


def test_a_barrier_does_not_order_two_groups(races_on):
    x = np.arange(129, dtype=np.int32)
    with pytest.raises(GlobalMemoryRaceError, match=r"race on 'x'\[64\]: write by thread 64 .* read by thread 63 "
                                                    r".*in different groups"):
        shift_left_with_barrier.launch(x, grid=(128,), group=(64,), backend="interp")


def test_a_thread_may_read_and_write_its_own_element_and_all_may_read_one(races_on):
    x = np.arange(256, dtype=np.int32)
    add_one.launch(x, grid=(256,), group=(64,), backend="interp")
    assert x.tolist() == list(range(1, 257))
    a, out = np.full(1, 3.0, np.float32), np.zeros(256, np.float32)
    broadcast.launch(a, out, grid=(256,), group=(64,), backend="interp")
    assert (out == 6.0).all()


def test_atomics_may_meet_atomics_but_not_plain_reads_of_other_groups(races_on):
    counts, seen = np.zeros(1, np.int32), np.zeros(4, np.int32)
    count_and_peek.launch(counts, seen, False, grid=(256,), group=(64,), backend="interp")
    assert counts[0] == 256
    with pytest.raises(GlobalMemoryRaceError, match=r"race on 'counts'\[0\]: read by thread 0 .* and atomic by"):
        count_and_peek.launch(counts, seen, True, grid=(256,), group=(64,), backend="interp")


def test_the_check_is_off_by_default_and_lock_step_gives_the_sequential_answer():
    config.clear_overrides()
    assert config.get("interp_global_races") is False
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    transpose.launch(x, x, 8, grid=(8, 8), group=(4, 4), backend="interp")
    assert (x == np.arange(64, dtype=np.float32).reshape(8, 8).T).all()

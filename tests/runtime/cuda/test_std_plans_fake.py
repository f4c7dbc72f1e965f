"""A std call replayed on device arrays (iron/std/_plans.py) launches through the launcher the device bound to its
plan (iron.runtime.cuda.fastpath.build_bound): the same launch, byte for byte, as the call run as written, with
the new arrays' addresses; the checks that depend on memory still refuse; and a device that no longer serves
the backend, or is closed, is never launched on that way."""

from __future__ import annotations

import numpy as np
import pytest

from iron import LaunchError, config, f32
from iron.runtime.cuda.array import CudaArray
from iron.std import elementwise, norms, softmax


def _aligned(device, shape):
    """A device array at a 128-byte boundary (the fake's blocks are), so calls share one signature."""
    a = device.empty(shape, f32)
    assert a.ptr % 128 == 0
    return a


CALLS = {
    "unary": (lambda x, w, o: elementwise.unary("exp", x, out=o), elementwise.unary),
    "binary": (lambda x, w, o: elementwise.binary("mul", x, x, out=o), elementwise.binary),
    "rmsnorm": (lambda x, w, o: norms.rmsnorm(x, w, out=o), norms.rmsnorm),
    "softmax": (lambda x, w, o: softmax.softmax(x, out=o), softmax.softmax),
}


def _launch_bytes(launch):
    return launch.entry, launch.blocks, launch.threads, launch.stream, launch.params, launch.shared


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_replay_launches_what_the_call_as_written_launches(served, fake, launches, monkeypatch, name):
    call, fn = CALLS[name]
    fn.plans.clear()
    arrays = [[_aligned(served, (4, 256)), _aligned(served, 256), _aligned(served, (4, 256))] for _ in range(2)]
    call(*arrays[0])  # recorded: the full path, once per kernel
    resolved = len(launches)
    fake.launches.clear()
    call(*arrays[1])  # replayed through the bound launcher
    replayed = [_launch_bytes(x) for x in fake.launches]
    plan = next(p for p in fn.plans.values() if p is not None)
    assert "GO0(" in plan.run.source, plan.run.source
    assert len(launches) == resolved, "a replay resolved nothing in the jit"
    monkeypatch.setenv("IRON_CALL_PLANS", "0")
    config.reload()
    fake.launches.clear()
    call(*arrays[1])  # the same arrays as written
    assert replayed == [_launch_bytes(x) for x in fake.launches] and replayed


def test_a_replay_that_allocates_launches_on_its_new_output(served, fake):
    elementwise.unary.plans.clear()
    x = [_aligned(served, 1024) for _ in range(2)]
    elementwise.unary("exp", x[0])
    fake.launches.clear()
    y = elementwise.unary("exp", x[1])
    (launch,) = fake.launches
    assert [int.from_bytes(p, "little") for p in launch.params[:2]] == [x[1].ptr, y.ptr]


def test_an_out_overlapping_an_input_is_refused_on_a_bound_replay(served, fake):
    elementwise.unary.plans.clear()
    block = _aligned(served, 4096)
    x, out = _aligned(served, 1024), _aligned(served, 1024)
    elementwise.unary("exp", x, out=out)
    elementwise.unary("exp", x, out=out)
    whole = CudaArray(served, block.ptr, (1024,), f32, 4096 * 4)
    shifted = CudaArray(served, block.ptr + 128, (1024,), f32, 4096 * 4)  # the same signature, 128 bytes on
    count = len(fake.launches)
    with pytest.raises(LaunchError, match="overlap"):
        elementwise.unary("exp", whole, out=shifted)
    assert len(fake.launches) == count, "nothing launched"


def test_a_freed_array_is_refused_on_a_bound_replay(served, fake):
    elementwise.unary.plans.clear()
    x, out = _aligned(served, 1024), _aligned(served, 1024)
    elementwise.unary("exp", x, out=out)
    freed = _aligned(served, 1024)
    served.release_array(freed)
    count = len(fake.launches)
    with pytest.raises(LaunchError):
        elementwise.unary("exp", x, out=freed)
    assert len(fake.launches) == count


def test_a_device_that_no_longer_serves_or_is_closed_is_not_launched_on(served, fake, monkeypatch):
    import iron.runtime as rt

    elementwise.unary.plans.clear()
    x, out = _aligned(served, 1024), _aligned(served, 1024)
    elementwise.unary("exp", x, out=out)
    elementwise.unary("exp", x, out=out)
    assert len(fake.launches) == 2
    monkeypatch.setitem(rt._devices, "cuda", object())  # another device serves 'cuda' now: the full path runs
    with pytest.raises(Exception):
        elementwise.unary("exp", x, out=out)
    assert len(fake.launches) == 2
    monkeypatch.setitem(rt._devices, "cuda", served)
    served.close()
    with pytest.raises(LaunchError, match="closed"):
        elementwise.unary("exp", x, out=out)
    assert len(fake.launches) == 2


def test_a_kernel_launched_with_host_arrays_gets_no_bound_launcher(served, fake):
    """numpy arrays are copied in and out by the full path: a plan cannot launch them by address."""
    elementwise.unary.plans.clear()
    x, out = np.ones(1024, np.float32), np.zeros(1024, np.float32)
    elementwise.unary("exp", x, out=out, backend="cuda")
    elementwise.unary("exp", x, out=out, backend="cuda")
    plan = next(p for p in elementwise.unary.plans.values() if p is not None)
    assert "GO0" not in plan.run.source and len(fake.launches) == 2
    assert served.bind(object(), [x, out], 1024, 256, {}, "cuda") is None

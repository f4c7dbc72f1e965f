"""Programmatic dependent launch's host side against the fake driver (docs/cuda.md): which plans are chained, that
the general path and the generated launchers both go through cuLaunchKernelEx with the attribute, and that a
driver refusing it gets plain launches from then on, from launchers made before too.  tests/gpu/test_cuda_pdl.py
runs the same on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from cudakernels import axpy, ir
from fakecuda import FakeDriver, interpreted

from iron import config
from iron.runtime.cuda import CudaDevice


def _device(tmp_path, arch=(9, 0), refuse=False):
    fake = FakeDriver(arch=arch, refuse_chained=refuse)
    dev = CudaDevice(driver=fake, cache_dir=tmp_path / "cache")
    kir = ir(axpy)
    fake.kernels[kir.name] = interpreted(kir, {"x": 50, "y": 50})
    return dev, fake, kir


def _run(dev, kir, times: int) -> np.ndarray:
    """y = 2 x + y, ``times`` times, on device arrays (the first launch general, the rest generated launchers)."""
    x = dev.to_device(np.arange(50, dtype=np.float32))
    y = dev.to_device(np.ones(50, np.float32))
    for _ in range(times):
        dev.launch(kir, [x, y, 2.0, 50], (50,), (32,))
    return y.numpy()


def test_with_the_option_an_sm90_device_chains_every_launch(nvrtc, tmp_path):
    with config.scoped("pdl", True):
        dev, fake, kir = _device(tmp_path)
        try:
            got = _run(dev, kir, 4)
            plan = dev._plans[id(kir)]
            assert plan.chained and plan.fast is not None
            assert len(fake.chained) == 4 and len(fake.launches) == 4, "the general path and the launcher both chain"
            np.testing.assert_array_equal(got, 1 + 4 * 2 * np.arange(50))
        finally:
            dev.close()


@pytest.mark.parametrize("arch,option", [((9, 0), False), ((8, 0), True)], ids=["option-off", "sm80"])
def test_otherwise_launches_are_plain(nvrtc, tmp_path, arch, option):
    with config.scoped("pdl", option):
        dev, fake, kir = _device(tmp_path, arch)
        try:
            _run(dev, kir, 3)
            assert not dev._plans[id(kir)].chained and fake.chained == [] and len(fake.launches) == 3
        finally:
            dev.close()


def test_a_driver_that_refuses_gets_plain_launches(nvrtc, tmp_path):
    with config.scoped("pdl", True):
        dev, fake, kir = _device(tmp_path, refuse=True)
        try:
            got = _run(dev, kir, 3)
            plan = dev._plans[id(kir)]
            assert not plan.chained and fake.chained == [] and len(fake.launches) == 3
            np.testing.assert_array_equal(got, 1 + 3 * 2 * np.arange(50))
        finally:
            dev.close()


def test_a_launcher_made_before_the_refusal_falls_back_every_time(nvrtc, tmp_path):
    with config.scoped("pdl", True):
        dev, fake, kir = _device(tmp_path)
        try:
            x = dev.to_device(np.arange(50, dtype=np.float32))
            y = dev.to_device(np.ones(50, np.float32))
            dev.launch(kir, [x, y, 2.0, 50], (50,), (32,))
            bound = dev.bind(kir, [x, y, 2.0, 50], (50,), (32,), {"cuda": dev}, "cuda")
            assert bound(x.ptr, y.ptr), "a bound launcher of a chained plan launches chained"
            fake.refuse_chained = True
            dev.launch(kir, [x, y, 2.0, 50], (50,), (32,))  # refused, unchained, launched plainly
            assert not dev._plans[id(kir)].chained and fake.refused == 1
            assert not bound(x.ptr, y.ptr), "the older launcher launches nothing and says so"
            assert fake.refused == 1, "without asking the driver again"
            dev.launch(kir, [x, y, 2.0, 50], (50,), (32,))
            assert len(fake.chained) == 2 and len(fake.launches) == 4
            np.testing.assert_array_equal(y.numpy(), 1 + 4 * 2 * np.arange(50))
        finally:
            dev.close()


def test_the_bindings_launcher_takes_each_launchs_geometry(nvrtc, tmp_path):
    """The cuda-bindings path keeps one launch config: each launch still goes out with its own grid, group and
    stream."""
    with config.scoped("pdl", True), config.scoped("native_launch", False):
        dev, fake, kir = _device(tmp_path)
        try:
            x = dev.to_device(np.arange(50, dtype=np.float32))
            y = dev.to_device(np.ones(50, np.float32))
            dev.launch(kir, [x, y, 2.0, 50], (50,), (32,))
            dev.launch(kir, [x, y, 2.0, 50], (64,), (64,))
            dev.launch(kir, [x, y, 2.0, 50], (50,), (32,))
            assert [(lc.blocks, lc.threads) for lc in fake.launches] == [
                ((2, 1, 1), (32, 1, 1)), ((1, 1, 1), (64, 1, 1)), ((2, 1, 1), (32, 1, 1))]
            assert len(fake.chained) == 3
            np.testing.assert_array_equal(y.numpy(), 1 + 3 * 2 * np.arange(50))
        finally:
            dev.close()

"""Fixtures for the CUDA runtime's host side, tested without a GPU.

NVRTC compiles CUBIN with no GPU, so the compile and cache layer runs for real here (skipping, or failing
in CI, where NVRTC is missing: ``require_toolchain``).  Everything that would touch the driver runs
against :class:`fakecuda.FakeDriver`.  Disk caches go to each test's temporary directory.
"""

from __future__ import annotations

import sys
from typing import Iterator

import pytest
from fakecuda import FakeDriver, fake_torch

from iron.runtime.cuda import CudaDevice, interop


@pytest.fixture
def nvrtc(require_toolchain) -> None:
    require_toolchain("nvrtc")


@pytest.fixture
def fake() -> FakeDriver:
    return FakeDriver()


@pytest.fixture
def device(nvrtc, fake, tmp_path) -> Iterator[CudaDevice]:
    dev = CudaDevice(driver=fake, cache_dir=tmp_path / "cache")
    yield dev
    dev.close()


@pytest.fixture
def served(device, monkeypatch):
    """The fake device serving backend 'cuda' (what a launch with backend='cuda', or on its arrays, finds).
    Options a test set are read again afterwards."""
    import iron.runtime as rt
    from iron import config

    monkeypatch.setitem(rt._devices, "cuda", device)
    yield device
    monkeypatch.undo()
    config.reload()


@pytest.fixture
def torch(monkeypatch):
    """A stand-in ``torch`` module in sys.modules (there is no real one here)."""
    module = fake_torch()
    monkeypatch.setitem(sys.modules, "torch", module)
    interop.torch_dtypes.cache_clear()
    yield module
    interop.torch_dtypes.cache_clear()

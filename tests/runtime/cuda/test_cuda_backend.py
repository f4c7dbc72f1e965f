"""Why the cuda backend is absent, and which backend ``auto`` and ``best_backend`` pick."""

from __future__ import annotations

import sys

import pytest
from fakecuda import FakeDriver

import iron.runtime as rt
from iron.runtime import BackendUnavailable, best_backend, get_device, resolve_backend
from iron.runtime.cuda import driver
from iron.runtime.cuda.errors import CudaUnavailable


@pytest.fixture
def fresh_probe():
    driver._probe.cache_clear()
    saved = dict(rt._devices)
    yield
    driver._probe.cache_clear()
    rt._devices.clear()
    rt._devices.update(saved)


def test_no_driver_library_no_gpu_no_binding(fresh_probe, monkeypatch):
    class Missing(FakeDriver):
        def cuInit(self, flags):
            raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search.')

    ok, why, _ = driver.probe_driver(Missing())
    assert not ok and "libcuda.so) cannot be loaded: no NVIDIA driver on this machine" in why
    ok, why, _ = driver.probe_driver(FakeDriver(devices=0))
    assert not ok and "reports no CUDA GPU (CUDA_ERROR_NO_DEVICE)" in why
    assert driver.probe_driver(FakeDriver(devices=2))[:2] == (True, "2 CUDA device(s)")
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    ok, why = driver.availability()
    assert not ok and why.startswith("cuda-bindings is not installed") and "pip install cuda-bindings" in why


def test_get_device_says_why_cuda_is_absent(fresh_probe, monkeypatch):
    monkeypatch.setattr(driver, "_probe", lambda: (False, "the NVIDIA driver reports no CUDA GPU", None))
    rt._devices.pop("cuda", None)
    with pytest.raises(BackendUnavailable, match="backend 'cuda' is not available: the NVIDIA driver reports no") \
            as e:
        get_device("cuda")
    assert isinstance(e.value, CudaUnavailable)
    ok, why = rt.backend_available("cuda")
    assert not ok and "no CUDA GPU" in why


def test_best_backend_prefers_cuda_then_vulkan_then_interp(fresh_probe, monkeypatch):
    answers = {"cuda": (False, "no GPU"), "vulkan": (True, "")}
    monkeypatch.setattr(rt, "backend_available", lambda name: answers[name])
    assert best_backend() == "vulkan"
    answers["cuda"] = (True, "")
    assert best_backend() == "cuda"
    answers["cuda"] = answers["vulkan"] = (False, "absent")
    assert best_backend() == "interp"
    assert resolve_backend("auto") == "interp", "host data with backend auto stays on the interpreter"
    assert resolve_backend("cuda") == "cuda"


def test_auto_follows_the_data_and_indices_name_a_gpu():
    assert resolve_backend("auto", "cuda") == "cuda" and resolve_backend("auto", "cuda:1") == "cuda:1"
    assert resolve_backend("cuda", "cuda:1") == "cuda:1", "cuda with the data on GPU 1 runs on GPU 1"
    assert resolve_backend("interp", "cuda") == "interp", "a named backend is obeyed"
    assert resolve_backend("cuda:1") == "cuda:1"
    with pytest.raises(BackendUnavailable, match="takes no device index"):
        get_device("vulkan:1")
    with pytest.raises(BackendUnavailable, match="must be a device index, as in 'cuda:1'"):
        get_device("cuda:one")


def test_driver_errors_name_the_call_and_the_error():
    from fakecuda import CUresult

    from iron.runtime.cuda.errors import CudaError

    fake = FakeDriver()
    assert driver.check(fake, (CUresult.CUDA_SUCCESS, 42), "x") == 42
    assert driver.check(fake, (CUresult.CUDA_SUCCESS,), "x") is None
    with pytest.raises(CudaError, match=r"cuMemAlloc\(64\) failed: CUDA_ERROR_OUT_OF_MEMORY \(2\): a fake") as e:
        driver.check(fake, (CUresult.CUDA_ERROR_OUT_OF_MEMORY, 0), "cuMemAlloc(64)")
    assert (e.value.code, e.value.name) == (2, "CUDA_ERROR_OUT_OF_MEMORY")

"""Opening the ``cuda`` device for the GPU tests: where no NVIDIA GPU answers, the test skips (CI has none)."""

from __future__ import annotations

from typing import Any

import pytest


def open_cuda(tmp_path_factory: Any, **kwargs: Any) -> Any:
    """A CudaDevice with its own cache folder, or a skip saying why there is none."""
    try:
        from iron.runtime.cuda import CudaDevice

        return CudaDevice(cache_dir=tmp_path_factory.mktemp("cuda-cache"), **kwargs)
    except Exception as e:  # noqa: BLE001 - no binding, no driver, no GPU: all mean skip
        pytest.skip(f"no CUDA GPU here ({type(e).__name__}: {e})")

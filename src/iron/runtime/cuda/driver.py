"""The driver API through cuda-bindings: loading it, checking its results, saying why it is absent.

Every driver call in this package goes through :func:`check`, which turns a
failed ``CUresult`` into a :class:`CudaError` naming the call, the error and
the driver's own description.  :func:`availability` answers "can a CUDA
device exist here, and if not, why" without raising, for ``iron device``
and ``resolve_backend("auto")``.  Tests pass a fake driver module with the
same function names; nothing here imports the binding at import time.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from .errors import INSTALL_HINT, CudaError, CudaUnavailable


def load_driver() -> ModuleType:
    """``cuda.bindings.driver`` after ``cuInit(0)``; CudaUnavailable says what is missing."""
    ok, reason, drv = _probe()
    if not ok:
        raise CudaUnavailable(f"backend 'cuda' is not available: {reason}")
    return drv


def availability() -> tuple[bool, str]:
    """(True, "N device(s)") or (False, why not): no cuda-bindings, no libcuda, no GPU."""
    ok, reason, _ = _probe()
    return ok, reason


@functools.cache
def _probe() -> tuple[bool, str, Any]:
    try:
        from cuda.bindings import driver as drv
    except ImportError as e:
        return False, f"cuda-bindings is not installed ({e}); {INSTALL_HINT}", None
    return probe_driver(drv)


def probe_driver(drv: Any) -> tuple[bool, str, Any]:
    """Initialise ``drv`` and count its devices; the result of :func:`availability` for that module."""
    try:
        result = drv.cuInit(0)
    except Exception as e:  # cuda.pathfinder raises when libcuda.so cannot be found
        return False, (f"the NVIDIA driver library (libcuda.so) cannot be loaded: no NVIDIA driver on this machine "
                       f"({type(e).__name__})"), None
    err = _code(result)
    if err == 100:  # CUDA_ERROR_NO_DEVICE
        return False, "the NVIDIA driver reports no CUDA GPU (CUDA_ERROR_NO_DEVICE)", None
    if err != 0:
        return False, f"cuInit failed: {describe(drv, result)}", None
    count_result = drv.cuDeviceGetCount()
    if _code(count_result) != 0:
        return False, f"cuDeviceGetCount failed: {describe(drv, count_result)}", None
    count = int(count_result[1])
    if count == 0:
        return False, "the NVIDIA driver is installed but reports no CUDA GPU", None
    return True, f"{count} CUDA device(s)", drv


def _code(result: Any) -> int:
    err = result[0] if isinstance(result, tuple) else result
    return int(err)


def describe(drv: Any, result: Any) -> str:
    """``CUDA_ERROR_X (code): the driver's description`` for a failed result."""
    err = result[0] if isinstance(result, tuple) else result
    code = int(err)
    name = getattr(err, "name", None) or _driver_text(drv, "cuGetErrorName", err) or f"CUresult {code}"
    text = _driver_text(drv, "cuGetErrorString", err)
    return f"{name} ({code})" + (f": {text}" if text else "")


def _driver_text(drv: Any, fn: str, err: Any) -> str | None:
    try:
        res, raw = getattr(drv, fn)(err)
    except Exception:
        return None
    if _code(res) != 0 or not raw:
        return None
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)


def check(drv: Any, result: Any, what: str) -> Any:
    """The value(s) of a driver call's ``(CUresult, value...)`` result; CudaError when it failed."""
    if isinstance(result, tuple):
        err, rest = result[0], result[1:]
    else:
        err, rest = result, ()
    if int(err) != 0:
        name = getattr(err, "name", None)
        raise CudaError(f"{what} failed: {describe(drv, result)}", int(err), name)
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest

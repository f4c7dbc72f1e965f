"""The errors the CUDA device raises on purpose."""

from __future__ import annotations

from ...core.errors import IronError
from .. import BackendUnavailable

#: How to get the Python pieces this device needs (the driver comes with the GPU's NVIDIA driver).
INSTALL_HINT = ("pip install cuda-bindings nvidia-cuda-nvrtc, plus nvidia-cuda-runtime and nvidia-cuda-crt with "
                "--no-deps for the fp16/bf16 headers (or: bash scripts/setup.sh)")


class CudaUnavailable(BackendUnavailable):
    """No usable CUDA here: the binding, the driver library or a GPU is missing."""


class CudaError(IronError):
    """A CUDA driver call failed while setting up or running a kernel."""

    def __init__(self, message: str, code: int | None = None, name: str | None = None):
        super().__init__(message)
        #: The CUresult's value and name (e.g. 700, CUDA_ERROR_ILLEGAL_ADDRESS), when a driver call failed.
        self.code = code
        self.name = name


class AotError(IronError):
    """An ``iron build`` output folder cannot be loaded on this device."""

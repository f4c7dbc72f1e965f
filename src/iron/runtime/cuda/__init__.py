"""iron.runtime.cuda: Iron kernels on NVIDIA GPUs through cuda-bindings (driver API + NVRTC).

See docs/cuda.md.  Importing this package needs neither cuda-bindings nor a
driver; creating a :class:`CudaDevice` does, and raises
:class:`CudaUnavailable` saying what is missing.  The compile and cache
layer (:mod:`.compile`) works without a GPU.
"""

from .array import CudaArray
from .device import CudaDevice
from .driver import availability
from .errors import AotError, CudaError, CudaUnavailable
from .graphs import CudaGraph

__all__ = ["AotError", "CudaArray", "CudaDevice", "CudaError", "CudaGraph", "CudaUnavailable", "availability"]

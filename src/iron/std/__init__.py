"""iron.std: the kernel standard library, written in the public DSL only.

Each module holds kernels (``@kernel`` objects, generic over dtype through variants, with their
contract in the docstring) and host functions that allocate outputs and launch them::

    from iron.std import elementwise, softmax
    y = elementwise.unary("gelu_tanh", x)        # x: numpy array, torch tensor, CuPy array, ...
    p = softmax.softmax(scores)

The proofs and measurements live beside them in :mod:`iron.std.suite` (``@test_kernel`` against
float64 oracles, ``@bench`` against PyTorch on CUDA and numpy elsewhere); the repository's
iron.toml lists it, so ``iron test`` and ``iron bench`` at the repository root run the library.
Submodules import on first use: ``import iron.std`` pulls in none of them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: The library's modules, in the order docs/std.md describes them.
MODULES = ("elementwise", "cast", "transpose", "reduce", "softmax", "norms", "rope", "gemv", "gemm", "conv",
           "gguf", "quant_gemv", "attention")


def __getattr__(name: str) -> ModuleType:
    if name in MODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'iron.std' has no attribute {name!r}")


__all__ = list(MODULES)

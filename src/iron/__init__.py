"""Iron: GPU kernels written once in Python, run on a CPU interpreter now and GPUs later.

    import iron
    from iron import kernel, variants, Tensor, T, f32, f16, bf16
    from iron.lang import program_id, load, store, exp

    @kernel(variants(T=[f32, f16, bf16]))
    def iron_exp(a: Tensor[T], out: Tensor[T]):
        idx = program_id(0)
        store(out[idx], exp(load(a[idx])))

    iron_exp[a.size](a, out)

See docs/language.md for the language and docs/ir.md for the IR.
"""

from __future__ import annotations

from . import config
from .core.errors import (  # noqa: F401
    ArityError,
    DivergentBarrierError,
    IronCompileError,
    IronError,
    KernelTypeError,
    LaunchError,
    ReadOnlyStoreError,
    RegisterIndexError,
    SharedShapeError,
    StaticAssertionError,
    UnknownNameError,
    UnsupportedSyntaxError,
)
from .lang import *  # noqa: F401,F403  (the language: decorators, annotations, dtypes, builtins)
from .lang import __all__ as _lang_all
from .lang import abs, max, min, pow, round  # noqa: F401,A004  (builtins named like Python's; not in __all__)
from .jit import KernelFunction, Launcher, SpecializedKernel, kernel

__version__ = "0.1.0"


def use(backend: str) -> None:
    """Run kernels on ``backend`` ("interp", "cuda", ...) unless a launch says otherwise."""
    config.set_option("backend", backend)


ERRORS = ["IronError", "IronCompileError", "UnknownNameError", "UnsupportedSyntaxError", "KernelTypeError",
          "ArityError", "ReadOnlyStoreError", "SharedShapeError", "RegisterIndexError", "DivergentBarrierError",
          "StaticAssertionError", "LaunchError"]

#: The test and bench registries (docs/runner.md), imported on first use: they need numpy, ``import iron`` does not.
HARNESS = {"test_kernel": "registry", "bench": "registry", "Case": "cases", "Setup": "cases", "Then": "cases",
           "TestSetup": "cases", "BenchSetup": "cases", "Depth": "tolerance", "Tolerance": "tolerance", "Expect": "tolerance",
           "EXACT": "tolerance", "log2_ceil": "tolerance"}


def __getattr__(name: str) -> object:
    if name in HARNESS:
        import importlib

        value = getattr(importlib.import_module(f".harness.{HARNESS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'iron' has no attribute {name!r}")


__all__ = ["use", "config", "__version__", "kernel", "KernelFunction", "SpecializedKernel", "Launcher", *ERRORS,
           *_lang_all, *HARNESS]

"""Code generation: IR -> optimised IR -> legal IR -> source -> binary, for every backend.

The entry point is :func:`compile` (``iron.codegen.compiler``); ``import iron.codegen`` stays light: the
driver is imported when first asked for.
"""

from typing import Any

__all__ = ["Artifact", "CompileOptions", "STAGES", "compile"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import compiler

        return getattr(compiler, name)
    raise AttributeError(f"module 'iron.codegen' has no attribute {name!r}")

"""iron.lang: the kernel language (the decorators, annotations and builtins) and its frontend.

Everything a kernel body may call is a plain object here, also re-exported
by ``iron``; the frontend (``iron.lang.frontend``) recognises them by
identity when it lowers a kernel's Python AST to the IR (docs/language.md).
"""

from ..core.dtypes import bf16, bool_, f8e4m3, f8e5m2, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64  # noqa: F401
from .annotations import Constexpr, In, T, Tensor, TypeVar, U, Variants, variants
from .builtins import *  # noqa: F401,F403  (every builtin, listed in builtins.__all__)
from .builtins import ALL_BUILTINS, Builtin, KernelOnlyError
from .helpers import HelperFunction, func
from .tiles import sw128, sw128_8

DTYPES = ["f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool_", "f8e4m3",
          "f8e5m2"]

#: Builtins named like Python's own: attributes of iron.lang and iron, but left out of ``import *`` so host
#: code keeps Python's abs/min/max/round/pow (which kernels may call too: they mean the same builtins).
SHADOWING_PYTHON = ("abs", "min", "max", "round", "pow")

__all__ = [
    "func", "variants", "Variants", "Tensor", "In", "Constexpr", "TypeVar", "T", "U",
    "HelperFunction", "Builtin", "KernelOnlyError", "sw128", "sw128_8",
    *DTYPES, *(name for name in ALL_BUILTINS if name not in SHADOWING_PYTHON),
]

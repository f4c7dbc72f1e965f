"""iron.core: the IR, the dtype table and the errors every layer shares (no GPU, no numpy at import)."""

from . import dtypes
from .builder import Builder, new_kernel
from .errors import IronCompileError, IronError, SourceLoc
from .hashing import kernel_hash
from .ir import Block, Kernel, Op, Param, Value, clone_kernel
from .printer import print_kernel
from .types import FragmentType, IRType, ScalarType, TensorType, VarType, VectorType
from .verifier import verify

__all__ = ["dtypes", "Builder", "new_kernel", "IronCompileError", "IronError", "SourceLoc", "kernel_hash",
           "Block", "Kernel", "Op", "Param", "Value", "clone_kernel", "print_kernel", "FragmentType", "IRType",
           "ScalarType", "TensorType", "VarType", "VectorType", "verify"]

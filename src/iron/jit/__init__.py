"""iron.jit: kernels as Python objects: ``@iron.kernel``, specialisation, the launch path and its caches.

It sits above the runtime (core <- lang <- codegen <- runtime <- jit): a launch lowers the kernel
(``iron.lang``), runs the target's pipeline (``iron.codegen``) and hands the result to a device
(``iron.runtime``); those layers are imported on first use, so ``import iron`` stays light.
"""

from .kernel import KernelFunction, Launcher, SpecializedKernel, kernel, normalize_grid, split_launch_key

__all__ = ["KernelFunction", "Launcher", "SpecializedKernel", "kernel", "normalize_grid", "split_launch_key"]

"""Helpers for the Vulkan tests: compiling hand-written GLSL and describing its ABI.

The shaders follow Iron's kernel ABI (iron.codegen.abi): tensors are
storage buffers at binding = parameter index, the parameter block is the
push-constant block (scalars, then the grid, then tensor sizes), and the
group size comes from specialization constants 0, 1, 2.  Their ABI is made
by :func:`iron.codegen.abi.kernel_abi` from a bodiless IR kernel with the
same parameters, so the offsets the tests pack are the ones Iron uses.
"""

from __future__ import annotations

import os

import pytest

from iron import config
from iron.codegen.abi import KernelABI, kernel_abi
from iron.codegen.toolchains import spirv as spirv_toolchain
from iron.core import dtypes as D
from iron.core.builder import new_kernel, tensor
from iron.core.types import ScalarType
from iron.runtime.vulkan import VulkanDevice, VulkanUnavailable

#: The preamble every test shader starts with: the local size from specialization constants 0/1/2.
HEADER = """#version 450
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
"""


def required() -> bool:
    """Whether a missing toolchain or driver must fail instead of skip (CI, or ``require_toolchains``)."""
    return os.environ.get("CI", "").strip().lower() == "true" or bool(config.get("require_toolchains"))


def missing(what: str) -> None:
    """Skip (outside CI) or fail (in CI) because ``what`` is not installed."""
    if required():
        pytest.fail(f"{what} [required here: CI=true or IRON_REQUIRE_TOOLCHAINS=1]", pytrace=False)
    pytest.skip(what)


def open_device(**options: object) -> VulkanDevice:
    """A VulkanDevice with the validation layer on, or a skip (a failure in CI) saying what to install."""
    try:
        return VulkanDevice(validation=True, **options)  # type: ignore[arg-type]
    except VulkanUnavailable as e:
        missing(f"no usable Vulkan here: {e}")
        raise  # unreachable: missing() skips or fails


def compile_glsl(source: str) -> bytes:
    """SPIR-V for a GLSL compute shader: glslc -O for Vulkan 1.2, checked by spirv-val."""
    if not spirv_toolchain.available():
        missing(f"glslc/spirv-tools are missing ({spirv_toolchain.unavailable_reason()}): "
                f"{spirv_toolchain.INSTALL}")
    return spirv_toolchain.compile_glsl(source).binary


def abi_for(name: str, params: list[tuple[str, D.DType | str]], access: dict[str, str] | None = None,
            sized: tuple[str, ...] = ()) -> KernelABI:
    """The ABI Iron gives a kernel with ``params``: a dtype makes a scalar, :func:`t` a tensor.

    ``access`` sets tensors' access ("read", "write"; default "readwrite");
    ``sized`` names the tensors whose size the kernel reads.
    """
    typed = []
    for pname, spec in params:
        if isinstance(spec, tuple):
            typed.append((pname, tensor(spec[1], readonly=(access or {}).get(pname) == "read")))
        else:
            typed.append((pname, ScalarType(spec)))
    k, b = new_kernel(name, typed)
    for p in k.params:
        if p.is_tensor:
            p.access = (access or {}).get(p.name, "readwrite")
        if p.name in sized:
            b.op("tensor_size", [p.value])
    return kernel_abi(k)


def t(dtype: D.DType) -> tuple[str, D.DType]:
    """A tensor parameter of ``dtype`` for :func:`abi_for`."""
    return ("tensor", dtype)

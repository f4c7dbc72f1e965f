"""``VulkanDevice.launch``: Iron kernels (optimised IR) run on Vulkan exactly as on the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_shaders import missing

from iron import In, Tensor, f32, i32, kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.core.errors import LaunchError
from iron.lang import program_id
from iron.runtime import get_device
from iron.runtime.interp import run as interp_run
from iron.runtime.vulkan import VulkanDevice, VulkanUnavailable


@kernel
def scale_add(x: In[f32], y: Tensor[f32], a: f32, b: i32):
    i = program_id(0)
    y[i] = a * x[i] + f32(b)


def spirv_ir(k):
    return run_pipeline(k.ir(), PassContext.for_target("spirv"))


def needs_emitter() -> None:
    try:
        from iron.codegen.emit import emit_kernel  # noqa: F401
        from iron.codegen.toolchains.spirv import compile_glsl  # noqa: F401
    except ImportError as e:
        missing(f"the GLSL emitter or the SPIR-V toolchain driver is not in this build of Iron yet ({e})")


def test_arguments_are_checked_before_anything_is_compiled(device):
    ir = spirv_ir(scale_add)
    x = np.zeros(16, np.float32)
    with pytest.raises(LaunchError, match="argument 'y': expects a numpy array of float32"):
        device.launch(ir, [x, np.zeros(16), 1.0, 2], (16,), (16,))
    with pytest.raises(LaunchError, match="takes 4 argument"):
        device.launch(ir, [x, x], (16,), (16,))
    with pytest.raises(LaunchError, match="overlap without being the same buffer"):
        buf = np.zeros(17, np.float32)
        device.launch(ir, [buf[1:], buf[:-1], 1.0, 2], (16,), (16,))
    with pytest.raises(LaunchError, match="allows at most"):
        device.launch(ir, [x, np.zeros(16, np.float32), 1.0, 2], (16,), (4096,))


def test_launch_matches_the_interpreter(device, seed):
    needs_emitter()
    ir = spirv_ir(scale_add)
    n = 1000
    x = seed.rng().uniform(-8, 8, n).astype(np.float32)
    want = np.full(n, np.nan, np.float32)
    got = np.full(n, np.nan, np.float32)
    interp_run(ir, [x, want, 1.5, -3], (n,), (256,))
    device.launch(ir, [x, got, 1.5, -3], (n,), (256,))
    assert np.array_equal(got, want), seed


def test_get_device_makes_one_vulkan_device():
    try:
        dev = get_device("vulkan")
    except VulkanUnavailable as e:
        missing(f"no usable Vulkan here: {e}")
    assert isinstance(dev, VulkanDevice) and dev.name == "vulkan" and dev.target == "spirv"
    assert get_device("vulkan") is dev


def test_a_barrier_kernel_with_a_grid_tail_is_refused_with_its_line(device):
    needs_emitter()
    from corpus import case_named

    case = case_named("shared_tree_reduction")
    k = case.kernel
    binding = case.bindings[0]
    ir = run_pipeline(k.ir(**binding), PassContext.for_target("spirv"))
    args = [np.ones(300, np.float32) if p.is_tensor and p.access == "read" else
            np.zeros(300, np.float32) if p.is_tensor else 300 for p in ir.params]
    with pytest.raises(LaunchError, match=r"not a multiple of the group .* uses barrier \(.*\.py:\d+"):
        device.launch(ir, args, (300,), (128,))

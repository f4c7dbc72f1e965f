"""The validation layer's messages reach the caller as VulkanValidationError, naming the rule broken."""

from __future__ import annotations

import numpy as np
import pytest
from vulkan_shaders import HEADER, abi_for, compile_glsl, open_device, t

from iron.codegen.abi import pack_params
from iron.core import dtypes as D
from iron.runtime.vulkan import VulkanValidationError

COPY = HEADER + """
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = BINDING) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params { uint grid_x; uint grid_y; uint grid_z; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.grid_x) return;
    y[i] = x[i];
}
"""


@pytest.fixture
def fresh_device():
    """A device of its own, so a test that provokes messages leaves the shared one clean."""
    dev = open_device()
    yield dev
    dev.close()


def run_copy(dev, binding: int) -> np.ndarray:
    abi = abi_for("copy", [("x", t(D.f32)), ("y", t(D.f32))], access={"x": "read", "y": "write"})
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    spirv = compile_glsl(COPY.replace("BINDING", str(binding)))
    dev.run_spirv(spirv, abi, [x, y], pack_params(abi, {}, (64,), {}), (64,), (64,))
    return y


def test_a_shader_whose_binding_is_not_in_the_layout_is_reported(fresh_device):
    with pytest.raises(VulkanValidationError) as info:
        run_copy(fresh_device, binding=3)
    assert any("VUID-VkComputePipelineCreateInfo-layout" in m for m in info.value.messages)
    assert "binding" in str(info.value).lower() or "descriptor" in str(info.value).lower()


def test_the_same_shader_with_the_right_binding_is_silent(fresh_device):
    """The control for the test above: binding 1 matches the ABI, and nothing is reported."""
    assert np.array_equal(run_copy(fresh_device, binding=1), np.arange(64, dtype=np.float32))
    assert fresh_device.validation_messages == []


def test_a_push_constant_block_larger_than_the_abi_block_is_reported(fresh_device):
    """Seen with Debian's layer (1.3.239) on lavapipe, as CI runs; the 1.4.309 layer on NVIDIA's driver stays
    silent about this one, so elsewhere the check belongs to the layer, not to Iron."""
    if fresh_device.info["device_type"] != "cpu":
        pytest.skip(f"the device is {fresh_device.info['name']}: whether its layer checks push constant ranges "
                    "is the layer's business")
    shader = HEADER + """
layout(set = 0, binding = 0) buffer Y { float y[]; };
layout(push_constant) uniform Params { uint grid_x; uint grid_y; uint grid_z; float extra[5]; } p;
void main() { y[gl_GlobalInvocationID.x] = p.extra[4]; }
"""
    abi = abi_for("extra", [("y", t(D.f32))])
    with pytest.raises(VulkanValidationError) as info:
        fresh_device.run_spirv(compile_glsl(shader), abi, [np.zeros(8, np.float32)],
                               pack_params(abi, {}, (8,), {}), (8,), (8,))
    assert any("push constant" in m.lower() or "PushConstant" in m for m in info.value.messages)

"""The Vulkan device itself: selection, description, timing, buffers, limits and teardown."""

from __future__ import annotations

import time

import numpy as np
import pytest
from test_vulkan_run_spirv import EXP_F32, exp_abi
from vulkan_shaders import HEADER, abi_for, compile_glsl, open_device, t

from iron.codegen.abi import pack_params
from iron.core import dtypes as D
from iron.core.errors import LaunchError
from iron.runtime.vulkan import VulkanDevice, VulkanUnavailable

DOUBLE = HEADER + """
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform Params { uint grid_x; uint grid_y; uint grid_z; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.grid_x) return;
    y[i] = 2.0 * x[i];
}
"""


def double(device: VulkanDevice, x: np.ndarray, y: np.ndarray, timing: bool = False) -> float | None:
    abi = abi_for("double", [("x", t(D.f32)), ("y", t(D.f32))], access={"x": "read", "y": "readwrite"})
    n = max(x.size, 1)
    return device.run_spirv(compile_glsl(DOUBLE), abi, [x, y], pack_params(abi, {}, (n,), {}), (n,), (64,),
                            timing=timing)


# ------------------------------------------------------------ description and selection
def test_info_describes_the_device_with_plausible_limits(device):
    info = device.info
    assert info["api_version"].split(".")[:2] >= ["1", "2"]
    width = info["subgroup_size"]
    assert width >= 1 and width & (width - 1) == 0
    assert {"basic", "arithmetic"} <= set(info["subgroup_operations"])
    assert info["max_workgroup_invocations"] >= 128  # Vulkan's required minimum
    assert info["max_shared_memory"] >= 16384
    assert info["max_push_constants_size"] >= 128
    assert info["timestamp_period"] > 0 and info["timestamp_valid_bits"] > 0
    assert info["features"]["storageBuffer16BitAccess"] in (True, False)


def test_the_cpu_device_is_lavapipe_with_its_documented_limits(device):
    if device.info["device_type"] != "cpu":
        pytest.skip(f"the device is {device.info['name']}, not Mesa's CPU driver")
    info = device.info
    assert "llvmpipe" in info["name"] and info["driver_name"] == "llvmpipe"
    assert info["subgroup_size"] == 8 and info["max_shared_memory"] == 32768
    assert info["features"]["shaderFloat16"] and info["features"]["storageBuffer16BitAccess"]


def test_a_device_can_be_chosen_by_name_or_index(device):
    by_index = open_device(device=device.info["index"])
    by_name = open_device(device=device.info["name"][:6].upper())
    try:
        assert by_index.info["name"] == device.info["name"]
        assert by_name.info["name"] == device.info["name"]
    finally:
        by_index.close()
        by_name.close()


@pytest.mark.parametrize("spec", ["no-such-gpu", "97"])
def test_an_unknown_device_is_rejected_with_the_list_of_devices(device, spec):
    with pytest.raises(VulkanUnavailable, match=r"matches no Vulkan device; available: 0: "):
        VulkanDevice(device=spec, validation=True)


# ------------------------------------------------------------ timing and buffers
def test_timestamps_give_a_positive_gpu_time_within_the_wall_time(device):
    x = np.ones(1 << 20, np.float32)
    y = np.zeros_like(x)
    double(device, x, y)  # warm up: the pipeline is compiled outside the timed call
    start = time.perf_counter()
    ms = double(device, x, y, timing=True)
    wall_ms = (time.perf_counter() - start) * 1e3
    assert isinstance(ms, float) and 0 < ms <= wall_ms
    assert double(device, x, y) is None  # untimed launches return nothing


def test_buffers_are_reused_across_launches_of_the_same_sizes(device):
    x = np.arange(1000, dtype=np.float32)
    y = np.zeros_like(x)
    double(device, x, y)
    allocated = device.buffer_allocations
    for _ in range(5):
        double(device, x, y)
    assert device.buffer_allocations == allocated
    bigger = np.zeros(100_000, np.float32)
    double(device, bigger, np.zeros_like(bigger))
    assert device.buffer_allocations > allocated


def test_reused_buffers_carry_no_data_from_the_previous_launch(device):
    x = np.full(256, 7, np.float32)
    y = np.zeros(256, np.float32)
    double(device, x, y)
    fresh = np.full(256, -1.0, np.float32)
    empty_in = np.zeros(256, np.float32)
    double(device, empty_in, fresh)  # the pooled buffers held 7s and 14s a moment ago
    assert np.array_equal(fresh, np.zeros(256, np.float32))


def test_empty_tensors_bind_a_dummy_buffer(device):
    abi = exp_abi(D.f32)
    x, y = np.zeros(0, np.float32), np.zeros(0, np.float32)
    device.run_spirv(compile_glsl(EXP_F32), abi, [x, y], pack_params(abi, {}, (1,), {}), (1,), (1,))
    assert y.size == 0


def test_the_same_array_twice_is_one_buffer(device):
    x = np.arange(64, dtype=np.float32)
    double(device, x, x)
    assert np.array_equal(x, 2 * np.arange(64, dtype=np.float32))


def test_only_tensors_the_abi_marks_written_are_copied_back(device):
    """The shader scribbles on x, which the ABI calls read-only: the caller's x must not change."""
    shader = DOUBLE.replace("readonly buffer X", "buffer X").replace("y[i] = 2.0 * x[i];",
                                                                      "y[i] = 2.0 * x[i]; x[i] = -1.0;")
    abi = abi_for("double", [("x", t(D.f32)), ("y", t(D.f32))], access={"x": "read", "y": "write"})
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    device.run_spirv(compile_glsl(shader), abi, [x, y], pack_params(abi, {}, (64,), {}), (64,), (64,))
    assert np.array_equal(x, np.arange(64, dtype=np.float32))
    assert np.array_equal(y, 2 * x)


# ------------------------------------------------------------ limits and misuse
def test_a_group_over_the_device_limit_is_rejected_before_dispatch(device):
    n = device.info["max_workgroup_invocations"] * 2
    abi = exp_abi(D.f32)
    x, y = np.zeros(n, np.float32), np.zeros(n, np.float32)
    with pytest.raises(LaunchError, match=f"group \\({n}, 1, 1\\) has {n} threads"):
        device.run_spirv(compile_glsl(EXP_F32), abi, [x, y], pack_params(abi, {}, (n,), {}), (n,), (n,))


def test_a_wrong_dtype_or_parameter_block_is_rejected(device):
    abi = exp_abi(D.f32)
    spirv = compile_glsl(EXP_F32)
    params = pack_params(abi, {}, (8,), {})
    with pytest.raises(LaunchError, match="buffer 'x' .* expects a numpy array of f32, got float64"):
        device.run_spirv(spirv, abi, [np.zeros(8), np.zeros(8, np.float32)], params, (8,), (8,))
    with pytest.raises(LaunchError, match="binds 2 buffer"):
        device.run_spirv(spirv, abi, [np.zeros(8, np.float32)], params, (8,), (8,))
    with pytest.raises(LaunchError, match="parameter block has 4 bytes, the ABI 16"):
        device.run_spirv(spirv, abi, [np.zeros(8, np.float32)] * 2, params[:4], (8,), (8,))


def test_default_groups_have_256_threads_within_the_limits(device):
    assert device.default_group((1000,)) == (256,)
    assert device.default_group((64, 64)) == (16, 16)
    assert device.default_group((8, 8, 8)) == (8, 8, 4)


# ------------------------------------------------------------ teardown
def test_close_frees_everything_and_is_idempotent():
    dev = open_device()
    x = np.ones(128, np.float32)
    double(dev, x, np.zeros_like(x), timing=True)
    dev.close()
    dev.close()
    # The layer reports objects left alive at vkDestroyDevice / vkDestroyInstance.
    assert dev.validation_messages == []
    with pytest.raises(LaunchError, match="closed"):
        double(dev, x, np.zeros_like(x))


def test_the_device_is_a_context_manager():
    with open_device() as dev:
        assert "closed" not in repr(dev)
    assert "closed" in repr(dev)

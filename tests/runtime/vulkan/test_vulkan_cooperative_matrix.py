"""Cooperative matrices on a Vulkan driver that offers them (the H200's), against the corpus oracles.

The device's profile (``VulkanDevice.profile``) lists the multiplies it runs;
fragment kernels whose ``mma`` it lists are emitted as ``coopmat`` values
(tests/codegen/test_glsl_cooperative_matrix.py checks the source) and must
agree with the float64 oracles.  Lavapipe (Mesa 22.3, CI) offers no
cooperative matrices, so there these tests skip: they run on the GPU machine.
"""

from __future__ import annotations

import pytest
from corpus import Run, case_named, harness

from iron import f16, f32
from iron.codegen.emit import emit_kernel
from iron.codegen.emit.fragments import native_fragment_types

POINTS = [("mma_16x8x16", {"T": f16, "KT": 2}), ("mma_narrow_store", {"T": f16}),
          ("mma_16x16x16", {"T": f16, "ACC": f32}), ("mma_16x16x16", {"T": f16, "ACC": f16})]


@pytest.fixture
def coopmat_device(device):
    if device.profile.mma_strategy != "vulkan_khr_cooperative_matrix":
        pytest.skip(f"'{device.info['name']}' offers no cooperative matrices (needs VK_KHR_cooperative_matrix)")
    return device


@pytest.mark.parametrize("size", [1, 8])
@pytest.mark.parametrize(("name", "binding"), POINTS, ids=[f"{n}-{'-'.join(map(str, b.values()))}" for n, b in POINTS])
def test_cooperative_matrix_kernels_match_the_oracle(coopmat_device, name, binding, size, seed) -> None:
    device = coopmat_device
    case = case_named(name)
    run = Run(size, binding, device.info["subgroup_size"])
    pristine = harness.make_inputs(case, run, seed.value)
    args = harness.fresh_args(case, pristine)
    ir = harness.optimized_ir(harness.frontend_ir(case, run, args), "spirv")
    assert native_fragment_types(ir, device.profile), "the device's profile should make these fragments native"
    assert "coopMatMulAdd(" in emit_kernel(ir, "spirv", device.profile).source
    grid, group = case.launch(run)
    device.launch(ir, harness.ir_args(ir, case, args), grid, group)
    problems = harness.verdict(case, run, pristine, args)
    assert not problems, harness.describe(case, run, seed) + "\n  " + "\n  ".join(problems)

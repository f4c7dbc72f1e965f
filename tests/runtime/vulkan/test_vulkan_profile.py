"""``VulkanDevice.profile``: the TargetProfile made from the device, cooperative matrices included.

lavapipe offers no VK_KHR_cooperative_matrix, so the cooperative-matrix path
is checked with plain fake records and a fake driver entry point, as far as
it runs without a device that has the extension.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from iron import In, Tensor, f32, kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.targets import VULKAN_FEATURES, default_profile
from iron.lang import program_id
from iron.runtime.vulkan import coopmat
from iron.runtime.vulkan.binding import load_vulkan
from iron.codegen.cache import ArtifactCache
from iron.codegen.compiler import CompileOptions, compile
from iron.runtime.vulkan.features import OPTIONAL_EXTENSIONS, WANTED, FeatureSet, _structs, _walk, enable_chain
from iron.runtime.vulkan.profile import FEATURE_NAMES, device_profile, profile_features

F16, F32, F64, S8, S32, U8, U32 = 0, 1, 2, 3, 5, 7, 9


def record(m, n, k, a, c, b=None, result=None, saturating=False, scope=coopmat.SCOPE_SUBGROUP):
    return SimpleNamespace(MSize=m, NSize=n, KSize=k, AType=a, BType=a if b is None else b, CType=c,
                           ResultType=c if result is None else result, saturatingAccumulation=saturating, scope=scope)


# ------------------------------------------------------------ the profile of the device in hand
def test_the_lavapipe_profile_is_the_default_spirv_profile_but_for_name_and_limits(device):
    if device.info["device_type"] != "cpu":
        pytest.skip(f"the device is {device.info['name']}, not Mesa's CPU driver")
    mine, default = device.profile, default_profile("spirv")
    assert mine.arch == f"vulkan-device:{device.info['name']}"
    assert dataclasses.replace(mine, arch=default.arch, max_group_dims=default.max_group_dims) == default


def test_the_profile_carries_the_devices_limits_and_enabled_features(device):
    p, info = device.profile, device.info
    assert p.target == "spirv" and p.lane_width == info["subgroup_size"]
    assert p.max_threads_per_group == info["max_workgroup_invocations"]
    assert p.max_group_dims == tuple(info["max_workgroup_size"])
    assert p.max_shared_bytes == info["max_shared_memory"]
    named = {name for name, vk_name in FEATURE_NAMES.items() if info["features"].get(vk_name)}
    assert named - {"cooperative_matrix"} <= p.features
    assert ("f64" in p.dtypes) == info["features"]["shaderFloat64"]


def test_every_profile_feature_name_maps_to_a_wanted_vulkan_feature():
    assert set(FEATURE_NAMES) == VULKAN_FEATURES
    wanted = {f for fields in WANTED.values() for f in fields}
    assert set(FEATURE_NAMES.values()) <= wanted
    assert "shaderSubgroupExtendedTypes" in WANTED["VkPhysicalDeviceVulkan12Features"]


def test_a_missing_feature_leaves_the_profile(device):
    info = device._info
    supported = dict(info.features.supported, shaderFloat64=False, shaderSubgroupExtendedTypes=False)
    lacking = dataclasses.replace(info, features=FeatureSet(supported, info.features.extensions))
    p = device_profile(lacking)
    assert "f64" not in p.features and "f64" not in p.dtypes and "subgroup_extended_types" not in p.features


def test_the_compiler_emits_for_the_device_profile_and_keys_its_cache_by_it(device):
    @kernel
    def scale(x: In[f32], y: Tensor[f32]):
        i = program_id(0)
        y[i] = 3.0 * x[i]

    ir = run_pipeline(scale.ir(), PassContext.for_target("spirv"))
    cache = ArtifactCache(None)

    def spirv(profile):
        options = CompileOptions(profile=profile, binary="spirv", optimised=True)
        return compile(ir, "spirv", options, cache=cache)

    ours = spirv(device.profile)
    assert device.profile.arch in ours.source and spirv(device.profile) is ours
    theirs = spirv(default_profile("spirv"))
    assert "vulkan-lavapipe" in theirs.source and theirs is not ours and cache.compiles == 2


# ------------------------------------------------------------ cooperative matrices
def test_cooperative_matrix_records_are_filtered_and_named():
    records = [
        record(16, 16, 16, F16, F32),
        record(16, 16, 16, F16, F16),
        record(16, 8, 16, F16, F32),
        record(16, 16, 16, F16, F32),  # a repeat
        record(16, 16, 32, S8, S32),
        record(16, 16, 32, U8, U32),
        record(16, 16, 32, U8, S32, b=S8),  # A and B differ
        record(16, 16, 16, F16, F32, result=F16),  # C and the result differ
        record(16, 16, 16, F16, F16, saturating=True),
        record(16, 16, 16, F16, F32, scope=2),  # workgroup scope
        record(16, 16, 16, 1000141000, F32),  # bfloat16 (VK_KHR_shader_bfloat16): not enabled, dropped
        record(16, 16, 32, 1000491002, F16),  # fp8 (NV): dropped
        record(8, 8, 4, F64, F64),
    ]
    assert coopmat.usable_combos(records) == (
        (8, 8, 4, "f64", "f64"), (16, 8, 16, "f16", "f32"), (16, 16, 16, "f16", "f16"), (16, 16, 16, "f16", "f32"),
        (16, 16, 32, "i8", "i32"), (16, 16, 32, "u8", "u32"))
    assert coopmat.usable_combos([]) == ()


def test_the_component_type_table_matches_the_binding():
    vk = load_vulkan()
    for name, dtype in [("FLOAT16", "f16"), ("FLOAT32", "f32"), ("FLOAT64", "f64"), ("SINT8", "i8"),
                        ("SINT16", "i16"), ("SINT32", "i32"), ("SINT64", "i64"), ("UINT8", "u8"),
                        ("UINT16", "u16"), ("UINT32", "u32"), ("UINT64", "u64")]:
        assert coopmat.COMPONENT_TYPES[getattr(vk, f"VK_COMPONENT_TYPE_{name}_KHR")] == dtype
    assert vk.VK_SCOPE_SUBGROUP_KHR == coopmat.SCOPE_SUBGROUP


def test_enumeration_sets_each_stype_and_retries_when_the_list_grows():
    vk = load_vulkan()
    offered = [(16, 16, 16, F16, F32), (16, 8, 16, F16, F16), (16, 16, 32, S8, S32)]
    calls = []

    def driver(physical, count, records):
        calls.append(records == vk.ffi.NULL)
        if records == vk.ffi.NULL:
            count[0] = 2 if len(calls) == 1 else 3  # a third combo appears after the first count
            return 0
        for i in range(count[0]):
            assert records[i].sType == vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
        if count[0] < len(offered):
            return vk.VK_INCOMPLETE
        for i, (m, n, k, a, c) in enumerate(offered):
            records[i].MSize, records[i].NSize, records[i].KSize = m, n, k
            records[i].AType = records[i].BType = a
            records[i].CType = records[i].ResultType = c
            records[i].scope = vk.VK_SCOPE_SUBGROUP_KHR
        return 0

    found = coopmat.enumerate_properties(vk, driver, "physical-device")
    assert calls == [True, False, True, False]
    assert coopmat.usable_combos(found) == ((16, 8, 16, "f16", "f16"), (16, 16, 16, "f16", "f32"),
                                            (16, 16, 32, "i8", "i32"))


def test_a_device_offering_cooperative_matrices_enables_them_and_profiles_them(device):
    info = device._info
    ext = (*info.features.extensions, coopmat.EXTENSION)
    combos = ((16, 8, 16, "f16", "f32"), (16, 16, 16, "f16", "f16"), (16, 16, 16, "f16", "f32"))
    offered = dataclasses.replace(info, features=FeatureSet(dict(info.features.supported, cooperativeMatrix=True),
                                                            ext),
                                  cooperative_matrices=combos, cooperative_matrix_in_compute=True)
    p = device_profile(offered)
    assert "cooperative_matrix" in p.features and p.mma_strategy == "vulkan_khr_cooperative_matrix"
    assert p.mma_offered == frozenset(combos)
    assert offered.to_dict()["cooperative_matrices"] == [list(c) for c in combos]
    # Not in compute shaders (the specification says it always is; the code checks anyway): no matrices.
    assert "cooperative_matrix" not in profile_features(dataclasses.replace(offered,
                                                                            cooperative_matrix_in_compute=False))
    # The feature chain the logical device would be created with turns the feature on.
    vk = load_vulkan()
    assert OPTIONAL_EXTENSIONS[coopmat.EXTENSION] == "VkPhysicalDeviceCooperativeMatrixFeaturesKHR"
    structs = _structs(offered.features.extensions)
    chain = _walk(vk, enable_chain(vk, offered.features), structs)
    coop = chain["VkPhysicalDeviceCooperativeMatrixFeaturesKHR"]
    assert coop.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR
    assert coop.cooperativeMatrix == vk.VK_TRUE and not coop.cooperativeMatrixRobustBufferAccess


def test_lavapipe_offers_no_cooperative_matrices(device):
    if device.info["device_type"] != "cpu":
        pytest.skip(f"the device is {device.info['name']}, not Mesa's CPU driver")
    assert device.info["cooperative_matrices"] == [] and "cooperative_matrix" not in device.profile.features
    assert "cooperativeMatrix" not in device.info["features"]  # the struct is not even queried without the extension


def test_the_instance_entry_point_lookup_runs_here(device):
    """lavapipe's loader has no such entry point, so the lookup ends at NULL and lists nothing; a newer
    loader would hand out a trampoline, which must not be called for a device without the extension."""
    vk, instance = device._instance.vk, device._instance.handle
    if vk.lib.vkGetInstanceProcAddr(instance, coopmat.ENUMERATE.encode()) != vk.ffi.NULL:
        pytest.skip("this loader knows vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
    assert coopmat.query_combos(vk, instance, device._device.physical) == ()

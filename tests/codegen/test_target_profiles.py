"""Target profiles: defaults per target, lane widths per architecture, clear errors."""

import pytest

from iron.codegen.targets import (
    PROFILES,
    UnknownTargetError,
    default_profile,
    get_target,
    profile,
)


def test_every_device_target_has_a_default_profile_of_its_own():
    for target in ("cuda", "hip", "spirv", "metal"):
        p = default_profile(target)
        assert p.target == target and (target, p.arch) in PROFILES


@pytest.mark.parametrize("target,arch,lanes", [
    ("cuda", "sm_90", 32), ("cuda", "sm_80", 32), ("hip", "gfx90a", 64), ("hip", "gfx1030", 32),
    ("hip", "gfx1100", 32), ("spirv", "vulkan-lavapipe", 8), ("spirv", "vulkan-nvidia", 32),
    ("metal", "apple-m2", 32),
])
def test_lane_width_follows_the_hardware(target, arch, lanes):
    assert profile(target, arch).lane_width == lanes


def test_limits_and_capabilities_differ_where_the_hardware_does():
    assert not default_profile("metal").supports_dtype("f64")
    assert default_profile("cuda").supports_atomic("add", "bf16")
    assert not profile("cuda", "sm_80").supports_atomic("add", "i8")
    assert profile("spirv", "vulkan-lavapipe").max_shared_bytes == 32 * 1024
    assert profile("spirv", "vulkan-nvidia").mma_strategy is not None
    assert profile("hip", "gfx1030").mma_strategy is None
    assert not profile("spirv", "vulkan-baseline").supports_atomic("add", "f32")


def test_unknown_architecture_lists_the_known_ones():
    with pytest.raises(UnknownTargetError, match="gfx90a"):
        profile("hip", "gfx9999")
    with pytest.raises(UnknownTargetError):
        default_profile("interp")


def test_targets_keep_their_contraction_defaults():
    assert get_target("cuda").fp_contract and not get_target("spirv").fp_contract

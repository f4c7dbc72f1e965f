"""The backend records: one per target, every name resolves to it, and every part it names exists."""

import importlib
import re
from pathlib import Path

import pytest

from iron import config, f32
from iron.codegen import backends as B
from iron.codegen.legalize import LEGALIZE_PASSES, legalize
from iron.codegen.pipeline import PassContext, pipeline_stages
from iron.codegen.targets import PROFILES, default_profile
from iron.codegen.toolchains import TOOLCHAINS, toolchain_of
from iron.harness.build import EMIT_KINDS
from iron.runtime import KNOWN_BACKENDS, PREFERENCE

SRC = Path(__file__).parents[2] / "src" / "iron"


def test_every_name_of_a_backend_resolves_to_its_one_record():
    spirv = B.get_target("spirv")
    assert B.get_backend("vulkan") is spirv and B.get_backend("glsl") is spirv
    assert B.by_device("vulkan") is spirv and B.by_language("glsl") is spirv
    assert spirv.names == ("spirv", "vulkan", "glsl")
    with pytest.raises(B.UnknownTargetError, match="device of target 'spirv'"):
        B.get_target("vulkan")
    with pytest.raises(B.UnknownTargetError, match="known targets: interp, cuda, hip, spirv, metal"):
        B.get_backend("opencl")


@pytest.mark.parametrize("backend", B.EMITTING, ids=lambda b: b.target)
def test_every_part_an_emitting_backend_names_exists(backend):
    dialect = backend.dialect_class()
    assert dialect.target == backend.target and dialect.language == backend.language
    assert default_profile(backend.target).arch == backend.default_arch
    assert (backend.target, backend.default_arch) in PROFILES
    assert backend.toolchain in TOOLCHAINS and toolchain_of(backend.target) is TOOLCHAINS[backend.toolchain]
    assert all(name in LEGALIZE_PASSES for name in backend.legalize)
    for kind in backend.binaries:
        assert EMIT_KINDS[kind.name].binary is kind and EMIT_KINDS[kind.name].target == backend.target
    assert EMIT_KINDS[backend.language].target == backend.target


def test_device_names_come_from_the_records_and_the_options_accept_each():
    assert KNOWN_BACKENDS == B.DEVICE_NAMES == ("interp", "cuda", "hip", "vulkan", "metal")
    assert PREFERENCE == ("cuda", "vulkan")
    for name in B.DEVICE_NAMES:
        assert config.parse_value("backend", name, "test") == name
    for b in B.BACKENDS:
        if b.device_factory:
            module, _, cls = b.device_factory.partition(":")
            assert isinstance(getattr(importlib.import_module(module), cls), type)


def test_legalisation_runs_the_records_passes_in_order_and_inspect_shows_them():
    from emit_testing import optimized

    ir = optimized("float_floordiv_mod_pow_logic", {"T": f32}, "interp")
    stages = [name for name, _ in pipeline_stages(ir, PassContext.for_target("spirv"), legalise=True)]
    legal = [s.removeprefix("legalize:") for s in stages if s.startswith("legalize:")]
    assert legal == list(B.get_target("spirv").legalize) and legal[-1] == "small_int_powers"
    assert not any(s.startswith("legalize:") for s, _ in pipeline_stages(ir, PassContext.for_target("interp"), legalise=True))
    opt = optimized("float_floordiv_mod_pow_logic", {"T": f32}, "spirv")
    exact = [n for n in B.get_target("spirv").legalize if LEGALIZE_PASSES[n].exact]
    seen: list[str] = []
    legalize(opt, "spirv", dump=lambda name, k: seen.append(name), exact_only=True)
    assert seen == [f"legalize:{n}" for n in exact] and "small_int_powers" not in "".join(seen)


_TARGET_TEST = re.compile(r'[!=]= "(spirv|cuda|hip|metal|vulkan|glsl|msl)"|in \("(cuda|hip|spirv|metal|vulkan)"')


def test_no_module_outside_the_records_tests_a_target_by_name():
    offenders = []
    for py in SRC.rglob("*.py"):
        for n, line in enumerate(py.read_text().splitlines(), 1):
            if _TARGET_TEST.search(line.split("#")[0]):
                offenders.append(f"{py.relative_to(SRC.parent)}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_library_asks_for_traits_and_imports_no_device():
    for py in (SRC / "std").rglob("*.py"):
        text = py.read_text()
        assert "iron.runtime" not in text and "..runtime" not in text, py


def test_device_traits_describe_the_device_without_naming_it():
    from iron.codegen.mma import CUDA_MMA_SYNC_M16N8K16
    from iron.jit.device import device_traits

    interp = device_traits("interp")
    assert interp.interpreted and interp.matrix_unit is None and interp.shared_limit is None
    assert interp.lane_width == config.get("simd_width") and interp.has("wgmma") and not interp.loose_math
    cuda = device_traits("cuda")  # the H200's traits, or sm_90's default profile where no GPU answers
    assert cuda.matrix_unit is CUDA_MMA_SYNC_M16N8K16 and cuda.has("wgmma") and cuda.lane_width == 32
    assert not cuda.interpreted and cuda.shared_limit >= 227 * 1024
    vulkan = device_traits("vulkan")
    assert vulkan.loose_math and not vulkan.interpreted and vulkan.profile.target == "spirv"

"""Kernels built ahead of time (iron build --emit cubin,ptx,manifest): read, checked, loaded, launched, no NVRTC."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from fakecuda import FakeDriver, interpreted

from iron import In, T, Tensor, f16, f32, kernel, variants
from iron.codegen.abi import kernel_abi
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.harness.build import build, write_atomically
from iron.lang import exp, program_id
from iron.runtime.cuda import AotError, CudaDevice
from iron.runtime.cuda.manifest import abi_mismatch, cubin_params, pick_binary, read_manifest


@kernel(variants(T=[f32, f16]))
def aot_exp(a: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        out[i] = exp(a[i])


class NoNvrtc:
    """A toolchain that fails the test if anything tries to compile."""

    @staticmethod
    def version() -> str:
        raise AssertionError("NVRTC was asked for its version at run time")

    @staticmethod
    def build(*args, **kwargs):
        raise AssertionError("NVRTC was called at run time")


@pytest.fixture(scope="module")
def built(tmp_path_factory, request):
    # The tests' root conftest (its require_toolchain fixture is function-scoped; this one is not).
    root = next(p for p in request.config.pluginmanager.get_plugins() if hasattr(p, "check_toolchain"))
    root.check_toolchain("nvrtc")
    out = tmp_path_factory.mktemp("build")
    write_atomically(build([("aot_exp", aot_exp)], ["cubin", "ptx", "manifest"]), out)
    return out


def _ir(T):
    return run_pipeline(aot_exp.ir(T=T), PassContext.for_target("cuda"))


def test_the_manifest_reads_back_with_each_abi(built):
    variants_ = read_manifest(built)
    assert [v.entry for v in variants_] == ["aot_exp__T_f32", "aot_exp__T_f16"]
    v = variants_[0]
    assert v.kernel == "aot_exp" and v.binding == {"T": "f32"} and v.abi == kernel_abi(_ir(f32))
    assert "cubin/aot_exp__T_f32.sm_90.cubin" in v.files


def test_binaries_are_picked_for_the_gpu_and_checked_against_the_abi(built):
    v = read_manifest(built)[0]
    path, fmt, arch = pick_binary(v, built, "sm_90")
    assert (path.name, fmt, arch) == ("aot_exp__T_f32.sm_90.cubin", "cubin", "sm_90")
    assert pick_binary(v, built, "sm_120")[1] == "ptx", "a newer GPU runs the PTX, not the sm_90 CUBIN"
    with pytest.raises(AotError, match="cubin for sm_90, ptx for sm_90; none runs on this GPU \\(sm_80\\)"):
        pick_binary(v, built, "sm_80")
    sizes = cubin_params(path.read_bytes(), v.entry)
    assert sizes == [8, 8, v.abi.params_size]
    assert abi_mismatch(v.abi, sizes) is None
    assert "takes parameters of [8, 8, 16] bytes, the manifest's ABI [8, 8, 24]" in abi_mismatch(
        type(v.abi)(v.abi.entry, v.abi.tensors, v.abi.fields, 24), sizes)


def test_load_and_launch_without_nvrtc(built, tmp_path):
    fake = FakeDriver()
    fake.kernels["aot_exp__T_f32"] = interpreted(_ir(f32), {"a": 100, "out": 100})
    dev = CudaDevice(driver=fake, cache_dir=tmp_path, toolchain=NoNvrtc)
    lib = dev.load_build(built)
    assert sorted(lib.kernels) == ["aot_exp__T_f16", "aot_exp__T_f32"] and lib.skipped == {}
    k = lib["aot_exp__T_f32"]
    assert [v.entry for v in lib.variants("aot_exp")] == ["aot_exp__T_f32", "aot_exp__T_f16"]
    a = np.linspace(-1, 1, 100, dtype=np.float32)
    out = np.zeros(100, np.float32)
    k.launch(a, out, 100, grid=100, group=32)
    np.testing.assert_allclose(out, np.exp(a), rtol=1e-6)
    out[:] = 0
    k[100, 64](a=a, out=out, n=50)
    np.testing.assert_allclose(out[:50], np.exp(a[:50]), rtol=1e-6)
    assert not out[50:].any()
    assert dev.info["nvrtc"].startswith("unavailable"), "no NVRTC was needed to describe the device"
    with pytest.raises(KeyError, match="not loaded"):
        lib["nope"]
    dev.close()


def test_a_build_for_another_gpu_says_so(built, tmp_path):
    dev = CudaDevice(driver=FakeDriver(arch=(8, 0)), cache_dir=tmp_path, toolchain=NoNvrtc)
    with pytest.raises(AotError, match="nothing loads on sm_80: 'aot_exp__T_f32': the build has cubin for sm_90"):
        dev.load_build(built)
    dev.close()


def test_damaged_builds(built, tmp_path):
    dev = CudaDevice(driver=FakeDriver(), cache_dir=tmp_path / "c", toolchain=NoNvrtc)
    with pytest.raises(AotError, match="manifest.json does not exist: build with `iron build --emit cubin"):
        dev.load_build(tmp_path / "empty")
    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["kernels"][0]["variants"][1]["abi"]["params_size"] = 32
    (copy / "manifest.json").write_text(json.dumps(manifest))
    (copy / "cubin" / "aot_exp__T_f32.sm_90.cubin").unlink()
    lib = dev.load_build(copy)
    assert "aot_exp__T_f32" in lib.kernels and lib.kernels["aot_exp__T_f32"].plan.module.kind == "ptx"
    assert "the manifest's ABI [8, 8, 32]" in lib.skipped["aot_exp__T_f16"]
    manifest["schema"] = "iron.manifest/0"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(AotError, match="schema 'iron.manifest/0', this Iron reads 'iron.manifest/1'"):
        dev.load_build(copy)
    dev.close()


def test_an_ahead_of_time_kernel_past_48_kib_opts_in_and_launches_dynamic(tmp_path, require_toolchain):
    """The manifest carries the dynamic shared bytes (and the launch limits): no emitter at load time."""
    require_toolchain("nvrtc")
    from cudakernels import reverse_far_apart

    out = tmp_path / "build"
    write_atomically(build([("reverse_far_apart", reverse_far_apart)], ["cubin", "manifest"]), out)
    (v,) = read_manifest(out)
    assert v.dynamic_shared_bytes == 65536 and v.whole_group is True and v.max_group_threads == 1024
    fake = FakeDriver()
    kir = run_pipeline(reverse_far_apart.ir(), PassContext.for_target("cuda"))
    fake.kernels[v.entry] = interpreted(kir, {"x": 128})
    dev = CudaDevice(driver=fake, cache_dir=tmp_path / "cache", toolchain=NoNvrtc)
    try:
        x = np.arange(128, dtype=np.float32)
        dev.load_build(out)[v.entry].launch(x, grid=128, group=64)
        np.testing.assert_array_equal(x, np.concatenate([np.arange(63, -1, -1), np.arange(127, 63, -1)]))
        assert fake.launches[-1].shared == 65536 and fake.function_attributes[(v.entry, 8)] == 65536
    finally:
        dev.close()

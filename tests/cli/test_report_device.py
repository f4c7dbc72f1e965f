"""iron device: every backend with its device or the reason it is absent; --probe with Iron's probe kernels."""

import json

import numpy as np
import pytest

from iron import config
from iron.cli.main import main
from iron.harness import measured, metrics, probes
from iron.runtime import BackendUnavailable


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path / "cache"))
    config.reload()
    yield tmp_path / "cache"
    monkeypatch.delenv("IRON_CACHE_DIR")
    config.reload()


class FakeCuda:
    """A CUDA device as the runtime would return it, with whatever keys its ``info`` has."""

    name, target = "cuda", "cuda"
    info = {"name": "NVIDIA H200", "arch": "sm_90", "multiprocessors": 132, "total_memory": 150_000_000_000,
            "clock_mhz": 1980, "features": {"graph_capture": True, "bf16": True, "fp8": False}}

    def default_group(self, grid):
        return (256,)


@pytest.fixture
def fake_backends(monkeypatch):
    import iron.runtime as runtime

    real = runtime.get_device

    def get_device(name):
        if name == "cuda":
            return FakeCuda()
        if name == "hip":
            raise BackendUnavailable("no ROCm runtime: libamdhip64.so not found")
        if name == "metal":
            raise RuntimeError("the driver fell over")
        if name == "vulkan":
            raise BackendUnavailable("no Vulkan loader (libvulkan.so.1)")
        return real(name)

    monkeypatch.setattr(runtime, "get_device", get_device)


def test_every_backend_is_listed_with_its_device_or_why_not(fake_backends, capsys):
    assert main(["device"]) == 0
    out = capsys.readouterr().out
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert "interp ✓ Iron interpreter (numpy)" in lines
    assert "cuda ✓ NVIDIA H200" in lines
    assert "hip ✗ no ROCm runtime: libamdhip64.so not found" in lines
    assert "metal ✗ RuntimeError: the driver fell over" in lines
    assert "vulkan ✗ no Vulkan loader (libvulkan.so.1)" in lines
    # The found CUDA device: its own keys, then the datasheet ceilings.
    for expected in ("arch sm_90", "multiprocessors 132", "total_memory 139.7 GiB", "clock_mhz 1980",
                     "features graph_capture, bf16", "peak bandwidth 4800 GB/s", "peak f32 67 TFLOP/s",
                     "peak matrix f16 / bf16 989.4 TFLOP/s / 989.4 TFLOP/s (dense)"):
        assert expected in lines, expected
    assert "toolchains" in lines and any(line.startswith("nvrtc ") for line in lines)


def test_device_json(fake_backends, capsys):
    assert main(["device", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by = {b["backend"]: b for b in doc["backends"]}
    assert set(by) == {"interp", "cuda", "vulkan", "hip", "metal"}
    assert by["cuda"]["available"] and by["cuda"]["specs"]["bandwidth_gbps"] == 4800
    assert by["cuda"]["info"]["arch"] == "sm_90"
    assert not by["hip"]["available"] and "libamdhip64" in by["hip"]["reason"]
    assert {t["name"] for t in doc["toolchains"]} == {"nvrtc", "hip", "spirv", "metal"}


def test_probe_on_the_interpreter_saves_ceilings_the_roofline_uses(private_cache, capsys):
    assert main(["device", "--probe", "--backend", "interp"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("iron device --probe · interp · Iron interpreter (numpy) · small sizes, host wall clock")
    assert "copy bandwidth" in out and "f32 FMA" in out and "matrix f16->f32" in out
    peaks = measured.peaks("Iron interpreter (numpy)")
    assert peaks["bandwidth_gbps"] > 0 and peaks["f32_gflops"] > 0 and peaks["matrix_f16_gflops"] > 0
    assert (private_cache / "probes" / "iron-interpreter-numpy.json").is_file()
    p = metrics.profile(1000.0, int(peaks["bandwidth_gbps"] * 1e9 * 1e-3 / 2), 0, "Iron interpreter (numpy)",
                        measured_peaks=peaks)
    assert p.bw_fraction == pytest.approx(0.5, rel=1e-4) and "measured" in p.peak_source  # bytes: an int


def test_probe_json_and_no_save(private_cache, capsys):
    assert main(["device", "--probe", "--backend", "interp", "--json", "--no-save"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["saved_to"] is None and doc["errors"] == {} and set(doc["probes"]) == {"copy", "fma", "mma"}
    assert doc["probes"]["mma"]["shape"] == "16x8x16"
    assert not (private_cache / "probes").exists()


def test_probe_kernels_compute_what_their_counts_claim():
    """The FLOP and byte counts are only honest if the kernels really do that work: check their results."""
    from iron.runtime import get_device

    dev = get_device("interp")
    x = np.linspace(0, 1, 64, dtype=np.float32)
    coef = np.array([0.999, 0.001], np.float32)
    out = np.zeros(64, np.float32)
    dev.launch(probes.fma_kernel.variant().compiled("interp"), [x, coef, out, 10], (64,), (64,))
    chains = np.stack([x.astype(np.float64) + k for k in range(8)])
    for _ in range(10):
        chains = chains * 0.999 + 0.001
    np.testing.assert_allclose(out, chains.sum(axis=0), rtol=1e-5)
    a = np.random.default_rng(1).random(16 * 16).astype(np.float16)
    b = np.random.default_rng(2).random(16 * 8).astype(np.float16)
    c = np.zeros(4 * probes.MMA_ACCUMULATORS * 128, np.float32)  # 128 threads = 4 subgroups of 32
    dev.launch(probes.mma_kernel.variant(M=16, N=8, K=16).compiled("interp"), [a, b, c, 3], (128,), (128,))
    tile = 3 * (a.reshape(16, 16).astype(np.float32) @ b.reshape(16, 8).astype(np.float32))
    # Each subgroup's four accumulators start at 0, 1, 2, 3 and each gains A @ B per iteration.
    expected = np.stack([tile + j for j in range(probes.MMA_ACCUMULATORS)] * 4)
    np.testing.assert_allclose(c.reshape(-1, 16, 8), expected, rtol=1e-3)


def test_probe_on_vulkan_lavapipe(tmp_path):
    pytest.importorskip("vulkan")
    from iron.runtime.vulkan import VulkanDevice, VulkanUnavailable

    try:
        dev = VulkanDevice(cache_dir=tmp_path)
    except VulkanUnavailable as e:
        if config.get("require_toolchains"):
            pytest.fail(f"no usable Vulkan here: {e}")
        pytest.skip(f"no usable Vulkan here: {e}")
    try:
        record = probes.run_probes(dev, "auto")
    finally:
        dev.close()
    assert record["errors"] == {}, record["errors"]
    assert record["size"] == ("small" if dev.info["device_type"] == "cpu" else "full")
    assert all(record[k] > 0 for k in ("bandwidth_gbps", "f32_gflops", "matrix_f16_gflops"))
    assert {p["clock"] for p in record["probes"].values()} == {"device timestamps"}
    if not dev.info["cooperative_matrices"]:
        assert record["probes"]["mma"]["matrix_unit"] == "portable fallback (no matrix unit)"


def test_probe_of_an_absent_backend_is_a_clear_error(fake_backends, capsys):
    assert main(["device", "--probe", "--backend", "hip"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("iron device: error: no ROCm runtime") and "Traceback" not in err

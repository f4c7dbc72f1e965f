"""device_specs: driver names resolve to the right datasheet entry, and every entry is sourced and sane."""

import pytest

from iron.harness import device_specs
from iron.harness.device_specs import lookup

DRIVER_NAMES = {
    # What nvidia-smi / cuDeviceGetName / Vulkan report, and the entry each must find.
    "NVIDIA H200": "NVIDIA H200",
    "NVIDIA H200 NVL": "NVIDIA H200 NVL",
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM",
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
    "NVIDIA H100 NVL": "NVIDIA H100 NVL",
    "NVIDIA A100-SXM4-40GB": "NVIDIA A100 40GB",
    "NVIDIA A100-PCIE-40GB": "NVIDIA A100 40GB",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100 80GB SXM",
    "NVIDIA A100 80GB PCIe": "NVIDIA A100 80GB PCIe",
    "NVIDIA L40S": "NVIDIA L40S",
    "NVIDIA GeForce RTX 4090": "NVIDIA GeForce RTX 4090",
    "NVIDIA GeForce RTX 5090": "NVIDIA GeForce RTX 5090",
    "AMD Instinct MI300X": "AMD Instinct MI300X",
    "AMD Instinct MI250X": "AMD Instinct MI250X",
    "Apple M1": "Apple M1",
    "Apple M1 Pro": "Apple M1 Pro",
    "Apple M1 Max": "Apple M1 Max",
    "Apple M1 Ultra": "Apple M1 Ultra",
    "Apple M2 Max": "Apple M2 Max",
    "Apple M3 Pro": "Apple M3 Pro",
    "Apple M4 Max": "Apple M4 Max",
    "Apple M4": "Apple M4",
}


@pytest.mark.parametrize("reported", sorted(DRIVER_NAMES))
def test_driver_names_find_their_entry(reported):
    spec = lookup(reported)
    assert spec is not None and spec.name == DRIVER_NAMES[reported]


@pytest.mark.parametrize("name", ["llvmpipe (LLVM 15.0.6, 256 bits)", "Iron interpreter (numpy)", "", None,
                                  "NVIDIA GeForce GTX 1080", "M1", "AMD Radeon M1 thing", "Intel(R) Arc(TM) A770"])
def test_unknown_devices_give_none(name):
    assert lookup(name) is None


def test_specific_variants_are_not_shadowed_by_their_family():
    # Every entry must be reachable by its own name: a general pattern listed first would swallow it.
    for spec in device_specs.SPECS:
        assert lookup(spec.name) is spec, spec.name


def test_every_entry_is_sourced_and_plausible():
    for spec in device_specs.SPECS:
        assert spec.source, spec.name
        assert spec.bandwidth_gbps is not None and 50 < spec.bandwidth_gbps < 10_000, spec.name
        if spec.f32_tflops is not None:
            assert 1 < spec.f32_tflops < 200, spec.name
        for dense in (spec.tensor_f16_tflops, spec.tensor_bf16_tflops):
            # Matrix units beat the vector units they sit beside.
            assert dense is None or spec.f32_tflops is None or dense > spec.f32_tflops, spec.name


def test_peak_units_and_dtype_choice():
    h200 = lookup("NVIDIA H200")
    assert h200.peak_bandwidth == 4.8e12
    assert h200.peak_flops("f32") == pytest.approx(67e12)
    assert h200.peak_flops("f16", matrix=True) == pytest.approx(989.4e12)
    assert h200.peak_flops("i32") is None
    m3 = lookup("Apple M3 Max")
    assert m3.peak_flops("f32") is None and m3.bandwidth_gbps == 400  # Apple publishes no M3 FLOPS


def test_normalize():
    assert device_specs.normalize("NVIDIA A100-SXM4-80GB") == "nvidia a100 sxm4 80gb"

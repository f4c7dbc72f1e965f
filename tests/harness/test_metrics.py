"""metrics.profile: the arithmetic of throughput and roofline fractions, and the bottleneck rule."""

import pytest

from iron.harness import measured, metrics
from iron.harness.metrics import profile

H200 = "NVIDIA H200"  # 4800 GB/s, 67 TFLOP/s f32, 989.4 TFLOP/s dense f16 matrix


def test_throughput_and_fractions():
    # 100 us to move 240 MB and do 6.7 GFLOP: 2400 GB/s (half of 4800), 67 TFLOP/s... / 1000 = 67,000 GFLOP/s.
    p = profile(100.0, 240_000_000, 6_700_000_000, H200, "f32", registers=40, occupancy=0.5, measured_peaks={})
    assert p.gbps == pytest.approx(2400.0)
    assert p.gflops == pytest.approx(67_000.0)
    assert p.bw_fraction == pytest.approx(0.5)
    assert p.flop_fraction == pytest.approx(1.0)
    assert p.intensity == pytest.approx(6.7e9 / 2.4e8)
    assert (p.registers, p.occupancy, p.bytes_moved, p.flops) == (40, 0.5, 240_000_000, 6_700_000_000)
    assert "H200" in p.peak_source


def test_dtype_and_matrix_pick_the_ceiling():
    f16 = profile(100.0, 1, 989_400_000, H200, "f16", matrix=True)
    assert f16.flop_fraction == pytest.approx(0.01)  # 9.894 TFLOP/s of 989.4
    vec = profile(100.0, 1, 989_400_000, H200, "f16")
    assert vec.flop_fraction == pytest.approx(9.894 / 133.8)


def test_unknown_device_leaves_the_roofline_blank():
    p = profile(50.0, 1_000_000, 2_000_000, "llvmpipe (LLVM 15.0.6, 256 bits)", "f32")
    assert p.gbps == pytest.approx(20.0) and p.gflops == pytest.approx(40.0) and p.intensity == 2.0
    assert p.bw_fraction is None and p.flop_fraction is None and p.bottleneck is None and p.peak_source is None


def test_no_time_gives_only_the_model():
    p = profile(None, 100, 10, H200)
    assert p.gbps is None and p.bottleneck is None and p.bytes_moved == 100


@pytest.mark.parametrize("us, nbytes, flops, verdict", [
    (3.0, 10**9, 10**12, "latency"),              # under LATENCY_US whatever the work
    (50.0, 4096, 1000, "latency"),                # work that would take nanoseconds at peak
    (100.0, 400_000_000, 100_000_000, "memory"),  # 0.25 FLOP/B, far below the ridge (~14 FLOP/B)
    (100.0, 400_000_000, None, "memory"),         # no FLOP model: a memory mover
    (100.0, 1_000_000, 6_000_000_000, "compute"),  # 6000 FLOP/B
])
def test_bottleneck_verdicts(us, nbytes, flops, verdict):
    assert profile(us, nbytes, flops, H200, "f32").bottleneck == verdict


def test_ridge_point_divides_memory_from_compute():
    ridge = metrics.ridge_point(H200, "f32")
    assert ridge == pytest.approx(67e12 / 4.8e12)
    nbytes = 10**9
    below = profile(1000.0, nbytes, int(nbytes * ridge * 0.9), H200, "f32")
    above = profile(1000.0, nbytes, int(nbytes * ridge * 1.1), H200, "f32")
    assert (below.bottleneck, above.bottleneck) == ("memory", "compute")


def test_half_precision_without_a_vector_peak_still_gets_a_verdict():
    # The MI300X data sheet gives no vector FP16 figure: %FLOP stays blank, the verdict uses the f32 peak.
    p = profile(100.0, 400_000_000, 100_000_000, "AMD Instinct MI300X", "f16")
    assert p.flop_fraction is None and p.bw_fraction is not None and p.bottleneck == "memory"


def test_measured_peaks_override_the_datasheet():
    peaks = {"bandwidth_gbps": 4000.0, "f32_gflops": 50_000.0, "created": "2025-01-01"}
    p = profile(100.0, 200_000_000, 1_000_000_000, H200, "f32", measured_peaks=peaks)
    assert p.bw_fraction == pytest.approx(2000 / 4000) and p.flop_fraction == pytest.approx(10_000 / 50_000)
    assert "measured" in p.peak_source and "2025-01-01" in p.peak_source
    # Measured bandwidth alone: FLOP/s still from the datasheet, and the source says both.
    mixed = profile(100.0, 200_000_000, 1_000_000_000, H200, "f32", measured_peaks={"bandwidth_gbps": 4000.0})
    assert mixed.flop_fraction == pytest.approx(10_000 / 67_000)
    assert "bandwidth: measured" in mixed.peak_source and "datasheet" in mixed.peak_source


def test_measured_peaks_give_an_unknown_device_a_roofline():
    p = profile(100.0, 1_000_000, 1000, "llvmpipe", "f32", measured_peaks={"bandwidth_gbps": 20.0})
    assert p.bw_fraction == pytest.approx(10.0 / 20.0) and p.peak_source.startswith("measured")


def test_saved_probe_records_round_trip(tmp_path, monkeypatch):
    from iron import config

    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    config.reload()
    try:
        assert measured.peaks("llvmpipe") is None
        path = measured.save({"device": "llvmpipe", "bandwidth_gbps": 12.5, "f32_gflops": 0.0, "created": "now"})
        assert path.parent == tmp_path / "probes"
        assert measured.peaks("llvmpipe") == {"bandwidth_gbps": 12.5, "created": "now"}  # zero is no ceiling
        path.write_text("{not json")
        assert measured.peaks("llvmpipe") is None  # corrupt reads as nothing measured
        path.write_text('{"format": "iron-probe", "version": 99, "device": "llvmpipe", "bandwidth_gbps": 1}')
        assert measured.peaks("llvmpipe") is None  # another version too
    finally:
        monkeypatch.delenv("IRON_CACHE_DIR")
        config.reload()

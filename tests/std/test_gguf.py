"""iron.std.gguf: the registered rows on interp and lavapipe, mutants, four-target compiles, the host
function against gguf's decoder (odd shapes, out=, every dtype), its errors, the non-finite policy, and
the suite's own K-quant packers."""

from pathlib import Path

import numpy as np
import pytest
from std_testing import edited_module
from std_testing import assert_mutant_caught, assert_rows_pass, mutant_rows

import iron
from iron import bf16, f16, f32
from iron.core.dtypes import numpy_dtype
from iron.std import gguf as G
from iron.std.suite import gguf as SG

QTYPES = list(G.FORMATS)


# ---------------------------------------------------------------- mutants

def mutant_module(tmp_path: Path, *edits: tuple[str, str]):
    """A copy of iron/std/gguf.py with each ``(old, new)`` edit made."""
    return edited_module(G, tmp_path, *edits)


MUTANTS = {
    # Q4_0's nibble order reversed: high nibbles taken as weights 0..15.
    "q4_0_nibble_order": ("dequant_q4_0", [("store8(out, o, d * int_f32(q & 15, 8))\n",
                                             "store8(out, o, d * int_f32(q >> 4, 8))\n"),
                                            ("store8(out, o + 16, d * int_f32(q >> 4, 8))",
                                             "store8(out, o + 16, d * int_f32(q & 15, 8))")]),
    # Q4_K's split 6-bit scales read without their top two bits (sub-blocks 4..7).
    "q4_k_scale_high_bits_dropped": ("dequant_q4_k", [("sc = (v2[s - 4] & 15) | ((v0[s - 4] >> 6) << 4)",
                                                        "sc = v2[s - 4] & 15")]),
    # Q4_K's mins of sub-blocks 4..7 take their high bits from the scale bytes, not the min bytes.
    "q4_k_min_high_bits_misread": ("dequant_q4_k", [("m = (v2[s - 4] >> 4) | ((v1[s - 4] >> 6) << 4)",
                                                      "m = (v2[s - 4] >> 4) | ((v0[s - 4] >> 6) << 4)")]),
    # Q6_K's qh bit offset off by one for the second quarter.
    "q6_k_qh_offset": ("dequant_q6_k", [("q = (qb & 15) | (((qh >> 2) & 3) << 4)",
                                         "q = (qb & 15) | (((qh >> 3) & 3) << 4)")]),
    # Q8_0's f16 scale read big-endian (helper shared by every kernel; the Q8_0 rows must catch it).
    "q8_0_scale_byte_order": ("dequant_q8_0", [("return f32(bitcast(u16(b[0]) | (u16(b[1]) << 8), f16))",
                                                "return f32(bitcast(u16(b[1]) | (u16(b[0]) << 8), f16))")]),
    # Q8_0's quants read as unsigned bytes.
    "q8_0_unsigned": ("dequant_q8_0", [("d * int_f32(q ^ 128, 128)", "d * int_f32(q, 0)")]),
    # the grid-stride loop steps by one thread too many: some units are skipped (the G = 1 rows).
    "grid_stride_skips": ("dequant_q6_k", [("    for u in range(program_id(0), units, grid_size(0)):\n"
                                            "        sb = u // 8",
                                            "    for u in range(program_id(0), units, grid_size(0) + 1):\n"
                                            "        sb = u // 8")]),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_caught(mutant, tmp_path, seed):
    kernel, edits = MUTANTS[mutant]
    module = mutant_module(tmp_path, *edits)
    assert_mutant_caught(f"std/gguf/{kernel}", getattr(module, kernel), seed)


def test_unmutated_copy_passes(tmp_path, seed):
    """The mutant machinery itself: a copy with no edit passes, so a caught mutant is caught by its edit."""
    module = mutant_module(tmp_path)
    assert_rows_pass(mutant_rows("std/gguf/dequant_q4_k", module.dequant_q4_k, seed), seed)


# ---------------------------------------------------------------- host function

def _data(rng, qtype, rows, k):
    return SG.make_data(rng, qtype, rows, k)


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("dtype", [f32, f16, bf16], ids=lambda d: d.name)
def test_dequantize_matches_gguf(qtype, dtype, seed):
    """Shapes the registry never runs: 3-D, one row of many blocks; f32 exact, f16/bf16 its rounding."""
    rng = np.random.default_rng(seed)
    block = G.block_size(qtype)
    for shape in [(2, 3, 2 * block), (1, 19 * block), (7, block)]:
        rows, k = int(np.prod(shape[:-1])), shape[-1]
        data = _data(rng, qtype, rows, k)
        got = G.dequantize(data, qtype, shape, dtype, backend="interp")
        assert got.shape == shape and got.dtype == numpy_dtype(dtype)
        want = SG.reference_dequantize(data, qtype).reshape(shape).astype(numpy_dtype(dtype))
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_dequantize_into_out_and_flat_bytes(seed):
    rng = np.random.default_rng(seed)
    data = _data(rng, "Q4_K", 3, 512)
    out = np.full((3, 512), np.nan, np.float16)
    assert G.dequantize(data.reshape(-1), "Q4_K", (3, 512), f16, out=out, backend="interp") is out
    np.testing.assert_array_equal(out, SG.reference_dequantize(data, "Q4_K").astype(np.float16))
    one = G.dequantize(data[0], "Q4_K", 512, backend="interp")  # a 1-D shape: one row
    np.testing.assert_array_equal(one, SG.reference_dequantize(data[:1], "Q4_K")[0])


def test_dequantize_on_vulkan(seed):
    from std_testing import device

    device("vulkan")
    rng = np.random.default_rng(seed)
    for qtype in QTYPES:
        data = _data(rng, qtype, 3, 2 * G.block_size(qtype))
        got = G.dequantize(data, qtype, (3, 2 * G.block_size(qtype)), backend="vulkan")
        np.testing.assert_array_equal(got, SG.reference_dequantize(data, qtype))


def test_block_geometry():
    assert [G.block_size(q) for q in QTYPES] == [32, 32, 256, 256]
    assert [G.block_bytes(q) for q in QTYPES] == [34, 18, 144, 210]
    assert G.row_bytes("Q4_K", 4096) == 16 * 144 and G.row_bytes("Q8_0", 64) == 68
    gguf = SG.gguf_quants()
    for q in QTYPES:  # the table agrees with gguf's own
        assert gguf.GGML_QUANT_SIZES[getattr(gguf.GGMLQuantizationType, q)] == (G.block_size(q), G.block_bytes(q))
    with pytest.raises(iron.LaunchError, match="whole number of 256-weight blocks"):
        G.row_bytes("Q6_K", 300)


class FakeDeviceBytes:
    """A device array seen only through __cuda_array_interface__ (the alignment check reads its address)."""

    def __init__(self, n: int, address: int):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (address, True), "version": 3}
        self.shape = (n,)


def test_bad_inputs_raise_launch_errors():
    data = np.zeros((2, 68), np.uint8)
    with pytest.raises(iron.LaunchError, match="unknown GGUF quantisation 'Q5_K'"):
        G.dequantize(data, "Q5_K", (2, 64))
    with pytest.raises(iron.LaunchError, match="K = 48 is not a positive multiple of 32"):
        G.dequantize(data, "Q8_0", (2, 48))
    with pytest.raises(iron.LaunchError, match="are 204 bytes, data has 136"):
        G.dequantize(data, "Q8_0", (3, 64))
    with pytest.raises(iron.LaunchError, match="raw bytes as uint8, got f32"):
        G.dequantize(np.zeros((2, 17), np.float32), "Q8_0", (2, 64))
    with pytest.raises(iron.LaunchError, match="dtype must be f32, f16 or bf16"):
        G.dequantize(data, "Q8_0", (2, 64), iron.i32)
    with pytest.raises(iron.LaunchError, match="dequantize: out has shape"):
        G.dequantize(data, "Q8_0", (2, 64), out=np.zeros((2, 65), np.float32))
    with pytest.raises(iron.LaunchError, match="dequantize: out has dtype .*; dequantize writes f16"):
        G.dequantize(data, "Q8_0", (2, 64), f16, out=np.zeros((2, 64), np.float32))
    with pytest.raises(iron.LaunchError, match="expected an array"):
        G.dequantize(list(range(68)), "Q8_0", (1, 64))
    with pytest.raises(iron.LaunchError, match="8-byte boundary"):
        G.check_data(FakeDeviceBytes(144, 0x10004), G.FORMATS["Q4_K"], 1, 256, "dequantize")
    G.check_data(FakeDeviceBytes(144, 0x10008), G.FORMATS["Q4_K"], 1, 256, "dequantize")
    assert G.dequantize(np.zeros(0, np.uint8), "Q4_0", (0, 32)).shape == (0, 32)


# ---------------------------------------------------------------- non-finite policy

@pytest.mark.parametrize("qtype", QTYPES)
def test_non_finite_scales_propagate_as_gguf(qtype, seed):
    """Inf and NaN scales give exactly gguf's IEEE results: NaN where a quant (or scale) is zero."""
    rng = np.random.default_rng(seed)
    block = G.block_size(qtype)
    data = _data(rng, qtype, 2, 4 * block)
    blocks = data.reshape(-1, G.block_bytes(qtype))
    fields = SG.SCALE_FIELDS[qtype]
    bad = np.array([np.inf, -np.inf, np.nan], np.float16).view(np.uint8).reshape(3, 2)
    for i, value in enumerate(bad):
        blocks[i, fields[i % len(fields)]:fields[i % len(fields)] + 2] = value
    got = G.dequantize(data, qtype, (2, 4 * block), backend="interp")
    want = SG.reference_dequantize(data, qtype)
    assert np.isnan(want).any() and np.isinf(want).any()
    np.testing.assert_array_equal(got, want)  # NaN where NaN
    assert np.isfinite(got.reshape(-1, block)[3:]).all()


# ---------------------------------------------------------------- the suite's packers

@pytest.mark.parametrize("qtype", ["Q4_K", "Q6_K"])
def test_k_quant_packers_round_trip_through_gguf(qtype, seed):
    """gguf decodes what the suite's packers write back to the weights, with the error of rounding to the
    grid: a uniform error of step / sqrt(12), step = range / 15 of 32 normals (Q4_K, about 4.1 sigma) or
    absmax / 32 of 16 (Q6_K, about 2 sigma); 25% margin.  A layout mistake gives errors of order 1."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((8, 1024)).astype(np.float32)
    w[0, :256] = np.abs(w[0, :256])
    back = SG.reference_dequantize(SG.quantize(w, qtype), qtype)
    relative_rms = np.sqrt(np.mean((back - w) ** 2) / np.mean(w ** 2))
    expected = (4.1 / 15 if qtype == "Q4_K" else 2.0 / 32) / np.sqrt(12)
    assert relative_rms < 1.25 * expected

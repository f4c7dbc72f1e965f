"""iron.std.quant_gemv: the registered rows on interp (three subgroup widths) and lavapipe, mutants,
four-target compiles, the host function on shapes the registry never runs, its errors and the
non-finite policy."""

from pathlib import Path

import numpy as np
import pytest
from std_testing import edited_module
from std_testing import assert_mutant_caught, assert_rows_pass, mutant_rows, run_entry, suite

import iron
from iron import bf16, config, f16, f32
from iron.core.dtypes import numpy_dtype
from iron.core import dtypes as D
from iron.harness.tolerance import compare, derive_tolerance
from iron.std import gguf as G
from iron.std import quant_gemv as Q
from iron.std.suite import gguf as SG
from iron.std.suite import quant_gemv as SQ

ENTRIES = suite("quant_gemv")
QTYPES = list(G.FORMATS)


@pytest.mark.parametrize("width", [8, 64])
def test_registered_rows_pass_at_other_subgroup_widths(width, seed):
    """8: three of four subgroups of a group find no row pair; 64: each subgroup loops over two pairs."""
    config.set_option("simd_width", width)
    for entry in ENTRIES:
        assert_rows_pass(run_entry(entry, "interp", seed), seed)


# ---------------------------------------------------------------- mutants

def mutant_module(tmp_path: Path, *edits: tuple[str, str]):
    """A copy of iron/std/quant_gemv.py with each ``(old, new)`` edit made."""
    return edited_module(Q, tmp_path, *edits)


MUTANTS = {
    # Q4_0's nibbles paired with the wrong half of x.
    "q4_0_nibble_order": ("gemv_q4_0", [("s = dot8(int_f32(q & 15, 8), xl, 0.0)",
                                         "s = dot8(int_f32(q & 15, 8), xh, 0.0)"),
                                        ("s = dot8(int_f32(q >> 4, 8), xh, s)",
                                         "s = dot8(int_f32(q >> 4, 8), xl, s)")]),
    # Q4_K's mins dropped for the high sub-block (a dropped term).
    "q4_k_min_dropped": ("gemv_q4_k", [("return f0 * s_lo - g0 * sxl + f1 * s_hi - g1 * sxh",
                                        "return f0 * s_lo - g0 * sxl + f1 * s_hi")]),
    # Q4_K's split scales (sub-blocks 4..7) without their top two bits.
    "q4_k_scale_high_bits_dropped": ("gemv_q4_k", [("sc0 = ((c & 15) | ((a >> 2) & 48)) if split else (a & 63)",
                                                    "sc0 = (c & 15) if split else (a & 63)")]),
    # Q4_K: byte 2's high nibble read at byte 1's place (the in-place nibble table off by one entry).
    "q4_k_nibble_place": ("gemv_q4_k", [("(0, 0xF0000, 16), (8, 0xF000, 12), (16, 0xF00, 8)",
                                         "(0, 0xF0000, 16), (0, 0xF000, 12), (16, 0xF00, 8)")]),
    # a team's third and fourth rows read from its second row's bytes.
    "q4_k_team_rows": ("gemv_q4_k", [("min(r + 2, m - 1) * stride,\n            min(r + 3, m - 1) * stride)",
                                      "min(r + 1, m - 1) * stride,\n            min(r + 1, m - 1) * stride)")]),
    # the word kernels: a block that starts 2 bytes into a word read as if it started at the word (and back).
    "words_half_swapped": ("gemv_q8_0_words", [("return hi if odd else ((lo >> 16) | (hi << 16))",
                                                "return ((lo >> 16) | (hi << 16)) if odd else hi")]),
    # Q8_0's words: bytes read unsigned (no flip of the sign bit before the in-place read).
    "q8_0_words_unsigned": ("gemv_q8_0_words", [("u = word ^ 0x80808080  # i8 + 128, unsigned",
                                                 "u = word  # i8 + 128, unsigned")]),
    # Q4_0's words: the nibbles' offset of 8 never subtracted.
    "q4_0_words_offset": ("gemv_q4_0_words", [("xl0, xh0, 0, 0.0, 0.0, 8, opaque)",
                                               "xl0, xh0, 0, 0.0, 0.0, 0, opaque)")]),
    # byte 3 read at byte 2's place.
    "byte_place": ("gemv_q8_0_words", [("(16, 0xFF, 0), (16, 0xFF00, 8))", "(16, 0xFF, 0), (16, 0xFF, 0))")]),
    # Q4_K's "halves" order: the high nibbles read against the low half's x.
    "q4_k_halves_x": ("gemv_q4_k", [("    ua = q4_k_half(a0, a1, a2, a3, x0, x1, x2, x3, True, opaque)\n",
                                     "    ua = q4_k_half(a0, a1, a2, a3, x0, x1, x2, x3, False, opaque)\n")]),
    # Q4_K's other order: the second row's scales taken from the first row's words.
    "q4_k_halves_scales": ("gemv_q4_k", [("    f0, g0, f1, g1 = q4_k_scales(hb, sb_, j)\n",
                                          "    f0, g0, f1, g1 = q4_k_scales(ha, sa, j)\n")]),
    # Q6_K's qh bit offset off by one for the third quarter.
    "q6_k_qh_offset": ("gemv_q6_k", [("q = (qa >> 4) | (((qh >> 4) & 3) << 4)",
                                      "q = (qa >> 4) | (((qh >> 5) & 3) << 4)")]),
    # Q8_0: the last piece of each row never added (a missing tail).
    "q8_0_last_piece": ("gemv_q8_0", [("for p in range(lane + w * piece_slice, nb * 4, w * sp, unroll=2):",
                                       "for p in range(lane + w * piece_slice, nb * 4 - 1, w * sp, unroll=2):")]),
    # a team's subgroups each walk every piece from their offset (the stride ignores the split).
    "q8_0_split_stride": ("gemv_q8_0", [("for p in range(lane + w * piece_slice, nb * 4, w * sp, unroll=2):",
                                         "for p in range(lane + w * piece_slice, nb * 4, w, unroll=2):")]),
    # only the team's first subgroup's sums are stored (the others' pieces dropped).
    "split_sums_dropped": ("gemv_q4_k", [("            for q in range(1, split):\n",
                                          "            for q in range(1, 1):\n")]),
    # the team's partials of the pair's two rows crossed.
    "split_rows_crossed": ("gemv_q6_k", [("acc_a = acc_a + sums[at + 2 * q]\n",
                                          "acc_a = acc_a + sums[at + 2 * q + 1]\n")]),
    # the butterfly starts one level too low: half the lanes' partials never meet.
    "butterfly_half": ("gemv_q6_k", [("    o = simd_size() // 2\n", "    o = simd_size() // 4\n")]),
    # the second row of a pair is read from the first row's bytes.
    "pair_second_row": ("gemv_q4_0", [("        rb = min(r + 1, m - 1) * stride\n        acc_a = 0.0\n"
                                       "        acc_b = 0.0\n        for p in range(lane + w * piece_slice, nb * 2,",
                                       "        rb = min(r, m - 1) * stride\n        acc_a = 0.0\n"
                                       "        acc_b = 0.0\n        for p in range(lane + w * piece_slice, nb * 2,")]),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_caught(mutant, tmp_path, seed):
    kernel, edits = MUTANTS[mutant]
    module = mutant_module(tmp_path, *edits)
    assert_mutant_caught(f"std/quant_gemv/{kernel.removeprefix('gemv_')}", getattr(module, kernel), seed)


def test_unmutated_copy_passes(tmp_path, seed):
    """The mutant machinery itself: a copy with no edit passes, so a caught mutant is caught by its edit."""
    module = mutant_module(tmp_path)
    assert_rows_pass(mutant_rows("std/quant_gemv/q4_k", module.gemv_q4_k, seed), seed)


# ---------------------------------------------------------------- host function

def check(y, data, qtype, x, m, k, backend="interp"):
    """``y`` against the suite's float64 oracle within the depth of the kernel the host ran."""
    want = SQ.oracle_of(qtype, m, k)(data, x.astype(np.float64), None, m, k, 1)
    w = 8 if backend == "vulkan" else config.get("simd_width")
    dt = D.from_numpy(x.dtype)
    sc = Q.scheme_for(data, qtype, m, k)
    verdict = compare(y, want, derive_tolerance(dt, SQ.depth(qtype, k, w, Q.split_for(m, k, qtype, sc),
                                                             sc.kernel.name)))
    assert verdict.ok, verdict.message


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("dtype", [f32, f16, bf16], ids=lambda d: d.name)
def test_quant_gemv_matches_the_oracle(qtype, dtype, seed):
    """Row counts and lengths the registry never runs: 7 rows (odd), 1 row of 23 blocks, 64 rows."""
    rng = np.random.default_rng(seed)
    block = G.block_size(qtype)
    for m, blocks in [(7, 3), (1, 23), (64, 2)]:
        k = blocks * block
        data = SG.make_data(rng, qtype, m, k)
        x = rng.standard_normal(k).astype(numpy_dtype(dtype))
        y = Q.quant_gemv(data, qtype, x, m, k, backend="interp")
        assert y.shape == (m,) and y.dtype == numpy_dtype(dtype)
        check(y, data, qtype, x, m, k)


def test_quant_gemv_out_and_vulkan(seed):
    from std_testing import device

    device("vulkan")
    rng = np.random.default_rng(seed)
    for qtype in QTYPES:
        m, k = 5, 4 * G.block_size(qtype)
        data = SG.make_data(rng, qtype, m, k)
        x = rng.standard_normal(k).astype(np.float32)
        out = np.full(m, np.nan, np.float32)
        assert Q.quant_gemv(data.reshape(-1), qtype, x, m, k, out=out, backend="vulkan") is out
        check(out, data, qtype, x, m, k, backend="vulkan")


def test_quant_gemv_equals_dequantize_then_matvec(seed):
    """The two modules agree: quant_gemv(W) == dequantize(W) @ x within the gemv's rounding."""
    rng = np.random.default_rng(seed)
    data = SG.make_data(rng, "Q4_K", 6, 768)
    x = rng.standard_normal(768).astype(np.float32)
    W = G.dequantize(data, "Q4_K", (6, 768), backend="interp").astype(np.float64)
    y = Q.quant_gemv(data, "Q4_K", x, 6, 768, backend="interp")
    np.testing.assert_allclose(y, W @ x, rtol=0, atol=1e-5 * (np.abs(W) @ np.abs(x)).max())


def test_bad_inputs_raise_launch_errors():
    data = np.zeros((2, 36), np.uint8)
    x = np.zeros(64, np.float32)
    with pytest.raises(iron.LaunchError, match="unknown GGUF quantisation 'q4_0'"):
        Q.quant_gemv(data, "q4_0", x, 2, 64)
    with pytest.raises(iron.LaunchError, match="M must be at least 0"):
        Q.quant_gemv(data, "Q4_0", x, -1, 64)
    with pytest.raises(iron.LaunchError, match="K = 40 is not a positive multiple of 32"):
        Q.quant_gemv(data, "Q4_0", np.zeros(40, np.float32), 2, 40)
    with pytest.raises(iron.LaunchError, match="are 108 bytes, data has 72"):
        Q.quant_gemv(data, "Q4_0", x, 3, 64)
    with pytest.raises(iron.LaunchError, match="expected shape \\(64,\\)"):
        Q.quant_gemv(data, "Q4_0", np.zeros(65, np.float32), 2, 64)
    with pytest.raises(iron.LaunchError, match="f32, f16 or bf16"):
        Q.quant_gemv(data, "Q4_0", np.zeros(64, np.int32), 2, 64)
    with pytest.raises(iron.LaunchError, match="quant_gemv: out has dtype f32; quant_gemv writes f16"):
        Q.quant_gemv(data, "Q4_0", x.astype(np.float16), 2, 64, out=np.zeros(2, np.float32))
    with pytest.raises(iron.LaunchError, match="raw bytes as uint8"):
        Q.quant_gemv(data.view(np.int8), "Q4_0", x, 2, 64)


def test_grid_covers_every_row_pair():
    assert Q.grid_for(1) == 256 and Q.grid_for(16) == 256 and Q.grid_for(17) == 512
    assert Q.grid_for(4096) == 256 * 256 and Q.grid_for(10 ** 7) == Q.MAX_GROUPS * 256
    # teams of 4 subgroups: 2 pairs a group; teams of 8 (a whole group): 1
    assert Q.grid_for(4, 4) == 256 and Q.grid_for(5, 4) == 512 and Q.grid_for(4096, 8) == 2048 * 256
    # Q4_K's teams of four rows: 8 teams of one subgroup take 32 rows a group
    assert Q.grid_for(32, 1, 4) == 256 and Q.grid_for(33, 1, 4) == 512 and Q.grid_for(4096, 2, 4) == 256 * 256


def test_split_gives_the_grid_its_target_subgroups():
    """The fewest subgroups per team that reach the kernel's target (TARGET_SUBGROUPS for the byte kernels),
    unless a lane would get fewer than its ``lane_pieces`` pieces of a row; always one of SPLITS."""
    for name, sc in Q.ALL_SCHEMES.items():
        qtype = SQ.QTYPE_OF[name]
        for m in (1, 4096, 11008, 2 * Q.TARGET_SUBGROUPS, 10 ** 6):
            for k in (256, 4096, 11008 // 256 * 256, 1 << 16):
                s = Q.split_for(m, k, qtype, sc)
                teams = -(-m // sc.rows)
                lane_pieces = k // G.block_size(qtype) * sc.pieces // 32
                assert s in Q.SPLITS
                assert s == 1 or lane_pieces // s >= sc.lane_pieces, (name, m, k, s)
                bigger = [b for b in Q.SPLITS if b > s]
                assert (teams * s >= sc.target or not bigger
                        or lane_pieces // bigger[0] < sc.lane_pieces), (name, m, k, s)
                assert s == 1 or teams * (s // 2) < sc.target, (name, m, k, s)
    # the Llama-2-7B decode shapes as the H200's bench chose them for the byte kernel (std/quant_gemv/*_splits)
    byte = Q.BYTE_SCHEMES["Q8_0"]
    assert [Q.split_for(m, k, "Q8_0", byte) for m, k in [(4096, 4096), (11008, 4096), (4096, 11008)]] == [4, 2, 4]
    # the word kernels: about 2048 subgroups, the splits that won on an H100 (std/quant_gemv/*_splits, 2026-12-07)
    assert [Q.split_for(m, k, "Q4_K") for m, k in [(4096, 4096), (11008, 4096), (4096, 11008)]] == [2, 1, 2]
    assert [Q.split_for(m, k, "Q8_0") for m, k in [(4096, 4096), (11008, 4096), (4096, 11008)]] == [2, 1, 2]


def test_the_host_reads_words_where_the_bytes_allow(seed):
    """Q8_0 data of whole words runs the word kernel, an odd number of blocks the byte kernel; Q4_0 always its
    byte kernel (the registered rows prove each kernel; here, the host's choice and both giving the oracle's
    answer)."""
    rng = np.random.default_rng(seed)
    for qtype in ("Q8_0", "Q4_0"):
        for m, blocks, words in [(3, 4, True), (3, 3, False), (1, 5, False), (2, 5, True)]:
            k = 32 * blocks
            data = SG.make_data(rng, qtype, m, k)
            sc = Q.scheme_for(data, qtype, m, k)
            words = words and qtype == "Q8_0"
            assert (sc.word == iron.u32) == words and sc.kernel.name.endswith("_words") == words, (qtype, m, k)
            x = rng.standard_normal(k).astype(np.float32)
            check(Q.quant_gemv(data, qtype, x, m, k, backend="interp"), data, qtype, x, m, k)


# ---------------------------------------------------------------- non-finite policy

@pytest.mark.parametrize("qtype", QTYPES)
def test_non_finite_policy(qtype, seed):
    """A non-finite scale makes its row's y non-finite and leaves the others exact; a NaN in x makes
    every y non-finite."""
    rng = np.random.default_rng(seed)
    m, k = 5, 2 * G.block_size(qtype)
    data = SG.make_data(rng, qtype, m, k)
    blocks = data.reshape(m, -1, G.block_bytes(qtype))
    fields = SG.SCALE_FIELDS[qtype]
    blocks[1, 1, fields[0]:fields[0] + 2] = np.array([np.inf], np.float16).view(np.uint8)
    blocks[3, 0, fields[-1]:fields[-1] + 2] = np.array([np.nan], np.float16).view(np.uint8)
    x = rng.standard_normal(k).astype(np.float32)
    y = Q.quant_gemv(data, qtype, x, m, k, backend="interp")
    assert not np.isfinite(y[[1, 3]]).any()
    keep = [0, 2, 4]
    check(y[keep], np.ascontiguousarray(data[keep]), qtype, x, len(keep), k)
    x[k // 3] = np.nan
    assert np.isnan(Q.quant_gemv(np.ascontiguousarray(data[keep]), qtype, x, 3, k, backend="interp")).all()


# ---------------------------------------------------------------- Q4_K's words

def test_q4_k_reads_the_same_bytes_from_numpy_and_torch(seed):
    """Q4_K's kernel reads u32 words (kernel_data): a torch uint8 tensor and a strided numpy view of the same bytes
    give the contiguous numpy array's result bit for bit."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    m, k = 6, 512
    data = SG.make_data(rng, "Q4_K", m, k)
    x = rng.standard_normal(k).astype(np.float32)
    want = Q.quant_gemv(data, "Q4_K", x, m, k, backend="interp")
    got = Q.quant_gemv(torch.from_numpy(data.copy()), "Q4_K", torch.from_numpy(x), m, k, backend="interp")
    np.testing.assert_array_equal(got.numpy(), want)
    wide = np.zeros((m, 2 * data.shape[1]), np.uint8)
    wide[:, ::2] = data  # every other byte: a strided view, read through a contiguous copy
    np.testing.assert_array_equal(Q.quant_gemv(wide[:, ::2], "Q4_K", x, m, k, backend="interp"), want)


def test_q4_k_forms_give_the_same_bits(seed):
    """"halves" computes every piece's value with the same roundings as "pieces", in another order: the same bits
    (the registered rows check both against the oracle).  The rows' 136 pieces take a split of two subgroups (64
    lanes): lanes 0-7 add three pieces, the others two."""
    rng = np.random.default_rng(seed)
    m, k = 9, 34 * 256
    data = Q.kernel_data(SG.make_data(rng, "Q4_K", m, k), Q.SCHEMES["Q4_K"])
    x = rng.standard_normal(k).astype(np.float32)
    got = []
    for order in ("pieces", "halves"):
        y = np.full(m, np.nan, np.float32)
        Q.gemv_q4_k.variant(T=iron.f32, ORDER=order).launch(data, x, y, m, k, 2, grid=(Q.GROUP,), group=(Q.GROUP,),
                                                            backend="interp")
        got.append(y)
    assert np.isfinite(got[0]).all()
    np.testing.assert_array_equal(got[0], got[1])


def test_bytes_as_keeps_a_device_arrays_memory():
    """Any other device array is read through an object exposing the same memory as words; a strided one is a
    clear error."""
    from iron.std import _host

    class Device:
        def __init__(self, strides=None):
            self.__cuda_array_interface__ = {"shape": (4, 36), "typestr": "|u1", "data": (1 << 20, True),
                                             "strides": strides, "version": 3}

    seen = _host.bytes_as(Device(), D.u32)
    face = seen.__cuda_array_interface__
    assert face["shape"] == (36,) and face["typestr"] == "<u4" and face["data"] == (1 << 20, True)
    assert face["strides"] is None
    with pytest.raises(iron.LaunchError, match="cannot read .* as u32 words: pass a contiguous"):
        _host.bytes_as(Device(strides=(72, 1)), D.u32)

"""iron.std.quant_few: the registered rows on interp and lavapipe, mutants, four-target compiles, the host
function's column window and its errors."""

import numpy as np
import pytest
from std_testing import assert_mutant_caught, assert_rows_pass, compile_for, edited_module, run_entry
from std_testing import suite

from iron import LaunchError
from iron.std import quant_few as QF
from iron.std.suite.gguf import make_data, reference_dequantize

ENTRIES = suite("quant_few")
RUNS = [pytest.param(e, b, id=f"{e.name}-{b}") for e in ENTRIES for b in ("interp", "vulkan") if e.items(b)]


@pytest.mark.parametrize("entry,backend", RUNS)
def test_registered_rows_pass(entry, backend, seed):
    assert_rows_pass(run_entry(entry, backend, seed), seed)


def test_both_formats_run_on_vulkan():
    """lavapipe runs Q8_0 (the ring, the 8-byte copies' portable form, the panel, the fragments)."""
    assert any(e.items("vulkan") for e in ENTRIES if "q8_0" in e.name)


MUTANTS = {
    # Q4_0's high nibbles stored over the low ones' weights (the wrong half of the block).
    "q4_0_nibble_half": ("std/quant_few/q4_0", [("store8(w_s, o + 16, d * int_f32(q >> 4, 8))",
                                                 "store8(w_s, o + 8, d * int_f32(q >> 4, 8))")]),
    # Q8_0's bytes read as unsigned (the sign flip of int_f32 dropped).
    "q8_0_unsigned": ("std/quant_few/q8_0", [("d * int_f32(q ^ 128, 128)", "d * int_f32(q, 0)")]),
    # the 8-byte copies' source one chunk behind (the K step's first byte off by a chunk).
    "copy_offset": ("std/quant_few/q8_0", [("off = first + (q % cps) * 8", "off = first + (q % cps) * 8 + 8")]),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_caught(name, tmp_path, seed):
    entry, edits = MUTANTS[name]
    mutant = edited_module(QF, tmp_path, *edits).quant_gemm_few
    assert_mutant_caught(entry, mutant, seed)


def _compile_params():
    """The host's binding on CUDA (both dtypes and formats); the small one (within 32 KiB) on the others, f16 (HIP and
    SPIR-V keep bf16 as bits, which fragments cannot read from shared memory), bf16 too on Metal."""
    from std_testing import TOOLCHAIN_OF

    from iron import bf16, f16

    params = []
    for target in TOOLCHAIN_OF:
        ring, lanes = (QF.QFEW_CONFIGS[0], 32) if target == "cuda" else (QF.QFEW_CONFIGS[-1], 32)
        dtypes = (bf16, f16) if target in ("cuda", "metal") else (f16,)
        for t in dtypes:
            for qt in QF.QTYPES:
                bn, bk, stages = ring
                launch = QF.quant_gemm_few.variant(T=t, QT=qt, BN=bn, BK=bk, STAGES=stages, THREADS=4 * lanes)
                params.append(pytest.param(target, launch, id=f"{target}-{t.name}-{qt}-{bn}x{bk}x{stages}"))
    return params


@pytest.mark.parametrize("target,launch", _compile_params())
def test_compiles_for_every_target(target, launch, require_toolchain):
    from std_testing import TOOLCHAIN_OF

    require_toolchain(TOOLCHAIN_OF[target])
    compile_for(target, launch)


@pytest.mark.parametrize("qtype", QF.QTYPES)
def test_host_writes_its_column_window_only(qtype):
    """quant_few writes out[:, col0 : col0 + n] of a wider output (a stacked projection's part) and nothing else."""
    import ml_dtypes

    rng = np.random.default_rng(3)
    m, n, k = 5, 24, 256
    data = make_data(rng, qtype, n, k)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    out = np.full((m, n + 11), 7.0, ml_dtypes.bfloat16)
    QF.quant_few(data, qtype, a, n, out, col0=4, backend="interp")
    w = reference_dequantize(data, qtype).reshape(n, k).astype(ml_dtypes.bfloat16).astype(np.float64)
    want = a.astype(np.float64) @ w.T
    got = out[:, 4:4 + n].astype(np.float64)
    assert np.abs(got - want).max() <= 2.0 ** -7 * np.abs(want).max()
    assert np.all(out[:, :4] == 7.0) and np.all(out[:, 4 + n:] == 7.0)


def test_bad_inputs_raise_launch_errors():
    import ml_dtypes

    rng = np.random.default_rng(0)
    data = make_data(rng, "Q8_0", 8, 64)
    a = np.zeros((2, 64), ml_dtypes.bfloat16)
    out = np.zeros((2, 8), ml_dtypes.bfloat16)
    with pytest.raises(LaunchError, match="K-quants"):
        QF.quant_few(data, "Q4_K", a, 8, out, backend="interp")
    with pytest.raises(LaunchError, match="1 <= m <= 16"):
        QF.quant_few(data, "Q8_0", np.zeros((17, 64), ml_dtypes.bfloat16), 8, np.zeros((17, 8), ml_dtypes.bfloat16),
                     backend="interp")
    with pytest.raises(LaunchError, match="f16 or bf16"):
        QF.quant_few(data, "Q8_0", np.zeros((2, 64), np.float32), 8, out, backend="interp")
    with pytest.raises(LaunchError, match="columns 4 .. 11"):
        QF.quant_few(data, "Q8_0", a, 8, out, col0=4, backend="interp")
    with pytest.raises(LaunchError, match="bytes"):
        QF.quant_few(data[:-1], "Q8_0", a, 8, out, backend="interp")
    with pytest.raises(LaunchError, match="contiguous"):
        QF.quant_few(data, "Q8_0", a, 8, np.zeros((2, 16), ml_dtypes.bfloat16)[:, ::2], backend="interp")
    wide = np.zeros((2, 72), ml_dtypes.bfloat16)
    with pytest.raises(LaunchError, match="shares memory"):
        QF.quant_few(data, "Q8_0", wide.reshape(-1)[:128].reshape(2, 64), 8, wide, col0=64, backend="interp")

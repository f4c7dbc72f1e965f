"""iron.std.gemm: the registered rows on interp and lavapipe (and the matrix kernel at subgroup widths 8
and 64), mutants, compiles for the four targets with each target's configuration, the host function
(unseen shapes, out=, K = 0, errors), the configuration choice and the non-finite policy."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from std_testing import edited_module
from std_testing import (TOOLCHAIN_OF, assert_mutant_caught, assert_rows_pass, compile_for, device, mutant_rows,
                         run_entry, suite)

import iron
from iron import bf16, config, f16
from iron.codegen.targets import profile
from iron.jit.device import DeviceTraits
from iron.core import dtypes as D
from iron.core.errors import UnsupportedOnTarget
from iron.harness.tolerance import compare, derive_tolerance
from iron.std import gemm as G
from iron.std.gemm_few import few_config, gemm_few
from iron.std.suite import gemm as GS

ENTRIES = suite("gemm")
FLOATS = [np.float32, np.float16, ml_dtypes.bfloat16]
FLOAT_IDS = ["f32", "f16", "bf16"]
TAIL = [GS._shape(33, 17, 45), GS._shape(130, 70, 96)]
RUNS = [pytest.param(e, b, id=f"{e.name}-{b}") for e in ENTRIES for b in ("interp", "vulkan") if e.items(b)]


@pytest.mark.parametrize("entry,backend", RUNS)
def test_registered_rows_pass(entry, backend, seed):
    assert_rows_pass(run_entry(entry, backend, seed), seed)


def test_every_registration_runs_somewhere_on_vulkan():
    """The fma and mma kernels both run on lavapipe (the mma one through the small portable configuration)."""
    names = {e.name for e in ENTRIES if e.items("vulkan")}
    assert {"std/gemm/fma", "std/gemm/mma"} <= names


@pytest.mark.parametrize("width", [8, 64])
def test_matrix_kernel_at_other_subgroup_widths(width, seed):
    """8: 16 subgroups in the group of 128, of which 4 own warp tiles and 12 only load and wait at the
    barriers; 64: groups of 256 threads (4 subgroups), 2 chunks of each tile per thread."""
    config.set_option("simd_width", width)
    assert_rows_pass(mutant_rows("std/gemm/mma", G.gemm_mma, seed, shapes=TAIL), seed)


# ---------------------------------------------------------------- compiles, with each target's configuration

MMA_COMPILE = [GS._flags(f16, False, True, "silu"), GS._flags(bf16, True, False, "relu")]
TARGET_CONFIGS = {"cuda": {**G.SM80_4W, "THREADS": 128}, "hip": {**G.AMD, "THREADS": 256},
                  "metal": {**G.APPLE, "THREADS": 128}, "spirv": G.portable_small(8)}


def _compile_params():
    """One FMA binding per target (a different one each), both matrix bindings everywhere.  SPIR-V's FMA and
    f16 matrix kernels compile at run time on lavapipe (test_registered_rows_pass); here only the bf16 refusal."""
    params = []
    for target in TOOLCHAIN_OF:
        fma = {"cuda": GS.FMA_BINDINGS[2:], "metal": GS.FMA_BINDINGS[:1], "hip": GS.FMA_BINDINGS[1:2], "spirv": []}[target]
        for i, flags in enumerate(fma):
            params.append(pytest.param(target, G.gemm_fma.variant(**flags), id=f"{target}-fma-{i}"))
        for i, flags in enumerate(MMA_COMPILE if target != "spirv" else MMA_COMPILE[1:]):
            params.append(pytest.param(target, G.gemm_mma.variant(**flags, **TARGET_CONFIGS[target]),
                                       id=f"{target}-mma-{i}"))
    wide = G.gemm_mma.variant(**MMA_COMPILE[0], **G.SM80_WIDE, THREADS=256)
    h200 = G.gemm_mma.variant(**MMA_COMPILE[0], **G.SM80, THREADS=128)
    deep = G.gemm_mma.variant(**MMA_COMPILE[0], **{**G.SM80_4W, "BK": 16, "STAGES": 4}, THREADS=128)
    few = [pytest.param(t, gemm_few.variant(**flags, **cfg), id=f"{t}-few-{i}")
           for t, cfg, dts in (("cuda", few_config(4096), (bf16, f16)), ("hip", FEW_SMALL, (f16,)),
                               ("metal", FEW_SMALL, (bf16, f16)), ("spirv", FEW_SMALL, (f16,)))
           for i, flags in enumerate({"T": dt, "BIAS": bias, "ACT": act} for dt in dts
                                     for bias, act in ((False, "none"), (True, "silu")))]
    return params + few + [pytest.param("cuda", wide, id="cuda-mma-wide"),
                           pytest.param("cuda", h200, id="cuda-mma-sm80"),
                           pytest.param("cuda", deep, id="cuda-mma-4-stages")]


#: gemm_few within 32 KiB of shared memory (Vulkan, Metal; HIP beside its fragments' scratch), 4 subgroups of 32.
FEW_SMALL = {"BN": 16, "BK": 64, "STAGES": 3, "THREADS": 128}


@pytest.mark.parametrize("target,launch", _compile_params())
def test_compiles(target, launch, require_toolchain):
    require_toolchain(TOOLCHAIN_OF[target])
    if target in ("spirv", "hip") and launch.binding["T"] == bf16 and launch.kernel is G.gemm_mma:
        # Both keep bf16 as bits: fragments cannot read a shared bf16 array (the host uses gemm_fma there).
        with pytest.raises(UnsupportedOnTarget, match="bf16"):
            compile_for(target, launch)
        assert G.fragment_config(_traits(target, "gfx90a" if target == "hip" else "vulkan-nvidia"), bf16) is None
    else:
        compile_for(target, launch)


def test_compiles_on_cooperative_matrices(require_toolchain):
    """The H200's Vulkan driver offers 16x8x16 f16 cooperative matrices: the SM80 configuration on them."""
    require_toolchain("spirv")
    from iron.codegen.emit import emit_kernel
    from iron.codegen.toolchains import spirv

    nvidia = profile("spirv", "vulkan-nvidia")
    binding = G.fragment_config(DeviceTraits("vulkan", 32, nvidia), f16)
    assert binding == {**G.SM80_4W, "THREADS": 128}
    kernel = G.gemm_mma.variant(**GS._flags(f16, True, True, "gelu_tanh"), **binding)
    emitted = emit_kernel(kernel.compiled("spirv"), "spirv", nvidia)
    assert "coopMatMulAdd" in emitted.source and emitted.shared_bytes <= nvidia.max_shared_bytes
    spirv.validate_spirv(spirv.compile_glsl(emitted.source).binary)


# ---------------------------------------------------------------- mutants

def mutant_module(tmp_path: Path, *edits: tuple[str, str]):
    """A copy of iron/std/gemm.py with each ``(old, new)`` edit made."""
    return edited_module(G, tmp_path, *edits)


MUTANTS = {
    # the last, partial K step is dropped.
    "fma_drops_k_tail": ("std/gemm/fma", "gemm_fma", [("ktiles = (k + FMA_BK - 1) // FMA_BK",
                                                       "ktiles = k // FMA_BK")], TAIL[:1]),
    "mma_drops_k_tail": ("std/gemm/mma", "gemm_mma", [("ktiles = (k + BK - 1) // BK", "ktiles = k // BK")],
                         TAIL[:1]),
    # the second half of each thread's rows is written 4 rows too high.
    "fma_wrong_row_offset": ("std/gemm/fma", "gemm_fma", [("row = bm + (i % 4) + ty * 4 + (i // 4) * 64",
                                                           "row = bm + (i % 4) + ty * 4 + (i // 4) * 60")],
                             [GS._shape(128, 128, 64)]),
    # the third row of fragments multiplies the second row's A tile.
    "mma_wrong_fragment_offset": ("std/gemm/mma", "gemm_mma", [("frag_a(a_s, at + 2 * fm * lda, lda, fm, fk)",
                                                                "frag_a(a_s, at + fm * lda, lda, fm, fk)")],
                                  [GS._shape(128, 128, 64)]),
    # the bias is forgotten on whole 16-byte chunks (the vector path).
    "fma_missing_bias": ("std/gemm/fma", "gemm_fma", [("y = y + f32(bias.load(col, width=4))", "y = y")],
                         [GS._shape(16, 16, 16)]),
    "mma_missing_bias": ("std/gemm/mma", "gemm_mma", [("y = y + f32(load_chunk(bias, 0, 0, col, 1, n, whole, 8))",
                                                     "y = y")],
                         [GS._shape(33, 17, 45)]),
    # the last column of a partial chunk is not stored.
    "mma_store_tail_short": ("std/gemm/mma", "gemm_mma", [("store_eight(c, row * n + col, out, whole, n - col)",
                                                           "store_eight(c, row * n + col, out, whole, n - col - 1)")],
                             [GS._shape(33, 17, 45)]),
    # the multiply reads A from the buffer being refilled, not from the step that landed.
    "mma_wrong_buffer": ("std/gemm/mma", "gemm_mma", [("a_s, b_s, (kt % STAGES) * a_stage",
                                                       "a_s, b_s, ((kt + 1) % STAGES) * a_stage")], TAIL[:1]),
    # the wait leaves the step about to be multiplied in flight (the interpreter lands copies at their wait).
    # (K and N multiples of 8: the copies are asynchronous ones)
    "mma_early_read": ("std/gemm/mma", "gemm_mma", [("copy_async_wait(STAGES - 2)", "copy_async_wait(STAGES - 1)")],
                       [GS._shape(40, 24, 136)]),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_caught(mutant, tmp_path, seed):
    name, kernel, edits, shapes = MUTANTS[mutant]
    module = mutant_module(tmp_path, *edits)
    assert_mutant_caught(name, getattr(module, kernel), seed, shapes=shapes)


def test_unmutated_copy_passes(tmp_path, seed):
    """The mutant machinery itself: an unedited copy passes, so a caught mutant is caught by its edit."""
    module = mutant_module(tmp_path)
    assert_rows_pass(mutant_rows("std/gemm/mma", module.gemm_mma, seed, shapes=TAIL[:1]), seed)


# ---------------------------------------------------------------- the host function

def check(got, a, b, bias=None, act="none", transpose_b=False) -> None:
    """``got`` against float64 act(a @ b + bias) within the depth both kernels share."""
    bb = b.T if transpose_b else b
    oracle = GS.make_oracle(False, bias is not None, act)
    n = bb.shape[1]
    want = oracle(a.astype(np.float64), np.ascontiguousarray(bb.astype(np.float64)),
                  None if bias is None else bias.astype(np.float64), None, a.shape[0], n, a.shape[1])
    dt = D.from_numpy(a.dtype)
    verdict = compare(np.asarray(got), want, derive_tolerance(dt, GS.gemm_depth(a.shape[1], bias is not None, act)))
    assert verdict.ok, verdict.message


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_host_gemm_matches_the_oracle_on_interp(dtype, seed):
    """Shapes the registry never saw, every epilogue, both layouts of B."""
    rng = np.random.default_rng(seed)
    for (m, n, k), act in (((3, 50, 19), "silu"), ((65, 9, 50), "gelu_tanh")):
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        bias = rng.standard_normal(n).astype(dtype)
        c = G.gemm(a, b, bias, act, backend="interp")
        assert c.shape == (m, n) and c.dtype == a.dtype
        check(c, a, b, bias, act)
        ct = G.gemm(a, np.ascontiguousarray(b.T), backend="interp", transpose_b=True)
        check(ct, a, b)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_one_row_is_a_matrix_vector_product(dtype, seed, launches):
    """M = 1 with no epilogue (a decode step's projection) runs gemv's kernels, both layouts of B, within
    gemm's own tolerance; with a bias or an activation it stays on gemm's kernels (one rounding after the
    epilogue)."""
    rng = np.random.default_rng(seed)
    k, n = 70, 45
    a = rng.standard_normal((1, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    for transpose_b, operand, kernel in ((False, b, "gemv_cols"), (True, np.ascontiguousarray(b.T), "gemv_rows")):
        launches.clear()
        c = G.gemm(a, operand, backend="interp", transpose_b=transpose_b)
        assert c.shape == (1, n) and c.dtype == a.dtype
        assert launches[0] == kernel, launches
        check(c, a, b)
    bias = rng.standard_normal(n).astype(dtype)
    launches.clear()
    c = G.gemm(a, b, bias, "relu", backend="interp")
    assert launches and not any(name.startswith("gemv") for name in launches), launches
    check(c, a, b, bias, "relu")


@pytest.mark.parametrize("dtype,flags", [(np.float32, (False, False, None)), (np.float16, (True, True, "relu")),
                                         (ml_dtypes.bfloat16, (False, True, "gelu_tanh"))],
                         ids=FLOAT_IDS)
def test_host_gemm_on_vulkan(dtype, flags, seed):
    """The registry's FMA specialisations (lavapipe has no matrix unit: f16/bf16 take gemm_fma there)."""
    device("vulkan")
    transpose_b, with_bias, act = flags
    rng = np.random.default_rng(seed)
    m, n, k = 37, 45, 29
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    bias = rng.standard_normal(n).astype(dtype) if with_bias else None
    c = G.gemm(a, np.ascontiguousarray(b.T) if transpose_b else b, bias, act, backend="vulkan",
               transpose_b=transpose_b)
    check(c, a, b, bias, act or "none")


def test_out_k_zero_and_empty():
    a = np.ones((4, 3), np.float32)
    b = np.full((3, 5), 2.0, np.float32)
    out = np.full((4, 5), np.nan, np.float32)
    assert G.gemm(a, b, out=out, backend="interp") is out
    assert np.array_equal(out, np.full((4, 5), 6.0, np.float32))
    bias = np.array([-1, 0, 1, 2, 3], np.float32)
    c = G.gemm(np.zeros((2, 0), np.float32), np.zeros((0, 5), np.float32), bias, "relu", backend="interp")
    assert np.array_equal(c, np.tile(np.maximum(bias, 0), (2, 1)))  # K = 0: act(bias)
    assert G.gemm(np.zeros((0, 3), np.float16), np.zeros((3, 7), np.float16), backend="interp").shape == (0, 7)


@pytest.mark.parametrize("transpose_b", [False, True])
def test_the_h200_configuration_on_interp(transpose_b, seed):
    """SM80 (K steps of 64: 8 chunks of each tile per thread, a ring of 3) with K and N tails, on the CPU."""
    rng = np.random.default_rng(seed)
    m, n, k = 130, 70, 136  # 3 K steps, the last 8 wide; a partial second row of tiles
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    binding = {**G.SM80, "THREADS": 128}
    grid, group = G.launch_geometry(m, n, 128, G.block_tile(binding))
    kern = G.gemm_mma.variant(T=f16, BT=transpose_b, BIAS=True, ACT="silu", **binding)
    kern.launch(a, np.ascontiguousarray(b.T) if transpose_b else b, bias, c, m, n, k, grid=grid, group=group,
                backend="interp")
    check(c, a, b, bias, "silu")


def test_shared_bytes_model_matches_the_kernel():
    """fragment_config decides by mma_shared_bytes: it must say what the kernel declares (and SM80's CUDA
    module holds it as dynamic shared memory, past the static 48 KiB)."""
    from iron.codegen.capabilities import shared_bytes
    from iron.codegen.emit import emit_kernel

    for cfg in (G.SM80, G.SM80_4W, G.SM80_WIDE, {**G.SM80_4W, "BK": 16, "STAGES": 4}):
        wm, wn = (int(x) for x in cfg["WARPS"].split("x"))
        for transpose_b in (False, True):
            kern = G.gemm_mma.variant(T=f16, BT=transpose_b, BIAS=True, ACT="relu", THREADS=32 * wm * wn, **cfg)
            assert shared_bytes(kern.ir) == G.mma_shared_bytes(cfg, 2, transpose_b), (cfg, transpose_b)
    emitted = emit_kernel(G.gemm_mma.variant(T=bf16, BT=False, BIAS=False, ACT="none", THREADS=128,
                                             **G.SM80).compiled("cuda"), "cuda")
    assert emitted.dynamic_shared_bytes == emitted.shared_bytes == G.mma_shared_bytes(G.SM80, 2, False) > 48 * 1024


def _traits(target, arch):
    p = profile(target, arch)
    return DeviceTraits(target, p.lane_width, p)


def test_configuration_choice():
    """Matrix units where the device has them for the dtype; the FMA kernel elsewhere."""
    assert G.fragment_config(_traits("cuda", "sm_90"), f16) == {**G.SM80, "THREADS": 128}
    assert G.fragment_config(_traits("cuda", "sm_90"), f16, True) == {**G.SM80, "THREADS": 128}
    # SM80's 110 KiB ring is more than an sm_86 may opt in to (99 KiB): the 48 KiB configuration there.
    assert G.fragment_config(_traits("cuda", "sm_86"), f16) == {**G.SM80_4W, "THREADS": 128}
    assert G.fragment_config(DeviceTraits("interp", 64, None), bf16) == {**G.SM80_4W, "THREADS": 256}
    assert G.fragment_config(_traits("metal", "apple-m2"), bf16) == {**G.APPLE, "THREADS": 128}
    assert G.fragment_config(_traits("hip", "gfx90a"), f16) == {**G.AMD, "THREADS": 256}
    assert G.fragment_config(_traits("hip", "gfx1100"), f16) == {**G.AMD, "THREADS": 128}
    assert G.fragment_config(_traits("hip", "gfx1030"), f16) is None  # no matrix unit
    assert G.fragment_config(_traits("spirv", "vulkan-lavapipe"), f16) is None
    assert G.fragment_config(_traits("spirv", "vulkan-nvidia"), f16) == {**G.SM80_4W, "THREADS": 128}
    assert G.fragment_config(_traits("spirv", "vulkan-nvidia"), bf16) is None
    assert G.block_tile({**G.SM80}) == (128, 128) and G.block_tile(G.portable_small(8)) == (32, 32)
    assert G.launch_geometry(130, 70, 128, (128, 128)) == ((128, 2), (128, 1))


def test_bad_inputs_raise_launch_errors():
    a = np.zeros((4, 8), np.float32)
    b = np.zeros((8, 5), np.float32)
    with pytest.raises(iron.LaunchError, match="f32, f16 or bf16"):
        G.gemm(a.astype(np.int32), b)
    with pytest.raises(iron.LaunchError, match="b has dtype f16, a has f32"):
        G.gemm(a, b.astype(np.float16))
    with pytest.raises(iron.LaunchError, match="2-D"):
        G.gemm(np.zeros(8, np.float32), b)
    with pytest.raises(iron.LaunchError, match=r"b must be \(8, 5\)"):
        G.gemm(a, np.zeros((7, 5), np.float32))
    with pytest.raises(iron.LaunchError, match=r"b must be \(8, 8\).*transpose_b"):
        G.gemm(a, b, transpose_b=True)
    with pytest.raises(iron.LaunchError, match=r"bias: expected shape \(5,\)"):
        G.gemm(a, b, np.zeros(4, np.float32))
    with pytest.raises(iron.LaunchError, match="bias has dtype f16"):
        G.gemm(a, b, np.zeros(5, np.float16))
    with pytest.raises(iron.LaunchError, match="activation must be None or one of relu"):
        G.gemm(a, b, activation="gelu")
    with pytest.raises(iron.LaunchError, match=r"gemm: out has shape \(\d+, \d+\); gemm writes shape \(4, 5\)"):
        G.gemm(a, b, out=np.zeros((5, 4), np.float32))
    with pytest.raises(iron.LaunchError, match="out has dtype f16"):
        G.gemm(a, b, out=np.zeros((4, 5), np.float16))
    with pytest.raises(iron.LaunchError, match="expected an array"):
        G.gemm([[1.0]], b)


# ---------------------------------------------------------------- non-finite policy

@pytest.mark.parametrize("dtype,backend", [(np.float32, "interp"), (np.float16, "interp"), (np.float32, "vulkan")],
                         ids=["fma-interp", "mma-interp", "fma-vulkan"])
def test_non_finite_policy(dtype, backend, seed):
    """NaN poisons exactly its row of A (or column of B); an Inf gives +-Inf where it meets finite
    non-zero values, NaN against a zero or an Inf of the other sign; the other outputs stay correct."""
    device(backend)
    rng = np.random.default_rng(seed)
    m, n, k = 6, 7, 40
    a = rng.uniform(0.5, 1.5, (m, k)).astype(dtype)
    b = rng.uniform(0.5, 1.5, (k, n)).astype(dtype)
    a[1, 7] = np.nan  # row 1 NaN
    b[3, 2] = np.nan  # column 2 NaN
    a[2, 5] = np.inf  # row 2: +Inf (B is positive) ...
    b[5, 4] = 0.0     # ... but NaN in column 4 (Inf * 0)
    a[3, 9], a[3, 10] = np.inf, -np.inf  # row 3: +Inf - Inf = NaN
    c = G.gemm(a, b, backend=backend).astype(np.float64)
    nan = np.zeros((m, n), bool)
    nan[1, :] = nan[:, 2] = nan[3, :] = True
    nan[2, 4] = True
    assert np.array_equal(np.isnan(c), nan)
    assert np.all(c[2, [0, 1, 3, 5, 6]] == np.inf)
    rows = [0, 4, 5]
    cols = [0, 1, 3, 4, 5, 6]
    check(c[np.ix_(rows, cols)].astype(dtype), a[rows], b[:, cols])
    if backend == "interp":  # relu keeps NaN (it is no max(x, 0), which would give 0) and +Inf
        r = G.gemm(a, b, activation="relu", backend=backend).astype(np.float64)
        assert np.array_equal(np.isnan(r), nan) and np.all(r[2, [0, 1, 3, 5, 6]] == np.inf)

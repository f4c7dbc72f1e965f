"""``mma_wg`` (warpgroup multiplies from swizzled shared tiles, docs/ir.md): its meaning on the interpreter
against numpy, its errors, its CUDA form (wgmma on sm_90a, compiled by NVRTC here) and its refusal elsewhere."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import iron
from iron import In, T, Tensor, bf16, f8e4m3, f8e5m2, f16, f32, kernel, variants
from iron.codegen.capabilities import check_kernel
from iron.codegen.emit import emit_kernel
from iron.codegen.mma import get_strategy
from iron.codegen.targets import profile
from iron.codegen.toolchains import nvrtc
from iron.core import dtypes as D
from iron.core.errors import IronCompileError, UnsupportedOnTarget
from iron.core.types import TILE_LAYOUTS, sw128_index
from iron.lang import (async_barriers, barrier, barrier_arrive, barrier_wait, copy_tile, frag_a, frag_acc, frag_store,
                       mma_wg, mma_wg_wait, select, shared, simd_group_id, static_range, sw128, sw128_8,
                       thread_id)


@iron.func
def stage_b(b_s, b, n, major):
    """B (given n-by-k for major "k", else k-by-n) into b_s as swizzled tiles, 64-column blocks 4096 apart."""
    for i in range(thread_id(0), n * 64, 128):
        if major == "k":
            b_s[sw128(i // 64, i % 64)] = b[i]
        else:
            b_s[((i % n) // 64) * 4096 + sw128(i // n, (i % n) % 64)] = b[i]


@kernel(variants(N=[64, 128, 256, 168, 24], MAJOR=["k", "n"], PENDING=[0, 1], SKEW=[0, 8]))
def probe(a: In[f16], b: In[f16], c: Tensor[f32]):
    """c (64 x N) = a (64 x 64, m-by-k) @ B; b is N x 64 (n-by-k) for MAJOR "k", 64 x N (k-by-n) for "n".

    PENDING 1 leaves the multiply running until mma_wg_wait; SKEW 8 starts the A tile off its atom.
    """
    a_s = shared(f16, 64 * 64 + 512)
    b_s = shared(f16, N * 64)
    tid = thread_id(0)
    for i in range(tid, 64 * 64, 128):
        a_s[SKEW + sw128(i // 64, i % 64)] = a[i]
    stage_b(b_s, b, N, MAJOR)
    barrier()
    acc = mma_wg(a_s, SKEW, b_s, 0, frag_acc(f32, 16, N), k=64, b_major=MAJOR, b_block=4096, pending=PENDING)
    mma_wg_wait(0)
    frag_store(c, simd_group_id() * 16 * N, N, acc)


def run_probe(n: int, major: str, pending: int = 0, skew: int = 0, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    bt = rng.standard_normal((n, 64)).astype(np.float16)  # B as n-by-k
    b = bt if major == "k" else np.ascontiguousarray(bt.T)
    c = np.full((64, n), np.nan, np.float32)
    probe.variant(N=n, MAJOR=major, PENDING=pending, SKEW=skew).launch(a, b, c, grid=(128,), group=(128,),
                                                                      backend="interp")
    return c, a.astype(np.float64) @ bt.astype(np.float64).T


@pytest.mark.parametrize("n", [64, 128, 256])
@pytest.mark.parametrize("major", ["k", "n"])
def test_interp_multiplies_each_subgroups_rows(n, major):
    """Subgroup s of the warpgroup holds rows 16 s .. of the 64 x N product, exact products summed in f64 and
    rounded once to f32 (the four 16-row stores together are the whole product)."""
    got, want = run_probe(n, major)
    np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.parametrize("n", [168, 24])
def test_widths_of_any_eight_columns_multiply(n):
    """N / 8 need not be a power of two (wgmma takes any multiple of 8): the accumulator is N / 8 copies of the
    16 x 8 layout side by side."""
    got, want = run_probe(n, "k")
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_pending_multiply_lands_at_its_wait():
    got, want = run_probe(128, "n", pending=1)
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_a_tile_off_its_atom_is_refused():
    with pytest.raises(iron.IronError, match="not on a 1024-byte swizzle atom"):
        run_probe(64, "k", skew=8)


@kernel
def reads_in_flight(a: In[f16], c: Tensor[f32]):
    """Reads the accumulator of a multiply still running (no mma_wg_wait): the interpreter gives NaN."""
    a_s = shared(f16, 64 * 64)
    for i in range(thread_id(0), 64 * 64, 128):
        a_s[i] = a[i]
    barrier()
    acc = mma_wg(a_s, 0, a_s, 0, frag_acc(f32, 16, 64), pending=1)
    frag_store(c, simd_group_id() * 16 * 64, 64, acc)


@kernel
def overwrites_in_flight(a: In[f16], c: Tensor[f32]):
    """Zeroes A while its multiply still runs: the multiply reads the zeros when it retires, as hardware may."""
    a_s = shared(f16, 64 * 64)
    for i in range(thread_id(0), 64 * 64, 128):
        a_s[i] = a[i]
    barrier()
    acc = mma_wg(a_s, 0, a_s, 0, frag_acc(f32, 16, 64), pending=1)
    barrier()
    for i in range(thread_id(0), 64 * 64, 128):
        a_s[i] = f16(0.0)
    barrier()
    mma_wg_wait(0)
    frag_store(c, simd_group_id() * 16 * 64, 64, acc)


def test_misuse_of_a_running_multiply_shows_on_the_interpreter():
    a = np.ones((64, 64), np.float16)
    c = np.zeros((64, 64), np.float32)
    reads_in_flight.launch(a, c, grid=(128,), group=(128,), backend="interp")
    assert np.isnan(c).all()
    overwrites_in_flight.launch(a, c, grid=(128,), group=(128,), backend="interp")
    assert not c.any()


def test_a_group_must_hold_whole_warpgroups():
    a = np.ones((64, 64), np.float16)
    c = np.zeros((64, 64), np.float32)
    with pytest.raises(iron.IronError, match="warpgroups of 4 subgroups"):
        reads_in_flight.launch(a, c, grid=(64,), group=(64,), backend="interp")


def test_frontend_errors_name_the_call(tmp_path):
    import importlib.util

    def compile_body(body: str):
        path = tmp_path / "user_kernel.py"
        path.write_text("from iron import *\nfrom iron.lang import *\n"
                        "@kernel\ndef k(a: In[f16], g: Tensor[f16], c: Tensor[f32]):\n"
                        "    s = shared(f16, 8192)\n"
                        f"    acc = {body}\n"
                        "    frag_store(c, 0, 64, acc)\n")
        spec = importlib.util.spec_from_file_location(f"user_kernel_{abs(hash(body))}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.k.ir()

    with pytest.raises(iron.KernelTypeError, match="shared array") as e:
        compile_body("mma_wg(g, 0, s, 0, frag_acc(f32, 16, 64))")
    assert "user_kernel.py:6" in str(e.value)
    with pytest.raises(iron.KernelTypeError, match="a multiple of 16 up to 64, got 80"):
        compile_body("mma_wg(s, 0, s, 0, frag_acc(f32, 16, 64), k=80)")
    with pytest.raises(iron.KernelTypeError, match="b_major"):
        compile_body("mma_wg(s, 0, s, 0, frag_acc(f32, 16, 64), b_major='m')")
    with pytest.raises(iron.KernelTypeError, match="needs b_block"):
        compile_body("mma_wg(s, 0, s, 0, frag_acc(f32, 16, 128), b_major='n')")
    with pytest.raises(iron.KernelTypeError, match="0 to 7"):
        compile_body("mma_wg(s, 0, s, 0, frag_acc(f32, 16, 64), pending=9)")
    with pytest.raises(iron.KernelTypeError, match="f32, 16, N"):
        compile_body("mma_wg(s, 0, s, 0, frag_acc(f16, 16, 64))")
    with pytest.raises(iron.KernelTypeError, match="waits for nothing"):
        compile_body("mma_wg(s, 0, s, 0, frag_acc(f32, 16, 64), commit=False, pending=1)")
    with pytest.raises(iron.KernelTypeError, match="commit is True or False"):
        compile_body("mma_wg(s, 0, s, 0, frag_acc(f32, 16, 64), commit=1)")


def test_sw128_matches_the_interpreters_layout():
    rows, cols = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    offsets = sw128_index(rows, cols)
    assert sorted(offsets.ravel().tolist()) == list(range(64 * 64))  # a permutation of the tile
    # each 8-element chunk stays whole, and chunk c of row r sits at chunk c ^ (r % 8)
    assert np.array_equal(offsets[:, ::8] % 64 // 8, (cols[:, ::8] // 8) ^ (rows[:, ::8] % 8))


@pytest.mark.parametrize("n", [64, 128, 256, 168, 24])
def test_the_accumulator_layout_is_the_wgmma_one(n):
    """PTX ISA, wgmma m64nNk16 D: row groupID + 8 (i >> 1 & 1), column 8 (i >> 2) + 2 (lane % 4) + (i & 1)."""
    layout = get_strategy("cuda_mma_sync_m16n8k16").fragment_layout("acc", 16, n, D.f32)
    layout.check()
    for lane in (0, 5, 31):
        for i in (0, 3, n // 2 - 1):
            want = ((lane >> 2) + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * (lane % 4) + (i & 1))
            assert layout.element(lane, i) == want


def test_cuda_emits_wgmma_of_168_columns(require_toolchain):
    kern = probe.variant(N=168, MAJOR="k", PENDING=0, SKEW=0).compiled("cuda")
    src = emit_kernel(kern, "cuda").source
    assert "wgmma.mma_async.sync.aligned.m64n168k16.f32.f16.f16" in src
    require_toolchain("nvrtc")
    assert nvrtc.compile_cuda(src, arch="sm_90a").report["spill_stores"] == 0


def test_b_stored_k_by_n_takes_whole_column_blocks():
    with pytest.raises(iron.IronError, match="multiple of 64"):
        probe.variant(N=168, MAJOR="n", PENDING=0, SKEW=0).compiled("cuda")


def test_cuda_emits_wgmma_for_sm90a(require_toolchain):
    require_toolchain("nvrtc")
    kern = probe.variant(N=128, MAJOR="n", PENDING=1, SKEW=0).compiled("cuda")
    emitted = emit_kernel(kern, "cuda")
    src = emitted.source
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in src and ", p, 1, 1, 0, 1;" in src  # trans-b
    assert "fence.proxy.async.shared::cta" in src and "__align__(1024) unsigned char iron_dynamic_shared[]" in src
    assert "wgmma.wait_group.sync.aligned 1;" in src and "wgmma.wait_group.sync.aligned 0;" in src
    assert nvrtc.arch_for_source(src, "sm_90") == "sm_90a" and nvrtc.arch_for_source("int x;", "sm_90") == "sm_90"
    report = nvrtc.compile_cuda(src, arch="sm_90a").report
    assert report["spill_stores"] == 0


@kernel(variants(T=[f16, bf16], N=[64, 128], MAJOR=["k", "n"]))
def register_a(a: In[T], b: In[T], c: Tensor[f32]):
    """c (64 x N) = a (64 x 64) @ B with A from registers: subgroup s's 16 rows as four 16 x 16 A fragments,
    each multiplied with the K slice k0 = 16 ks of the swizzled B tile (B stored n-by-k for MAJOR "k")."""
    b_s = shared(T, N * 64)
    stage_b(b_s, b, N, MAJOR)
    barrier()
    sg = simd_group_id()
    acc = frag_acc(f32, 16, N)
    for ks in static_range(4):
        fa = frag_a(a, sg * 16 * 64 + ks * 16, 64, 16, 16)
        acc = mma_wg(fa, 0, b_s, 0, acc, k=16, b_major=MAJOR, b_block=4096, k0=ks * 16, pending=1)
    mma_wg_wait(0)
    frag_store(c, sg * 16 * N, N, acc)


def register_a_case(dtype, n: int, major: str, seed: int = 0):
    """Inputs, an output full of NaN and the f64 product for :data:`register_a`."""
    host = np.float16 if dtype == f16 else ml_dtypes.bfloat16
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((64, 64)).astype(host)
    bt = rng.standard_normal((n, 64)).astype(host)  # B as n-by-k
    b = bt if major == "k" else np.ascontiguousarray(bt.T)
    return a, b, np.full((64, n), np.nan, np.float32), a.astype(np.float64) @ bt.astype(np.float64).T


@pytest.mark.parametrize("dtype", [f16, bf16], ids=["f16", "bf16"])
@pytest.mark.parametrize("n,major", [(64, "k"), (128, "n")])
def test_a_from_registers_multiplies_each_subgroups_rows(dtype, n, major):
    a, b, c, want = register_a_case(dtype, n, major)
    register_a.variant(T=dtype, N=n, MAJOR=major).launch(a, b, c, grid=(128,), group=(128,), backend="interp")
    bound = (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64) if major == "n" else
                                                     b.astype(np.float64).T)) * np.finfo(np.float32).eps * 5
    assert np.all(np.abs(c - want) <= bound)


def test_cuda_takes_a_from_the_fragments_registers(require_toolchain):
    """wgmma's register-A form, four words of the mma A layout, B's descriptor at the K slice; ptxas keeps
    it a pipeline, and the SASS multiplies read A from registers (HGMMA's second operand a register)."""
    src = emit_kernel(register_a.variant(T=bf16, N=128, MAJOR="n").compiled("cuda"), "cuda").source
    assert "{%64, %65, %66, %67}, %68, p, 1, 1, 1;" in src  # A words, B descriptor, scales, B transposed
    # K slice k0 = 16 ks of a k-by-n B: two 8-row atoms (2048 bytes) further per slice
    assert all(f" + {2048 * ks}u, 8192u, 1024u)" in src for ks in range(4))
    require_toolchain("nvrtc")
    from iron.codegen.toolchains import sass

    built = nvrtc.build(src, arch="sm_90")
    assert built.report["wgmma_serialized"] == {}
    if sass.nvdisasm() is None:
        pytest.skip(f"nvdisasm is not installed: {sass.INSTALL}")
    multiplies = [i for i in sass.instructions(sass.disassemble(built.binary)) if i.opcode.startswith("HGMMA")]
    assert len(multiplies) == 4 and all(i.operands.split(", ")[1].startswith("R") for i in multiplies)


@kernel(variants(CASE=["shape", "k", "k0"]))
def register_a_misuse(a: In[f16], c: Tensor[f32]):
    b_s = shared(f16, 64 * 64)
    acc = frag_acc(f32, 16, 64)
    if CASE == "shape":
        acc = mma_wg(frag_a(a, 0, 8, 8, 8), 0, b_s, 0, acc, k=16)  # shape
    elif CASE == "k":
        acc = mma_wg(frag_a(a, 0, 16, 16, 16), 0, b_s, 0, acc, k=32)  # k
    else:
        acc = mma_wg(frag_a(a, 0, 16, 16, 16), 0, b_s, 0, acc, k=16, k0=56)  # k0
    frag_store(c, 0, 64, acc)


@pytest.mark.parametrize("case,message,at", [
    ("shape", "takes A from registers as frag_a", "frag_a"), ("k", "multiplies one K slice: k=16", "32"),
    ("k0", "k0 is the tiles. first K column", "56")])
def test_register_a_misuse_is_located(case, message, at):
    with pytest.raises(IronCompileError, match=message) as info:
        register_a_misuse.variant(CASE=case).ir()
    with open(__file__, encoding="utf-8") as f:
        lines = f.read().splitlines()
    line = next(i for i, text in enumerate(lines, start=1) if text.endswith(f"# {case}"))
    assert (info.value.line, info.value.col) == (line, lines[line - 1].index(at))


@kernel(variants(STORED=[False, True]))
def copied_tiles(a: In[f16], b: In[f16], c: Tensor[f32]):
    """c (64 x 64) = a @ b^T with both tiles tile-copied, or B stored by the threads when STORED."""
    a_s = shared(f16, 64 * 64)
    b_s = shared(f16, 64 * 64)
    full = async_barriers(1, 1)
    tid = thread_id(0)
    if tid == 0:
        copy_tile(a_s, 0, a, (64, 64), (0, 0), (64, 64), full, 0)
        if not STORED:
            copy_tile(b_s, 0, b, (64, 64), (0, 0), (64, 64), full, 0)
        barrier_arrive(full, 0, bytes=(1 if STORED else 2) * 64 * 64 * 2)
    if STORED:
        for i in range(tid, 64 * 64, 128):
            b_s[sw128(i // 64, i % 64)] = b[i]
        barrier()
    barrier_wait(full, 0, 0)
    acc = mma_wg(a_s, 0, b_s, 0, frag_acc(f32, 16, 64), k=64, b_major="k")
    frag_store(c, simd_group_id() * 16 * 64, 64, acc)


@pytest.mark.parametrize("stored", [False, True])
def test_a_wait_fences_the_async_proxy_unless_tile_copies_alone_wrote_the_tiles(stored, require_toolchain):
    """wgmma reads through the async proxy: a store into its tile needs fence.proxy.async after the wait that
    orders it; TMA writes through that proxy, so tiles only tile-copied need none.  Both products are right."""
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((64, 64)).astype(np.float16) for _ in range(2))
    launch = copied_tiles.variant(STORED=stored)
    c = np.full((64, 64), np.nan, np.float32)
    launch.launch(a, b, c, grid=(128,), group=(128,), backend="interp")
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64).T, rtol=1e-3, atol=1e-3)
    src = emit_kernel(launch.compiled("cuda"), "cuda").source
    wait = src.index("iron_mbarrier_wait(")
    wait = src.index("iron_mbarrier_wait(", wait + 1)  # the call, after the helper's definition
    fenced = "fence.proxy.async.shared::cta" in src[wait:src.index("wgmma.mma_async", wait)]
    assert fenced == stored
    require_toolchain("nvrtc")
    assert nvrtc.compile_cuda(src, arch="sm_90a").report["spill_stores"] == 0


@pytest.mark.parametrize("target,arch", [("cuda", "sm_80"), ("hip", "gfx90a"), ("spirv", "vulkan-nvidia"),
                                         ("metal", "apple-m2")])
def test_refused_where_no_wgmma_runs(target, arch):
    kern = probe.variant(N=64, MAJOR="k", PENDING=0, SKEW=0).compiled(target)
    with pytest.raises(UnsupportedOnTarget, match="mma_wg"):
        check_kernel(kern, profile(target, arch))
    assert "wgmma" in profile("cuda", "sm_90").features and "wgmma" not in profile("cuda", "sm_80").features


def test_the_runtime_builds_warpgroup_kernels_for_the_arch_specific_variant():
    def arch(kern) -> str:
        return nvrtc.arch_for_source(emit_kernel(kern, "cuda", profile("cuda", "sm_90")).source, "sm_90")

    assert arch(probe.variant(N=64, MAJOR="k", PENDING=0, SKEW=0).compiled("cuda")) == "sm_90a"
    assert arch(reads_in_flight.variant().compiled("cuda")) == "sm_90a"

    @kernel
    def plain(x: Tensor[f32]):
        x[thread_id(0)] = 1.0

    assert arch(plain.variant().compiled("cuda")) == "sm_90"


@pytest.mark.parametrize("strategy", ["cuda_mma_sync_m16n8k16", "portable"])
def test_interp_holds_the_accumulators_per_lane(strategy):
    """With the interpreter placing fragments per lane (``interp_fragment_layout``), mma_wg scatters its result
    by the strategy's 16 x N layout (the wgmma one for CUDA's) and frag_store gathers it back."""
    iron.config.set_option("interp_fragment_layout", strategy)
    got, want = run_probe(256, "k", pending=1)
    np.testing.assert_array_equal(got, want.astype(np.float32))


@kernel(variants(BAD=["offsets", "missing"]))
def misused(a: In[f16], c: Tensor[f32]):
    """BAD "offsets": subgroup 1 of the warpgroup names another A tile; "missing": subgroup 2 skips the multiply."""
    a_s = shared(f16, 2 * 64 * 64)
    for i in range(thread_id(0), 2 * 64 * 64, 128):
        a_s[i] = a[i % 4096]
    barrier()
    acc = frag_acc(f32, 16, 64)
    if BAD == "offsets":
        acc = mma_wg(a_s, select(simd_group_id() == 1, 4096, 0), a_s, 0, acc)
    elif simd_group_id() != 2:
        acc = mma_wg(a_s, 0, a_s, 0, acc)
    frag_store(c, simd_group_id() * 16 * 64, 64, acc)


@pytest.mark.parametrize("bad,message", [("offsets", "different tile offsets"), ("missing", "all four subgroups")])
def test_a_warpgroup_must_agree(bad, message):
    a = np.ones((64, 64), np.float16)
    c = np.zeros((64, 64), np.float32)
    with pytest.raises(iron.IronError, match=message):
        misused.variant(BAD=bad).launch(a, c, grid=(128,), group=(128,), backend="interp")


# ---------------------------------------------------------------- 8-bit floats

@kernel(variants(TA=[f8e4m3, f8e5m2], TB=[f8e4m3, f8e5m2], N=[64, 256], PENDING=[0, 1]))
def probe_f8(a: In[TA], b: In[TB], c: Tensor[f32]):
    """c (64 x N) = a (64 x 128, m-by-k) @ b.T (b N x 128, n-by-k), in two multiplies of k = 64 (k0 0 and 64)
    on tiles staged byte by byte at sw128_8 offsets."""
    a_s = shared(TA, 64 * 128)
    b_s = shared(TB, N * 128)
    for i in range(thread_id(0), 64 * 128, 128):
        a_s[sw128_8(i // 128, i % 128)] = a[i]
    for i in range(thread_id(0), N * 128, 128):
        b_s[sw128_8(i // 128, i % 128)] = b[i]
    barrier()
    acc = mma_wg(a_s, 0, b_s, 0, frag_acc(f32, 16, N), k=64, pending=PENDING)
    acc = mma_wg(a_s, 0, b_s, 0, acc, k=64, k0=64, pending=PENDING)
    mma_wg_wait(0)
    frag_store(c, simd_group_id() * 16 * N, N, acc)


def _f8_inputs(ta, tb, n, rng):
    a = (rng.standard_normal((64, 128)) * 4).astype(D.numpy_dtype(ta))
    b = (rng.standard_normal((n, 128)) * 4).astype(D.numpy_dtype(tb))
    return a, b


@pytest.mark.parametrize("ta,tb", [(f8e4m3, f8e4m3), (f8e5m2, f8e5m2), (f8e4m3, f8e5m2)], ids=str)
@pytest.mark.parametrize("n,pending", [(64, 0), (256, 1)])
def test_f8_tiles_multiply_each_subgroups_rows(ta, tb, n, pending, seed):
    a, b = _f8_inputs(ta, tb, n, seed.rng())
    c = np.full((64, n), np.nan, np.float32)
    probe_f8.variant(TA=ta, TB=tb, N=n, PENDING=pending).launch(a, b, c, grid=(128,), group=(128,),
                                                                backend="interp")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = (a64[:, :64] @ b64[:, :64].T).astype(np.float32).astype(np.float64) + a64[:, 64:] @ b64[:, 64:].T
    np.testing.assert_array_equal(c, want.astype(np.float32))


def test_cuda_emits_fp8_wgmma(require_toolchain):
    kern = probe_f8.variant(TA=f8e4m3, TB=f8e5m2, N=256, PENDING=1).compiled("cuda")
    src = emit_kernel(kern, "cuda", profile("cuda", "sm_90")).source
    assert src.count("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e5m2") == 4  # two slices of 32, twice
    assert ", p, 1, 1;" in src and ", p, 1, 1, 0," not in src  # no transpose operands for 8-bit tiles
    # the four K slices of 32 bytes in each 128-byte swizzled row: descriptors 32 bytes apart
    assert set(re.findall(r"iron_wgmma_desc\(wg_a\w* \+ (\d+)u, 16u, 1024u\)", src)) == {"0", "32", "64", "96"}
    require_toolchain("nvrtc")
    report = nvrtc.compile_cuda(src, arch="sm_90a").report
    assert report["spill_stores"] == 0 and not report.get("wgmma_serialized")


@pytest.mark.parametrize("body,message", [
    ("mma_wg(s8, 0, s8, 0, frag_acc(f32, 16, 64), k=16)", "multiple of 32 up to 128"),
    ("mma_wg(s8, 0, s8, 0, frag_acc(f32, 16, 64), k=64, k0=96)", "k0 + k <= 128"),
    ('mma_wg(s8, 0, s8, 0, frag_acc(f32, 16, 64), k=32, b_major="n")', "K-major only"),
    ("mma_wg(s8, 0, s, 0, frag_acc(f32, 16, 64), k=32)", "A tile holds f8e4m3 and its B tile f16"),
])
def test_f8_misuse_is_located(body, message, user_module):
    module = user_module("k8", "from iron import kernel, f16, f32, f8e4m3, In, Tensor\n"
                               "from iron.lang import mma_wg, frag_acc, shared\n"
                               "@kernel\n"
                               "def k(x: Tensor[f32]):\n"
                               "    s8 = shared(f8e4m3, 64 * 128)\n"
                               "    s = shared(f16, 64 * 64)\n"
                               f"    acc = {body}\n")
    with pytest.raises(iron.KernelTypeError, match=re.escape(message)) as info:
        module.k.ir()
    assert "k8.py:7" in str(info.value)


def test_a_fresh_zero_accumulator_is_not_copied():
    """mma_wg on frag_acc's zeros starts from its first slice's products (scale-d 0) instead of copying zeros
    in; an accumulator carried from an earlier multiply is copied and added to (scale-d 1 throughout)."""
    fresh = emit_kernel(probe.variant(N=64, MAJOR="k", PENDING=0, SKEW=0).compiled("cuda"), "cuda").source
    assert fresh.count('"r"(0) : "memory"') == 1 and fresh.count('"r"(1) : "memory"') == 3
    block = fresh.split("// mma_wg:")[1].split("wgmma.fence")[0]
    assert not re.search(r"\w+\[\w+\] = \w+\[\w+\];", block)  # no copy into the result
    from iron.std import gemm_ws as W
    from iron.std.suite import gemm as GS

    carried = emit_kernel(W.gemm_ws.variant(**GS.WS_BINDINGS[0]).compiled("cuda"), "cuda").source
    assert '"r"(0) : "memory"' not in carried


@kernel(variants(CLOSE=[True, False]))
def grouped(a: In[f16], b: In[f16], c: Tensor[f32]):
    """c (64 x 192): a @ B's first 64 columns from one group, then a second group of two multiplies (the first
    issued with commit=False) of the second 64 and the first 64 again; after ``mma_wg_wait(1)`` the second group's
    first multiply is stored (still running: NaN on the interpreter), after ``mma_wg_wait(0)`` again.  CLOSE
    False: the second group's last multiply leaves it open too (a misuse)."""
    a_s = shared(f16, 64 * 64)
    b_s = shared(f16, 128 * 64)
    for i in range(thread_id(0), 64 * 64, 128):
        a_s[sw128(i // 64, i % 64)] = a[i]
    for i in range(thread_id(0), 128 * 64, 128):
        b_s[sw128(i // 64, i % 64)] = b[i]
    barrier()
    row = simd_group_id() * 16 * 192
    first = mma_wg(a_s, 0, b_s, 0, frag_acc(f32, 16, 64), pending=1)
    second = mma_wg(a_s, 0, b_s, 4096, frag_acc(f32, 16, 64), commit=False)
    third = mma_wg(a_s, 0, b_s, 0, frag_acc(f32, 16, 64), commit=CLOSE, pending=2 if CLOSE else 0)
    mma_wg_wait(1)
    frag_store(c, row, 192, first)
    frag_store(c, row + 64, 192, second)
    mma_wg_wait(0)
    frag_store(c, row + 128, 192, second - third)


def test_multiplies_issued_with_commit_false_retire_with_their_group() -> None:
    """pending and mma_wg_wait count groups: mma_wg_wait(1) after two groups retires the first alone, so the
    second group's multiply issued with commit=False still runs (a wait that counted multiplies would have
    retired it); a group left open by commit=False is reported at the next wait."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((128, 64)).astype(np.float16)  # B n-by-k: 128 columns as two tiles of 64
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    c = np.zeros((64, 192), np.float32)
    grouped.variant(CLOSE=True).launch(a, b, c, grid=(128,), group=(128,), backend="interp")
    assert np.allclose(c[:, :64], exact[:, :64], rtol=1e-5, atol=1e-4)
    assert np.isnan(c[:, 64:128]).all(), "the second group retired at mma_wg_wait(1)"
    assert np.allclose(c[:, 128:], exact[:, 64:] - exact[:, :64], rtol=1e-5, atol=1e-4)
    with pytest.raises(iron.IronError, match="commit=False and no mma_wg after it"):
        grouped.variant(CLOSE=False).launch(a, b, c, grid=(128,), group=(128,), backend="interp")


def test_cuda_commits_one_group_for_multiplies_issued_with_commit_false(require_toolchain) -> None:
    require_toolchain("nvrtc")
    source = emit_kernel(grouped.variant(CLOSE=True).compiled("cuda"), "cuda", profile("cuda", "sm_90")).source
    assert source.count("wgmma.mma_async") == 12 and source.count("wgmma.commit_group") == 2
    assert source.count("wgmma.wait_group.sync.aligned 1;") == 2  # the first group's mma_wg, and mma_wg_wait(1)
    nvrtc.compile_cuda(source, arch="sm_90a")

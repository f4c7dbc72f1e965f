"""The interpreter holding fragments per lane, placed by each MMA strategy's layout.

With ``fragment_layout`` set, frag_load has every lane read the elements its
registers hold, mma gathers the matrices by the layout and scatters its
result back, frag_store gathers; the arithmetic is unchanged, so every corpus
fragment kernel must give bit-identical results to the default mode under
every strategy that runs it.  A layout table that is not a bijection (an
element held twice, another by nobody) is rejected at its first use; a
permutation of lanes keeps results identical by design and is caught by the
ISA-formula checks in tests/codegen/test_mma_layouts.py instead.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from corpus import fragments as corpus_fragments
from corpus import harness
from corpus.case import Run, binding_label, randn
from iron import In, T, Tensor, bf16, config, f16, f32, kernel, variants
from iron.codegen import mma
from iron.codegen.mma import LayoutRule, TableLayout
from iron.core import dtypes as D
from iron.core.errors import InterpError, LaunchError
from iron.lang import frag_a, frag_acc, frag_b, frag_store, group_id, mma as mma_op, num_simd_groups, simd_group_id
from iron.runtime import interp

LANE_STRATEGIES = [s for s in mma.STRATEGIES.values() if s.has_lane_layout]


def _mma_combos(ir) -> set[tuple]:
    """(shape, in dtype, acc dtype) of every mma in ``ir``."""
    combos = set()
    for op in ir.walk():
        if op.opcode == "mma":
            a, _, c = (v.type for v in op.operands)
            combos.add(((a.rows, c.cols, a.cols), a.dtype, c.dtype))
    return combos


def _runs_everything(strategy: mma.MmaStrategy, ir) -> bool:
    return all(strategy.supports(*combo) for combo in _mma_combos(ir))


def _widths(strategy: mma.MmaStrategy) -> tuple[int, ...]:
    return (strategy.lane_width,) if strategy.lane_width else harness.SIMD_WIDTHS


def _outputs(case, run: Run, ir, pristine, fragment_layout) -> list[np.ndarray]:
    args = harness.fresh_args(case, pristine)
    grid, group = case.launch(run)
    interp.run(ir, harness.ir_args(ir, case, args), grid, group, simd_width=run.simd_width,
               fragment_layout=fragment_layout)
    return [args[i] for i in case.outputs]


def _assert_same_bits(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), what


# ---------------------------------------------------------------- the corpus, bit for bit

def _corpus_points():
    for case in corpus_fragments.CASES:
        for binding in case.bindings:
            for strategy in LANE_STRATEGIES:
                for width in _widths(strategy):
                    yield pytest.param(case, binding, strategy, width,
                                       id=f"{case.name}-{binding_label(binding)}-{strategy.name}-w{width}")


@pytest.mark.parametrize(("case", "binding", "strategy", "width"), list(_corpus_points()))
def test_corpus_kernels_give_identical_bits_with_every_layout(case, binding, strategy, width, seed):
    ir = harness.cached_optimized_ir(case, Run(case.sizes[0], binding, width))
    if not _runs_everything(strategy, ir):
        with pytest.raises(InterpError, match=f"fragment_layout '{strategy.name}' (cannot hold|does not run)"):
            _outputs(case, Run(case.sizes[0], binding, width), ir,
                     harness.make_inputs(case, Run(case.sizes[0], binding, width), seed.value), strategy.name)
        return
    for size in case.sizes:
        run = Run(size, binding, width)
        pristine = harness.make_inputs(case, run, seed.value)
        want = _outputs(case, run, ir, pristine, None)
        got = _outputs(case, run, ir, pristine, strategy.name)
        _assert_same_bits(got, want, f"{harness.describe(case, run, seed)} with fragment_layout={strategy.name}")


def test_every_strategy_with_a_layout_runs_some_kernel_here():
    """The corpus plus this file's 16x16x16 kernel exercise every lane layout (no vacuous passes)."""
    irs = [harness.cached_optimized_ir(c, Run(c.sizes[0], b)) for c in corpus_fragments.CASES for b in c.bindings]
    covered = {s.name for s in LANE_STRATEGIES if any(_runs_everything(s, ir) for ir in irs)}
    covered |= {s.name for s in LANE_STRATEGIES if s.supports((16, 16, 16), D.f16, D.f32)}
    assert covered == {s.name for s in LANE_STRATEGIES}


# ---------------------------------------------------------------- 16x16x16 (MFMA, WMMA, portable)

@kernel(variants(T=[f16, bf16]))
def mma_16x16x16_loop(a: In[T], bt: In[T], c: Tensor[f32], tiles: int, ksteps: int):
    """One 16x16 tile per subgroup, K = 16 * ksteps in a run-time loop (the accumulator lives in a variable)."""
    tile = group_id(0) * num_simd_groups() + simd_group_id()
    if tile < tiles:
        kdim = 16 * ksteps
        acc = frag_acc(f32, 16, 16, 0.5)
        for kk in range(ksteps):
            fa = frag_a(a, tile * 16 * kdim + kk * 16, kdim, 16, 16)
            fb = frag_b(bt, tile * 16 * kdim + kk * 16, kdim, 16, 16, layout="col")
            acc = mma_op(fa, fb, acc)
        frag_store(c, tile * 256, 16, acc)


def _run_16x16x16(dtype, rng, tiles: int = 3, ksteps: int = 2):
    kdim = 16 * ksteps
    a, bt = randn(rng, tiles * 16 * kdim, dtype), randn(rng, tiles * 16 * kdim, dtype)
    out = np.full(tiles * 256, np.nan, dtype=np.float32)
    mma_16x16x16_loop.variant(T=dtype).launch(a, bt, out, tiles, ksteps, grid=(tiles * 64,), group=(64,),
                                              backend="interp")
    return a, bt, out


@pytest.mark.parametrize("dtype", [f16, bf16], ids=str)
@pytest.mark.parametrize("strategy", [s for s in LANE_STRATEGIES if s.supports((16, 16, 16), D.f16, D.f32)],
                         ids=lambda s: s.name)
def test_16x16x16_loop_gives_identical_bits_and_the_oracles_answer(strategy, dtype, seed):
    for width in _widths(strategy):
        results = []
        for layout in (None, strategy.name):
            config.set_option("simd_width", width)
            config.set_option("interp_fragment_layout", layout)  # the launch API reads the options
            results.append(_run_16x16x16(dtype, seed.rng()))
        (a, bt, want), (_, _, got) = results
        assert got.tobytes() == want.tobytes(), f"{strategy.name} at width {width}, {seed}"
        a64 = a.astype(np.float64).reshape(3, 16, 32)
        b64 = bt.astype(np.float64).reshape(3, 16, 32).transpose(0, 2, 1)
        expect = (0.5 + a64 @ b64).reshape(-1)
        scale = (0.5 + np.abs(a64) @ np.abs(b64)).reshape(-1)
        assert np.all(np.abs(got - expect) <= 1e-6 * scale), f"{strategy.name} at width {width}, {seed}"


# ---------------------------------------------------------------- broken layouts and bad requests

def _corpus_16x8x16(binding=None):
    case = corpus_fragments.MMA_16x8x16
    run = Run(1, binding or {"T": f16, "KT": 2})
    ir = harness.cached_optimized_ir(case, run)
    return case, run, ir


def _with_table(strategy: mma.MmaStrategy, role: str, table: np.ndarray) -> mma.MmaStrategy:
    """``strategy`` with ``role``'s layout replaced by an explicit (possibly wrong) table."""
    rules = tuple(dataclasses.replace(r, layout=TableLayout.from_array(r.rows, r.cols, table)) if r.role == role
                  else r for r in strategy.layouts)
    return dataclasses.replace(strategy, name=f"{strategy.name}_mutated", layouts=rules)


def test_a_layout_that_holds_an_element_twice_is_rejected_at_first_use():
    cuda = mma.CUDA_MMA_SYNC_M16N8K16
    table = cuda.layout("b", (16, 8, 16), D.f16).to_table().copy()
    table[5, 1] = table[6, 1]  # lane 5's second register takes lane 6's element; lane 5's own has no owner
    broken = _with_table(cuda, "b", table)
    case, run, ir = _corpus_16x8x16()
    pristine = harness.make_inputs(case, run, 0)
    with pytest.raises(InterpError, match=r"'cuda_mma_sync_m16n8k16_mutated' has an invalid layout for "
                                          r"frag<b,f16,16x8>: element \(\d+, \d+\) is held [02] times") as info:
        _outputs(case, run, ir, pristine, broken)
    assert info.value.loc is not None and info.value.loc.file.endswith("fragments.py")  # the user's frag_b line


def test_a_permuted_layout_still_gives_identical_bits():
    """Placement never changes results: a lane swap is invisible here, by design (see the module docstring)."""
    cuda = mma.CUDA_MMA_SYNC_M16N8K16
    table = cuda.layout("a", (16, 8, 16), D.f16).to_table().copy()
    table[[3, 12]] = table[[12, 3]]
    case, run, ir = _corpus_16x8x16()
    pristine = harness.make_inputs(case, run, 1)
    _assert_same_bits(_outputs(case, run, ir, pristine, _with_table(cuda, "a", table)),
                      _outputs(case, run, ir, pristine, None), "lane-swapped layout")


def test_a_layout_with_the_wrong_lane_count_is_rejected():
    rule = LayoutRule("acc", 16, 8, (D.f32,), TableLayout.from_array(16, 8, np.zeros((16, 8, 2), dtype=int)))
    broken = dataclasses.replace(mma.CUDA_MMA_SYNC_M16N8K16, layouts=(rule,))
    case, run, ir = _corpus_16x8x16()
    with pytest.raises(InterpError, match="cannot hold frag<acc,f32,16x8>: this 16x8 layout spreads over 16 lanes"):
        _outputs(case, run, ir, harness.make_inputs(case, run, 0), broken)


def test_a_combo_the_strategy_does_not_run_is_a_located_error():
    case, run, ir = _corpus_16x8x16({"T": f32, "KT": 2})
    with pytest.raises(InterpError, match=r"'cuda_mma_sync_m16n8k16' cannot hold frag<a,f32,16x16>.*"
                                          r"16x8x16 f16->f32") as info:
        _outputs(case, run, ir, harness.make_inputs(case, run, 0), "cuda_mma_sync_m16n8k16")
    assert info.value.kernel == "mma_16x8x16"


@pytest.mark.parametrize(("layout", "width", "message"), [
    ("cuda_mma_sync_m16n8k16", 64, "spreads fragments over 32 lanes, but simd_width is 64; run with simd_width=32"),
    ("amd_mfma_gfx90a", 32, "over 64 lanes, but simd_width is 32"),
    ("vulkan_khr_cooperative_matrix", 32, "has no per-lane layout"),
    ("tensor_cores", 32, "unknown MMA strategy 'tensor_cores'; known: cuda_mma_sync_m16n8k16"),
])
def test_bad_fragment_layout_requests_fail_before_running(layout, width, message):
    case, run, ir = _corpus_16x8x16()
    with pytest.raises(LaunchError, match=message):
        _outputs(case, Run(run.size, run.binding, width), ir, harness.make_inputs(case, run, 0), layout)


def test_the_config_option_is_read_and_the_keyword_overrides_it():
    case, run, ir = _corpus_16x8x16()
    pristine = harness.make_inputs(case, run, 2)
    config.set_option("interp_fragment_layout", "amd_mfma_gfx90a")  # wrong width for this run: proves it is read
    with pytest.raises(LaunchError, match="amd_mfma_gfx90a"):
        _outputs(case, run, ir, pristine, None)
    default = _outputs(case, run, ir, pristine, "none")
    _assert_same_bits(_outputs(case, run, ir, pristine, "cuda_mma_sync_m16n8k16"), default, "keyword wins")
    config.set_option("interp_fragment_layout", "none")
    assert config.get("interp_fragment_layout") is None


def test_an_mma_the_strategy_does_not_run_is_an_error_even_when_each_fragment_has_a_layout():
    cuda = mma.CUDA_MMA_SYNC_M16N8K16
    f16_accumulator_only = dataclasses.replace(cuda, combos=tuple(c for c in cuda.combos if c.acc_dtype == D.f16))
    case, run, ir = _corpus_16x8x16()
    with pytest.raises(InterpError, match=r"does not run 16x8x16 f16->f32; it runs: 16x8x16 f16->f16"):
        _outputs(case, run, ir, harness.make_inputs(case, run, 0), f16_accumulator_only)

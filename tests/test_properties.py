"""Property tests over generated expression kernels (hypothesis).

Random expression programs (see ``corpus/exprgen.py``) are rendered to DSL
source, written to a temporary module and imported, so the frontend reads
real source and errors point at real lines.  Each runs on the interpreter:

(a) the optimised pipeline agrees with the unoptimised frontend IR: bit for
    bit with contraction off (specials included: NaN, infinities, signed
    zeros, extreme integers); with contraction on, within a per-element
    running-error budget (``exprgen.eval_float_bound``) for programs made of
    continuous operations, where the budget is sound to first order;
(b) integer programs agree exactly with an independent Python evaluation of
    docs/ir.md's integer semantics (wrapping, C division and remainder,
    shifts modulo the width, arithmetic/logical ``>>``), before and after
    optimisation.
"""

import hashlib
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from corpus import exprgen
from corpus.case import finfo
from corpus.harness import optimized_ir
from corpus.intmath import from_ints, to_ints
from iron.core import dtypes as D
from iron.core import print_kernel
from iron.runtime import interp

N = 37  # elements per launch: one full group of 32 and a partial one
GROUP = (32,)
FLOAT_DTYPES = (D.f32, D.f16, D.bf16)
INT_DTYPES = (D.i32, D.u32, D.i64, D.i16)
SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_MODULE_DIR = Path(tempfile.mkdtemp(prefix="iron_props_"))
_LOADED: dict[str, object] = {}


def teardown_module() -> None:
    shutil.rmtree(_MODULE_DIR, ignore_errors=True)


def load_kernel(program: exprgen.Program):
    """Import the rendered program from a real file (once per distinct source)."""
    source = exprgen.render_kernel(program, "expr_kernel")
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    if digest not in _LOADED:
        name = f"iron_prop_{digest}"
        path = _MODULE_DIR / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _LOADED[digest] = module.expr_kernel
    return _LOADED[digest]


def make_inputs(dtype: D.DType, seed: int, specials: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    npdt = D.numpy_dtype(dtype)
    out = {}
    for name in exprgen.INPUTS:
        if dtype.is_float:
            a = (rng.standard_normal(N) * rng.choice([0.5, 4.0, 40.0], N)).astype(npdt)
            pool = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-6, 65504.0], dtype=np.float64)
        else:
            lo, hi = D.min_value(dtype), D.max_value(dtype)
            wide = rng.integers(lo, hi, size=N, endpoint=True, dtype=np.int64)
            small = rng.integers(max(lo, -300), min(hi, 300), size=N, endpoint=True, dtype=np.int64)
            a = np.where(rng.random(N) < 0.5, wide, small).astype(npdt)
            pool = np.array([0, 1, 7, lo, hi, hi - 1, lo + 1], dtype=np.int64)
        if specials:
            picks = rng.random(N) < 0.2
            a[picks] = pool[rng.integers(0, pool.size, N)][picks].astype(npdt)
        out[name] = a
    return out


def launch(ir, inputs: dict[str, np.ndarray], dtype: D.DType) -> np.ndarray:
    out = np.zeros(N, dtype=D.numpy_dtype(dtype))
    interp.run(ir, [inputs["a"], inputs["b"], inputs["c"], out, N], (N,), GROUP)
    return out


def frontend(program: exprgen.Program, inputs: dict[str, np.ndarray]):
    k = load_kernel(program)
    return k.lower(inputs["a"], inputs["b"], inputs["c"], np.zeros(N, inputs["a"].dtype), N)


def bits_equal(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu":
        return x == y
    view = np.dtype(f"u{x.dtype.itemsize}")
    nan = np.isnan(x.astype(np.float64)) & np.isnan(y.astype(np.float64))
    return (x.view(view) == y.view(view)) | nan


def _explain(program: exprgen.Program, ir, mask: np.ndarray, **columns) -> str:
    rows = np.flatnonzero(mask)[:5]
    table = "\n".join("  [" + str(i) + "] " + ", ".join(f"{k}={v[i]!r}" for k, v in columns.items()) for i in rows)
    return (f"{int(mask.sum())} element(s) differ\n{exprgen.render_kernel(program, 'expr_kernel')}\n"
            f"{table}\noptimised IR:\n{print_kernel(ir)}")


@SETTINGS
@given(program=exprgen.programs(FLOAT_DTYPES + INT_DTYPES), seed=st.integers(0, 2**32 - 1))
def test_optimised_pipeline_is_bitwise_identical(program: exprgen.Program, seed: int) -> None:
    inputs = make_inputs(program.dtype, seed, specials=True)
    ir = frontend(program, inputs)
    want = launch(ir, inputs, program.dtype)
    opt = optimized_ir(ir, fp_contract=False)
    got = launch(opt, inputs, program.dtype)
    same = bits_equal(want, got)
    assert same.all(), _explain(program, opt, ~same, frontend=want, optimised=got, **inputs)


UNIT_ROUNDOFF = {"f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}


@settings(SETTINGS, max_examples=60)
@given(program=exprgen.programs(FLOAT_DTYPES, continuous=True), seed=st.integers(0, 2**32 - 1))
def test_contraction_stays_within_error_budget(program: exprgen.Program, seed: int) -> None:
    inputs = make_inputs(program.dtype, seed, specials=False)
    u = UNIT_ROUNDOFF[program.dtype.name]
    exact = {k: v.astype(np.float64) for k, v in inputs.items()}
    value, budget, peak = exprgen.eval_float_bound(program, exact, u)
    assume(peak < float(D.max_value(program.dtype)) / 64)  # no overflow anywhere in the program
    ir = frontend(program, inputs)
    unfused = launch(ir, inputs, program.dtype).astype(np.float64)
    fused_ir = optimized_ir(ir, fp_contract=True)
    fused = launch(fused_ir, inputs, program.dtype).astype(np.float64)
    # Both evaluations lie within about u * budget of the exact value; the
    # factor 3 leaves room for the remaining higher-order terms, the atol
    # for underflow.
    atol = 64 * float(finfo(program.dtype).smallest_subnormal)
    bad = np.abs(fused - unfused) > 3 * u * budget + atol
    assert not bad.any(), _explain(program, fused_ir, bad, unfused=unfused, fused=fused, exact=value,
                                   budget=budget)


@SETTINGS
@given(program=exprgen.programs(INT_DTYPES), seed=st.integers(0, 2**32 - 1))
def test_integer_programs_match_reference_semantics(program: exprgen.Program, seed: int) -> None:
    inputs = make_inputs(program.dtype, seed, specials=True)
    want = from_ints(exprgen.eval_int_program(program, {k: to_ints(v) for k, v in inputs.items()}), program.dtype)
    ir = frontend(program, inputs)
    for stage, k in (("frontend", ir), ("optimised", optimized_ir(ir))):
        got = launch(k, inputs, program.dtype)
        bad = got != want
        assert not bad.any(), stage + ": " + _explain(program, k, bad, got=got, want=want, **inputs)

"""The pass manager: contexts, targets, pass order per level, verification and dumps."""

from __future__ import annotations

import numpy as np
import pytest

from iron import config
from iron.codegen import passes as passes_pkg
from iron.codegen.passes import PASSES, Pass, get_pass
from iron.codegen.pipeline import PassContext, default_passes, pipeline_stages, run_pipeline
from iron.codegen.backends import TARGET_NAMES as TARGETS, UnknownTargetError, get_target
from iron.core import dtypes as D
from iron.core.builder import new_kernel, tensor
from iron.core.errors import IRVerificationError
from iron.core.ir import Op, clone_kernel
from iron.core.printer import print_kernel

from pass_harness import F32, assert_same_bits, count_ops, run_kernel


@pytest.fixture(autouse=True)
def _clean_config():
    config.clear_overrides()
    yield
    config.clear_overrides()


def _kernel():
    """A kernel that every stage of the pipeline has something to do for."""
    from iron.core.ir import Block, Function, Param, Value

    k, b = new_kernel("pipe", [("a", tensor(D.f32, True)), ("out", tensor(D.f32))])
    a, out = (p.value for p in k.params)
    f = Function("twice", [Param("v", Value(F32, "v"))], Block(), F32)
    with b.at(f.body):
        b.op("return", [b.op("mul", [f.params[0].value, b.const(2.0, D.f32)])])
    k.functions["twice"] = f
    pid = b.op("program_id", axis=0, hint="pid")
    base = b.op("mul", [pid, b.const(4, D.i32)])
    loop = b.for_(b.const(0, D.i32), b.const(4, D.i32), b.const(1, D.i32))
    with b.at(loop.regions[0]):
        idx = b.op("add", [base, loop.regions[0].args[0]])
        x = b.op("load", [a, idx])
        y = b.op("call", [x], callee="twice", result_type=F32)
        b.op("store", [out, idx, b.op("add", [b.op("mul", [y, x]), b.const(1.0, D.f32)])])
    return k


def test_context_defaults_and_contract_per_target():
    ctx = PassContext()
    assert (ctx.target, ctx.fp_contract, ctx.unroll_max, ctx.opt_level, ctx.verify) == ("interp", None, 64, 2, "end")
    assert {t: PassContext(target=t).contract for t in TARGETS} == {
        "interp": False, "cuda": True, "hip": True, "spirv": False, "metal": True}
    assert PassContext(target="cuda", fp_contract=False).contract is False
    assert PassContext(target="spirv", fp_contract=True).contract is True


def test_for_target_reads_unspecified_fields_from_config():
    config.set_option("unroll_max", 7)
    config.set_option("fp_contract", "off")
    config.set_option("opt_level", 1)
    ctx = PassContext.for_target("cuda")
    assert (ctx.unroll_max, ctx.fp_contract, ctx.opt_level, ctx.contract) == (7, False, 1, False)
    ctx = PassContext.for_target("cuda", unroll_max=3, fp_contract=None)
    assert (ctx.unroll_max, ctx.contract) == (3, True)


def test_bad_targets_and_fields_are_clear_errors():
    with pytest.raises(UnknownTargetError, match="unknown target 'ptx'.*cuda"):
        PassContext(target="ptx")
    with pytest.raises(UnknownTargetError):
        get_target("vulkan")
    with pytest.raises(TypeError, match="unrol_max; known: fp_contract, unroll_max"):
        PassContext.for_target("cuda", unrol_max=3)
    with pytest.raises(ValueError, match="opt_level"):
        PassContext(opt_level=5)


def test_passes_are_registered_by_name():
    assert get_pass("inline") is PASSES["inline"] and isinstance(PASSES["dce"], Pass)
    with pytest.raises(KeyError, match="known"):
        get_pass("nope")


@pytest.mark.parametrize("level, names", [
    (0, ["inline"]),
    (1, ["inline", "forward_vars", "const_fold", "simplify", "cse", "dce"]),
    (2, ["inline", "forward_vars", "const_fold", "simplify", "cse", "dce", "unroll", "forward_vars", "const_fold",
         "simplify", "cse", "vectorize", "fma_contract", "dce"]),
])
def test_default_passes_per_level(level, names):
    assert [p.name for p in default_passes(PassContext(opt_level=level))] == names


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("level", [0, 1, 2])
def test_pipeline_is_pure_verifies_and_preserves_results(target, level):
    k = _kernel()
    before = print_kernel(k)
    ctx = PassContext(target=target, opt_level=level)
    out = run_pipeline(k, ctx)
    assert print_kernel(k) == before
    assert out.functions == {} and count_ops(out, "call") == 0
    args = [np.linspace(-3, 3, 64).astype(np.float32), np.zeros(64, np.float32)]
    expected = run_kernel(k, args, 16)[1]
    got = run_kernel(out, args, 16)[1]
    if ctx.contract and level == 2:
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    else:
        assert_same_bits(expected, got, f"{target} O{level}")


def test_full_pipeline_unrolls_vectorizes_and_contracts():
    k = _kernel()
    out = run_pipeline(k, PassContext(target="cuda"))
    assert count_ops(out, "for") == 0
    assert count_ops(out, "fma") == 4
    # a and out are one buffer or disjoint (the launch-time aliasing rule), so the loads merge.
    assert count_ops(out, "vload") == 1


def test_dump_sees_every_stage_and_stages_start_with_the_frontend():
    k = _kernel()
    seen = []
    run_pipeline(k, PassContext(opt_level=1), dump=lambda name, kk: seen.append((name, print_kernel(kk))))
    assert [n for n, _ in seen] == [p.name for p in default_passes(PassContext(opt_level=1))]
    stages = pipeline_stages(k, PassContext(opt_level=1))
    assert stages[0][0] == "frontend" and stages[0][1] is k
    assert [(n, print_kernel(s)) for n, s in stages[1:]] == seen


def test_verification_failure_names_the_pass(monkeypatch):
    def broken(kernel, ctx):
        out = clone_kernel(kernel)
        out.body.ops.append(Op("break", []))  # break outside a loop
        return out
    monkeypatch.setitem(passes_pkg.PASSES, "cse", Pass("cse", broken, "broken on purpose"))
    with pytest.raises(IRVerificationError, match="after cse"):
        run_pipeline(_kernel(), PassContext(opt_level=1, verify="each"))
    # Verified once at the end (the default): still caught, with the way to name the pass.
    with pytest.raises(IRVerificationError, match="IRON_VERIFY=each names the pass"):
        run_pipeline(_kernel(), PassContext(opt_level=1, verify="end"))
    # With verification off the broken IR goes through unnoticed.
    run_pipeline(_kernel(), PassContext(opt_level=1, verify="off"))


def test_verify_modes_and_the_booleans_they_replace():
    """True meant after every pass, False never; the option reads the same words from IRON_VERIFY."""
    assert [PassContext(verify=v).verify for v in (True, False, "each", "end", "off", "EACH")] == \
        ["each", "off", "each", "end", "off", "each"]
    with pytest.raises(ValueError, match="each, end, off"):
        PassContext(verify="sometimes")
    config.set_option("verify", "1")
    assert config.get("verify") == "each" and PassContext.for_target("cuda").verify == "each"
    config.set_option("verify", "end")
    assert PassContext.for_target("cuda").verify == "end"


def test_the_end_check_runs_once_after_the_passes(monkeypatch):
    """"end" verifies once after the pipeline, "each" after each of its passes."""
    import iron.codegen.passes as P  # the one pass manager (run_passes) verifies

    calls = []
    monkeypatch.setattr(P, "verify", lambda k, stage: calls.append(stage))
    run_pipeline(_kernel(), PassContext(opt_level=2, verify="end"))
    assert len(calls) == 1
    calls.clear()
    run_pipeline(_kernel(), PassContext(opt_level=2, verify="each"))
    assert calls == [p.name for p in default_passes(PassContext(opt_level=2))]


def test_in_place_passes_leave_the_input_and_match_the_staged_pipeline():
    """run_pipeline rewrites one private copy in place; the caller's kernel is untouched and the result is the
    same IR as the pipeline that keeps every stage (a copy per pass)."""
    k = _kernel()
    before = print_kernel(k)
    ctx = PassContext(target="cuda")
    fast = run_pipeline(k, ctx)
    assert print_kernel(k) == before
    staged = pipeline_stages(k, ctx)[-1][1]
    assert print_kernel(fast) == print_kernel(staged)
    assert print_kernel(k) == before
    assert not ctx.in_place and "in_place" not in repr(ctx)


def test_targets_with_one_passes_key_get_the_same_optimised_kernel():
    """iron build shares one pipeline run between targets whose PassContext.passes_key agrees: the passes may
    read the target only through it (a pass that reads ctx.target fails here)."""
    from corpus import CASES
    from corpus.case import Run
    from corpus.harness import fresh_args, frontend_ir, make_inputs

    for case in CASES[::7]:
        run = Run(case.sizes[0], case.bindings[0])
        ir = frontend_ir(case, run, fresh_args(case, make_inputs(case, run, 0)))
        by_key: dict = {}
        for target in TARGETS:
            ctx = PassContext.for_target(target)
            text = print_kernel(run_pipeline(ir, ctx))
            assert by_key.setdefault(ctx.passes_key, text) == text, (case.name, target)
        assert len(by_key) == 2  # contracting (cuda, hip, metal) and not (interp, spirv)

"""The printed IR of eight corpus kernels, before and after the pipeline, against tests/golden/.

A change to the frontend, a pass or the printer that alters these texts must
be a deliberate one: review the diff, then regenerate the files with

    IRON_UPDATE_GOLDEN=1 PYTHONPATH=src python3 -m pytest tests/test_golden_ir.py

(the variable is read here only, by this test).  The optimised texts are
taken with contraction off, so they do not depend on the configuration.
"""

import ast
import difflib
import inspect
import os
import re
import textwrap
from pathlib import Path

import pytest

from corpus import Run, case_named, harness
from iron.core import dtypes as D
from iron.core import print_kernel

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("IRON_UPDATE_GOLDEN") == "1"

#: golden name -> (corpus case, variant binding)
KERNELS = {
    "iron_exp_f32": ("iron_exp", {"T": D.f32}),
    "shared_tree_reduction_f32": ("shared_tree_reduction", {"T": D.f32, "BLOCK": 128}),
    "simd_sum_atomic_f32": ("simd_sum_atomic_partials", {"T": D.f32}),
    "unroll_hint_dot_f32": ("unroll_hint_dot", {"T": D.f32}),
    "mergeable_loads_f32": ("mergeable_loads", {"T": D.f32}),
    "mma_16x8x16_f16": ("mma_16x8x16", {"T": D.f16, "KT": 2}),
    "func_helpers_f32": ("func_helpers", {"T": D.f32}),
    "variants_f16_block128": ("variants_t_x_block", {"T": D.f16, "BLOCK": 128}),
}


def _texts(name: str) -> dict[str, str]:
    case_name, binding = KERNELS[name]
    case = case_named(case_name)
    run = Run(case.sizes[0], binding)
    ir = harness.frontend_ir(case, run, harness.fresh_args(case, harness.make_inputs(case, run, 0)))
    return {"frontend": print_kernel(ir), "optimized": print_kernel(harness.optimized_ir(ir, fp_contract=False))}


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("stage", ["frontend", "optimized"])
def test_ir_matches_golden(name: str, stage: str) -> None:
    text = _texts(name)[stage]
    path = GOLDEN_DIR / f"{name}.{stage}.ir"
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} is missing: generate it with IRON_UPDATE_GOLDEN=1"
    want = path.read_text()
    if text != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), str(path), "now"))
        pytest.fail(f"IR of {name} ({stage}) changed; if intended, regenerate with IRON_UPDATE_GOLDEN=1\n{diff}")


_OP_LINE = re.compile(r"^\s+(%[\w.]+ = [a-z_0-9]+\b|[a-z_]+\b)")


def _assigned_names(fn) -> set[str]:
    """The local variable names a kernel's source assigns."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_golden_texts_are_readable(name: str) -> None:
    """One op per line, values named after the user's variables: goldens a person can review."""
    case = case_named(KERNELS[name][0])
    user_names = _assigned_names(case.kernel.fn)
    for stage in ("frontend", "optimized"):
        text = (GOLDEN_DIR / f"{name}.{stage}.ir").read_text()
        lines = text.splitlines()
        assert lines[0].startswith("kernel @"), lines[0]
        assert "<undefined" not in text
        for line in lines[1:]:
            if line.strip() in ("}", "} else {") or line.startswith(("kernel @", "func @", "}")):
                continue
            assert _OP_LINE.match(line), f"{name}.{stage}: not one op per line: {line!r}"
        named = {n for n in user_names if re.search(rf"%{re.escape(n)}(\.\d+)? = ", text)}
        assert named, f"{name}.{stage}: no value carries a user's variable name ({sorted(user_names)})"

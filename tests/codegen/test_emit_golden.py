"""The emitted source of nine corpus kernels for every target, against tests/codegen/golden/.

A change to an emitter that alters these files must be deliberate: review
the diff, then regenerate with

    IRON_UPDATE_GOLDEN=1 PYTHONPATH=src python3 -m pytest tests/codegen/test_emit_golden.py

(the variable is read here only, by this test).
"""

import difflib
import os
import re
from pathlib import Path

import pytest
from emit_testing import TARGETS, optimized

from iron.codegen.emit import emit_kernel
from iron.core import dtypes as D

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("IRON_UPDATE_GOLDEN") == "1"
EXTENSION = {"cuda": "cu", "hip": "hip", "spirv": "comp", "metal": "metal"}

#: golden name -> (corpus case, variant binding): elementwise math, bf16 and f16 storage,
#: shared memory and barriers, subgroups, vectors, atomics, loops and math helpers.
KERNELS = {
    "iron_exp_f32": ("iron_exp", {"T": D.f32}),
    "iron_exp_bf16": ("iron_exp", {"T": D.bf16}),
    "saxpy_fma_f16": ("saxpy_fma", {"T": D.f16}),
    "shared_tree_reduction_f32": ("shared_tree_reduction", {"T": D.f32, "BLOCK": 128}),
    "simd_sum_atomic_f32": ("simd_sum_atomic_partials", {"T": D.f32}),
    "shuffle_up_scan_i32": ("shuffle_up_scan", {"T": D.i32}),
    "mergeable_loads_f32": ("mergeable_loads", {"T": D.f32}),
    "atomic_max_min_f32": ("atomic_max_min", {"T": D.f32}),
    "transcendentals_f32": ("transcendentals", {"T": D.f32}),
}


def _source(name: str, target: str) -> str:
    case_name, binding = KERNELS[name]
    return emit_kernel(optimized(case_name, binding, target), target).source


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_emitted_source_matches_golden(name: str, target: str) -> None:
    text = _source(name, target)
    path = GOLDEN_DIR / f"{name}.{EXTENSION[target]}"
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} is missing: generate it with IRON_UPDATE_GOLDEN=1"
    want = path.read_text()
    if text != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), str(path), "now"))
        pytest.fail(f"{target} source of {name} changed; if intended, regenerate with IRON_UPDATE_GOLDEN=1\n{diff}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_emitted_source_is_readable(name: str, target: str) -> None:
    """One statement per line, even indentation, balanced braces, the user's names kept."""
    text = (GOLDEN_DIR / f"{name}.{EXTENSION[target]}").read_text()
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#") or not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        assert indent % 2 == 0, f"line {number} is indented by {indent} spaces: {line!r}"
        code = re.sub(r'"[^"]*"', '""', re.sub(r"//.*", "", line))  # a PTX string's ';' ends no C statement
        one_declaration = code.lstrip().startswith(("for (", "layout("))  # `for (;;)`, a GLSL buffer block
        assert code.count(";") <= 1 or one_declaration, f"line {number} holds two statements"
        assert len(line) <= 130, f"line {number} is {len(line)} characters long"
        depth += code.count("{") - code.count("}")
        assert depth >= 0, f"line {number} closes a brace that was never opened"
    assert depth == 0, "unbalanced braces"
    # The kernels name their values: those names survive into the source.
    expected = {"iron_exp": ["idx"], "shared_tree_reduction": ["buf", "partial"], "simd_sum_atomic_partials": ["s"],
                "atomic_max_min": ["v"], "shuffle_up_scan": ["lane"]}.get(KERNELS[name][0], [])
    for user_name in expected:
        assert re.search(rf"\b{user_name}\b", text), f"the user's name {user_name!r} is missing"

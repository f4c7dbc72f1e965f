"""Every corpus kernel, at each variant binding and size, on the Vulkan device vs its oracle.

The kernels go through the spirv pipeline, the GLSL emitter and glslc, then
run under the validation layer; subgroup kernels run at the device's own
subgroup width (8 on lavapipe), which the oracles take into account.  An op
the emitter does not support yet skips with the emitter's located message;
``KNOWN_GAPS`` lists the cases known to disagree, as non-strict xfails (the
small sizes may miss the inputs that show the difference).
"""

from __future__ import annotations

import pytest
from corpus import CASES, CorpusCase, Run, binding_label, harness
from vulkan_shaders import missing

#: (case, binding label) -> why it disagrees today.
KNOWN_GAPS = {
}


def _matrix():
    for case in CASES:
        for binding in case.bindings:
            for size in case.sizes:
                gap = KNOWN_GAPS.get((case.name, binding_label(binding)))
                marks = [pytest.mark.xfail(reason=gap, strict=False)] if gap else []
                yield pytest.param(case, binding, size, id=f"{case.name}-{binding_label(binding)}-n{size}",
                                   marks=marks)


@pytest.mark.parametrize(("case", "binding", "size"), list(_matrix()))
def test_matches_oracle_on_vulkan(device, case: CorpusCase, binding, size: int, seed) -> None:
    try:
        from iron.codegen.emit import emit_kernel  # noqa: F401
    except ImportError as e:
        missing(f"the GLSL emitter is not in this build of Iron yet ({e})")
    run = Run(size, binding, device.info["subgroup_size"] if case.subgroup else 32)
    pristine = harness.make_inputs(case, run, seed.value)
    args = harness.fresh_args(case, pristine)
    ir = harness.optimized_ir(harness.frontend_ir(case, run, args), "spirv")
    grid, group = case.launch(run)
    device.launch(ir, harness.ir_args(ir, case, args), grid, group)
    problems = harness.verdict(case, run, pristine, args)
    assert not problems, harness.describe(case, run, seed) + "\n  " + "\n  ".join(problems)

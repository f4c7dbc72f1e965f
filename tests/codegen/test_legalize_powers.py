"""GLSL's pow(x, c) for c in 2, 3, 4 becomes products (Vulkan's pow may be ~2e-6 off for x**3)."""

import numpy as np
import pytest

from iron import In, Tensor, f32, kernel
from iron.codegen.emit import emit_kernel
from iron.codegen.legalize import small_int_powers
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.lang import pow as ipow
from iron.lang import program_id
from iron.runtime.interp import run


@kernel
def powers(x: In[f32], out: Tensor[f32]):
    i = program_id(0)
    v = x[i]
    out[4 * i] = v ** 2
    out[4 * i + 1] = v ** 3
    out[4 * i + 2] = ipow(v, 4.0)
    out[4 * i + 3] = ipow(v, 2.5)


def _ops(k, name):
    return sum(op.opcode == name for op in k.walk())


def test_only_small_integer_exponents_become_products():
    ir = run_pipeline(powers.ir(), PassContext.for_target("spirv"))
    assert _ops(ir, "pow") == 3, "the frontend already writes v ** 2 as v * v"
    out = small_int_powers(ir)
    assert _ops(out, "pow") == 1, "pow(v, 2.5) stays"
    assert emit_kernel(ir, "spirv").source.count("iron_pow(") == 2, "one call and the helper's definition"
    cuda = emit_kernel(run_pipeline(powers.ir(), PassContext.for_target("cuda")), "cuda").source
    assert cuda.count("powf(") == 3, "targets with an accurate pow keep it"


@pytest.mark.parametrize("values", [
    [0.0, -0.0, np.inf, -np.inf, np.nan, -2.0, 1.0, -1.0],
    [1e-13, -3e-13, 1e13, -7e9, 3.4e38, 1.5e-45, 0.1, 123.456],
])
def test_products_agree_with_c_pow(values):
    x = np.array(values, np.float32)
    ir = run_pipeline(powers.ir(), PassContext.for_target("spirv"))
    out = np.full(4 * x.size, np.nan, np.float32)
    run(small_int_powers(ir), [x, out], (x.size,), (x.size,))
    got = out.reshape(-1, 4)
    for col, c in enumerate((2, 3, 4)):
        want = np.power(x.astype(np.float64), c).astype(np.float32)
        same = (got[:, col] == want) & (np.signbit(got[:, col]) == np.signbit(want))
        close = np.isclose(got[:, col], want, rtol=3e-7, atol=0) | (np.isnan(got[:, col]) & np.isnan(want))
        assert np.all(same | close), (c, x[~(same | close)], got[~(same | close), col], want[~(same | close)])

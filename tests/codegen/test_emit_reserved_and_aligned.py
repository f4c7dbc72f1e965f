"""Emitter corners the standard library met: a scalar parameter named like a target's reserved word
(`short`, `sample`), a vectorised shared array (`alignas`), a short-circuit temporary, casts between f16
and bf16 (Metal has no direct one), on every target's real compiler; and on the Vulkan device the
renamed parameter's value must still arrive."""

import numpy as np
import pytest

from iron import In, Tensor, bf16, f16, f32, func, kernel
from iron.codegen.emit import emit_kernel
from iron.codegen.backends import EMITTING
from iron.codegen.toolchains import check_source

TOOLCHAIN_OF_TARGET = {b.target: b.toolchain for b in EMITTING}
from iron.lang import barrier, program_id, shared, static_range, thread_id



@kernel
def reserved_names(a: In[f32], out: Tensor[f32], short: bool, sample: f32, n: int):
    i = program_id(0)
    if i < n:
        out[i] = a[i] * sample if short else a[i]


@kernel
def aligned_shared(a: In[f32], out: Tensor[f32]):
    buf = shared(f32, 256)
    t = thread_id(0)
    for j in static_range(4):  # four adjacent stores: the vectoriser makes one 16-byte store
        buf[4 * t + j] = a[4 * t + j]
    barrier()
    for j in static_range(4):
        out[4 * t + j] = buf[(4 * t + j + 4) % 256] + 1.0


@pytest.mark.parametrize("target", list(TOOLCHAIN_OF_TARGET))
@pytest.mark.parametrize("k", [reserved_names, aligned_shared], ids=["reserved", "aligned"])
def test_compiles(k, target, require_toolchain):
    require_toolchain(TOOLCHAIN_OF_TARGET[target])
    check_source(target, emit_kernel(k.variant().compiled(target), target).source)


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_a_parameter_named_short_still_carries_its_value(backend):
    if backend == "vulkan":
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
        from runner_testing import require_vulkan

        require_vulkan()
    a = np.arange(100, dtype=np.float32)
    out = np.full(100, np.nan, np.float32)
    reserved_names.launch(a, out, True, np.float32(3.0), 100, grid=100, group=64, backend=backend)
    np.testing.assert_array_equal(out, a * 3)
    reserved_names.launch(a, out, False, np.float32(3.0), 100, grid=100, group=64, backend=backend)
    np.testing.assert_array_equal(out, a)


@func
def positive(x: f32) -> bool:
    return x > 0.0


@kernel
def short_circuit(a: In[f32], out: Tensor[f32], n: int):
    i = program_id(0)
    if i < n and positive(a[i]):  # a helper call on the right: lowered through a temporary named after `and`
        out[i] = a[i]


@pytest.mark.parametrize("target", list(TOOLCHAIN_OF_TARGET))
def test_a_short_circuit_temporary_is_not_named_and(target, require_toolchain):
    require_toolchain(TOOLCHAIN_OF_TARGET[target])
    check_source(target, emit_kernel(short_circuit.variant().compiled(target), target).source)


@kernel
def half_to_bfloat(a: In[f16], b: In[bf16], out_b: Tensor[bf16], out_h: Tensor[f16]):
    i = program_id(0)
    out_b[i] = bf16(a[i])
    out_h[i] = f16(b[i])


@pytest.mark.parametrize("target", list(TOOLCHAIN_OF_TARGET))
def test_casts_between_f16_and_bf16check_source(target, require_toolchain):
    require_toolchain(TOOLCHAIN_OF_TARGET[target])
    check_source(target, emit_kernel(half_to_bfloat.variant().compiled(target), target).source)

"""IEEE signed zeros, infinities and NaNs on Vulkan, as on the interpreter (docs/language.md).

Without the ``SignedZeroInfNanPreserve`` execution mode a Vulkan driver may assume no NaN, infinity
or signed zero occurs: lavapipe gave ``atan(NaN) = 0``.  The device now adds the mode for every
float width it supports (``info["ieee_preserve_widths"]``, :func:`iron.runtime.vulkan.spirv.preserve_ieee`).
Even then lavapipe folds arithmetic with a literal zero (``x * 0.0`` was +0 for -1, -0, inf and NaN;
``x / 0.0`` was 0; ``-0.0 + 0.0`` was -0), so the GLSL emitter writes such operations out exactly.
Subnormals: the device adds ``DenormPreserve`` where it offers it (``info["denorm_preserve_widths"]``; NVIDIA's
driver flushed ``1e-45`` to zero without it); where it does not, a subnormal operand or result may be a zero of
its sign, exactly that and nothing else (docs/vulkan.md; tests/runtime/vulkan/float_flush.py, shared with the
rounding tests); lavapipe offers no DenormPreserve but keeps subnormals, so there the results are exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from float_flush import accepted, flush_allowed, flushed, keeps_subnormals, same

from iron import In, Tensor, f16, f32, kernel
from iron.codegen.emit import emit_kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.codegen.toolchains.spirv import compile_glsl, disassemble, validate_spirv
from iron.lang import atan, program_id
from iron.runtime.vulkan.spirv import denorm_preserve_widths, preserve_ieee

CASES = ("x * 0.0", "0.0 * x", "x * -0.0", "x / 0.0", "x / -0.0", "0.0 / x", "-0.0 / x", "x + 0.0", "0.0 + x",
         "x + -0.0", "x - 0.0", "x - -0.0", "0.0 - x", "-0.0 - x", "atan(x)", "x * y", "x / y", "x + y")


@kernel
def special(x: In[f32], y: In[f32], out: Tensor[f32]):
    i = program_id(0)
    a = x[i]
    b = y[i]
    o = i * 18
    out[o + 0] = a * 0.0
    out[o + 1] = 0.0 * a
    out[o + 2] = a * -0.0
    out[o + 3] = a / 0.0
    out[o + 4] = a / -0.0
    out[o + 5] = 0.0 / a
    out[o + 6] = -0.0 / a
    out[o + 7] = a + 0.0
    out[o + 8] = 0.0 + a
    out[o + 9] = a + -0.0
    out[o + 10] = a - 0.0
    out[o + 11] = a - -0.0
    out[o + 12] = 0.0 - a
    out[o + 13] = -0.0 - a
    out[o + 14] = atan(a)
    out[o + 15] = a * b  # b is 0.0 at run time: nothing to fold
    out[o + 16] = a / b
    out[o + 17] = a + b


VALUES = np.array([-1.0, -0.0, 0.0, 1.0, np.inf, -np.inf, np.nan, 3.4e38, 1e-45, -2.5], np.float32)


def _run_interp(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    want = np.full(18 * x.size, 7.0, np.float32)
    special.launch(x, y, want, grid=(x.size,), group=(1,), backend="interp")
    return want


def test_special_values_match_the_interpreter(device):
    x = VALUES.copy()
    y = np.zeros_like(x)
    n = x.size
    got = np.full(18 * n, 7.0, np.float32)
    device.launch(run_pipeline(special.ir(), PassContext.for_target("spirv")), [x, y, got], (n,), (1,))
    want = _run_interp(x, y)
    ok = same(got, want).reshape(n, 18)
    finite = np.isfinite(x) & (x != 0)  # atan of these within 4 ulp (test_vulkan_math_accuracy.py), not bit for bit
    atan_got, atan_want = got[14::18][finite].astype(np.float64), want[14::18][finite].astype(np.float64)
    assert (np.abs(atan_got - atan_want) <= 4 * np.spacing(np.abs(atan_want).astype(np.float32))).all()
    ok[finite, 14] = True
    subnormal = flushed(x) != x
    assert subnormal.any()
    # documented: without DenormPreserve subnormals may flush, to signed zeros only (lavapipe keeps them: exact)
    allowed = accepted(got, want, _run_interp(flushed(x), y), keeps_subnormals(device.info)).reshape(n, 18)
    ok[subnormal] = allowed[subnormal]
    bad = [f"{CASES[c]} at x={x[r]!r}: {got[18 * r + c]!r}, interpreter {want[18 * r + c]!r}"
           for r, c in zip(*np.nonzero(~ok))]
    assert not bad, "\n".join(bad)


def test_flushing_allows_signed_zeros_only():
    """What NVIDIA's driver gave for x = 1e-45 without DenormPreserve passes as flushing; nothing else does."""
    x = np.array([1e-45], np.float32)
    y = np.zeros_like(x)
    want, want_flushed_inputs = _run_interp(x, y), _run_interp(flushed(x), y)
    nvidia = want.copy()
    nvidia[[3, 5, 12, 17]] = [np.nan, np.nan, -0.0, 0.0]  # x / 0.0, 0.0 / x, 0.0 - x, x + y
    assert flush_allowed(nvidia, want, want_flushed_inputs).all()
    assert not same(nvidia, want).all()
    wrong = nvidia.copy()
    for slot, value in ((3, -np.inf), (5, -0.0), (12, 1e-45), (17, 3e-45), (15, np.nan), (7, -0.0)):
        wrong[slot] = value
        assert not flush_allowed(wrong, want, want_flushed_inputs)[slot], (CASES[slot], value)
        wrong[slot] = nvidia[slot]


def test_the_interpreter_is_ieee_here():
    """The reference itself: numpy's IEEE results for the issue's cases."""
    x = np.array([-1.0, -0.0, np.inf, np.nan], np.float32)
    got = np.zeros(18 * 4, np.float32)
    special.launch(x, np.zeros_like(x), got, grid=(4,), group=(1,), backend="interp")
    rows = got.reshape(4, 18)
    with np.errstate(invalid="ignore", divide="ignore"):
        assert same(rows[:, 0], x * np.float32(0.0)).all()
        assert same(rows[:, 3], x / np.float32(0.0)).all()
    assert np.signbit(rows[1, 0]) and np.isinf(rows[0, 3]) and np.isnan(rows[3, 14])
    assert rows[1, 7] == 0.0 and not np.signbit(rows[1, 7])  # -0.0 + 0.0 is +0


def test_device_reports_and_requests_float_controls(device):
    widths = device.info["ieee_preserve_widths"]
    assert set(widths) <= {16, 32, 64}
    denorm = device.info["denorm_preserve_widths"]
    assert set(denorm) <= {16, 32, 64} and device.info["denorm_independence"] in ("all", "32-bit only", "none")
    if "llvmpipe" in device.info["name"]:
        assert widths == [16, 32, 64]  # Mesa 22.3 lavapipe supports all three
        assert denorm == []  # and offers no DenormPreserve (it keeps subnormals anyway: the test above)
    source = emit_kernel(run_pipeline(special.ir(), PassContext.for_target("spirv")), "spirv", device.profile).source
    spirv = compile_glsl(source).binary
    patched = preserve_ieee(spirv, tuple(widths), tuple(denorm), device.info["denorm_independence"])
    validate_spirv(patched)
    text = disassemble(patched)
    if 32 in widths:
        assert "OpCapability SignedZeroInfNanPreserve" in text
        assert "OpExecutionMode %main SignedZeroInfNanPreserve 32" in text or "SignedZeroInfNanPreserve 32" in text
    doubles = "OpCapability Float64" in disassemble(spirv)  # iron_div computes through double
    assert ("SignedZeroInfNanPreserve 64" in text) == (doubles and 64 in widths)
    assert ("DenormPreserve 32" in text) == (32 in denorm)


@kernel
def single(x: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = x[i] * 3.0  # f32 only: no Float16, no Float64


def test_preserve_ieee_adds_only_what_is_supported_and_missing():
    source = emit_kernel(run_pipeline(single.ir(), PassContext.for_target("spirv")), "spirv").source
    spirv = compile_glsl(source).binary
    assert preserve_ieee(spirv, ()) == spirv  # a device without support: the module as compiled
    assert preserve_ieee(spirv, (16, 64)) == spirv  # widths the module does not compute in
    assert preserve_ieee(spirv, (), (16, 64)) == spirv
    once = preserve_ieee(spirv, (16, 32, 64))
    assert once != spirv and preserve_ieee(once, (16, 32, 64)) == once  # idempotent
    assert disassemble(once).count("SignedZeroInfNanPreserve 32") == 1
    assert "DenormPreserve" not in disassemble(once)


@kernel
def widths_used(x: In[f32], h: In[f16], out: Tensor[f32]):
    i = program_id(0)
    out[i] = x[i] * f32(h[i])  # f32 arithmetic, f16 loads and conversions: Float16 declared, no Float64


def _modes(spirv: bytes, name: str) -> list[int]:
    return sorted(int(line.split()[-1]) for line in disassemble(spirv).splitlines()
                  if line.split()[:1] == ["OpExecutionMode"] and line.split()[2] == name)


@pytest.mark.parametrize("supported, independence, want", [
    ((32,), "all", [32]), ((16, 32, 64), "all", [16, 32]), ((16, 32), "all", [16, 32]), ((64,), "all", []),
    ((16, 32), "32-bit only", [32]),  # 16 and 64 must share one mode: 64 is not offered, so neither
    ((16, 32, 64), "32-bit only", [16, 32, 64]),  # 64 joins 16 although the module does not compute in it
    ((16, 32), "none", []), ((16, 32, 64), "none", [16, 32, 64]), ((), "all", [])])
def test_denorm_preserve_is_requested_for_the_supported_widths_the_module_uses(supported, independence, want):
    source = emit_kernel(run_pipeline(widths_used.ir(), PassContext.for_target("spirv")), "spirv").source
    spirv = compile_glsl(source).binary
    assert "OpCapability Float16" in disassemble(spirv) and "OpCapability Float64" not in disassemble(spirv)
    assert list(denorm_preserve_widths({16, 32}, supported, independence)) == want
    patched = preserve_ieee(spirv, (16, 32, 64), supported, independence)
    validate_spirv(patched)
    assert _modes(patched, "DenormPreserve") == want
    assert _modes(patched, "SignedZeroInfNanPreserve") == [16, 32]
    assert ("OpCapability DenormPreserve" in disassemble(patched)) == bool(want)
    assert preserve_ieee(patched, (16, 32, 64), supported, independence) == patched


def test_preserve_ieee_puts_the_extension_after_the_capabilities_before_spirv_1_4():
    """SPIR-V 1.3 has float controls only as SPV_KHR_float_controls: the extension follows every capability."""
    spirv = compile_glsl("#version 450\nlayout(local_size_x = 1) in;\n"
                         "layout(std430, binding = 0) buffer B { float v[]; };\nvoid main() { v[0] = v[1] / v[2]; }\n",
                         target_env="vulkan1.1").binary
    patched = preserve_ieee(spirv, (32,), (32,))
    validate_spirv(patched, target_env="vulkan1.1")
    text = disassemble(patched)
    assert 'OpExtension "SPV_KHR_float_controls"' in text and "DenormPreserve 32" in text


@pytest.mark.parametrize("bad", [b"", b"\x03\x02\x23\x07" * 3, b"\x00" * 20])
def test_preserve_ieee_rejects_what_is_not_spirv(bad):
    from iron.runtime.vulkan.errors import VulkanError

    with pytest.raises(VulkanError):
        preserve_ieee(bad, (32,))

"""Every iron.std host function, table-driven on the interpreter: a zero-size batch gives an empty result of
the right shape and dtype; a wrong ``out`` (shape, dtype, kind, layout, or memory shared with an input the
kernel reads) is refused under the user's names -- the function and ``out`` -- before any launch; and the
documented in-place forms (``out=x``) still run in place.

The checks run on the host, before a launch, so they hold on every backend; the interpreter's threads run
in lock-step, which is why an aliased ``out`` came out right there and wrong on the GPUs (issue 16, item 13).
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import iron.std as S
from iron import LaunchError
from iron.jit.kernel import KernelFunction
from iron.std import (attention, cast, conv, elementwise, gemm, gemv, gguf, norms, quant_gemv, reduce, rope, softmax,
                      transpose)

F32, F16, I32, U8 = np.float32, np.float16, np.int32, np.uint8


def _z(*shape: int, dtype: Any = F32) -> np.ndarray:
    return np.zeros(shape, dtype)


def _r(*shape: int, dtype: Any = F32) -> np.ndarray:
    return np.random.default_rng(7).standard_normal(shape).astype(dtype)


@dataclass
class Case:
    """One host function: ``call(inputs, out)`` on ``inputs()``, writing (shape, dtype); ``zero`` likewise
    with a zero batch.  ``alias``: the input names ``out`` may not share memory with (each tried as out);
    ``in_place``: inputs ``out`` may be exactly (documented)."""

    name: str
    fn: Callable[..., Any]
    call: Callable[[dict[str, np.ndarray], Any], Any]
    inputs: Callable[[], dict[str, np.ndarray]]
    shape: tuple[int, ...]
    dtype: Any
    zero: Callable[[], dict[str, np.ndarray]]
    zero_shape: tuple[int, ...]
    alias: tuple[str, ...] = ()
    in_place: tuple[str, ...] = ()
    label: str = ""  # how errors name the function, when not ``name`` (elementwise names the op)

    @property
    def said(self) -> str:
        return re.escape(self.label or self.name)


def _q8(rows: int, k: int) -> np.ndarray:
    """rows x k Q8_0 weights: per block an f16 scale of 1/64, then 32 int8 values."""
    block = np.zeros(34, U8)
    block[:2] = np.frombuffer(np.float16(1 / 64).tobytes(), U8)
    block[2:] = np.arange(32, dtype=np.int8).view(U8)
    return np.tile(block, rows * k // 32).copy()


CASES = [
    Case("unary", elementwise.unary, lambda i, out: elementwise.unary("exp", i["x"], out=out),
         lambda: {"x": _r(4, 8)}, (4, 8), F32, lambda: {"x": _z(0, 8)}, (0, 8), in_place=("x",), label="exp"),
    Case("clamp", elementwise.clamp, lambda i, out: elementwise.clamp(i["x"], -1.0, 1.0, out=out),
         lambda: {"x": _r(4, 8)}, (4, 8), F32, lambda: {"x": _z(0, 8)}, (0, 8), in_place=("x",)),
    Case("binary", elementwise.binary, lambda i, out: elementwise.binary("add", i["a"], i["b"], out=out),
         lambda: {"a": _r(4, 8), "b": _r(8)}, (4, 8), F32, lambda: {"a": _z(0, 8), "b": _z(8)}, (0, 8),
         alias=("b",), in_place=("a",), label="add"),
    Case("fma", elementwise.fma, lambda i, out: elementwise.fma(i["a"], i["b"], i["c"], out=out),
         lambda: {"a": _r(4, 8), "b": _r(4, 8), "c": _r(4, 8)}, (4, 8), F32,
         lambda: {"a": _z(0, 8), "b": _z(0, 8), "c": _z(0, 8)}, (0, 8), in_place=("a", "b", "c")),
    Case("where", elementwise.where, lambda i, out: elementwise.where(i["cond"], i["a"], i["b"], out=out),
         lambda: {"cond": np.arange(32).reshape(4, 8) % 3 == 0, "a": _r(4, 8), "b": _r(4, 8)}, (4, 8), F32,
         lambda: {"cond": np.zeros((0, 8), bool), "a": _z(0, 8), "b": _z(0, 8)}, (0, 8), in_place=("a", "b")),
    Case("cast", cast.cast, lambda i, out: cast.cast(i["x"], "f16", out=out), lambda: {"x": _r(4, 8)}, (4, 8), F16,
         lambda: {"x": _z(0, 8)}, (0, 8), alias=("x",)),
    Case("copy", cast.copy, lambda i, out: cast.copy(i["x"], out=out), lambda: {"x": _r(4, 8)}, (4, 8), F32,
         lambda: {"x": _z(0, 8)}, (0, 8), in_place=("x",)),
    Case("transpose", transpose.transpose, lambda i, out: transpose.transpose(i["x"], out=out),
         lambda: {"x": _r(8, 8)}, (8, 8), F32, lambda: {"x": _z(0, 5)}, (5, 0), alias=("x",)),
    *[Case(op, getattr(reduce, op), lambda i, out, op=op: getattr(reduce, op)(i["x"], out=out),
           lambda: {"x": _r(8, 4)}, (8,), I32 if op == "argmax" else F32, lambda: {"x": _z(0, 8)}, (0,),
           alias=("x",)) for op in ("sum", "mean", "max", "min", "argmax")],
    Case("softmax", softmax.softmax, lambda i, out: softmax.softmax(i["x"], out=out), lambda: {"x": _r(4, 8)},
         (4, 8), F32, lambda: {"x": _z(0, 8)}, (0, 8), in_place=("x",)),
    Case("log_softmax", softmax.log_softmax, lambda i, out: softmax.log_softmax(i["x"], out=out),
         lambda: {"x": _r(4, 8)}, (4, 8), F32, lambda: {"x": _z(0, 8)}, (0, 8), in_place=("x",)),
    Case("layernorm", norms.layernorm, lambda i, out: norms.layernorm(i["x"], i["weight"], i["bias"], out=out),
         lambda: {"x": _r(4, 8), "weight": _r(8), "bias": _r(8)}, (4, 8), F32,
         lambda: {"x": _z(0, 8), "weight": _z(8), "bias": _z(8)}, (0, 8), alias=("weight", "bias"),
         in_place=("x",)),
    Case("rmsnorm", norms.rmsnorm, lambda i, out: norms.rmsnorm(i["x"], i["weight"], out=out),
         lambda: {"x": _r(4, 8), "weight": _r(8)}, (4, 8), F32, lambda: {"x": _z(0, 8), "weight": _z(8)}, (0, 8),
         alias=("weight",), in_place=("x",)),
    Case("add_rmsnorm", norms.add_rmsnorm,
         lambda i, out: norms.add_rmsnorm(i["x"], i["residual"], i["weight"], out=out)[0],
         lambda: {"x": _r(4, 8), "residual": _r(4, 8), "weight": _r(8)}, (4, 8), F32,
         lambda: {"x": _z(0, 8), "residual": _z(0, 8), "weight": _z(8)}, (0, 8), alias=("weight",),
         in_place=("x", "residual")),
    Case("rope", rope.rope, lambda i, out: rope.rope(i["x"], i["positions"], out=out),
         lambda: {"x": _r(3, 2, 8), "positions": np.arange(3, dtype=I32)}, (3, 2, 8), F32,
         lambda: {"x": _z(0, 2, 8), "positions": np.zeros(0, I32)}, (0, 2, 8), in_place=("x",)),
    Case("gemv", gemv.gemv, lambda i, out: gemv.gemv(i["A"], i["x"], out=out), lambda: {"A": _r(8, 8), "x": _r(8)},
         (8,), F32, lambda: {"A": _z(0, 8), "x": _z(8)}, (0,), alias=("A", "x")),
    Case("gemm", gemm.gemm, lambda i, out: gemm.gemm(i["a"], i["b"], i["bias"], out=out),
         lambda: {"a": _r(8, 8), "b": _r(8, 8), "bias": _r(8)}, (8, 8), F32,
         lambda: {"a": _z(0, 8), "b": _z(8, 4), "bias": _z(4)}, (0, 4), alias=("a", "b", "bias")),
    Case("conv1d", conv.conv1d, lambda i, out: conv.conv1d(i["x"], i["w"], out=out),
         lambda: {"x": _r(1, 2, 10), "w": _r(2, 2, 3)}, (1, 2, 8), F32,
         lambda: {"x": _z(0, 2, 8), "w": _z(3, 2, 3)}, (0, 3, 6), alias=("x", "w")),
    Case("conv2d", conv.conv2d, lambda i, out: conv.conv2d(i["x"], i["w"], padding=1, out=out),
         lambda: {"x": _r(1, 2, 4, 4), "w": _r(2, 2, 3, 3)}, (1, 2, 4, 4), F32,
         lambda: {"x": _z(0, 2, 5, 5), "w": _z(3, 2, 3, 3)}, (0, 3, 5, 5), alias=("x", "w")),
    # the matrix path (f16, C_in / groups a multiple of 8): transposes, views and scratch in the plan too
    Case("conv2d_matrix", conv.conv2d,
         lambda i, out: conv.conv2d(i["x"], i["w"], padding=1, groups=2, activation="relu", residual=i["residual"],
                                    out=out),
         lambda: {"x": _r(1, 16, 4, 4, dtype=F16), "w": _r(8, 8, 3, 3, dtype=F16),
                  "residual": _r(1, 8, 4, 4, dtype=F16)},
         (1, 8, 4, 4), F16,
         lambda: {"x": _z(0, 16, 4, 4, dtype=F16), "w": _z(8, 8, 3, 3, dtype=F16),
                  "residual": _z(0, 8, 4, 4, dtype=F16)},
         (0, 8, 4, 4), alias=("x", "w", "residual"), label="conv2d"),
    Case("depthwise_conv2d", conv.depthwise_conv2d,
         lambda i, out: conv.depthwise_conv2d(i["x"], i["w"], padding=1, out=out),
         lambda: {"x": _r(1, 2, 4, 4), "w": _r(2, 1, 3, 3)}, (1, 2, 4, 4), F32,
         lambda: {"x": _z(0, 2, 5, 5), "w": _z(2, 1, 3, 3)}, (0, 2, 5, 5), alias=("x",)),
    Case("dequantize", gguf.dequantize,
         lambda i, out: gguf.dequantize(i["data"], "Q8_0", (i["data"].size // 34, 32), out=out),
         lambda: {"data": _q8(2, 32)}, (2, 32), F32, lambda: {"data": np.zeros(0, U8)}, (0, 32)),
    Case("quant_gemv", quant_gemv.quant_gemv,
         lambda i, out: quant_gemv.quant_gemv(i["data"], "Q8_0", i["x"], i["data"].size // 34, 32, out=out),
         lambda: {"data": _q8(2, 32), "x": _r(32)}, (2,), F32, lambda: {"data": np.zeros(0, U8), "x": _z(32)}, (0,),
         alias=("x",)),
    Case("decode_attention", attention.decode_attention,
         lambda i, out: attention.decode_attention(i["q"], i["k_cache"], i["v_cache"], i["seq_lens"], out=out),
         lambda: {"q": _r(1, 2, 64), "k_cache": _r(1, 1, 4, 64), "v_cache": _r(1, 1, 4, 64),
                  "seq_lens": np.array([3], I32)}, (1, 2, 64), F32,
         lambda: {"q": _z(0, 2, 64), "k_cache": _z(0, 1, 4, 64), "v_cache": _z(0, 1, 4, 64),
                  "seq_lens": np.zeros(0, I32)}, (0, 2, 64), alias=("q", "k_cache", "v_cache")),
    Case("decode_attention_paged", attention.decode_attention_paged,
         lambda i, out: attention.decode_attention_paged(i["q"], i["k_pages"], i["v_pages"], i["block_table"],
                                                         i["seq_lens"], out=out),
         lambda: {"q": _r(1, 2, 64), "k_pages": _r(3, 4, 1, 64), "v_pages": _r(3, 4, 1, 64),
                  "block_table": np.array([[2, 0]], I32), "seq_lens": np.array([6], I32)}, (1, 2, 64), F32,
         lambda: {"q": _z(0, 2, 64), "k_pages": _z(3, 4, 1, 64), "v_pages": _z(3, 4, 1, 64),
                  "block_table": np.zeros((0, 2), I32), "seq_lens": np.zeros(0, I32)}, (0, 2, 64),
         alias=("q", "k_pages", "v_pages")),
    Case("prefill_attention", attention.prefill_attention,
         lambda i, out: attention.prefill_attention(i["q"], i["k"], i["v"], out=out),
         lambda: {"q": _r(1, 1, 4, 64, dtype=F16), "k": _r(1, 1, 4, 64, dtype=F16), "v": _r(1, 1, 4, 64, dtype=F16)},
         (1, 1, 4, 64), F16,
         lambda: {"q": _z(0, 2, 4, 64, dtype=F16), "k": _z(0, 1, 4, 64, dtype=F16), "v": _z(0, 1, 4, 64, dtype=F16)},
         (0, 2, 4, 64), alias=("q", "k", "v")),
    Case("prefill_attention_varlen", attention.prefill_attention_varlen,
         lambda i, out: attention.prefill_attention_varlen(i["q"], i["k"], i["v"], i["cu_seqlens"], out=out),
         lambda: {"q": _r(4, 1, 64, dtype=F16), "k": _r(4, 1, 64, dtype=F16), "v": _r(4, 1, 64, dtype=F16),
                  "cu_seqlens": np.array([0, 1, 4], I32)}, (4, 1, 64), F16,
         lambda: {"q": _z(0, 2, 64, dtype=F16), "k": _z(0, 1, 64, dtype=F16), "v": _z(0, 1, 64, dtype=F16),
                  "cu_seqlens": np.zeros(2, I32)}, (0, 2, 64), alias=("q", "k", "v")),
    Case("prefill_attention_paged", attention.prefill_attention_paged,
         lambda i, out: attention.prefill_attention_paged(i["q"], i["k_pages"], i["v_pages"], i["block_table"],
                                                          i["cu_seqlens"], i["seq_lens"], out=out),
         lambda: {"q": _r(3, 2, 64, dtype=F16), "k_pages": _r(3, 4, 1, 64, dtype=F16),
                  "v_pages": _r(3, 4, 1, 64, dtype=F16), "block_table": np.array([[2, 0], [1, 1]], I32),
                  "cu_seqlens": np.array([0, 1, 3], I32), "seq_lens": np.array([6, 2], I32)}, (3, 2, 64), F16,
         lambda: {"q": _z(0, 2, 64, dtype=F16), "k_pages": _z(3, 4, 1, 64, dtype=F16),
                  "v_pages": _z(3, 4, 1, 64, dtype=F16), "block_table": np.zeros((1, 2), I32),
                  "cu_seqlens": np.zeros(2, I32), "seq_lens": np.zeros(1, I32)}, (0, 2, 64),
         alias=("q", "k_pages", "v_pages")),
]
BY_NAME = {c.name: c for c in CASES}


def _run(case: Case, inputs: dict[str, np.ndarray], out: Any) -> Any:
    return case.call(inputs, out)


@pytest.fixture(autouse=True)
def interp(monkeypatch):
    monkeypatch.setenv("IRON_BACKEND", "interp")


def test_every_host_function_is_in_the_table():
    """A new host function (one taking ``out=``) must join the table, so its contract is checked too."""
    found = set()
    for name in S.MODULES:
        module = importlib.import_module(f"iron.std.{name}")
        for attr, obj in vars(module).items():
            if (inspect.isfunction(obj) and obj.__module__ == module.__name__ and "<locals>" not in obj.__qualname__
                    and "out" in inspect.signature(obj).parameters and not attr.startswith("_")
                    and not isinstance(obj, KernelFunction)):
                found.add(obj)
    # elementwise's one function per op calls unary / binary; softmax.checked_out is the norms' helper
    covered = {getattr(elementwise, op) for op in elementwise.UNARY_OPS + elementwise.BINARY_OPS
               if hasattr(elementwise, op)} | {softmax.checked_out}
    listed = {c.fn for c in CASES} | covered
    missing = sorted(f"{f.__module__}.{f.__name__}" for f in found - listed)
    assert not missing, f"host functions without a row in CASES: {missing}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_zero_batch_gives_an_empty_result(case):
    result = _run(case, case.zero(), None)
    assert result.shape == case.zero_shape and result.dtype == case.dtype, (result.shape, result.dtype)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_wrong_out_shape_is_refused_before_any_launch(case, launches):
    bad = np.zeros(tuple(s + 1 for s in case.shape), case.dtype)
    said_shape = re.escape(str(bad.shape))
    with pytest.raises(LaunchError, match=rf"^{case.said}: out has shape {said_shape}; {case.said} writes"):
        _run(case, case.inputs(), bad)
    assert launches == []


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_wrong_out_dtype_is_refused_before_any_launch(case, launches):
    other = np.float64 if case.dtype != np.float64 else F32
    with pytest.raises(LaunchError, match=rf"^{case.said}: out has dtype f64; {case.said} writes"):
        _run(case, case.inputs(), np.zeros(case.shape, other))
    assert launches == []


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_out_must_be_contiguous_and_an_array(case, launches):
    strided = np.zeros(case.shape[:-1] + (2 * case.shape[-1],), case.dtype)[..., ::2]
    with pytest.raises(LaunchError, match=rf"^{case.said}: out must be C-contiguous"):
        _run(case, case.inputs(), strided)
    with pytest.raises(LaunchError, match=rf"^{case.said}: out: expected an array"):
        _run(case, case.inputs(), [0.0] * 4)
    assert launches == []


ALIASED = [(c, name) for c in CASES for name in c.alias]


@pytest.mark.parametrize("case,name", ALIASED, ids=[f"{c.name}-{n}" for c, n in ALIASED])
def test_out_overlapping_an_input_is_refused_before_any_launch(case, name, launches):
    """out over the memory of an input the kernel reads (the input itself, or a view of its buffer)."""
    inputs = case.inputs()
    x = inputs[name]
    size = int(np.prod(case.shape))
    # A buffer holding the input and the output at overlapping places, each of its own dtype.
    itemsize = max(x.itemsize, np.dtype(case.dtype).itemsize)
    raw = np.zeros((x.nbytes + size * itemsize) // 1 + 64, U8)
    inputs[name] = np.frombuffer(raw.data, x.dtype, x.size, 0).reshape(x.shape)
    inputs[name][...] = x
    out = np.frombuffer(raw.data, case.dtype, size, x.nbytes // 2 // itemsize * itemsize).reshape(case.shape)
    with pytest.raises(LaunchError, match=rf"^{case.said}: out overlaps {name}: {case.said} cannot write"):
        _run(case, inputs, out)
    assert launches == []


IN_PLACE = [(c, name) for c in CASES for name in c.in_place]


@pytest.mark.parametrize("case,name", IN_PLACE, ids=[f"{c.name}-{n}" for c, n in IN_PLACE])
def test_documented_in_place_forms_still_run(case, name):
    want = _run(case, case.inputs(), None)
    inputs = case.inputs()
    got = _run(case, inputs, inputs[name])
    assert got is inputs[name]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case,name", IN_PLACE, ids=[f"{c.name}-{n}" for c, n in IN_PLACE])
def test_a_shifted_view_of_an_in_place_input_is_refused(case, name, launches):
    """In place means out *is* the input; half a row over it would have threads read what others wrote."""
    inputs = case.inputs()
    x = inputs[name]
    flat = np.zeros(x.size + 1, x.dtype)
    inputs[name] = flat[:-1].reshape(x.shape)
    inputs[name][...] = x
    with pytest.raises(LaunchError, match=rf"out overlaps {name}"):
        _run(case, inputs, flat[1:].reshape(x.shape))
    assert launches == []


def test_decode_attention_checks_out_dtype_before_its_first_launch(launches):
    """It used to launch the split pass and only then fail, under the combine kernel's 'o'."""
    case = BY_NAME["decode_attention"]
    with pytest.raises(LaunchError, match=r"^decode_attention: out has dtype f16"):
        _run(case, case.inputs(), np.zeros(case.shape, F16))
    assert launches == []


class _DeviceArray:
    """A device array as CuPy or torch exports one (``__cuda_array_interface__``), never dereferenced here."""

    def __init__(self, shape: tuple[int, ...]):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (1 << 40, False),
                                         "strides": None, "version": 3}


def test_out_of_another_kind_is_refused():
    """A device array as out= for numpy inputs (or the reverse) is refused before anything runs."""
    with pytest.raises(LaunchError, match=r"^gemm: out is a _DeviceArray, the input a numpy array"):
        gemm.gemm(_r(4, 4), _r(4, 4), out=_DeviceArray((4, 4)))


def test_every_module_has_a_case():
    modules = {c.fn.__module__.rsplit(".", 1)[1] for c in CASES}
    assert modules == set(S.MODULES)


def test_on_vulkan_gemv_into_its_own_vector_is_refused_not_wrong():
    """gemv(A, v, out=v) on lavapipe gave 300, 599, 1197, ... where 300 everywhere was right: threads read
    elements of v that others had already overwritten.  Now it is refused before the launch."""
    from runner_testing import require_vulkan

    require_vulkan()
    A = np.ones((64, 64), F32)
    v = np.full(64, 300 / 64, F32)
    with pytest.raises(LaunchError, match=r"^gemv: out overlaps x"):
        gemv.gemv(A, v, out=v, backend="vulkan")
    np.testing.assert_allclose(gemv.gemv(A, v, backend="vulkan"), np.full(64, 300, F32), rtol=1e-6)
    assert (v == F32(300 / 64)).all()  # nothing was written


class _DeviceArray:
    """A stand-in for a GPU array as the host functions read one (``__cuda_array_interface__``): only its address
    matters here."""

    def __init__(self, address: int):
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f2", "data": (address, False), "version": 3,
                                         "strides": None}


def test_arrays_off_a_16_byte_boundary_are_found_on_a_gpu_only():
    """The decode and gemm hosts refuse device arrays that would fault their 16-byte copies; host arrays (which the
    interpreter and Vulkan copy into buffers of their own) are never refused."""
    from iron.std._host import device_starts_off

    assert device_starts_off(_DeviceArray(0x1000 + 2), 16)
    assert not device_starts_off(_DeviceArray(0x1000), 16)
    assert not device_starts_off(np.zeros(9, np.float16)[1:], 16)

"""Architecture choices, and the argument buffer: byte for byte what iron.codegen.abi.pack_params makes."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from cudakernels import axpy, half_scale, ir

from iron import Tensor, bf16, f16, f32, f64, i8, i16, i64, kernel, u8, u16, u32, u64
from iron import bool_ as b8
from iron.codegen.abi import kernel_abi, pack_params
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.core import dtypes as D
from iron.core.errors import LaunchError
from iron.lang import program_id
from iron.runtime.cuda.arch import binary_runs_on, compile_target, device_profile
from iron.runtime.cuda.packer import ArgBuffer, block_format
from iron.runtime.cuda.signature import ParamSpec, of_abi, of_kernel, scalar_converter
from iron.runtime.interp.args import bind_arguments


def test_profiles_for_known_and_newer_gpus():
    assert device_profile("sm_90") == (device_profile("sm_90")[0], None)
    assert device_profile("sm_90")[0].arch == "sm_90"
    prof, note = device_profile("sm_120")
    assert prof.arch == "sm_90" and "no profile for sm_120" in note
    assert device_profile("sm_87")[0].arch == "sm_86", "the nearest older one of the same major version"
    assert device_profile("sm_75")[0].arch == "sm_80", "older than every profile: the oldest"


def test_cubin_for_the_device_unless_nvrtc_is_older_than_it():
    assert compile_target("sm_90", ["sm_80", "sm_90", "sm_100"]) == ("sm_90", "cubin")
    assert compile_target("sm_90", []) == ("sm_90", "cubin")
    assert compile_target("sm_120", ["sm_80", "sm_90", "sm_100"]) == ("compute_100", "ptx")
    with pytest.raises(ValueError):
        compile_target("sm_70", ["sm_80"])


@pytest.mark.parametrize(("binary", "fmt", "device", "runs"), [
    ("sm_90", "cubin", "sm_90", True), ("sm_80", "cubin", "sm_86", True), ("sm_86", "cubin", "sm_80", False),
    ("sm_90", "cubin", "sm_100", False), ("sm_90a", "cubin", "sm_90", True), ("sm_90a", "cubin", "sm_91", False),
    ("sm_90", "ptx", "sm_120", True), ("compute_90", "ptx", "sm_80", False)])
def test_which_binaries_load_where(binary, fmt, device, runs):
    assert binary_runs_on(binary, fmt, device) is runs


@kernel
def many(a: f16, x: b8, b: i8, c: u16, y: Tensor[f32], z: f64, w: u64, v: i16, t: u8, q: i64, r: bf16, s: u32, k: f32):
    i = program_id(0)
    y[i] = f32(a) + f32(b) + f32(c) + f32(z) + f32(w) + f32(v) + f32(t) + f32(q) + f32(r) + f32(s) + k + f32(x)


def _ir_many():
    return run_pipeline(many.lower(1.5, True, -3, 7, np.zeros(4, np.float32), 2.0, 5, -2, 250, -9, 0.5, 11, 3.0),
                        PassContext.for_target("cuda"))


@pytest.mark.parametrize("seed", range(4))
def test_argument_buffer_equals_pack_params(seed):
    kir = _ir_many()
    abi = kernel_abi(kir)
    rng = np.random.default_rng(seed)
    args = [float(rng.normal()), bool(rng.integers(2)), int(rng.integers(-128, 128)), int(rng.integers(0, 65536)),
            np.zeros(int(rng.integers(1, 50)), np.float32), float(rng.normal()), int(rng.integers(0, 2**63)),
            int(rng.integers(-2**15, 2**15)), int(rng.integers(0, 256)), int(rng.integers(-2**62, 2**62)),
            float(rng.normal()), int(rng.integers(0, 2**32)), float(rng.normal()) * 1e30]
    sig = of_kernel(kir)
    conv = {p.name: scalar_converter(sig.kernel, p) for p in sig.params if not p.is_tensor}
    bound = bind_arguments(kir, args)
    scalars = {p.name: a for p, a in zip(kir.params, bound) if not p.is_tensor}
    sizes = {p.name: a.size for p, a in zip(kir.params, bound) if p.is_tensor}
    grid = (int(rng.integers(1, 1000)), int(rng.integers(1, 9)))
    want = pack_params(abi, scalars, grid, sizes)
    buf = ArgBuffer(abi)
    values = []
    for kind, what in buf.order():
        if kind == "pointer":
            values.append(0xDEAD0000 + 8 * len(values))
        elif kind == "param":
            values.append(conv[what](args[[p.name for p in sig.params].index(what)]))
        elif kind == "grid":
            values.append((grid + (1,))[what] if what < 2 else 1)
        else:
            values.append(sizes[what])
    buf.pack(values)
    assert buf.block() == want
    assert buf.pointers() == [0xDEAD0000]


def test_the_kernel_params_array_points_into_the_buffer():
    abi = kernel_abi(ir(half_scale))
    buf = ArgBuffer(abi)
    import ctypes

    pointers = (ctypes.c_void_p * 2).from_address(buf.params_address)
    base = ctypes.addressof(buf.buffer)
    assert [pointers[0], pointers[1]] == [base, base + 8]
    assert struct.calcsize("<" + block_format(abi)) == abi.params_size == 24


@pytest.mark.filterwarnings("ignore:overflow encountered")
@pytest.mark.parametrize(("dt", "value"), [
    (f32, 1e39), (f32, -1e39), (f32, float("nan")), (f32, 3), (f32, np.float64(0.1)), (f16, 65519.0), (f16, 1e9),
    (bf16, 1.00390625), (i8, 127), (u8, 255), (i16, -32768), (u16, 65535), (u32, 2**32 - 1), (u64, 2**64 - 1),
    (i64, -2**63), (b8, True), (b8, False), (b8, np.bool_(True)), (f64, 1e300), (i8, np.int8(-5)),
    (f32, np.float16(0.5)),
    # numpy scalars the short path takes as they are (std passes np.float32 scalars on every call)
    (f32, np.float32(0.1)), (f32, np.float32("inf")), (f32, np.float32("nan")), (f32, np.float32(-3.4e38)),
    (D.i32, np.int32(-7)), (D.i32, np.int64(2**31 - 1)), (D.i32, np.uint8(200)), (u32, np.uint32(2**32 - 1)),
    (i64, np.int64(-2**63)), (u64, np.uint64(2**64 - 1)), (f64, np.float32(0.1)), (f64, np.float16(0.1)),
    (b8, np.bool_(False))])
def test_scalar_conversion_matches_the_interpreter(dt, value):
    spec = ParamSpec("s", False, dt)
    stored = scalar_converter("k", spec)(value)
    from types import SimpleNamespace

    from iron.runtime.interp.args import _bind_scalar

    reference = _bind_scalar(SimpleNamespace(name="k"), SimpleNamespace(name="s"), dt, value)
    from iron.codegen.abi import storage_dtype

    np_store = D.numpy_dtype(storage_dtype(dt))
    assert np.asarray(stored, np_store).tobytes() == np.asarray(reference).astype(np_store).tobytes()


@pytest.mark.parametrize(("dt", "value", "message"), [
    (i8, 128, "does not fit i8"), (u32, -1, "does not fit u32"), (i32 := D.i32, 1.5, "expects an integer"),
    (f32, "x", "expects a number"), (b8, 1, "expects a bool"), (u64, 2**64, "does not fit u64"),
    (D.i32, np.int64(2**31), "does not fit i32"), (u32, np.int32(-1), "does not fit u32"),
    (D.i32, np.float32(1.0), "expects an integer"), (b8, np.int32(1), "expects a bool")])
def test_bad_scalars_raise_the_interpreters_error(dt, value, message):
    with pytest.raises(LaunchError, match=message) as e:
        scalar_converter("k", ParamSpec("s", False, dt))(value)
    assert "kernel 'k', argument 's'" in str(e.value)


def test_signatures_from_ir_and_from_a_manifest_abi():
    kir = ir(axpy)
    sig = of_kernel(kir)
    assert [(p.name, p.is_tensor, p.dtype.name, p.written) for p in sig.params] == [
        ("x", True, "f32", False), ("y", True, "f32", True), ("a", False, "f32", False), ("n", False, "i32", False)]
    assert of_abi("axpy", kernel_abi(kir)) == sig
    assert [p.name for p in of_abi("axpy", kernel_abi(kir), ["a", "x", "n", "y"]).params] == ["a", "x", "n", "y"]
    with pytest.raises(ValueError, match="does not match"):
        of_abi("axpy", kernel_abi(kir), ["x", "y"])

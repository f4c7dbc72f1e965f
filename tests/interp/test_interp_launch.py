"""Launching: argument binding, geometry, options, and the Device interface."""

from __future__ import annotations

import numpy as np
import pytest

from iron.core import dtypes as D
from iron.core.builder import tensor
from iron.core.errors import LaunchError
from iron.core.types import ScalarType
from iron.runtime import get_device
from iron.runtime.interp import InterpDevice, run

from interp_kernels import KernelBuilder


def scale_kernel(scalar_dt: D.DType = D.f32, data_dt: D.DType = D.f32):
    """``out[i] = x[i] * cast(s)``: one read-only tensor, one written tensor, one scalar."""
    kb = KernelBuilder("scale", x=tensor(data_dt, True), out=tensor(data_dt), s=ScalarType(scalar_dt))
    i = kb.gid()
    s = kb.p["s"] if scalar_dt == data_dt else kb.op("cast", kb.p["s"], to=data_dt)
    kb.op("store", kb.p["out"], i, kb.op("mul", kb.op("load", kb.p["x"], i), s))
    return kb.kernel


def test_tensors_are_written_in_place_whatever_their_shape():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.zeros((3, 4), dtype=np.float32)
    run(scale_kernel(), [x, out, 2.0], (12,), (4,))
    assert out.tolist() == (x * 2).tolist()


def test_scalars_are_converted_to_the_parameter_dtype():
    x = np.ones(4, dtype=np.float16)
    out = np.zeros(4, dtype=np.float16)
    run(scale_kernel(D.f16, D.f16), [x, out, 0.1], (4,), (4,))
    assert out.tolist() == [float(np.float16(0.1))] * 4
    xi = np.arange(4, dtype=np.int8)
    outi = np.zeros(4, dtype=np.int8)
    run(scale_kernel(D.i8, D.i8), [xi, outi, np.int64(-3)], (4,), (4,))
    assert outi.tolist() == [0, -3, -6, -9]


@pytest.mark.parametrize("args,match", [
    (lambda x, o: [x, o], r"takes 3 argument\(s\) \(x, out, s\), got 2"),
    (lambda x, o: [x.astype(np.float64), o, 1.0],
     r"argument 'x'.*expects a numpy array of float32.*got an array of float64"),
    (lambda x, o: [x.tolist(), o, 1.0], r"argument 'x'.*expects a numpy array of float32.*got list"),
    (lambda x, o: [x, np.zeros(16, np.float32)[::2], 1.0], r"argument 'out'.*C-contiguous"),
    (lambda x, o: [x, o, "2"], r"argument 's'.*expects a number"),
    (lambda x, o: [x, o, True], r"argument 's'.*expects a number"),
], ids=["count", "dtype", "not-an-array", "strided", "string-scalar", "bool-for-float"])
def test_bad_arguments_are_launch_errors_naming_the_parameter(args, match):
    x, out = np.ones(8, np.float32), np.zeros(8, np.float32)
    with pytest.raises(LaunchError, match=match):
        run(scale_kernel(), args(x, out), (8,), (8,))


def test_read_only_arrays_are_refused_only_for_writable_tensors():
    x, out = np.ones(8, np.float32), np.zeros(8, np.float32)
    x.flags.writeable = False
    run(scale_kernel(), [x, out, 3.0], (8,), (8,))  # x is In[f32]: fine
    assert out.tolist() == [3.0] * 8
    out.flags.writeable = False
    with pytest.raises(LaunchError, match="argument 'out'.*read-only"):
        run(scale_kernel(), [x, out, 3.0], (8,), (8,))


@pytest.mark.parametrize("dt,value,match", [
    (D.i8, 300, r"300 does not fit i8 \(range -128 .. 127\)"),
    (D.u32, -1, r"-1 does not fit u32"),
    (D.i32, 2.5, r"expects an integer \(i32\)"),
    (D.i32, True, r"expects an integer \(i32\)"),
    (D.bool_, 1, r"expects a bool"),
])
def test_scalars_that_do_not_fit_are_refused(dt, value, match):
    kb = KernelBuilder("takes_scalar", s=ScalarType(dt))
    with pytest.raises(LaunchError, match=match):
        run(kb.kernel, [value], (1,), (1,))


@pytest.mark.parametrize("grid,group,match", [
    ((0,), (1,), "grid"), ((1, 2, 3, 4), (1,), "grid"), ("8", (1,), "grid"), ((2.5,), (1,), "grid"),
    ((8,), (0,), "group"), ((8,), (), "group"), ((True,), (1,), "grid"),
])
def test_bad_geometry_is_a_launch_error(grid, group, match):
    kb = KernelBuilder("empty")
    with pytest.raises(LaunchError, match=match):
        run(kb.kernel, [], grid, group)


def test_bad_simd_width_is_a_launch_error():
    with pytest.raises(LaunchError, match="simd_width must be one of 8, 32, 64"):
        run(KernelBuilder("empty").kernel, [], (1,), (1,), simd_width=16)


def test_int_grid_and_shorter_group_are_padded():
    kb = KernelBuilder("ids2d", out=tensor(D.i32))
    x, y = kb.gid(0), kb.gid(1)
    kb.op("store", kb.p["out"], kb.op("add", x, kb.op("mul", y, kb.i32(6))), kb.op("thread_id", axis=0))
    out = np.full(18, -1, np.int32)
    run(kb.kernel, [out], (6, 3), (4,))
    assert out.reshape(3, 6).tolist() == [[0, 1, 2, 3, 0, 1]] * 3
    out1 = np.zeros(5, np.int32)
    kb1 = KernelBuilder("ids1d", out=tensor(D.i32))
    kb1.op("store", kb1.p["out"], kb1.gid(), kb1.op("grid_size", axis=0))
    run(kb1.kernel, [out1], 5, 8)
    assert out1.tolist() == [5] * 5


def test_interp_device_implements_the_device_interface():
    dev = get_device("interp")
    assert isinstance(dev, InterpDevice)
    assert (dev.name, dev.target) == ("interp", "interp")
    assert dev.default_group((1000,)) == (256,)
    assert dev.default_group((64, 64)) == (16, 16)
    assert dev.default_group((8, 8, 8)) == (8, 8, 4)
    x, out = np.arange(10, dtype=np.float32), np.zeros(10, np.float32)
    dev.launch(scale_kernel(), [x, out, 0.5], (10,), dev.default_group((10,)))
    assert out.tolist() == (x * 0.5).tolist()

"""The native launch module (iron/runtime/cuda/native): built with this machine's C compiler, then loaded in a
child process against a stand-in libcuda.so.1 whose cuLaunchKernel records what it was given, so the test sees
every value the C code passes to the driver; and the fast launcher a device generates calls it with raw
handles."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from fakecuda import interpreted

from iron import In, Tensor, config, f32, kernel
from iron.lang import program_id
from iron.runtime.cuda import native

RECORDER = r"""
#include <stdint.h>
static unsigned long long seen[11];
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra) {
    unsigned long long v[11] = {(uintptr_t)f, gx, gy, gz, bx, by, bz, shared, (uintptr_t)stream,
                                (uintptr_t)params, (uintptr_t)extra};
    for (int i = 0; i < 11; i++) seen[i] = v[i];
    return gx == 13 ? 700 : 0;  /* CUDA_ERROR_ILLEGAL_ADDRESS for one grid, to see a failure come back */
}
void last_launch(unsigned long long *out) { for (int i = 0; i < 11; i++) out[i] = seen[i]; }
"""

CHILD = """
import ctypes, json, sys
sys.path.insert(0, {src!r})
import importlib.util
spec = importlib.util.spec_from_file_location("iron_native_launch", {module!r})
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
lib = ctypes.CDLL("libcuda.so.1")
seen = (ctypes.c_ulonglong * 11)()
results = {{}}
results["ok"] = m.launch(0x7F00DEADBEEF, 2, 3, 4, 128, 2, 1, 49152, 0x5555AAAA, 0x7FFF0000)
lib.last_launch(seen)
results["seen"] = list(seen)
results["failed"] = m.launch(1, 13, 1, 1, 1, 1, 1, 0, 0, 0)
for bad in ((1, 2), (1, 1 << 32, 1, 1, 1, 1, 1, 0, 0, 0), (1, -1, 1, 1, 1, 1, 1, 0, 0, 0)):
    try:
        m.launch(*bad)
        results.setdefault("refused", []).append(None)
    except (TypeError, OverflowError) as e:
        results.setdefault("refused", []).append(type(e).__name__)
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    if native.compiler() is None:
        pytest.skip("no C compiler here")
    return native.build(tmp_path_factory.mktemp("native"))


def test_the_module_passes_each_value_to_cuLaunchKernel_and_returns_its_result(built, tmp_path):
    lib = tmp_path / "libcuda.so.1"
    source = tmp_path / "recorder.c"
    source.write_text(RECORDER)
    subprocess.run([native.compiler(), "-shared", "-fPIC", str(source), "-o", str(lib)], check=True)
    src = str(Path(native.__file__).parents[4])
    code = CHILD.format(src=src, module=str(built))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"LD_LIBRARY_PATH": str(tmp_path), "PATH": ""})
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["ok"] == 0 and got["failed"] == 700
    assert got["seen"] == [0x7F00DEADBEEF, 2, 3, 4, 128, 2, 1, 49152, 0x5555AAAA, 0x7FFF0000, 0]
    assert got["refused"] == ["TypeError", "OverflowError", "OverflowError"]


def test_a_build_is_reused_and_named_by_its_source(built):
    again = native.build(built.parent)
    assert again == built and built.stat().st_size > 0
    assert not list(built.parent.glob(".iron_native_launch-*")), "no temporary file left behind"


@pytest.fixture
def options(monkeypatch):
    """Re-read IRON_* variables set with ``monkeypatch.setenv``; read them again afterwards."""
    from iron import config

    yield config.reload
    monkeypatch.undo()
    config.reload()


def test_where_the_module_cannot_be_had_load_says_why(tmp_path, monkeypatch, options):
    monkeypatch.setattr(native.LAUNCH, "_loaded", {})
    monkeypatch.setenv("IRON_CACHE_DIR", "off")
    options()
    assert native.load() is None and "IRON_CACHE_DIR=off" in native.LAUNCH.why_not
    monkeypatch.setattr(native.LAUNCH, "_loaded", {})
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("IRON_NATIVE_LAUNCH", "0")
    options()
    assert native.load() is None and "IRON_NATIVE_LAUNCH=0" in native.LAUNCH.why_not


@kernel
def twice(x: In[f32], y: Tensor[f32]):
    i = program_id(0)
    y[i] = x[i] + x[i]


def test_a_device_fast_launcher_calls_the_native_launch_with_raw_handles(device, fake, torch):
    config.set_option("pdl", False)  # a plain launch (the chained one: tests/runtime/cuda/test_cuda_pdl_fake.py)
    kir = twice.variant().compiled("cuda")
    fake.kernels[kir.name] = interpreted(kir, {"x": 16, "y": 16})
    calls = []

    class Recorder:
        @staticmethod
        def launch(*args):
            calls.append(args)
            err, = fake.cuLaunchKernel(args[0], *args[1:8], fake.CUstream(args[8]), args[9], 0)
            return int(err)

    device._dispatch.native = Recorder
    mem = [device.empty(16, f32) for _ in range(2)]
    mem[0].copy_from(np.arange(16, dtype=np.float32))
    tensors = [torch.Tensor(m.ptr, 16, torch.float32) for m in mem]
    device.launch(kir, tensors, (16,), (16,))  # the general path, which then writes the fast launcher
    device.launch(kir, tensors, (16,), (16,))  # the fast launcher, through the native launch
    assert len(calls) == 1
    plan = device._plans[id(kir)]
    assert "NATIVE(FUNCI" in plan.fast.source
    function, gx, gy, gz, bx, by, bz, shared, stream, params = calls[0]
    assert (function, stream, params) == (int(plan.function), 0x77, plan.args.params_address)
    assert (gx, bx) == (1, 16)
    np.testing.assert_array_equal(mem[1].numpy(), 2 * np.arange(16, dtype=np.float32))

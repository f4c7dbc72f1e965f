"""The GPU-only paths of the runner: rotated device-resident inputs on a (fake) GPU here, and the real
CUDA backend end to end where an NVIDIA GPU answers (skipped elsewhere)."""

import io
import sys
import textwrap

import numpy as np
import pytest
from runner_testing import GOOD, quick_runs, write_project  # noqa: F401  (quick_runs is a fixture)

from iron.core import protocol
from iron.harness import registry, timing
from iron.runner.benches import run_benches
from iron.runner.main import Emitter
from iron.runtime.interp import InterpDevice


class FakeArray:
    def __init__(self, host: np.ndarray):
        self.host = host.copy()


class FakeGpu(InterpDevice):
    """The interpreter dressed as a GPU with a 64 KiB L2, its own arrays and a device clock."""

    name = "fakegpu"
    info = {"name": "Fake GPU", "device_type": "discrete_gpu", "l2_bytes": 64 << 10}

    def __init__(self):
        self.timed_sets: list[tuple[int, ...]] = []
        self.released: list[int] = []

    def to_device(self, host):
        return FakeArray(host)

    def release_array(self, arr):
        self.released.append(id(arr))

    def launch(self, kernel, args, grid, group):
        """Takes its own arrays, as a GPU device does (the call-time loop launches on them)."""
        super().launch(kernel, [a.host if isinstance(a, FakeArray) else a for a in args], grid, group)

    def launch_timed(self, kernel, args, grid, group, timing=True):
        self.timed_sets.append(tuple(id(a) for a in args if isinstance(a, FakeArray)))
        assert all(not isinstance(a, np.ndarray) for a in args), "timed launches take device arrays only"
        self.launch(kernel, args, grid, group)
        return 0.25


@pytest.fixture
def good_items(tmp_path, monkeypatch, quick_runs):  # noqa: F811
    registry.clear()
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "good", raising=False)
    write_project(tmp_path, {"good": GOOD})
    monkeypatch.chdir(tmp_path)
    from iron.harness import project

    project.load("good", project.find_project())
    yield registry.select("bench", "interp", dtypes=["f32"])
    registry.clear()


def test_on_a_gpu_inputs_rotate_through_device_copies_past_twice_the_l2(good_items):
    gpu = FakeGpu()
    out = io.StringIO()
    policy = timing.Policy(warmup=2, reps=40, max_seconds=60)
    assert run_benches(good_items, gpu, "fakegpu", "Fake GPU", 1, Emitter(out), policy) == 0
    (row,) = [protocol.bench_row(protocol.decode(ln).data) for ln in out.getvalue().splitlines()
              if protocol.decode(ln).kind == "bench_row"]
    assert row.ok and row.iron_us == 250.0 and row.samples == 40  # the device clock, not the host's
    set_bytes = 2 * 4096 * 4  # x and out of one argument set
    copies = -(-2 * (64 << 10) // set_bytes)
    distinct = list(dict.fromkeys(gpu.timed_sets))
    assert len(distinct) == copies and copies > 1
    assert gpu.timed_sets[:2 * copies] == distinct * 2  # round robin, each copy in turn
    # every device array given back after timing, the call-time loop's one set (x and out) too
    assert len(gpu.released) == 2 * copies + 2
    assert row.iron_call_us is not None and row.iron_call_us > 0, "a GPU row reports its call time"


def _cuda_or_skip():
    from iron.runtime import backend_available

    ok, why = backend_available("cuda")
    if not ok:
        pytest.skip(f"no CUDA device here: {why}")


def test_cuda_tests_and_benches_end_to_end(tmp_path, monkeypatch, quick_runs, capsys):  # noqa: F811
    _cuda_or_skip()
    from iron.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["init", "proj"]) == 0
    monkeypatch.chdir(tmp_path / "proj")
    assert main(["test", "--backend", "cuda"]) == 0
    assert "15 passed, 0 failed" in capsys.readouterr().out
    pytest.importorskip("torch", reason="the bench's cuda reference is PyTorch")
    assert main(["bench", "--backend", "cuda", "--json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert len(doc["rows"]) == 3 and all(r["ok"] and r["ref_name"] == "torch.axpy_torch" for r in doc["rows"])
    assert all(r["iron_us"] > 0 and r["ref_us"] > 0 and r["iron"]["gbps"] > 0 for r in doc["rows"])


TORCH_REFERENCE = textwrap.dedent('''
    import numpy as np
    from iron import In, Setup, Tensor, bench, f32, kernel
    from iron.lang import program_id

    @kernel
    def double(a: In[f32], out: Tensor[f32], n: int):
        i = program_id(0)
        if i < n:
            out[i] = a[i] * 2.0

    def torch_in_place(a, out, n):
        import torch
        torch.mul(a, 2.0, out=out)

    @bench(double, shapes=[1 << 20], reference={"cuda": torch_in_place})
    def double_setup(case):
        return Setup(args=[case.randn(case.n), case.empty(case.n), case.n], grid=case.n)
''')


def test_a_torch_reference_writing_its_output_in_place_checks_iron(tmp_path, monkeypatch, quick_runs):  # noqa: F811
    _cuda_or_skip()
    pytest.importorskip("torch")
    from iron.cli.project_runner import ProjectRunner

    write_project(tmp_path, {"k": TORCH_REFERENCE})
    result = ProjectRunner("bench", ["--backend", "cuda"], timeout=300, cwd=tmp_path).run()
    (row,) = result.rows
    assert row.ok and row.ref_name == "torch.torch_in_place" and row.ref_us > 0, row.error


def test_a_then_step_runs_on_the_timed_arrays_and_its_time_is_added(monkeypatch):
    """iron.std's split x @ A: gemv_cols writes f32 partials, the then= step (gemv_cols_sum) adds them into
    y.  On a device clock each launch counts 0.25 ms, so the row's time is both steps'; y is only right
    if the step ran on the very arrays (device copies) the first launch wrote."""
    import importlib

    import iron.std.suite.gemv as suite_gemv

    registry.clear()
    importlib.reload(suite_gemv)
    items = [i for i in registry.select("bench", "interp", dtypes=["f32"]) if i.entry.name == "std/gemv/cols_split"]
    assert items
    gpu = FakeGpu()
    out = io.StringIO()
    assert run_benches(items, gpu, "fakegpu", "Fake GPU", 1, Emitter(out),
                       timing.Policy(warmup=1, reps=5, max_seconds=60)) == 0
    (row,) = [protocol.bench_row(protocol.decode(ln).data) for ln in out.getvalue().splitlines()
              if protocol.decode(ln).kind == "bench_row"]
    assert row.ok and row.iron_us == 500.0, row
    registry.clear()


def test_a_then_step_needs_a_bound_variant_and_run_time_names():
    from iron import Then, f32
    from iron.runner import execute
    from iron.std.gemv import gemv_cols_sum

    with pytest.raises(execute.SetupError, match="variant bound"):
        execute._step(Then(gemv_cols_sum, [], grid=32), ["a"], [0], "x/y")
    with pytest.raises(execute.SetupError, match="'b' is not a run-time parameter"):
        execute._step(Then(gemv_cols_sum.variant(T=f32), ["b"], grid=32), ["a"], [0], "x/y")
    step = execute._step(Then(gemv_cols_sum.variant(T=f32), ["a", 3], grid=32), ["k", "a"], [0, 1], "x/y")
    assert step.args(["K", "A"]) == ["A", 3]

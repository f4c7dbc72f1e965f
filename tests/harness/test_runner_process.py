"""``python -m iron.runner``: plans, rows, faults that fail only their own row, and a clean stdout."""

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from runner_testing import GOOD, quick_runs, write_project  # noqa: F401  (quick_runs is a fixture)

from iron.core import protocol
from iron.harness import registry
from iron.runner.main import run

MIXED = textwrap.dedent('''
    import numpy as np
    from iron import In, Setup, Tensor, f32, kernel, test_kernel, bench
    from iron.lang import program_id

    @kernel
    def copy(a: In[f32], out: Tensor[f32], n: int):
        i = program_id(0)
        if i < n:
            out[i] = a[i]

    @kernel
    def copy_unguarded(a: In[f32], out: Tensor[f32], n: int):
        out[program_id(0)] = a[program_id(0)]

    @kernel
    def relu_forgets_negatives(a: In[f32], out: Tensor[f32], n: int):
        i = program_id(0)
        if i < n:
            if a[i] > 0.0:
                out[i] = a[i]

    @kernel
    def accumulate(a: In[f32], out: Tensor[f32], n: int):
        i = program_id(0)
        if i < n:
            out[i] += a[i]

    def padded(case):
        n = case.n
        return Setup(args=[case.randn(n), case.empty(n), n], grid=n + 64, group=64, oracle=lambda a, out, n: a)

    test_kernel(copy, shapes=[1, 100], name="good")(padded)
    test_kernel(copy_unguarded, shapes=[100], name="oob")(padded)

    @test_kernel(relu_forgets_negatives, shapes=[64], name="unwritten")
    def relu(case):
        return Setup(args=[case.randn(64), case.empty(64), 64], grid=64, oracle=lambda a, out, n: np.maximum(a, 0))

    @test_kernel(accumulate, shapes=[50], name="readwrite")
    def acc(case):
        return Setup(args=[case.randn(50), case.randn(50), 50], grid=50, oracle=lambda a, out, n: out + a)

    @test_kernel(copy, shapes=[5], name="raises")
    def raises(case):
        raise ValueError("no inputs today")

    @test_kernel(copy, shapes=[5], name="no_oracle")
    def no_oracle(case):
        return Setup(args=[case.randn(5), case.empty(5), 5], grid=5)

    @bench(copy, shapes=[256], name="bad_reference", reference={"*": lambda a, out, n: a + 1})
    def bad_ref(case):
        return Setup(args=[case.randn(256), case.empty(256), 256], grid=256, oracle=lambda a, out, n: a)

    @bench(copy, shapes=[256], name="unchecked")
    def unchecked(case):
        return Setup(args=[case.randn(256), case.empty(256), 256], grid=256)
''')


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path, quick_runs):  # noqa: F811
    """Each test imports its own project's modules afresh (the real runner is a fresh process)."""
    registry.clear()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("good", "mixed", "broken", "noisy"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield
    registry.clear()


def _run(*argv: str) -> tuple[int, list[protocol.ProtocolMessage]]:
    out = io.StringIO()
    rc = run(list(argv), out)
    return rc, [protocol.decode(line) for line in out.getvalue().splitlines()]


def _rows(messages):
    return {m.data.get("test") or m.data.get("bench"): m.data for m in messages if m.kind.endswith("_row")}


def test_each_fault_fails_only_its_own_row(tmp_path):
    write_project(tmp_path, {"mixed": MIXED})
    rc, msgs = _run("test", "--backend", "interp", "--seed", "3")
    assert rc == 0 and [m.kind for m in msgs][:2] == ["hello", "plan"] and msgs[-1].kind == "done"
    assert msgs[0].data["backend"] == "interp" and msgs[0].data["seed"] == 3
    rows = [m.data for m in msgs if m.kind == "test_row"]
    plan = msgs[1].data["items"]
    assert len(rows) == len(plan) == 7 and msgs[-1].data == {"items": 7, "failed": 4}
    starts = [m.data["item"] for m in msgs if m.kind == "start"]
    assert starts == plan  # rows in plan order, each after its start
    by = {r["test"]: r for r in rows if r["case"] != "N=1"}
    assert by["good"]["ok"] and by["readwrite"]["ok"] and by["good"]["worst"] == 0.0
    assert "OutOfBoundsError" in by["oob"]["error"] and "index 100 is out of bounds" in by["oob"]["error"]
    assert not by["unwritten"]["ok"] and "got nan" in by["unwritten"]["error"]  # poison caught the missed write
    assert "ValueError: no inputs today" in by["raises"]["error"] and "mixed.py" in by["raises"]["error"]
    assert "has no oracle" in by["no_oracle"]["error"]


def test_skip_only_filter_dtype_and_list_select_items(tmp_path):
    write_project(tmp_path, {"good": GOOD})
    _, msgs = _run("test", "--backend", "interp", "--list")
    plan = msgs[1].data["items"]
    assert plan == ["scale_setup[N=1,f32]", "scale_setup[N=7,f32]", "scale_setup[N=300,f32]",
                    "scale_setup[N=1,f16]", "scale_setup[N=7,f16]", "scale_setup[N=300,f16]"]
    assert [m.kind for m in msgs] == ["hello", "plan", "done"]
    _, msgs = _run("test", "--backend", "interp", "--skip", plan[0], "--dtype", "f32", "--only", plan[0],
                   "--only", plan[1], "--only", plan[4])
    assert msgs[1].data["items"] == [plan[1]]
    _, msgs = _run("test", "--backend", "interp", "--filter", "N=300", "--lookahead", "0")
    assert msgs[1].data["items"] == [plan[2], plan[5]] and all(r["ok"] for r in _rows(msgs).values())


def test_a_module_that_does_not_import_is_reported_and_the_others_run(tmp_path):
    write_project(tmp_path, {"good": GOOD, "broken": "import no_such_module_here\n"})
    rc, msgs = _run("test", "--backend", "interp")
    errors = [m.data["message"] for m in msgs if m.kind == "error"]
    assert rc == 0 and len(errors) == 1 and "cannot load broken" in errors[0] and "no_such_module_here" in errors[0]
    assert len([m for m in msgs if m.kind == "test_row"]) == 6


def test_an_unknown_backend_or_a_missing_project_says_what_to_do(tmp_path):
    write_project(tmp_path, {"good": GOOD})
    rc, msgs = _run("test", "--backend", "opencl")
    assert rc == 2 and [m.kind for m in msgs] == ["hello", "error", "done"] and "opencl" in msgs[1].data["message"]
    (tmp_path / "iron.toml").unlink()
    rc, msgs = _run("test", "--backend", "interp")
    assert rc == 2 and "iron init" in msgs[1].data["message"]


def test_benches_time_both_sides_and_check_both_outputs(tmp_path):
    write_project(tmp_path, {"good": GOOD, "mixed": MIXED})
    rc, msgs = _run("bench", "--backend", "interp")
    assert msgs[0].data["lookahead"] == 0
    rows = [protocol.bench_row(m.data) for m in msgs if m.kind == "bench_row"]
    good = [r for r in rows if r.bench == "scale_setup"]
    assert [r.dtype for r in good] == ["f32", "f16"] and all(r.ok for r in good)
    for r in good:
        assert r.samples == 5 and r.iron_min_us <= r.iron_us <= r.iron_max_us and r.ref_us > 0
        assert r.ref_name == "numpy.scale_numpy" and r.compile_ms > 0
        assert r.iron.bytes_moved == 2 * 4096 * (4 if r.dtype == "f32" else 2) and r.iron.flops == 4096
        assert r.iron.gbps == pytest.approx(r.iron.bytes_moved / (r.iron_us * 1e3))
        assert r.ref_gbps == pytest.approx(r.iron.bytes_moved / (r.ref_us * 1e3))
    (bad,) = [r for r in rows if r.bench == "bad_reference"]
    assert not bad.ok and "reference numpy" in bad.error and "Iron:" not in bad.error and bad.iron_us > 0
    (unchecked,) = [r for r in rows if r.bench == "unchecked"]
    assert not unchecked.ok and "neither an oracle nor a reference" in unchecked.error


def test_stdout_carries_protocol_lines_only(tmp_path):
    noisy = GOOD + "\nprint('printed at import')\nimport os\nos.write(1, b'raw bytes on fd 1\\n')\n"
    write_project(tmp_path, {"noisy": noisy})
    src = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run([sys.executable, "-m", "iron.runner", "test", "--backend", "interp"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": src, "PATH": ""})
    assert done.returncode == 0, done.stderr
    kinds = [protocol.decode(line).kind for line in done.stdout.splitlines()]
    assert kinds[0] == "hello" and kinds[-1] == "done" and kinds.count("test_row") == 6
    assert "printed at import" in done.stderr and "raw bytes on fd 1" in done.stderr


def test_auto_picks_the_best_backend_here(tmp_path):
    from iron.runtime import best_backend

    write_project(tmp_path, {"good": GOOD})
    _, msgs = _run("test", "--backend", "auto", "--list")
    assert msgs[0].data["backend"] == best_backend() and msgs[0].data["device"]

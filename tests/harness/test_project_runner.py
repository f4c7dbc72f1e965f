"""``ProjectRunner``: a crash, a hang or an early exit fails that item's row alone; a fresh runner goes on."""

import os
import stat
import tempfile
import textwrap
import time

import pytest
from runner_testing import GOOD, quick_runs, write_project  # noqa: F401  (quick_runs is a fixture)

from iron.cli.project_runner import ProjectRunner, RunnerFailed
from iron.core.protocol import ProtocolError

TROUBLE = textwrap.dedent('''
    import os, signal, time
    from iron import In, Setup, Tensor, f32, kernel, test_kernel
    from iron.lang import program_id

    @kernel
    def copy(a: In[f32], out: Tensor[f32], n: int):
        i = program_id(0)
        if i < n:
            out[i] = a[i]

    def fine(case):
        n = case.n
        return Setup(args=[case.randn(n), case.empty(n), n], grid=n, oracle=lambda a, out, n: a)

    test_kernel(copy, shapes=list(range(1, 61)), name="a_many")(fine)

    @test_kernel(copy, shapes=[5], name="b_hang")
    def hang(case):
        time.sleep(600)

    @test_kernel(copy, shapes=[5], name="c_crash_ahead")
    def crash_in_setup(case):  # runs ahead on a worker thread: first blamed on whatever item is running
        os.kill(os.getpid(), signal.SIGKILL)

    def kill_while_judging(outputs):
        os.kill(os.getpid(), signal.SIGSEGV)

    @test_kernel(copy, shapes=[5], name="d_crash_main")
    def crash_in_main(case):
        return Setup(args=[case.randn(5), case.empty(5), 5], grid=5, oracle=lambda a, out, n: a,
                     canonicalize=kill_while_judging)

    @test_kernel(copy, shapes=[5], name="e_exits")
    def exits(case):
        os._exit(0)

    test_kernel(copy, shapes=[7, 9], name="f_after")(fine)
''')


@pytest.fixture
def project(tmp_path, quick_runs):  # noqa: F811
    return write_project(tmp_path, {"trouble": TROUBLE})


def test_crashes_hangs_and_early_exits_fail_their_rows_alone(project, monkeypatch):
    rows, starts, argfiles = [], [], []
    real = tempfile.NamedTemporaryFile

    def recorded(*args, **kwargs):
        f = real(*args, **kwargs)
        argfiles.append(f.name)
        return f
    monkeypatch.setattr(tempfile, "NamedTemporaryFile", recorded)
    started = time.monotonic()
    result = ProjectRunner("test", ["--backend", "interp", "--seed", "1"], on_row=rows.append,
                           on_start=starts.append, timeout=3, cwd=project).run()
    elapsed = time.monotonic() - started
    assert result.rows == rows and len(rows) == len(result.plan) == 66
    by = {(r.test, r.case): r for r in rows}
    assert {r.test for r in rows if not r.ok} == {"b_hang", "c_crash_ahead", "d_crash_main", "e_exits"}
    assert all(r.ok for r in rows if r.test in ("a_many", "f_after"))
    assert "timed out: no result within 3 s" in by["b_hang", "N=5"].error
    assert "crashed while running this item (killed by SIGKILL)" in by["c_crash_ahead", "N=5"].error
    assert "killed by SIGSEGV" in by["d_crash_main", "N=5"].error
    assert "exit status 0" in by["e_exits", "N=5"].error
    # every item reported once, failed ones in their own place; runners restarted after each failure
    assert sorted(f"{r.test}[{r.case},{r.dtype}]" for r in rows) == sorted(result.plan)
    assert result.restarts >= 4 and not result.errors and result.hello["backend"] == "interp"
    assert starts[0] == result.plan[0] and elapsed < 60
    # the run's time is its wall time, restarts and the hung item's wait included; that item's row says its wait
    assert elapsed - 1 < result.seconds <= elapsed and by["b_hang", "N=5"].seconds >= 3
    # past 50 finished items the --skip list went through an @file, removed afterwards
    assert argfiles and not any(os.path.exists(f) for f in argfiles)


def test_a_runner_that_dies_before_its_plan_is_an_error_with_its_stderr(tmp_path):
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\necho 'Fatal Python error: something broke' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(RunnerFailed, match="(?s)before planning anything.*exit status 1.*something broke"):
        ProjectRunner("test", python=str(fake), timeout=10, cwd=tmp_path).run()


def test_a_runner_of_another_protocol_is_refused(tmp_path):
    fake = tmp_path / "fake-python"
    fake.write_text('#!/bin/sh\necho \'{"protocol": 999, "runner_version": "9", "kind": "hello", "data": {}}\'\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(ProtocolError, match="protocol 999"):
        ProjectRunner("test", python=str(fake), timeout=10, cwd=tmp_path).run()


def test_an_unusable_backend_comes_back_as_an_error_not_rows(tmp_path):
    write_project(tmp_path, {"good": GOOD})
    result = ProjectRunner("test", ["--backend", "opencl"], timeout=60, cwd=tmp_path).run()
    assert result.rows == [] and len(result.errors) == 1 and "opencl" in result.errors[0] and result.failed


def test_nothing_in_the_project_is_written(project):
    before = {p: p.stat().st_mtime_ns for p in project.rglob("*") if "__pycache__" not in p.parts}
    ProjectRunner("test", ["--backend", "interp", "--filter", "f_after"], timeout=60, cwd=project).run()
    after = {p: p.stat().st_mtime_ns for p in project.rglob("*") if "__pycache__" not in p.parts}
    assert before == after


LEAVES_A_CHILD = textwrap.dedent('''
    import subprocess
    from pathlib import Path
    from iron import In, Setup, Tensor, f32, kernel, test_kernel
    from iron.lang import program_id

    @kernel
    def copy(a: In[f32], out: Tensor[f32], n: int):
        i = program_id(0)
        if i < n:
            out[i] = a[i]

    @test_kernel(copy, shapes=[5])
    def leaves_a_sleeper(case):
        child = subprocess.Popen(["sleep", "600"])  # inherits the runner's stderr (its stdout is stderr too)
        Path(PID_FILE).write_text(str(child.pid))
        return Setup(args=[case.randn(5), case.empty(5), 5], grid=5, oracle=lambda a, out, n: a)
''')


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie waiting for init is gone too
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def test_a_child_left_holding_stderr_neither_stalls_the_run_nor_outlives_it(tmp_path, quick_runs):  # noqa: F811
    """Once the runner has exited, a process it left behind with its stderr open does not keep the CLI waiting
    for the end of that pipe (a whole runner_timeout), and it is stopped with the runner's process group."""
    pid_file = tmp_path / "sleeper.pid"
    root = write_project(tmp_path / "proj", {"sleeper": f"PID_FILE = {str(pid_file)!r}\n" + LEAVES_A_CHILD})
    rows, seen = [], []

    def on_row(row):
        rows.append(row)
        seen.append(time.monotonic())
    result = ProjectRunner("test", ["--backend", "interp", "--seed", "1"], on_row=on_row, timeout=60, cwd=root).run()
    returned = time.monotonic()
    assert [r.ok for r in result.rows] == [True] == [r.ok for r in rows] and not result.errors
    assert returned - seen[-1] < 10, f"the CLI waited {returned - seen[-1]:.1f} s after the last row"
    assert result.restarts == 0
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid), "the sleeper the test left behind still runs"

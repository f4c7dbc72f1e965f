"""``iron test``: a project's registered tests through the runner, on interp and vulkan; failures explained."""

import json
import sys
import time
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from runner_testing import GOOD, quick_runs, require_vulkan, write_project  # noqa: E402,F401

from iron import config  # noqa: E402
from iron.cli.main import main  # noqa: E402

BROKEN = textwrap.dedent('''
    from iron import In, Setup, Tensor, f32, kernel, test_kernel
    from iron.lang import program_id

    @kernel
    def off_by_one(a: In[f32], out: Tensor[f32], n: int):
        i = program_id(0)
        if i < n - 1:
            out[i] = a[i]

    @test_kernel(off_by_one, shapes=[10])
    def off_by_one_setup(case):
        return Setup(args=[case.randn(10), case.empty(10), 10], grid=10, oracle=lambda a, out, n: a)
''')


@pytest.fixture
def project(tmp_path, monkeypatch, quick_runs):  # noqa: F811
    root = write_project(tmp_path / "proj", {"kernels": GOOD})
    monkeypatch.chdir(root)
    config.reload()
    return root


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_a_projects_tests_pass(project, backend, capsys):
    if backend == "vulkan":
        require_vulkan()
    assert main(["test", "--backend", backend]) == 0
    out = capsys.readouterr().out
    assert f"iron test · {backend}" in out and "scale_setup" in out and "6/6" in out and "6 passed, 0 failed" in out


def test_a_wrong_kernel_fails_with_what_and_why(project, capsys):
    (project / "broken.py").write_text(BROKEN)
    assert main(["test", "--backend", "interp", "-m", "broken", "--seed", "11"]) == 1
    captured = capsys.readouterr()
    assert "0/1" in captured.out and "N=10 f32: output 'out': 1/10 elements differ" in captured.out
    assert "got nan" in captured.out and "0 passed, 1 failed" in captured.out
    assert "--seed 11" in captured.err


def test_json_is_one_document_with_every_row(project, capsys):
    assert main(["test", "--backend", "interp", "--json", "--dtype", "f16"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "iron-test" and doc["passed"] == 3 and doc["failed"] == 0
    assert {r["dtype"] for r in doc["rows"]} == {"f16"} and all(r["ok"] for r in doc["rows"])


def test_a_module_given_as_a_path_and_a_filter(tmp_path, monkeypatch, quick_runs, capsys):  # noqa: F811
    (tmp_path / "mine.py").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    assert main(["test", "-m", "mine.py", "--backend", "interp", "--filter", "N=7"]) == 0
    assert "2 passed" in capsys.readouterr().out


def test_no_tests_and_no_project_say_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["test", "--backend", "interp"]) == 1
    assert "iron init" in capsys.readouterr().err
    write_project(tmp_path, {"kernels": GOOD})
    assert main(["test", "--backend", "interp", "--filter", "no-such-test"]) == 1
    assert "no tests matched" in capsys.readouterr().err


def test_the_corpus_runs_as_registered_tests(monkeypatch, quick_runs, capsys):  # noqa: F811
    suite = Path(__file__).resolve().parents[1] / "harness" / "corpus_suite.py"
    assert main(["test", "-m", str(suite), "--backend", "interp"]) == 0
    out = capsys.readouterr().out
    assert "corpus/softmax_shared" in out and " 0 failed" in out
    passed = int(out.strip().splitlines()[-1].split()[0])
    assert passed > 400


def test_the_example_in_docs_runner_md_passes(tmp_path, monkeypatch, quick_runs, capsys):  # noqa: F811
    import re

    doc = (Path(__file__).resolve().parents[2] / "docs" / "runner.md").read_text()
    blocks = dict((lang, body) for lang, body in re.findall(r"```(toml|python)\n(.*?)```", doc, re.S))
    (tmp_path / "iron.toml").write_text(blocks["toml"])
    (tmp_path / "kernels.py").write_text(blocks["python"])
    monkeypatch.chdir(tmp_path)
    assert main(["test", "--backend", "interp"]) == 0
    out = capsys.readouterr().out
    assert "axpy_setup" in out and "block_sum_setup   18/18" in out and "33 passed, 0 failed" in out


def test_a_filter_is_never_read_as_a_file_of_arguments_or_a_flag(project, capsys):
    """``--filter @x`` is the text "@x" (the runner once read the file x as more arguments: here "N=7", which
    ran two tests), and a filter that begins with "-" is no flag either."""
    (project / "x").write_text("N=7\n")
    for flag in ("--filter=@x", "--filter=-x"):
        assert main(["test", "--backend", "interp", flag]) == 1
        err = capsys.readouterr().err
        assert "no tests matched" in err and "error" not in err


@pytest.mark.parametrize("value", ["inf", "0", "-3", "nan", "1e400", "soon"])
def test_a_bad_timeout_is_a_clean_usage_error(project, value, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["test", "--backend", "interp", "--timeout", value])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument --timeout: " in err and "runner_timeout" in err and "Traceback" not in err


HANGS = textwrap.dedent('''
    import time
    from iron import Setup, Tensor, f32, kernel, test_kernel
    from iron.lang import program_id

    @kernel
    def copy1(a: Tensor[f32], out: Tensor[f32]):
        i = program_id(0)
        out[i] = a[i]

    @test_kernel(copy1, shapes=[4])
    def hangs_setup(case):
        time.sleep(600)
''')


def test_the_summary_time_is_the_runs_wall_time_with_restarts(tmp_path, monkeypatch, quick_runs, capsys):  # noqa: F811
    """A row failed as hung stops its runner, and a fresh runner starts; the summary's time is the whole run's
    wall time, both runners' start-up included (it was the rows' own times added up)."""
    root = write_project(tmp_path / "proj", {"kernels": GOOD, "hangs": HANGS})
    monkeypatch.chdir(root)
    config.reload()
    started = time.monotonic()
    assert main(["test", "--backend", "interp", "--timeout", "3"]) == 1
    wall = time.monotonic() - started
    out = capsys.readouterr().out
    assert "timed out" in out
    totals = out.rstrip().splitlines()[-1]
    assert totals.endswith(" s") and " failed · " in totals, totals
    reported = float(totals.rsplit(" · ", 1)[1].split()[0])
    assert 0.85 * wall <= reported <= wall + 0.1, (reported, wall)

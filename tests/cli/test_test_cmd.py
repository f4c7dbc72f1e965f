"""``iron test``: a project's registered tests through the runner, on interp and vulkan; failures explained."""

import json
import sys
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

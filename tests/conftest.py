"""Shared fixtures: reproducible-but-fresh random seeds for the corpus suites.

Every run draws a new base seed (so inputs differ from run to run) unless
``--corpus-seed N`` fixes it; each test derives its own seed from the base
seed and its test id, and failing corpus checks print both.
"""

import gc
import os
import secrets
import zlib
from dataclasses import dataclass

# The suite verifies the IR after every pass (iron's default is once after the pipeline), so a pass that
# breaks the IR is named where it did; before iron reads its options, and for the runner processes too.
os.environ.setdefault("IRON_VERIFY", "each")

import numpy as np
import pytest


@dataclass(frozen=True)
class TestSeed:
    """A test's seed and the run's base seed, which replays it."""

    __test__ = False  # not a test class, despite the name

    value: int
    base: int

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.value)

    def __str__(self) -> str:
        return f"seed {self.value} (replay with: pytest --corpus-seed {self.base} <this test id>)"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--corpus-seed", type=int, default=None,
                     help="base seed of the corpus tests' random inputs (default: a fresh one each run)")


def pytest_configure(config: pytest.Config) -> None:
    seed = config.getoption("--corpus-seed")
    config.corpus_base_seed = seed if seed is not None else secrets.randbits(31)


@pytest.fixture
def launches(monkeypatch) -> list[str]:
    """The kernels launched through the jit's full path (resolution and call summary) during the test, by name.
    A repeated launch the device's generated launcher takes straight (iron.jit.kernel.relaunch) is not one."""
    from iron.jit.kernel import KernelFunction

    seen: list[str] = []
    real = KernelFunction._launch

    def spy(self, *args, **kwargs):
        seen.append(self.name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(KernelFunction, "_launch", spy)
    return seen


#: Test files under these folders need an NVIDIA GPU.
GPU_PATHS = ("tests/gpu/",)
#: Test files under these folders run an external compiler or a Vulkan driver, whatever fixtures they take.
TOOLCHAIN_PATHS = ("tests/toolchains/", "tests/runtime/vulkan/")
#: Fixtures that mean an external compiler or driver.
TOOLCHAIN_FIXTURES = frozenset({"require_toolchain", "missing_tool"})
#: Test ids (prefixes) of the families that took seconds per test on CI's two cores (--durations=80,
#: 2026-12-02): the standard library's rows and compiled specialisations, the fuzzer's seeds, and the runner
#: tests that start processes.
SLOW: tuple[str, ...] = ("tests/std/", "tests/fuzz/test_differential.py::test_backend_agrees",
                         "tests/harness/test_project_runner.py", "tests/cli/test_test_cmd.py",
                         "tests/cli/test_bench_cmd.py", "tests/pytorch/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test ``gpu``, ``toolchain`` and ``slow`` (pyproject.toml) from where it lives and what it uses,
    so that ``-m`` selects them without a marker on every test."""
    root = str(config.rootpath) + os.sep
    for item in items:
        nodeid = item.nodeid
        path = str(item.path).removeprefix(root).replace(os.sep, "/")
        params = getattr(getattr(item, "callspec", None), "params", {})
        if path.startswith(GPU_PATHS):
            item.add_marker(pytest.mark.gpu)
        if (path.startswith(TOOLCHAIN_PATHS) or TOOLCHAIN_FIXTURES.intersection(getattr(item, "fixturenames", ()))
                or params.get("backend") in ("vulkan", "cuda")):
            item.add_marker(pytest.mark.toolchain)
        if nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Take what the session leaves alive out of the cyclic garbage collector before the process ends.

    The suite ends holding millions of long-lived objects (the IR of every kernel it lowered: ops, values,
    source locations, mostly in reference cycles). After the summary, pytest's cleanup and the interpreter's
    shutdown each run full collections, each a walk over all of them (issue 16 saw about 40 s between the whole
    suite's summary and its exit; after one std module, 5.2 s before this freeze, 0.03 s after). Frozen after
    pytest's collection at unconfigure (its check for exceptions raised in finalizers) has run, they are
    skipped; every atexit handler (devices closing) still runs.
    """
    gc.freeze()


def pytest_report_header(config: pytest.Config) -> str:
    return f"corpus base seed: {config.corpus_base_seed} (replay with --corpus-seed {config.corpus_base_seed})"


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> TestSeed:
    """This test's seed: the base seed mixed with the test id, so tests draw different inputs."""
    base = request.config.corpus_base_seed
    return TestSeed(zlib.crc32(f"{base}:{request.node.nodeid}".encode()) & 0x7FFFFFFF, base)


@pytest.fixture(autouse=True)
def _fresh_configuration():
    """No test sees options another test set in code (iron.use, set_option)."""
    from iron import config

    config.clear_overrides()
    yield
    config.clear_overrides()


def toolchains_required() -> bool:
    """True in CI (``CI=true``) or with IRON_REQUIRE_TOOLCHAINS=1: a missing compiler is then a failure."""
    import os

    from iron import config

    return os.environ.get("CI", "").strip().lower() == "true" or bool(config.get("require_toolchains"))


def check_toolchain(name: str) -> None:
    """Return if toolchain ``name`` (nvrtc, hip, spirv, metal) is here; else skip, saying how to install it.

    Where toolchains are required (:func:`toolchains_required`) the test fails instead.
    """
    from iron.codegen.toolchains import TOOLCHAINS

    module = TOOLCHAINS[name]
    if module.available():
        return
    report_missing(f"toolchain '{name}' ({module.TOOL}) is missing: {module.unavailable_reason()}; "
                   f"install it with: {module.INSTALL}")


def report_missing(message: str) -> None:
    """Skip with ``message`` (which says how to install what is missing); fail where toolchains are required."""
    if toolchains_required():
        pytest.fail(message + " [required here: CI=true or IRON_REQUIRE_TOOLCHAINS=1]", pytrace=False)
    pytest.skip(message)


@pytest.fixture
def require_toolchain():
    """``require_toolchain("nvrtc")`` in a test: skip (fail in CI) unless that compiler is installed."""
    return check_toolchain


@pytest.fixture
def missing_tool():
    """``missing_tool("glslang 13 is missing; install it with: ...")``: a skip, or a failure in CI."""
    return report_missing


@pytest.fixture
def user_module(tmp_path):
    """``user_module(name, source)``: ``source`` written to ``<tmp>/<name>.py`` and imported, as a user's own
    file (kernels need a file: Iron reads their source), for tests of located errors."""
    import importlib.util

    def load(name: str, source: str):
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load

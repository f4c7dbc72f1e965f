"""The library's tests draw fresh inputs each run: the seed is the run's corpus base seed (--corpus-seed)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))  # runner_testing: the Vulkan check


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """This run's seed; a failure message names it (replay: pytest --corpus-seed N)."""
    return request.config.corpus_base_seed


@pytest.fixture
def on_interp(monkeypatch):
    """IRON_BACKEND=interp for the test, the options reloaded before and after (call plans key on them)."""
    from iron import config

    monkeypatch.setenv("IRON_BACKEND", "interp")
    config.reload()
    yield
    monkeypatch.undo()
    config.reload()

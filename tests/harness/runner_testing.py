"""Helpers for the runner and CLI tests: small projects on disk, and the Vulkan device or a skip."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from iron import config

#: A project module: a correct kernel with a test and a bench, and nothing else.
GOOD = textwrap.dedent('''
    import numpy as np
    from iron import Depth, Expect, In, Setup, T, Tensor, bench, f16, f32, kernel, test_kernel, variants
    from iron.lang import program_id

    @kernel(variants(T=[f32, f16]))
    def scale(x: In[T], out: Tensor[T], s: f32, n: int):
        i = program_id(0)
        if i < n:
            out[i] = T(s * f32(x[i]))

    def scale_numpy(x, out, s, n):
        return (np.float32(s) * x.astype(np.float32)).astype(out.dtype)

    @test_kernel(scale, shapes=[1, 7, 300])
    @bench(scale, shapes=[4096], reference={"*": scale_numpy})
    def scale_setup(case):
        n = case.n
        return Setup(args=[case.randn(n), case.empty(n), np.float32(0.75), n], grid=n, group=64,
                     oracle=lambda x, out, s, n: s * x, depth=Depth(1, 1), flops=n)
''')


def write_project(root: Path, modules: dict[str, str], listed: list[str] | None = None) -> Path:
    """``root`` with an iron.toml listing ``listed`` (default: every module) and the module files."""
    root.mkdir(parents=True, exist_ok=True)
    names = listed if listed is not None else list(modules)
    (root / "iron.toml").write_text("[iron]\nmodules = " + json.dumps(names) + "\n")
    for name, text in modules.items():
        (root / f"{name}.py").write_text(text)
    return root


def required() -> bool:
    """A missing driver fails instead of skipping in CI (``CI=true``) or with ``require_toolchains``."""
    return os.environ.get("CI", "").strip().lower() == "true" or bool(config.get("require_toolchains"))


def require_vulkan() -> None:
    """Return if a Vulkan device answers here (lavapipe will do); else skip (fail in CI)."""
    from iron.runtime import BackendUnavailable, get_device

    try:
        get_device("vulkan")
    except (BackendUnavailable, Exception) as e:  # no loader, no driver: the message says which
        message = f"no usable Vulkan device here: {e}; install mesa-vulkan-drivers (lavapipe)"
        if required():
            pytest.fail(message + " [required here]", pytrace=False)
        pytest.skip(message)


@pytest.fixture
def quick_runs(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Children use a private cache folder and few bench repetitions (the options travel by environment)."""
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "iron-cache"))
    monkeypatch.setenv("IRON_BENCH_WARMUP", "1")
    monkeypatch.setenv("IRON_BENCH_REPS", "5")
    config.reload()

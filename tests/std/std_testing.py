"""Running the library's registered tests inside pytest: every row on a backend, a mutant's rows, and
every kernel emitted and compiled for the four targets.

The suite modules (src/iron/std/suite) register ``std/<module>/...`` items; these helpers run them
in-process through the runner's own code (iron.runner.tests), so pytest sees exactly what
``iron test`` sees.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from iron.codegen.backends import EMITTING
from iron.codegen.toolchains import check_source
from iron.core.protocol import TestRow
from iron.harness import registry
from iron.runner import execute
from iron.runner.tests import run_tests

#: The seed of the compile points (their inputs do not matter); the runs take the fixture ``seed``.
SEED = 20261129


def suite(module: str) -> list[registry.Registered]:
    """Import ``iron.std.suite.<module>`` and return its test registrations."""
    mod = importlib.import_module(f"iron.std.suite.{module}")
    prefix = f"std/{module}/"
    entries = [e for e in registry.registered("test") if e.name.startswith(prefix)]
    if not entries:  # another test cleared the registries (tests/harness does): register again
        importlib.reload(mod)
        entries = [e for e in registry.registered("test") if e.name.startswith(prefix)]
    assert entries, f"iron.std.suite.{module} registers no test named {prefix}..."
    return entries


def device(backend: str) -> Any:
    if backend == "vulkan":
        from runner_testing import require_vulkan

        require_vulkan()
    from iron.runtime import get_device

    return get_device(backend)


def run_entry(entry: registry.Registered, backend: str, seed: int) -> list[TestRow]:
    """Every item of ``entry`` on ``backend``; the rows in order."""
    rows: list[TestRow] = []
    run_tests(entry.items(backend), device(backend), backend, seed,
              lambda kind, payload: rows.append(payload) if kind == "test_row" else None, lookahead=0)
    return rows


def assert_rows_pass(rows: Sequence[TestRow], seed: int) -> None:
    failed = [f"{r.test}[{r.case},{r.dtype}]: {r.error or f'worst {r.worst}'}" for r in rows if not r.ok]
    assert rows, "no rows ran"
    assert not failed, f"seed {seed} (replay: pytest --corpus-seed {seed}):\n" + "\n".join(failed)


def mutant_rows(name: str, mutant: Any, seed: int, backend: str = "interp", shapes: Any = None) -> list[TestRow]:
    """The rows of registration ``name`` with its kernel replaced by ``mutant`` (same parameters)."""
    entry = next(e for e in suite(name.split("/")[1]) if e.name == name)
    fake = registry.Registered("test", name + "#mutant", mutant, entry.setup,
                               entry.shapes if shapes is None else shapes, entry.dtypes, entry.bindings, None,
                               entry.origin)
    return run_entry(fake, backend, seed)


def assert_mutant_caught(name: str, mutant: Any, seed: int, backend: str = "interp", shapes: Any = None) -> None:
    """The known-bad ``mutant`` must fail at least one row of ``name``'s oracle check."""
    rows = mutant_rows(name, mutant, seed, backend, shapes)
    assert rows and any(not r.ok for r in rows), f"the mutant of {name} passed every row: the test is too weak"


@dataclass(frozen=True, eq=False)
class Point:
    """One kernel specialisation a test runs: found at collection without lowering it (the kernel lowers
    and compiles it on first use, once per test run)."""

    kernel: Any
    binding: dict[str, Any]

    def compiled(self, target: str) -> Any:
        return self.kernel.variant(**self.binding).compiled(target)


def compile_points(module: str) -> list[tuple[str, Point]]:
    """(registration name, point) for every distinct kernel specialisation the module's tests run."""
    points: dict[tuple[str, str], tuple[str, Point]] = {}
    for entry in suite(module):
        for item in entry.items("interp"):
            case, setup = execute.make_setup(item, SEED, device("interp"))
            kernel, binding = execute.bind(item, case, setup)
            key = (kernel.name, repr(sorted(binding.items(), key=lambda kv: kv[0])))
            points.setdefault(key, (entry.name, Point(kernel, binding)))
    return list(points.values())


TOOLCHAIN_OF = {b.target: b.toolchain for b in EMITTING}


def compile_for(target: str, launch: Any) -> None:
    """Emit ``launch``'s kernel for ``target`` and compile it with the real toolchain."""
    from iron.codegen.emit import emit_kernel

    check_source(target, emit_kernel(launch.compiled(target), target).source)


def compile_params(module: str) -> list[Any]:
    """pytest params (target, launch) for every specialisation of ``module`` on every target."""
    return [pytest.param(t, launch, id=f"{t}-{module}-{launch.kernel.name}-{i}")
            for i, (_, launch) in enumerate(compile_points(module)) for t in TOOLCHAIN_OF]


def load_source_module(source: str, tmp_path: Any, stem: str) -> Any:
    """Import ``source`` (a library module's text, relative imports made absolute) from ``tmp_path/stem.py``."""
    import importlib.util
    import re
    import sys

    source = re.sub(r"^from \.\.(\w+)", r"from iron.\1", source, flags=re.M)
    source = re.sub(r"^from \.(\w*) import", lambda m: f"from iron.std{'.' + m.group(1) if m.group(1) else ''} import",
                    source, flags=re.M)
    path = tmp_path / f"{stem}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def edited_module(module: Any, tmp_path: Any, *edits: tuple[str, str], unique: bool = True) -> Any:
    """A copy of library ``module`` with each ``(old, new)`` edit made: the known-bad mutants of the tests.

    ``old`` must occur exactly once (``unique``) or at least once (every occurrence is replaced).
    """
    from pathlib import Path

    name = Path(module.__file__).name
    source = Path(module.__file__).read_text()
    for old, new in edits:
        count = source.count(old)
        assert count == 1 if unique else count >= 1, f"the mutation site {old!r} occurs {count} times in {name}"
        source = source.replace(old, new)
    return load_source_module(source, tmp_path, f"{Path(name).stem}_mutant_{abs(hash(edits))}")


def spy_on_kernels(monkeypatch: Any, module: Any, *names: str) -> list:
    """The (kernel name, binding) of every ``variant`` a host function asks of ``module``'s kernels ``names`` (the
    names it launches them by), in order."""
    launched: list = []
    for name in names:
        class Spy:
            def variant(self, _real=getattr(module, name), _name=name, **binding):
                launched.append((_name, binding))
                return _real.variant(**binding)
        monkeypatch.setattr(module, name, Spy())
    return launched


def assert_wgmma_pipeline(launch: Any) -> None:
    """ptxas keeps ``launch``'s wgmma a pipeline: no serialisation note (C7515) in NVRTC's report for sm_90a.
    It serialises them when anything but wgmma writes an accumulator between a multiply's issue and its wait,
    or a wgmma sits in a divergent path: the multiplies then run one at a time."""
    from iron.codegen.emit import emit_kernel
    from iron.codegen.toolchains import nvrtc

    report = nvrtc.build(emit_kernel(launch.compiled("cuda"), "cuda").source, arch="sm_90").report
    assert report["arch"] == "sm_90a" and report["kernels"]
    assert report["wgmma_serialized"] == {}

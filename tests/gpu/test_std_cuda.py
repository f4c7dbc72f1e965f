"""The whole standard library (iron.std) on the ``cuda`` device, against the same oracles as on the CPU.

One test per registration of iron.std.suite, every item at its "cuda" shapes, through the runner's own
code (what `iron test --backend cuda` runs).  Skips where no CUDA GPU answers (CI); the H200 runs it.
"""

from __future__ import annotations

import pytest

import iron.std.suite  # noqa: F401  (registers every std/ item)
from iron.harness import registry
from iron.runner.tests import run_tests

ENTRIES = [e for e in registry.registered("test") if e.name.startswith("std/")]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_std_kernel_matches_its_oracle_on_cuda(cuda, entry, request) -> None:
    seed = request.config.corpus_base_seed
    rows = []
    run_tests(entry.items("cuda"), cuda, "cuda", seed,
              lambda kind, payload: rows.append(payload) if kind == "test_row" else None, lookahead=0)
    failed = [f"[{r.case},{r.dtype}]: {r.error or f'worst {r.worst}'}" for r in rows if not r.ok]
    assert rows and not failed, f"seed {seed} (pytest --corpus-seed {seed}):\n" + "\n".join(failed)

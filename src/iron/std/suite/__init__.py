"""The standard library's tests and benches: one module here per module of :mod:`iron.std`.

Importing this package imports every suite module, which registers its ``@test_kernel`` and
``@bench`` items (docs/runner.md); the repository's iron.toml lists it.  Rows are named
``std/<module>/<kernel>`` so ``iron test --filter std/softmax`` picks one family.
"""

from __future__ import annotations

import importlib
import pkgutil

SUITES = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))

for _name in SUITES:
    importlib.import_module(f".{_name}", __name__)

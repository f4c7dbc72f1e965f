"""The layers of DESIGN.md hold: iron.core imports no numpy, codegen touches no device."""

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).parents[2] / "src"


def _modules_after_import(module: str) -> set[str]:
    code = f"import sys; import {module}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(SRC), "PATH": ""})
    return set(out.stdout.split())


def test_core_imports_no_numpy():
    mods = _modules_after_import("iron.core")
    assert "numpy" not in mods


def test_codegen_does_not_import_runtime():
    mods = _modules_after_import("iron.codegen.pipeline")
    assert not any(m.startswith("iron.runtime") for m in mods)


def test_no_module_reads_iron_settings_from_the_environment_directly():
    offenders = []
    for py in (SRC / "iron").rglob("*.py"):
        if py.parent.name == "config":
            continue
        text = py.read_text()
        if "os.environ" in text or "os.getenv" in text:
            offenders.append(str(py.relative_to(SRC)))
    assert not offenders, f"read options through iron.config, not os.environ: {offenders}"

"""The layers of DESIGN.md hold: iron.core imports no numpy, codegen touches no device."""

import ast
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


#: The layers, lowest first (docs/architecture.md): a module may import its own layer and those below.
#: ``iron`` itself (the public façade: the language and ``@iron.kernel``) sits with ``jit``.
LAYERS = {"core": 0, "config": 0, "_version": 0, "lang": 1, "codegen": 2, "runtime": 3, "jit": 4, "": 4,
          "harness": 5, "std": 6, "torch": 7, "models": 7, "runner": 7, "cli": 8, "__main__": 9}


def _imports(py: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``py``, function-level ones included."""
    package = py.relative_to(SRC).parts[:-1]  # a module's package; for __init__.py, the package itself
    found = []
    for node in ast.walk(ast.parse(py.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.append((node.lineno, node.module or ""))
                continue
            base = list(package[:len(package) - (node.level - 1)])
            if node.module:
                found.append((node.lineno, ".".join(base + [node.module])))
            else:  # from . import a, b: each name is a module of the package (or a name in its __init__)
                found += [(node.lineno, ".".join(base + [a.name])) for a in node.names]
    return found


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "iron":
        return None
    return LAYERS.get(parts[1] if len(parts) > 1 else "", LAYERS[""])


def test_no_module_imports_a_layer_above_its_own():
    offenders = []
    for py in sorted((SRC / "iron").rglob("*.py")):
        mine = _layer(".".join(py.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"))
        for line, module in _imports(py):
            theirs = _layer(module)
            if mine is not None and theirs is not None and theirs > mine:
                offenders.append(f"{py.relative_to(SRC)}:{line} imports {module}")
    assert not offenders, "imports against the layer order core <- lang <- codegen <- runtime <- jit <- " \
                          "harness <- std <- runner <- cli:\n" + "\n".join(offenders)


def test_every_package_has_a_layer():
    packages = {p.name for p in (SRC / "iron").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(LAYERS), f"give these packages a layer: {sorted(packages - set(LAYERS))}"

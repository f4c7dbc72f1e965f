"""Find kernels by name: ``file.py:name``, ``package.module:name`` or a bare name.

A bare name is looked up in the modules the project's ``iron.toml`` lists
under ``[iron] modules = [...]``.  Errors say what was searched and what to
write instead, never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from ..core.errors import IronCompileError, IronError


class KernelNotFound(IronError):
    pass


class ModuleImportFailed(KernelNotFound):
    """The user's module raised while it was imported (a syntax error, an exception in its body)."""


_loads = 0
_IRON_DIR = str(Path(__file__).resolve().parents[1])


def _user_frame(exc: BaseException, where: Path | None) -> str:
    """Where in the user's code ``exc`` arose: ``file:line:column`` of a syntax error, else the last frame
    outside Python's import machinery and Iron (an Iron error raised by the user's line is theirs)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        column = f":{exc.offset}" if exc.offset else ""
        text = (exc.text or "").rstrip("\n")
        shown = f"\n    {text.strip()}\n    {' ' * max(0, (exc.offset or 1) - 1 - (len(text) - len(text.lstrip())))}^" \
            if text.strip() else ""
        return f"{exc.filename}:{exc.lineno}{column}: {type(exc).__name__}: {exc.msg}{shown}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<frozen") and not f.filename.startswith(_IRON_DIR)]
    at = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else (f"{where}: " if where else "")
    return f"{at}{type(exc).__name__}: {exc}"


def _load_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise KernelNotFound(f"no such file: {path}")
    # A fresh module each time: the file may have changed since an earlier load in this process.
    global _loads
    _loads += 1
    mod_name = f"_iron_user_{path.stem}_{_loads}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise KernelNotFound(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except IronCompileError:
        raise
    except Exception as e:  # the user's module failed to import: report it as theirs
        del sys.modules[mod_name]
        raise ModuleImportFailed(f"importing {path} failed: {_user_frame(e, path)}") from e
    finally:
        sys.path.remove(str(path.resolve().parent))
    return module


def _load_module(name: str) -> ModuleType:
    """Import module ``name`` as ``python -m`` would from here: the working directory is searched first
    (the ``iron`` script's own folder is what Python puts on the path, not the user's)."""
    here = str(Path.cwd())
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(name)
    except IronCompileError:
        raise
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise KernelNotFound(f"cannot import module '{name}': {e} (searched the working directory {here} "
                                 "and the installed packages)") from e
        raise ModuleImportFailed(f"importing module '{name}' failed: {_user_frame(e, None)}") from e
    except Exception as e:  # the user's module failed to import: report it as theirs
        raise ModuleImportFailed(f"importing module '{name}' failed: {_user_frame(e, None)}") from e


def project_modules(start: Path | None = None) -> list[str]:
    """The modules the project's iron.toml lists (none without a project); its folder joins the import path."""
    from .project import find_project  # project imports this module

    project = find_project(start)
    if project is None:
        return []
    if str(project.root) not in sys.path:
        sys.path.insert(0, str(project.root))
    return list(project.modules)


def is_kernel(obj: Any) -> bool:
    """A ``@kernel`` object: it can be specialised (``variant``) and lowered (``ir``)."""
    return not isinstance(obj, type) and all(callable(getattr(obj, a, None)) for a in ("variant", "ir")) \
        and hasattr(obj, "variants")


def find_kernel(spec: str) -> Any:
    """The kernel object named by ``spec``."""
    if ":" in spec:
        where, name = spec.rsplit(":", 1)
        module = _load_file(Path(where)) if where.endswith(".py") else _load_module(where)
        obj = getattr(module, name, None)
        if obj is None or not is_kernel(obj):
            found = sorted(n for n, v in vars(module).items() if is_kernel(v))
            raise KernelNotFound(f"'{name}' is not a kernel in {where}; kernels there: {', '.join(found) or 'none'}")
        return obj
    modules = project_modules()
    if not modules:
        raise KernelNotFound(f"cannot find kernel '{spec}': name it as FILE.py:{spec} or MODULE:{spec}, "
                             "or list your kernel modules in iron.toml under [iron] modules = [...]")
    for m in modules:
        obj = getattr(_load_module(m), spec, None)
        if obj is not None and is_kernel(obj):
            return obj
    raise KernelNotFound(f"no kernel '{spec}' in the project's modules ({', '.join(modules)})")


def load_source(where: str) -> ModuleType:
    """A module named by a ``.py`` path or a dotted module name."""
    return _load_file(Path(where)) if where.endswith(".py") else _load_module(where)


def kernels_in(sources: list[str] | None = None, name_filter: str | None = None) -> list[tuple[str, Any]]:
    """Every kernel defined in ``sources`` (default: the modules iron.toml lists), by name,
    keeping those whose name contains ``name_filter``."""
    sources = sources or project_modules()
    if not sources:
        raise KernelNotFound("no kernel modules: pass --module FILE.py (or MODULE), "
                             "or list them in iron.toml under [iron] modules = [...]")
    found: dict[str, Any] = {}
    for src in sources:
        module = load_source(src)
        for name, obj in vars(module).items():
            if is_kernel(obj) and (not name_filter or name_filter in name):
                found.setdefault(name, obj)
    return sorted(found.items())

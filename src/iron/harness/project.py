"""An Iron project: the folder holding ``iron.toml`` and the modules it names.

``iron.toml``::

    [iron]
    modules = ["kernels", "more.kernels"]   # imported from the project's folder (or paths: "lib/ops.py")
    backend = "auto"                        # any option (docs/configuration.md)

Importing a module runs its ``@test_kernel`` / ``@bench`` decorators, which is how the registries
fill.  The runner imports them; the CLI never does (it touches no GPU and no user code).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .. import config
from ..core.errors import IronError
from .discovery import load_source


class ProjectError(IronError):
    pass


@dataclass(frozen=True)
class Project:
    """A folder with an ``iron.toml``; ``modules`` as listed under ``[iron] modules``."""

    root: Path
    modules: tuple[str, ...]

    @property
    def toml(self) -> Path:
        return self.root / "iron.toml"


def find_project(start: Path | None = None) -> Project | None:
    """The project whose ``iron.toml`` is in ``start`` (default: the working directory) or above it, as far
    as the project's root (:func:`iron.config.find_toml`: a file another user owns or may write is refused)."""
    f = config.find_toml(start)
    if f is None:
        return None
    mods = config.toml_table(f).get("modules", [])
    if not isinstance(mods, list) or not all(isinstance(m, str) for m in mods):
        raise ProjectError(f"{f}: [iron] modules must be a list of module names, e.g. modules = [\"kernels\"]")
    return Project(f.parent, tuple(mods))


def sources(explicit: list[str] | None, start: Path | None = None) -> tuple[list[str], Project | None]:
    """The module sources to load: ``explicit`` (``-m``) if given, else the project's modules."""
    project = find_project(start)
    if explicit:
        return list(explicit), project
    if project is None:
        raise ProjectError("no iron.toml here or above: run `iron init` to start a project, or pass -m FILE.py "
                           "(or -m MODULE) with your kernels")
    if not project.modules:
        raise ProjectError(f"{project.toml} lists no modules: add [iron] modules = [\"kernels\"]")
    return list(project.modules), project


def load(source: str, project: Project | None) -> ModuleType:
    """Import one source (a ``.py`` path or a module name importable from the project's folder)."""
    if project is not None and str(project.root) not in sys.path:
        sys.path.insert(0, str(project.root))
    if source.endswith(".py") and project is not None and not Path(source).is_absolute():
        source = str(project.root / source)  # iron.toml paths are relative to the project, not the shell
    return load_source(source)


__all__ = ["Project", "ProjectError", "find_project", "load", "sources"]

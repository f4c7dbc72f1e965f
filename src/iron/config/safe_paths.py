"""Which folders Iron must never own: where a cache or build folder would put the user's files at risk.

``iron clean`` deletes what Iron wrote inside its cache and build folders, so
such a folder must never be one that holds the user's life: the home folder,
a file-system root, or a folder holding the project (or the working folder).
One rule, used by ``iron clean`` and by the ``cache_dir`` option's check.
"""

from __future__ import annotations

import os
from pathlib import Path


def _resolved(path: Path) -> Path:
    """``path`` made absolute with its symlinks resolved (a folder that links to home is home)."""
    try:
        return Path(os.path.realpath(path.expanduser()))
    except (OSError, RuntimeError):  # an unknown ~user, a symlink loop
        return Path(os.path.abspath(path))


def _home() -> Path | None:
    try:
        return _resolved(Path.home())
    except (RuntimeError, KeyError, OSError):  # no HOME and no password entry
        return None


def _holds(folder: Path, other: Path) -> bool:
    """Whether ``other`` is ``folder`` or lies inside it."""
    return other == folder or folder in other.parents


def unsafe_folder_reason(path: Path, project_root: Path | None) -> str | None:
    """Why Iron must not own ``path`` (as a cache or build folder), or None when it may.

    Refused: a file-system root, the user's home folder or a folder holding it,
    and a folder holding ``project_root`` (the folder with ``iron.toml``) or the
    working folder.  Symlinks are resolved first, so a link to one of them is
    refused too.
    """
    folder = _resolved(Path(path))
    if folder.parent == folder:
        return f"{path} is a file-system root"
    home = _home()
    if home is not None and _holds(folder, home):
        return f"{path} is your home folder" if folder == home else f"{path} holds your home folder ({home})"
    places = [("the project", project_root)] if project_root is not None else []
    try:
        places.append(("the working folder", Path.cwd()))
    except OSError:  # the working folder was removed
        pass
    for what, place in places:
        resolved = _resolved(Path(place))
        if _holds(folder, resolved):
            return f"{path} holds {what} ({resolved})"
    return None


__all__ = ["unsafe_folder_reason"]

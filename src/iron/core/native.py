"""Small C extension modules Iron builds once with the system C compiler and loads: the hot paths that pay
for Python's per-value dispatch on every call (the CUDA launch, the std call-plan signature).

Each is built into the ``cache_dir`` folder under a name that hashes its source, the Python ABI and the
compiler, with the write made atomic (build to a temporary name, then rename), so processes sharing the folder
never load a half-written file.  Where there is no C compiler, no Python headers or no cache folder, or the
module's option is off, :meth:`NativeModule.load` returns None, says why at debug level (logger
``iron.native``) and the caller keeps its Python path.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

from .. import config

_log = logging.getLogger("iron.native")


def compiler() -> str | None:
    """The C compiler to build with: the one Python was built with, else cc / gcc / clang."""
    for candidate in ((sysconfig.get_config_var("CC") or "").split(" ")[0], "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return candidate
    return None


class NativeModule:
    """The C module ``name`` (``PyInit_<name>``) of ``source``, linked with ``libraries`` and on while the
    boolean option ``option`` is."""

    def __init__(self, source: Path, name: str, option: str, libraries: tuple[str, ...] = ()) -> None:
        self.source, self.name, self.option, self.libraries = source, name, option, libraries
        self._loaded: dict[bool, ModuleType | None] = {}
        #: Why the last :meth:`load` found no module (None: it found one, or it was not asked).
        self.why_not: str | None = None

    def _key(self, cc: str) -> str:
        h = hashlib.sha256(self.source.read_bytes())
        h.update(f"{sys.implementation.cache_tag} {sysconfig.get_config_var('EXT_SUFFIX')} {cc}".encode())
        return h.hexdigest()[:16]

    def build(self, folder: Path) -> Path:
        """The built module's path in ``folder`` (built now unless already there); RuntimeError says why not."""
        cc = compiler()
        if cc is None:
            raise RuntimeError("no C compiler (install gcc or clang)")
        include = sysconfig.get_paths()["include"]
        if not Path(include, "Python.h").exists():
            raise RuntimeError(f"no Python headers in {include} (Debian: apt-get install python3-dev)")
        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
        target = folder / f"{self.name}-{self._key(cc)}{suffix}"
        if target.exists():
            return target
        folder.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{self.name}-", suffix=suffix, dir=folder)
        os.close(fd)
        try:
            command = [cc, "-O2", "-shared", "-fPIC", f"-I{include}", str(self.source), "-o", temporary,
                       *self.libraries]
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            if done.returncode:
                raise RuntimeError(f"{cc} failed: {(done.stderr or done.stdout).strip()[:400]}")
            os.replace(temporary, target)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
        return target

    def load(self) -> ModuleType | None:
        """The module, or None where it is off or cannot be had (:attr:`why_not` says why)."""
        enabled = bool(config.get(self.option))
        if enabled in self._loaded:
            return self._loaded[enabled]
        module = None
        if not enabled:
            self.why_not = f"off (IRON_{self.option.upper()}=0)"
        else:
            folder = config.cache_dir()
            try:
                if folder is None:
                    raise RuntimeError("the disk cache is off (IRON_CACHE_DIR=off): nowhere to keep the built module")
                path = self.build(Path(folder) / "native")
                spec = importlib.util.spec_from_file_location(self.name, path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)  # type: ignore[union-attr]
                self.why_not = None
            except (RuntimeError, OSError, ImportError, subprocess.SubprocessError) as e:
                self.why_not = str(e)
                _log.debug("%s is not available, its Python path runs instead: %s", self.name, self.why_not)
        self._loaded[enabled] = module
        return module

"""The native launch module: ``launch.c`` built once with the system C compiler and loaded, so that a fast
launcher calls ``cuLaunchKernel`` from C with plain ints (docs/cuda.md, "Launch overhead").

Built into the ``cache_dir`` folder under a name that hashes the source, the Python ABI and the compiler, with
the write made atomic (build to a temporary name, then rename), so processes sharing the folder never load a
half-written file.  Where there is no C compiler, no Python headers, no cache folder or no driver, :func:`load`
returns None, says why at debug level (logger ``iron.launch``) and the launchers use cuda-bindings.
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

from .... import config

_log = logging.getLogger("iron.launch")
SOURCE = Path(__file__).with_name("launch.c")
MODULE = "iron_native_launch"
_loaded: dict[bool, ModuleType | None] = {}
#: Why the last :func:`load` found no module (None: it found one, or it was not asked).
why_not: str | None = None


def compiler() -> str | None:
    """The C compiler to build with: the one Python was built with, else cc / gcc / clang."""
    for candidate in ((sysconfig.get_config_var("CC") or "").split(" ")[0], "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return candidate
    return None


def _key(cc: str) -> str:
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(f"{sys.implementation.cache_tag} {sysconfig.get_config_var('EXT_SUFFIX')} {cc}".encode())
    return h.hexdigest()[:16]


def build(folder: Path) -> Path:
    """The built module's path in ``folder`` (built now unless already there); RuntimeError says why not."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (install gcc or clang)")
    include = sysconfig.get_paths()["include"]
    if not Path(include, "Python.h").exists():
        raise RuntimeError(f"no Python headers in {include} (Debian: apt-get install python3-dev)")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    target = folder / f"{MODULE}-{_key(cc)}{suffix}"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{MODULE}-", suffix=suffix, dir=folder)
    os.close(fd)
    try:
        done = subprocess.run([cc, "-O2", "-shared", "-fPIC", f"-I{include}", str(SOURCE), "-o", temporary, "-ldl"],
                              capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{cc} failed: {(done.stderr or done.stdout).strip()[:400]}")
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return target


def load() -> ModuleType | None:
    """The native launch module, or None where it is off or cannot be had (``why_not`` says why)."""
    global why_not
    enabled = bool(config.get("native_launch"))
    if enabled in _loaded:
        return _loaded[enabled]
    module = None
    if not enabled:
        why_not = "off (IRON_NATIVE_LAUNCH=0)"
    else:
        folder = config.cache_dir()
        try:
            if folder is None:
                raise RuntimeError("the disk cache is off (IRON_CACHE_DIR=off): nowhere to keep the built module")
            path = build(Path(folder) / "native")
            spec = importlib.util.spec_from_file_location(MODULE, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            why_not = None
        except (RuntimeError, OSError, ImportError, subprocess.SubprocessError) as e:
            why_not = str(e)
            _log.debug("launches call cuLaunchKernel through cuda-bindings: the native launch module is not "
                       "available (%s)", why_not)
    _loaded[enabled] = module
    return module

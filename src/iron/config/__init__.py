"""One registry of Iron's options, resolved from defaults, iron.toml, IRON_* and code.

Every tunable has exactly one :class:`Option` here with its ``IRON_*`` name and
documentation; nothing else in Iron reads ``os.environ`` for settings.
The environment and the file are read once per process (``reload()`` re-reads them).
Precedence, later winning: default -> ``iron.toml`` (``[iron]`` table, found
from the working directory upward) -> ``IRON_*`` environment -> values set in
code (``iron.use(...)`` / :func:`set_option`) -> explicit arguments.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..core.errors import IronError


class ConfigError(IronError):
    pass


def _bool(s: Any) -> bool:
    if isinstance(s, bool):
        return s
    v = str(s).strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected a boolean (1/0, true/false), got {s!r}")


def _opt_bool(s: Any) -> bool | None:
    if s is None or str(s).strip().lower() in ("", "auto", "default"):
        return None
    return _bool(s)


def _choice(s: Any) -> str:
    return str(s).strip().lower()


#: When the IR verifier runs: after every pass, once after the whole pipeline, or never.
VERIFY_MODES = ("each", "end", "off")


def verify_mode(s: Any) -> str:
    """``each``, ``end`` or ``off``; a boolean reads as ``each`` (true) or ``off`` (false), as it used to."""
    if isinstance(s, bool):
        return "each" if s else "off"
    v = str(s).strip().lower()
    if v in VERIFY_MODES:
        return v
    try:
        return "each" if _bool(v) else "off"
    except ValueError:
        raise ValueError(f"expected one of {', '.join(VERIFY_MODES)} (or a boolean), got {s!r}") from None


#: ``cache_dir`` values that turn the on-disk caches off.
CACHE_OFF = "off"


def _cache_dir(s: Any) -> str | None:
    """None for the default place (:func:`cache_dir`), ``"off"``, or an absolute path."""
    v = "" if s is None else str(s).strip()
    if v.lower() in ("", "auto", "default"):
        return None
    if v.lower() in ("off", "none", "0", "false"):
        return CACHE_OFF
    return str(Path(v).expanduser().resolve())


@dataclass(frozen=True)
class Option:
    name: str
    default: Any
    parse: Callable[[Any], Any]
    doc: str
    choices: tuple[Any, ...] | None = None

    @property
    def env(self) -> str:
        return "IRON_" + self.name.upper()


OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("backend", "auto", str, "Where kernels run: auto, interp, cuda, vulkan, hip, metal.",
           ("auto", "interp", "cuda", "vulkan", "hip", "metal")),
    Option("simd_width", 32, int, "Subgroup width the interpreter simulates (8, 32 or 64).", (8, 32, 64)),
    Option("interp_checks", True, _bool,
           "Interpreter checks: out-of-bounds, misaligned vectors, shared-memory races, partial barriers."),
    Option("fp_contract", None, _opt_bool,
           "Fuse a*b+c into fma: on, off, or auto (each target's compiler default)."),
    Option("unroll_max", 64, int, "Largest trip count the unroll pass fully unrolls without a hint."),
    Option("verify", "end", verify_mode,
           "When the IR verifier runs: after the frontend and once after the passes (end), after every pass as "
           "well (each: names the pass that broke the IR; the tests run so), or off.", VERIFY_MODES),
    Option("opt_level", 2, int, "0: no optimisation passes; 1: cleanups only; 2: the full pipeline.", (0, 1, 2)),
    Option("vulkan_device", "auto", str,
           "Vulkan device to run on: auto (a GPU first, else the CPU driver lavapipe), an index, or part of its name."),
    Option("vulkan_validation", False, _bool,
           "Run the vulkan device under the Khronos validation layer; a launch it warns about raises an error."),
    Option("vulkan_staging", "auto", _choice,
           "Vulkan storage buffers: auto (device-local memory filled by staging copies where the device's main "
           "memory is not host-visible, i.e. a discrete GPU without resizable BAR; else mapped host-visible "
           "memory), always, or never.", ("auto", "always", "never")),
    Option("cache_dir", None, _cache_dir,
           "Directory of Iron's on-disk caches (compiled SPIR-V, Vulkan pipeline caches, CUDA modules): auto "
           "($XDG_CACHE_HOME/iron, else ~/.cache/iron), a path, or off."),
    Option("fmad", True, _bool,
           "CUDA: let NVRTC fuse a multiply feeding an add into one FFMA (NVRTC's default); off compiles with "
           "--fmad=false. Part of the CUDA module cache key."),
    Option("interp_fragment_layout", None, lambda s: None if s is None or str(s).strip().lower() in ("", "none")
           else str(s).strip(),
           "Interpreter: hold matrix fragments per lane, placed by this MMA strategy (iron.codegen.mma, e.g. "
           "cuda_mma_sync_m16n8k16, portable); none: one matrix per subgroup."),
    Option("require_toolchains", False, _bool,
           "Toolchain tests fail, instead of skipping, when a compiler (NVRTC, hip clang, glslc, clang-19) is missing."),
    Option("runner_timeout", 300.0, float,
           "Seconds one test or bench item may run in the runner process before it is stopped, its row failed "
           "and the rest continued in a fresh runner."),
    Option("bench_warmup", 10, int, "Launches of each bench row before timing starts."),
    Option("bench_reps", 100, int, "Timed launches of each bench row (and of its reference); the median is reported."),
    Option("bench_seconds", 2.0, float,
           "Seconds of timed launches after which a bench row stops repeating early (after at least 5)."),
)}

_overrides: dict[str, Any] = {}


def _find_toml(start: Path | None = None) -> Path | None:
    d = (start or Path.cwd()).resolve()
    for p in (d, *d.parents):
        f = p / "iron.toml"
        if f.is_file():
            return f
    return None


_toml_cache: dict[tuple[str, int], dict[str, Any]] = {}


def _toml_values(path: Path | None) -> dict[str, Any]:
    """The ``[iron]`` table of ``path``, cached by modification time (launches read options often)."""
    if path is None:
        return {}
    try:
        key = (str(path), path.stat().st_mtime_ns)
        if key in _toml_cache:
            return _toml_cache[key]
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the configuration: {e}") from None
    table = data.get("iron", {})
    table = table if isinstance(table, dict) else {}
    _toml_cache[key] = table
    return table


def _parse(opt: Option, raw: Any, source: str) -> Any:
    try:
        v = opt.parse(raw)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{source}: bad value for {opt.name}: {e}") from None
    if opt.choices is not None and v is not None and v not in opt.choices:
        raise ConfigError(f"{source}: {opt.name} must be one of {', '.join(map(str, opt.choices))}; got {v!r}")
    return v


_snapshot: dict[str, tuple[Any, str]] | None = None


def resolve(toml_path: Path | None = None) -> dict[str, tuple[Any, str]]:
    """Every option's value and where it came from.

    Launches read options on every call, so the environment and iron.toml
    are read once per process and kept; :func:`set_option` and
    :func:`clear_overrides` refresh the snapshot, and :func:`reload` re-reads
    everything after the environment, the iron.toml or the working directory
    changed in-process.  An explicit ``toml_path`` is always read afresh.
    """
    global _snapshot
    if toml_path is not None:
        return _resolve_uncached(toml_path)
    if _snapshot is None:
        _snapshot = _resolve_uncached(_find_toml())
    return _snapshot


def reload() -> None:
    """Forget the snapshot: the next read sees the current environment and iron.toml."""
    global _snapshot, _generation
    _snapshot = None
    _generation += 1


_generation = 0


def generation() -> int:
    """A number that changes whenever option values may have (caches keyed by options use it)."""
    return _generation


def _resolve_uncached(path: Path | None) -> dict[str, tuple[Any, str]]:
    tv = _toml_values(path)
    out: dict[str, tuple[Any, str]] = {}
    for name, opt in OPTIONS.items():
        value, source = opt.default, "default"
        if name in tv:
            value, source = _parse(opt, tv[name], f"{path} [iron] {name}"), str(path)
        if opt.env in os.environ:
            value, source = _parse(opt, os.environ[opt.env], opt.env), opt.env
        if name in _overrides:
            value, source = _overrides[name], "set in code"
        out[name] = (value, source)
    return out


def get(name: str) -> Any:
    if name not in OPTIONS:
        raise ConfigError(f"unknown option {name!r}; known: {', '.join(OPTIONS)}")
    return resolve()[name][0]


def set_option(name: str, value: Any) -> None:
    if name not in OPTIONS:
        raise ConfigError(f"unknown option {name!r}; known: {', '.join(OPTIONS)}")
    _overrides[name] = _parse(OPTIONS[name], value, "set in code")
    reload()


def cache_dir() -> Path | None:
    """Where the on-disk caches live (the ``cache_dir`` option resolved), or None when they are off."""
    value = get("cache_dir")
    if value == CACHE_OFF:
        return None
    if value is not None:
        return Path(value)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "iron"


def child_environment(prepend_paths: dict[str, str]) -> dict[str, str]:
    """This process's environment for a child process, with each of ``prepend_paths``' directories put
    first on its search-path variable (``LD_LIBRARY_PATH`` for a tool whose libraries travel with it)."""
    env = dict(os.environ)
    for name, directory in prepend_paths.items():
        env[name] = os.pathsep.join(p for p in (directory, env.get(name, "")) if p)
    return env


def clear_overrides() -> None:
    _overrides.clear()
    reload()

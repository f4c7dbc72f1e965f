"""One registry of Iron's options, resolved from defaults, iron.toml, IRON_* and code.

Every tunable has exactly one :class:`Option` here with its ``IRON_*`` name, the kind and range of
values it takes, and documentation; nothing else in Iron reads ``os.environ`` for settings.
The environment and the file are read once per process (``reload()`` re-reads them).
Precedence, later winning: default -> ``iron.toml`` (``[iron]`` table, found from the working
directory upward as far as the project's root, see :func:`find_toml`) -> ``IRON_*`` environment ->
values set in code (``iron.use(...)`` / :func:`set_option`) -> explicit arguments.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import numbers
import os
import stat
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..core.errors import IronError
from .safe_paths import unsafe_folder_reason


class ConfigError(IronError):
    pass


# ---------------------------------------------------------------- kinds: what type a value must have
# Each reader takes a string (the environment, a flag) or a typed value (TOML, code) and returns the value,
# or raises ValueError saying what was expected. Nothing is coerced silently: 8.9 is no integer, true no number.

def _integer(v: Any) -> int:
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            pass
    raise ValueError(f"expected an integer, got {v!r}")


def _number(v: Any) -> float:
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            pass
    raise ValueError(f"expected a number, got {v!r}")


def _bool(s: Any) -> bool:
    if isinstance(s, bool):
        return s
    if isinstance(s, numbers.Integral) and s in (0, 1):
        return bool(s)
    v = s.strip().lower() if isinstance(s, str) else None
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected a boolean (1/0, true/false), got {s!r}")


def _text(v: Any) -> str:
    if isinstance(v, str):
        return v.strip()
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    raise ValueError(f"expected a string, got {v!r}")


def _text_or_bool(v: Any) -> str | bool:
    return v if isinstance(v, bool) else _text(v)


def _text_or_int(v: Any) -> str:
    return str(int(v)) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else _text(v)


#: An option's ``kind`` names its reader here.
KINDS: dict[str, Callable[[Any], Any]] = {
    "int": _integer, "float": _number, "bool": _bool, "str": _text, "str|bool": _text_or_bool, "str|int": _text_or_int,
}


# ---------------------------------------------------------------- options' own readings, after the kind's
def _opt_bool(s: str | bool) -> bool | None:
    if isinstance(s, str) and s.strip().lower() in ("", "auto", "default"):
        return None
    return _bool(s)


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


def _cache_dir(v: str) -> str | None:
    """None for the default place (:func:`cache_dir`), ``"off"``, or an absolute path.

    A ``~user`` that names no user stays as written: :func:`cache_dir` reports it where a cache is used,
    so commands that need no cache still run (and ``iron config`` shows the problem)."""
    if v.lower() in ("", "auto", "default"):
        return None
    if v.lower() in ("off", "none", "0", "false"):
        return CACHE_OFF
    try:
        return str(Path(v).expanduser().resolve())
    except RuntimeError:  # "~nouser/x": no such user's home
        return v


def _none_or_text(v: str) -> str | None:
    return None if v.lower() in ("", "none") else v


#: Seconds in a week: the longest a runner item may take, or a bench row repeat.
WEEK = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Option:
    """One option. Its checks are data: ``kind`` (a key of :data:`KINDS`), ``choices``, and for numbers
    ``minimum`` / ``maximum`` (``exclusive_minimum``: the value must be greater than ``minimum``)."""

    name: str
    default: Any
    kind: str
    doc: str
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    #: What numbers count (in messages), e.g. "seconds".
    unit: str = ""
    #: The option's own reading of the kind-checked value (verify modes, the cache folder), if any.
    parse: Callable[[Any], Any] | None = None

    @property
    def env(self) -> str:
        return "IRON_" + self.name.upper()


OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("backend", "auto", "str",
           "Where kernels run: auto, interp, cuda, vulkan, hip, metal. auto follows the data: device arrays run on "
           "the GPU holding them, numpy arrays on the interpreter; iron test / bench take the best device present.",
           ("auto", "interp", "cuda", "vulkan", "hip", "metal")),
    Option("simd_width", 32, "int", "Subgroup width the interpreter simulates (8, 32 or 64).", (8, 32, 64)),
    Option("interp_checks", True, "bool",
           "Interpreter checks: out-of-bounds, misaligned vectors, shared-memory races, partial barriers."),
    Option("interp_global_races", False, "bool",
           "Interpreter: report a global tensor element one thread writes and another touches (another group's "
           "thread, or one of its own group with no barrier between): wrong on GPUs, which run threads apart."),
    Option("fp_contract", None, "str|bool",
           "Fuse a*b+c into fma: on, off, or auto (each target's compiler default).", parse=_opt_bool),
    Option("unroll_max", 64, "int", "Largest trip count the unroll pass fully unrolls without a hint.",
           minimum=0, maximum=4096),
    Option("verify", "end", "str|bool",
           "When the IR verifier runs: after the frontend and once after the passes (end), after every pass as "
           "well (each: names the pass that broke the IR; the tests run so), or off.", VERIFY_MODES,
           parse=verify_mode),
    Option("opt_level", 2, "int", "0: no optimisation passes; 1: cleanups only; 2: the full pipeline.", (0, 1, 2)),
    Option("vulkan_device", "auto", "str|int",
           "Vulkan device to run on: auto (a GPU first, else the CPU driver lavapipe), an index, or part of its name."),
    Option("vulkan_validation", False, "bool",
           "Run the vulkan device under the Khronos validation layer; a launch it warns about raises an error."),
    Option("vulkan_staging", "auto", "str",
           "Vulkan storage buffers: auto (device-local memory filled by staging copies where the device's main "
           "memory is not host-visible, i.e. a discrete GPU without resizable BAR; else mapped host-visible "
           "memory), always, or never.", ("auto", "always", "never"), parse=str.lower),
    Option("cache_dir", None, "str",
           "Directory of Iron's on-disk caches (compiled SPIR-V, Vulkan pipeline caches, CUDA modules): auto "
           "($XDG_CACHE_HOME/iron, else ~/.cache/iron), a path, or off.", parse=_cache_dir),
    Option("dump", None, "str",
           "A folder: each compile stage Iron runs (optimise, legalise, source, binary) writes its output there, "
           "one file per kernel, target and stage; none: no dump. iron inspect --stage prints one stage.",
           parse=_none_or_text),
    Option("tma_store", False, "bool",
           "CUDA sm_90: store_tile as a TMA bulk store (cp.async.bulk.tensor through a tensor map; a box that starts "
           "at a negative coordinate, which TMA refuses, takes the element loop at run time); off (the default "
           "until it is timed) stores the tile from the issuing thread, as on every other target."),
    Option("conv_ws", True, "bool",
           "iron.std.conv on Hopper: run convolutions of one group (or of groups of 64-channel multiples, as packed "
           "groups are) at stride 1 (or 2 along an even W) on conv_ws, "
           "warp roles fed by tile copies of the input's taps (faster than conv_wg on every shape of issue 19 "
           "measured on an H100); off keeps conv_wg's gather. A host function's call plan keeps the choice of its "
           "first call."),
    Option("conv_pack_groups", True, "bool",
           "iron.std.conv, grouped convolutions on the matrix units: run several groups of few output channels "
           "(the most, a power of two, that fill at most 64) as one group whose weights are block-diagonal "
           "(a small packing kernel per call), instead of one group each on tiles mostly empty; off runs one "
           "group each. A host function's call plan keeps the choice of its first call."),
    Option("fmad", True, "bool",
           "CUDA: let NVRTC fuse a multiply feeding an add into one FFMA (NVRTC's default); off compiles with "
           "--fmad=false. Part of the CUDA module cache key."),
    Option("call_plans", True, "bool",
           "iron.std: each host function records its first call with a signature of arguments (dtypes, shapes, "
           "devices, layout, alignment, other values) and replays the checks that depend on memory, the "
           "allocations and the launches on later calls with that signature; off runs every call as written."),
    Option("native_plans", True, "bool",
           "iron.std: call plans build each call's signature in a small C module Iron builds once with the system "
           "C compiler (cached beside the modules); off, or where no compiler or Python headers are found, in "
           "Python (the same key, slower)."),
    Option("pdl", True, "bool",
           "CUDA sm_90+: launch Iron's kernels as programmatic dependent launches (each kernel's blocks may reach "
           "the SMs while the grid before it drains; every kernel then starts by waiting for that grid's writes, "
           "griddepcontrol.wait), eagerly and in captured graphs; off emits no wait and launches kernels one after "
           "the other as cuLaunchKernel does."),
    Option("native_launch", True, "bool",
           "CUDA: the generated fast launchers call cuLaunchKernel through a small C module Iron builds once with "
           "the system C compiler (cached beside the modules); off, or where no compiler or Python headers are "
           "found, they call it through cuda-bindings."),
    Option("interp_fragment_layout", None, "str",
           "Interpreter: hold matrix fragments per lane, placed by this MMA strategy (iron.codegen.mma, e.g. "
           "cuda_mma_sync_m16n8k16, portable); none: one matrix per subgroup.", parse=_none_or_text),
    Option("require_toolchains", False, "bool",
           "Toolchain tests fail, instead of skipping, when a compiler (NVRTC, hip clang, glslc, clang-19) is "
           "missing."),
    Option("runner_timeout", 300.0, "float",
           "Seconds one test or bench item may run in the runner process before it is stopped, its row failed "
           "and the rest continued in a fresh runner.", minimum=0, exclusive_minimum=True, maximum=WEEK,
           unit="seconds"),
    Option("bench_warmup", 10, "int", "Launches of each bench row before timing starts.", minimum=0),
    Option("bench_reps", 100, "int", "Timed launches of each bench row (and of its reference); the median is reported.",
           minimum=1),
    Option("bench_seconds", 2.0, "float",
           "Seconds of timed launches after which a bench row stops repeating early (after at least 5).",
           minimum=0, exclusive_minimum=True, maximum=WEEK, unit="seconds"),
)}

#: Keys of iron.toml's [iron] table that are project settings rather than options (harness/project.py reads
#: ``modules``, the modules to import).
PROJECT_KEYS = frozenset({"modules"})

#: Set to 1 to trust an iron.toml that another user owns or that others may write (git's ``safe.directory = *``),
#: or to folders (separated by os.pathsep) whose iron.toml to trust.
SAFE_CONFIG_ENV = "IRON_SAFE_CONFIG"

#: IRON_* variables that are not options but that Iron or its tools read (so no misspelling of one).
OTHER_VARIABLES = frozenset({SAFE_CONFIG_ENV, "IRON_UPDATE_GOLDEN", "IRON_SKIP_TOOLCHAINS"})

_overrides: dict[str, Any] = {}


# ---------------------------------------------------------------- finding and trusting iron.toml
#: What marks a project's root folder: the search for iron.toml goes no higher.
VCS_MARKERS = (".git", ".hg", ".svn", ".jj")


def _exists(p: Path) -> bool:
    try:
        return p.exists()
    except OSError:  # a folder we may not look into
        return False


def _home() -> Path | None:
    try:
        return Path.home().resolve()
    except (RuntimeError, KeyError, OSError):
        return None


def search_folders(start: Path | None = None) -> list[Path]:
    """The folders searched for iron.toml, nearest first: ``start`` (default: the working directory) and its
    parents up to the project's root, the first that holds a VCS marker (.git, .hg, .svn, .jj) or is the
    user's home, whichever comes first. A file above that root, in a folder others share, is never read."""
    d = (start or Path.cwd()).resolve()
    home = _home()
    out = []
    for folder in (d, *d.parents):
        out.append(folder)
        if folder == home or any(_exists(folder / m) for m in VCS_MARKERS):
            break
    return out


def find_toml(start: Path | None = None) -> Path | None:
    """The nearest iron.toml of :func:`search_folders`, checked by :func:`check_trusted`; None if there is none."""
    for folder in search_folders(start):
        f = folder / "iron.toml"
        try:
            found = f.is_file()
        except OSError:
            found = False
        if found:
            check_trusted(f)
            return f
    return None


_find_toml = find_toml


def _safe_by_opt_in(path: Path) -> bool:
    value = os.environ.get(SAFE_CONFIG_ENV, "").strip()
    if value.lower() in ("1", "*", "true", "yes", "on"):
        return True
    for entry in filter(None, (e.strip() for e in value.split(os.pathsep))):
        try:
            trusted = Path(entry).expanduser().resolve()
        except (RuntimeError, OSError):
            continue
        if trusted in (path.parent.resolve(), path.resolve()):
            return True
    return False


def _user_name(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _private_group(gid: int, uid: int) -> bool:
    """Whether ``gid`` is ``uid``'s own group (no other members): group-writable is then owner-writable,
    as files are by default where the umask is 002 (user private groups)."""
    try:
        import grp
        import pwd

        owner = pwd.getpwuid(uid)
        return owner.pw_gid == gid and set(grp.getgrgid(gid).gr_mem) <= {owner.pw_name}
    except (ImportError, KeyError):
        return False


def check_trusted(path: Path) -> None:
    """Refuse (ConfigError) an iron.toml another user owns or may write, as git refuses a repository
    another user owns (``safe.directory``): it names the modules ``iron test`` imports and where the
    caches go. Root's files are trusted; :data:`SAFE_CONFIG_ENV` opts in to trusting others'."""
    geteuid = getattr(os, "geteuid", None)
    if geteuid is None or _safe_by_opt_in(path):
        return
    try:
        target, link = path.stat(), path.lstat()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the configuration: {e.strerror or e}") from None
    me = geteuid()
    opt_in = f"If you trust it, set {SAFE_CONFIG_ENV}={path.parent} (or {SAFE_CONFIG_ENV}=1 to trust any)."
    for st in (link, target):
        if st.st_uid not in (me, 0):
            raise ConfigError(f"{path} is owned by another user, {_user_name(st.st_uid)}; Iron does not read it, as "
                              f"it names code to import and where caches go. {opt_in}")
    if target.st_mode & stat.S_IWOTH:
        raise ConfigError(f"{path} is writable by every user; Iron does not read it. Make it yours alone: "
                          f"chmod o-w {path}. {opt_in}")
    if target.st_mode & stat.S_IWGRP and not _private_group(target.st_gid, target.st_uid):
        raise ConfigError(f"{path} is writable by its group (gid {target.st_gid}); Iron does not read it. Make it "
                          f"yours alone: chmod g-w {path}. {opt_in}")


_toml_cache: dict[tuple[str, int], dict[str, Any]] = {}


def toml_table(path: Path | None) -> dict[str, Any]:
    """The ``[iron]`` table of ``path``, cached by modification time (launches read options often)."""
    if path is None:
        return {}
    try:
        key = (str(path), path.stat().st_mtime_ns)
        if key in _toml_cache:
            return _toml_cache[key]
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the configuration: {e}") from None
    table = data.get("iron", {})
    table = table if isinstance(table, dict) else {}
    _toml_cache[key] = table
    return table


def _amount(opt: Option, x: float) -> str:
    text = f"{x:g}" + (f" {opt.unit}" if opt.unit else "")
    if opt.unit == "seconds" and x >= 86400:
        text += f" ({x / 86400:g} days)"
    return text


def _range_problem(opt: Option, v: Any) -> str | None:
    """What is wrong with number ``v`` for ``opt`` (its minimum, maximum, finiteness), or None."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    if math.isnan(v):
        return "must be a number, not nan"
    if opt.minimum is not None:
        if opt.exclusive_minimum and not v > opt.minimum:
            return f"must be greater than {_amount(opt, opt.minimum)}"
        if v < opt.minimum:
            return f"must be at least {_amount(opt, opt.minimum)}"
    if opt.maximum is not None and v > opt.maximum:
        return f"must be at most {_amount(opt, opt.maximum)}"
    if not math.isfinite(v):
        return "must be finite"
    return None


def _parse(opt: Option, raw: Any, source: str) -> Any:
    if raw is None and opt.default is None:
        return None
    try:
        v = KINDS[opt.kind](raw)
        if opt.parse is not None:
            v = opt.parse(v)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{source}: bad value for {opt.name}: {e}") from None
    problem = _range_problem(opt, v)
    if problem:
        raise ConfigError(f"{source}: {opt.name} {problem}; got {raw!r}")
    if opt.choices is not None and v is not None and v not in opt.choices:
        raise ConfigError(f"{source}: {opt.name} must be one of {', '.join(map(str, opt.choices))}; got {v!r}")
    return v


def parse_value(name: str, raw: Any, source: str) -> Any:
    """``raw`` read and checked as option ``name`` requires (its kind, range and choices), as iron.toml and
    IRON_* values are: a string (a flag, the environment) or a typed value. A ConfigError names ``source``."""
    if name not in OPTIONS:
        raise ConfigError(f"unknown option {name!r}; known: {', '.join(OPTIONS)}")
    return _parse(OPTIONS[name], raw, source)


# ---------------------------------------------------------------- names Iron ignores: likely typos
def _closest(name: str, known: Any) -> str:
    match = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    return f"; did you mean {match[0]}?" if match else ""


def unknown_keys(path: Path | None) -> list[str]:
    """Keys of the [iron] table of ``path`` that name no option and no project setting (they are ignored)."""
    return sorted(k for k in toml_table(path) if k not in OPTIONS and k not in PROJECT_KEYS)


def warnings(path: Path | None = None, *, shown: bool = True) -> list[str]:
    """Names Iron ignores, each a likely typo: [iron] keys of ``path`` (default: the iron.toml found) that
    name no option, and ``IRON_*`` variables close to a known name. ``shown``: :func:`resolve` need not
    print these again (``iron config`` prints them itself)."""
    path = find_toml() if path is None else path
    keys = OPTIONS.keys() | PROJECT_KEYS
    out = [f"{path} [iron] {k}: no such option (ignored){_closest(k, keys)}" for k in unknown_keys(path)]
    known = {o.env for o in OPTIONS.values()} | OTHER_VARIABLES
    for var in sorted(os.environ):
        if var.startswith("IRON_") and var not in known:
            hint = _closest(var, known)
            if hint:  # a variable near no Iron name belongs to something else
                out.append(f"{var}: no such variable (ignored){hint}")
    if shown:
        _warned.update(out)
    return out


_warned: set[str] = set()


def _print_warnings(path: Path | None) -> None:
    for message in warnings(path, shown=False):
        if message not in _warned:
            _warned.add(message)
            print(f"iron: warning: {message}", file=sys.stderr)


_snapshot: dict[str, tuple[Any, str]] | None = None


def resolve(toml_path: Path | None = None) -> dict[str, tuple[Any, str]]:
    """Every option's value and where it came from.

    Launches read options on every call, so the environment and iron.toml
    are read once per process and kept; :func:`set_option` and
    :func:`clear_overrides` refresh the snapshot, and :func:`reload` re-reads
    everything after the environment, the iron.toml or the working directory
    changed in-process.  An explicit ``toml_path`` is always read afresh.
    Names that look misspelt (:func:`warnings`) are printed once per process, on stderr.
    """
    global _snapshot
    if toml_path is not None:
        return _resolve_uncached(toml_path)
    if _snapshot is None:
        path = find_toml()
        _print_warnings(path)
        _snapshot = _resolve_uncached(path)
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


def touch() -> None:
    """Note that something read like an option changed (a tuning table of iron.std): caches keyed by
    :func:`generation` (call plans, launch keys, device traits) miss once, the options themselves stay."""
    global _generation
    _generation += 1


def _resolve_uncached(path: Path | None) -> dict[str, tuple[Any, str]]:
    tv = toml_table(path)
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


@contextlib.contextmanager
def scoped(name: str, value: Any) -> Iterator[None]:
    """``name`` set to ``value`` in code for a ``with`` block, then back to what it was (an earlier value set in code,
    else what the environment and iron.toml say).  Options read when a kernel is built or planned (``pdl``,
    ``tma_store``) apply to what is built inside the block."""
    had, before = name in _overrides, _overrides.get(name)
    set_option(name, value)
    try:
        yield
    finally:
        if had:
            _overrides[name] = before
        else:
            _overrides.pop(name, None)
        reload()


def cache_dir() -> Path | None:
    """Where the on-disk caches live (the ``cache_dir`` option resolved), or None when they are off.

    A ConfigError, naming where the value came from, when it cannot be a folder (``~nouser/x``)."""
    value, source = resolve()["cache_dir"]
    if value == CACHE_OFF:
        return None
    if value is not None:
        if value.startswith("~"):
            user = value[1:].split("/", 1)[0]
            raise ConfigError(f"{source}: cache_dir {value!r} cannot be used: there is no user {user!r} whose home "
                              "folder '~' could name; give a path, auto or off")
        toml = find_toml()
        unsafe = unsafe_folder_reason(Path(value), toml.parent if toml is not None else None)
        if unsafe is not None:
            raise ConfigError(f"{source}: cache_dir {value!r} cannot be used: {unsafe}, and Iron must own its cache "
                              "folder (iron clean empties it); give a folder of its own, such as ~/.cache/iron, "
                              "auto or off")
        return Path(value)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "iron"
    try:
        return Path.home() / ".cache" / "iron"
    except (RuntimeError, KeyError):
        raise ConfigError("cache_dir auto: there is no home folder (HOME) for ~/.cache/iron; set IRON_CACHE_DIR "
                          "to a path, or off") from None


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

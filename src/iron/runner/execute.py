"""From a registered item to a judged launch: the steps tests and benches share.

1. :func:`make_setup` calls the user's setup callback (CPU, safe to run ahead in a worker thread);
2. :func:`call_oracle` evaluates the float64 oracle on the pristine arguments (CPU, likewise);
3. :func:`resolve` binds the setup to its kernel: the specialisation, its run-time arguments,
   which outputs to check and poison, the launch geometry, the steps that follow (main thread: it
   lowers IR);
4. :func:`fresh_args` copies the arguments and poisons the write-only outputs before each run;
5. :func:`judge` compares the outputs with the expectations, within each output's tolerance.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core import dtypes as D
from ..core.errors import IronCompileError, IronError
from ..harness.cases import Case, Setup, Then
from ..harness.registry import Item, base_kernel
from ..harness.tolerance import Expect, Tolerance, Verdict, compare, derive_tolerance, poison, widen
from ..jit.kernel import normalize_grid

_IRON_DIR = str(Path(__file__).resolve().parents[1])


class SetupError(IronError):
    """A setup callback or oracle that returned something the runner cannot use."""


def describe(exc: BaseException) -> str:
    """A one-paragraph reason for a failed row: Iron's own message, or the user's exception and where."""
    if isinstance(exc, IronCompileError):
        return str(exc)
    if isinstance(exc, IronError):
        return f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if not f.filename.startswith(_IRON_DIR)]
    where = user[-1] if user else (frames[-1] if frames else None)
    at = f" (at {where.filename}:{where.lineno} in {where.name})" if where else ""
    return f"{type(exc).__name__}: {exc}{at}"


def simd_width(device: Any) -> int:
    """Threads per subgroup on ``device``: the interpreter's setting, else its target profile's lane width."""
    if device.name == "interp":
        from .. import config

        return int(config.get("simd_width"))
    profile = getattr(device, "profile", None)
    return int(getattr(profile, "lane_width", None) or 32)


def make_setup(item: Item, seed: int, device: Any) -> tuple[Case, Setup]:
    """The item's case on ``device`` and what its setup callback returns for it."""
    case = item.case(seed, device.name, simd_width(device))
    setup = item.entry.setup(case)
    if not isinstance(setup, Setup):
        raise SetupError(f"the setup '{item.entry.name}' returned {type(setup).__name__}; return "
                         "iron.Setup(args=[...], grid=...)")
    return case, setup


def call_oracle(setup: Setup) -> Any:
    """The oracle's raw answer on float64 copies of the pristine arguments (None without an oracle)."""
    if setup.oracle is None:
        return None
    return setup.oracle(*[widen(a) for a in setup.args])


@dataclass
class Step:
    """A :class:`~iron.harness.cases.Then` resolved: each argument a literal or a run-time position of
    the setup kernel's arguments (``refs``), so a step gets the very arrays the launch before it had."""

    kernel: Any
    values: list[Any]
    refs: dict[int, int]
    grid: tuple[int, ...]
    group: tuple[int, ...] | None

    def args(self, runtime_args: Sequence[Any]) -> list[Any]:
        return [runtime_args[self.refs[i]] if i in self.refs else v for i, v in enumerate(self.values)]

    def compiled(self, target: str) -> Any:
        return self.kernel.compiled(target)


@dataclass
class Launch:
    """An item's setup bound to its kernel (and the steps that follow it)."""

    item: Item
    setup: Setup
    names: list[str]
    kernel: Any
    binding: dict[str, Any]
    runtime: list[int]
    outputs: list[int]
    poisoned: list[int]
    grid: tuple[int, ...]
    group: tuple[int, ...] | None
    #: Tensor parameter name -> "read", "write" or "readwrite", as the kernel uses it.
    access: dict[str, str | None]
    then: list[Step] = field(default_factory=list)

    def runtime_args(self, args: Sequence[Any]) -> list[Any]:
        return [args[i] for i in self.runtime]

    def compiled(self, target: str) -> Any:
        return self.kernel.variant(**self.binding).compiled(target)

    def run_steps(self, device: Any, runtime_args: Sequence[Any]) -> None:
        """Launch the steps after the kernel's own launch on ``runtime_args``, in order."""
        for step in self.then:
            device.launch(step.compiled(device.target), step.args(runtime_args), step.grid,
                          step.group or device.default_group(step.grid))


def bind(item: Item, case: Case, setup: Setup) -> tuple[Any, dict[str, Any]]:
    """The kernel ``setup`` runs and its variant binding, without lowering it (cheap: test collection)."""
    kernel, fixed = base_kernel(item.entry.kernel)
    names = [s.name for s in kernel.params]
    args = list(setup.args)
    if len(args) != len(names):
        raise SetupError(f"'{kernel.name}' takes {len(names)} arguments ({', '.join(names)}); the setup "
                         f"'{item.entry.name}' gave {len(args)}")
    binding, _ = kernel.resolver.resolve({**fixed, **case.binding, **dict(setup.binding)}, args, {})
    return kernel, binding


def resolve(item: Item, case: Case, setup: Setup) -> Launch:
    """Bind ``setup`` to its kernel: binding, run-time argument positions, outputs, poisoned outputs."""
    kernel, binding = bind(item, case, setup)
    names = [s.name for s in kernel.params]
    runtime = [i for i, s in enumerate(kernel.params) if s.kind != "constexpr"]
    access = {p.name: p.access for p in kernel.ir_for_binding(binding).params if p.is_tensor}
    written = [i for i, n in enumerate(names) if access.get(n) in ("write", "readwrite")]
    outputs = _positions(setup.outputs, names, "outputs") if setup.outputs is not None else written
    if not outputs:
        raise SetupError(f"'{kernel.name}' writes no tensor; name the outputs to check with outputs=[...]")
    poisoned = (_positions(setup.poison, names, "poison") if setup.poison is not None
                else [i for i in outputs if access.get(names[i]) == "write"])
    group = None if setup.group is None else normalize_grid(setup.group, "group")
    steps = [_step(t, names, runtime, item.entry.name) for t in setup.then]
    return Launch(item, setup, names, kernel, binding, runtime, outputs, poisoned,
                  normalize_grid(setup.grid, "grid"), group, access, steps)


def _step(then: Then, names: list[str], runtime: list[int], entry: str) -> Step:
    if not callable(getattr(then.kernel, "compiled", None)):
        raise SetupError(f"the setup '{entry}': a then= step needs a kernel with its variant bound "
                         f"(kernel.variant(...)), got {type(then.kernel).__name__}")
    refs = {}
    for i, a in enumerate(then.args):
        if isinstance(a, str):
            if a not in names or names.index(a) not in runtime:
                raise SetupError(f"the setup '{entry}': then= argument {a!r} is not a run-time parameter of the "
                                 f"kernel ({', '.join(names)})")
            refs[i] = runtime.index(names.index(a))
    group = None if then.group is None else normalize_grid(then.group, "group")
    return Step(then.kernel, list(then.args), refs, normalize_grid(then.grid, "grid"), group)


def _positions(which: Sequence[str | int], names: list[str], what: str) -> list[int]:
    out = []
    for w in which:
        if isinstance(w, int) and 0 <= w < len(names):
            out.append(w)
        elif isinstance(w, str) and w in names:
            out.append(names.index(w))
        else:
            raise SetupError(f"{what}: {w!r} is not a parameter of the kernel ({', '.join(names)})")
    return out


def bytes_moved(launch: Launch) -> int:
    """The setup's byte count, else every tensor argument once (twice if read and written)."""
    if launch.setup.bytes_moved is not None:
        return int(launch.setup.bytes_moved)
    total = 0
    for name, arg in zip(launch.names, launch.setup.args):
        if isinstance(arg, np.ndarray) and name in launch.access:
            total += arg.nbytes * (2 if launch.access[name] == "readwrite" else 1)
    return total


def fresh_args(launch: Launch) -> list[Any]:
    """Copies of the pristine arguments (arrays copied, scalars shared), write-only outputs poisoned."""
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in launch.setup.args]
    for i in launch.poisoned:
        if not isinstance(args[i], np.ndarray):
            raise SetupError(f"poison: argument '{launch.names[i]}' is not an array")
        poison(args[i])
    return args


def expectations(launch: Launch, answer: Any, source: str = "oracle") -> dict[int, Expect]:
    """``answer`` (an array, a tuple of them, or a dict by name or position) as one Expect per output."""
    outs = launch.outputs
    if isinstance(answer, Mapping):
        got = {(_positions([k], launch.names, source)[0]): v for k, v in answer.items()}
    elif isinstance(answer, (tuple, list)):
        if len(answer) != len(outs):
            raise SetupError(f"the {source} returned {len(answer)} values for {len(outs)} outputs "
                             f"({', '.join(launch.names[i] for i in outs)})")
        got = dict(zip(outs, answer))
    elif answer is None:
        raise SetupError(f"the {source} returned nothing")
    else:
        if len(outs) != 1:
            raise SetupError(f"the {source} returned one value for {len(outs)} outputs "
                             f"({', '.join(launch.names[i] for i in outs)}): return a tuple or a dict by name")
        got = {outs[0]: answer}
    missing = [launch.names[i] for i in outs if i not in got]
    if missing:
        raise SetupError(f"the {source} gave no value for output(s) {', '.join(missing)}")
    return {i: v if isinstance(v, Expect) else Expect(v) for i, v in got.items() if i in outs}


def tolerance_of(launch: Launch, index: int) -> Tolerance:
    """The setup's tolerance, else one derived from the output's dtype (or ``out_dtype``) and depth."""
    if launch.setup.tolerance is not None:
        return launch.setup.tolerance
    dtype = launch.setup.out_dtype or D.from_numpy(np.asarray(launch.setup.args[index]).dtype)
    return derive_tolerance(dtype, launch.setup.depth)


@dataclass(frozen=True)
class Judgement:
    ok: bool
    worst: float | None
    tolerance: str
    problems: list[str]


def judge(launch: Launch, after: Sequence[Any], expected: Mapping[int, Expect]) -> Judgement:
    """Every checked output of ``after`` (host arrays) against ``expected``."""
    outs = {launch.names[i]: np.array(after[i], copy=True) for i in launch.outputs}
    if launch.setup.canonicalize is not None:
        launch.setup.canonicalize(outs)
    verdicts: list[tuple[str, Tolerance, Verdict]] = []
    for i in launch.outputs:
        tol = tolerance_of(launch, i)
        verdicts.append((launch.names[i], tol, compare(outs[launch.names[i]], expected[i], tol)))
    worsts = [v.worst for _, _, v in verdicts]
    worst = None if any(w is None for w in worsts) else max(worsts, default=0.0)
    tols = {str(t) for _, t, _ in verdicts}
    tol_text = tols.pop() if len(tols) == 1 else "; ".join(f"{n}: {t}" for n, t, _ in verdicts)
    problems = [f"output '{n}': {v.message}" for n, _, v in verdicts if not v.ok]
    return Judgement(not problems, worst, tol_text, problems)


__all__ = ["Judgement", "Launch", "SetupError", "Step", "bytes_moved", "call_oracle", "describe", "expectations",
           "fresh_args", "judge", "make_setup", "resolve", "simd_width", "tolerance_of"]

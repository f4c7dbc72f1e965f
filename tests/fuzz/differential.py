"""Run generated kernels on several backends and compare them with the interpreter (docs/fuzzing.md).

The interpreter is the reference (it defines the IR's meaning, docs/interpreter.md).  Each device's
outputs are compared with an interpreter run at that device's subgroup width (the lanes a subgroup
operation combines depend on it): exact outputs bit for bit (NaN equal to NaN; ``+0`` equal to ``-0``
unless the domain compares signed zeros), approximate ones with :func:`iron.harness.tolerance.compare`
and the function's allowance in :data:`kernelgen.APPROX`.

Nothing here needs pytest: ``scripts/fuzz.py`` runs it from the source tree.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from iron.harness.tolerance import Tolerance, compare

from .kernelgen import (APPROX, APPROX_SLOTS, ARG_ORDER, GROUP, OUTPUTS, SLOTS, THREADS, Domain, Program, generate,
                        make_inputs)

_MODULE_DIR: Path | None = None
_LOADED: dict[str, Any] = {}


def load_kernel(source: str) -> Any:
    """Import ``fuzz_kernel`` from ``source`` written to a real file (the frontend reads the source)."""
    global _MODULE_DIR
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    if digest not in _LOADED:
        if _MODULE_DIR is None:
            _MODULE_DIR = Path(tempfile.mkdtemp(prefix="iron_fuzz_"))
        name = f"iron_fuzz_{digest}"
        path = _MODULE_DIR / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _LOADED[digest] = module.fuzz_kernel
    return _LOADED[digest]


def subgroup_width(backend: str) -> int:
    """The subgroup width the device runs kernels at (what the interpreter must model to agree with it)."""
    from iron.runtime import get_device

    if backend == "vulkan":
        return int(get_device("vulkan").info["subgroup_size"])
    if backend == "cuda":
        return int(getattr(get_device("cuda").profile, "lane_width", 32) or 32)
    return 32


def available(backend: str) -> tuple[bool, str]:
    from iron.runtime import backend_available

    return backend_available(backend)


def run_interp(kernel: Any, inputs: dict[str, np.ndarray], simd_width: int) -> dict[str, np.ndarray]:
    from iron.runtime import interp

    args = {k: v.copy() for k, v in inputs.items()}
    ir = kernel.variant().compiled("interp")
    interp.run(ir, [args[k] for k in ARG_ORDER] + [THREADS], (THREADS,), (GROUP,), simd_width=simd_width)
    return {k: args[k] for k in OUTPUTS}


def run_device(kernel: Any, backend: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    args = {k: v.copy() for k, v in inputs.items()}
    kernel.launch(*[args[k] for k in ARG_ORDER], THREADS, grid=(THREADS,), group=(GROUP,), backend=backend)
    return {k: args[k] for k in OUTPUTS}


@dataclass
class Mismatch:
    """One output of one backend that disagrees with the interpreter."""

    seed: int
    backend: str
    output: str
    detail: str
    source: str
    simd_width: int
    #: (thread, slot, got, want) of the first differing elements.
    elements: list[tuple[int, int, Any, Any]] = field(default_factory=list)

    def report(self, with_source: bool = True) -> str:
        rows = "\n".join(f"    thread {t} slot {s}: {self.backend} {g!r}, interp {w!r}" for t, s, g, w in self.elements)
        text = (f"seed {self.seed}: {self.backend} differs from interp (subgroup width {self.simd_width}) in "
                f"'{self.output}': {self.detail}\n{rows}")
        return text + ("\n--- program ---\n" + self.source if with_source else "")


def _same(got: np.ndarray, want: np.ndarray, signed_zero: bool) -> np.ndarray:
    """Elementwise: the same value (NaN == NaN; the sign of zero only when ``signed_zero``)."""
    if got.dtype.kind in "iub":
        return got == want
    g, w = got.astype(np.float64), want.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    if signed_zero:
        same &= np.signbit(g) == np.signbit(w)
    return same


def compare_outputs(program: Program, source: str, backend: str, width: int, got: dict[str, np.ndarray],
                    want: dict[str, np.ndarray]) -> list[Mismatch]:
    out = []
    for name in OUTPUTS:
        g, w = got[name], want[name]
        if name == "to":
            slots = np.tile(np.arange(APPROX_SLOTS), THREADS)
            bad = np.zeros(g.size, bool)
            details = []
            for slot, fn in program.approx.items():
                _, rtol, atol = APPROX[fn]
                sel = slots == slot
                verdict = compare(g[sel], w[sel].astype(np.float64), Tolerance(rtol=rtol, atol=max(atol, 1.2e-38)))
                if not verdict.ok:
                    bad |= sel & ~_within(g, w, rtol, atol)
                    details.append(f"slot {slot} ({fn}, rtol={rtol:g}, atol={atol:g}): {verdict.message}")
            per = APPROX_SLOTS
            detail = "; ".join(details)
        else:
            bad = ~_same(g, w, program.domain.signed_zero)
            per = SLOTS
            detail = f"{int(bad.sum())}/{bad.size} elements differ (exact)"
        if bad.any():
            idx = np.flatnonzero(bad)[:6]
            elements = [(int(k) // per, int(k) % per, _py(g[k]), _py(w[k])) for k in idx]
            out.append(Mismatch(program.seed, backend, name, detail, source, width, elements))
    return out


def _within(g: np.ndarray, w: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return (np.abs(g64 - w64) <= rtol * np.abs(w64) + atol) | (np.isnan(g64) & np.isnan(w64))


def _py(v: Any) -> Any:
    return float(v) if np.asarray(v).dtype.kind == "f" else int(v)


@dataclass
class Outcome:
    seed: int
    source: str
    mismatches: list[Mismatch]
    #: A backend that raised where the interpreter ran: (backend, error text).
    errors: list[tuple[str, str]]
    #: The interpreter rejected the program: a generator bug (the program should be valid).
    invalid: str | None = None


def check_program(program: Program, backends: list[str], source: str | None = None,
                  inputs_seed: int | None = None) -> Outcome:
    """Run ``program`` (or ``source``, a hand-edited version of it) on every backend; compare with interp."""
    source = program.source() if source is None else source
    inputs = make_inputs(program.seed if inputs_seed is None else inputs_seed)
    try:
        kernel = load_kernel(source)
        refs: dict[int, dict[str, np.ndarray]] = {}
        widths = {b: (subgroup_width(b) if program.uses_subgroups else 32) for b in backends if b != "interp"}
        for w in sorted(set(widths.values()) | {32}):
            refs[w] = run_interp(kernel, inputs, w)
    except Exception as e:  # the generator promised a valid program
        return Outcome(program.seed, source, [], [], f"{type(e).__name__}: {e}")
    mismatches, errors = [], []
    for b in backends:
        if b == "interp":
            continue
        try:
            got = run_device(kernel, b, inputs)
        except Exception as e:
            errors.append((b, f"{type(e).__name__}: {e}"))
            continue
        mismatches += compare_outputs(program, source, b, widths[b], got, refs[widths[b]])
    return Outcome(program.seed, source, mismatches, errors)


def fuzz(seeds: range | list[int], backends: list[str], domain: Domain | None = None,
         progress: Callable[[int, Outcome], None] | None = None) -> list[Outcome]:
    """``check_program`` for the program of each seed; the outcomes with a mismatch, an error or a bad program."""
    bad = []
    for k, seed in enumerate(seeds):
        outcome = check_program(generate(seed, domain), backends)
        if outcome.mismatches or outcome.errors or outcome.invalid:
            bad.append(outcome)
        if progress:
            progress(k, outcome)
    return bad


__all__ = ["Mismatch", "Outcome", "available", "check_program", "compare_outputs", "fuzz", "load_kernel",
           "run_device", "run_interp", "subgroup_width"]

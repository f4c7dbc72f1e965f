#!/usr/bin/env python3
"""Differential fuzzing of Iron's backends with random kernels (docs/fuzzing.md).

Run from the source tree (no pytest needed):

    PYTHONPATH=src:tests python3 scripts/fuzz.py --count 300 --seed 1000 --backends interp,vulkan[,cuda]

Each seed gives one program (tests/fuzz/kernelgen.py); it runs on the interpreter and on every other
backend named, and each output is compared with the interpreter's.  Every mismatch is printed with its
seed, the program (the kernel as Python source), and the differing elements; ``--minimize`` first
deletes statements while the mismatch stays, ``--out DIR`` saves each failing program as a file that
``--replay FILE --seed S`` runs again.  The exit status is 1 when anything mismatched, 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from fuzz import differential, kernelgen  # noqa: E402
from fuzz.minimize import minimize  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=100, help="programs to run (default 100)")
    ap.add_argument("--seed", type=int, default=0, help="first seed (default 0); seeds are seed .. seed+count-1")
    ap.add_argument("--backends", default="interp,vulkan", help="comma-separated: interp,vulkan,cuda")
    ap.add_argument("--domain", default="", help="switches of kernelgen.Domain, e.g. 'subgroups=0,max_trip=3'")
    ap.add_argument("--minimize", action="store_true", help="shrink each failing program before reporting it")
    ap.add_argument("--out", type=Path, help="folder to save each failing program in (seed_<S>.py)")
    ap.add_argument("--replay", type=Path, help="run this saved program (with --seed's inputs) instead")
    ap.add_argument("--show", action="store_true", help="print each program's source before running it")
    args = ap.parse_args(argv)

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    try:
        domain = kernelgen.Domain.parse(args.domain)
    except ValueError as e:
        print(f"fuzz: {e}", file=sys.stderr)
        return 2
    for b in backends:
        if b == "interp":
            continue
        ok, why = differential.available(b)
        if not ok:
            print(f"fuzz: backend {b} is not available here: {why}", file=sys.stderr)
            return 2
    if "interp" not in backends:
        backends.insert(0, "interp")
    widths = {b: differential.subgroup_width(b) for b in backends if b != "interp"}
    print(f"fuzz: backends {', '.join(backends)} (subgroup widths {widths}); domain [{domain.describe() or 'default'}]",
          flush=True)

    if args.replay:
        program = kernelgen.generate(args.seed, domain)
        outcome = differential.check_program(program, backends, source=args.replay.read_text())
        failed = bool(outcome.mismatches or outcome.errors or outcome.invalid)
        print(f"seed {outcome.seed} ({args.replay}): {'MISMATCH' if failed else 'ok'}")
        return _report([outcome] if failed else [], args, backends)

    start = time.monotonic()
    seeds = range(args.seed, args.seed + args.count)

    def progress(k: int, outcome: differential.Outcome) -> None:
        state = "ok" if not (outcome.mismatches or outcome.errors or outcome.invalid) else "MISMATCH"
        if outcome.invalid:
            state = "INVALID PROGRAM"
        elapsed = time.monotonic() - start
        print(f"[{k + 1}/{len(seeds)}] seed {outcome.seed}: {state} ({elapsed:.0f} s)", flush=True)
        if args.show:
            print(outcome.source)

    bad = differential.fuzz(seeds, backends, domain, progress)
    return _report(bad, args, backends, domain, len(seeds))


def _report(bad: list[differential.Outcome], args: argparse.Namespace, backends: list[str],
            domain: kernelgen.Domain | None = None, total: int = 1) -> int:
    for outcome in bad:
        source = outcome.source
        if args.minimize and (outcome.mismatches or outcome.errors) and not args.replay:
            program = kernelgen.generate(outcome.seed, domain)
            smaller = minimize(program, backends)
            if smaller is not None:
                source = smaller.source
                outcome = smaller
        print("=" * 100)
        if outcome.invalid:
            print(f"seed {outcome.seed}: the interpreter rejected the generated program (a generator bug): "
                  f"{outcome.invalid}")
        for b, err in outcome.errors:
            print(f"seed {outcome.seed}: {b} raised where the interpreter ran: {err}")
        for m in outcome.mismatches:
            print(m.report(with_source=False))
        print("--- program (save as a file; rerun: PYTHONPATH=src:tests python3 scripts/fuzz.py "
              f"--replay FILE --seed {outcome.seed} --backends {','.join(backends)}) ---")
        print(source)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"seed_{outcome.seed}.py").write_text(source)
    print(f"fuzz: {len(bad)} of {total} programs failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""``iron inspect KERNEL``: the IR as written, after each pass, and its hash; any compile stage's output."""

from __future__ import annotations

import argparse
from typing import Any

from ..codegen.backends import EMITTING, TARGET_NAMES, by_language, get_target
from ..codegen.compiler import STAGES
from ..core import dtypes as D
from ..core.errors import IronError
from ..core.hashing import kernel_hash
from ..core.printer import print_kernel


HELP = "show a kernel's IR as written and after each optimisation pass, or its emitted source"

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kernel", metavar="KERNEL",
                   help="FILE.py:NAME, MODULE:NAME, or a kernel name from the modules in iron.toml")
    p.add_argument("--variant", action="append", default=[], metavar="K=V,...",
                   help="which variant, e.g. T=f16,BLOCK=256 (repeatable: --variant T=f16 --variant BLOCK=256; "
                        "default: the first)")
    p.add_argument("--ir", action="store_true", help="print the IR as the frontend wrote it (the default)")
    p.add_argument("--passes", action="store_true", help="print the IR after every pass of the pipeline")
    p.add_argument("--optimized", action="store_true", help="print only the IR after the whole pipeline")
    p.add_argument("--target", default="interp", choices=TARGET_NAMES,
                   help="whose pipeline defaults to use (FMA contraction differs by target); with --passes, "
                        "a target that emits source also shows its legalisation passes")
    p.add_argument("--opt-level", type=int, choices=(0, 1, 2), default=None, help="override IRON_OPT_LEVEL")
    p.add_argument("--stage", choices=STAGES, default=None,
                   help="print one stage of the compile driver for --target: optimise (the IR after the passes), "
                        "legalise (after the target's legalisation), source (the emitted source), binary (the "
                        "compiled form and resource report, as --asm)")
    p.add_argument("--emit", choices=tuple(b.language for b in EMITTING), default=None,
                   help="print the native source for this language instead of the IR")
    p.add_argument("--asm", action="store_true",
                   help="with --emit: compile it and print the compiled form and resource report "
                        "(PTX + registers/shared/spills, AMDGPU notes, SPIR-V disassembly)")
    p.add_argument("--arch", default=None,
                   help="with --emit or --stage: the architecture (sm_90, gfx90a, gfx1030, ...)")


def parse_variant(text: str) -> dict[str, Any]:
    """``T=f16,BLOCK=256,FRAG=16x8x16`` -> {"T": f16, "BLOCK": 256, "FRAG": "16x8x16"}.

    A value that is not a dtype, bool or number stays a string (string variants such as an
    activation name); the kernel's own variant check says when it is not one of its values.
    """
    out: dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        if "=" not in item:
            raise IronError(f"--variant: expected NAME=VALUE, got '{item}'")
        name, raw = (s.strip() for s in item.split("=", 1))
        out[name] = _parse_value(raw)
    return out


def _parse_value(raw: str) -> Any:
    if raw in D.BY_NAME:
        return D.BY_NAME[raw]
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    return raw


def run(args: argparse.Namespace) -> int:
    from ..codegen.pipeline import PassContext, pipeline_stages
    from ..harness.discovery import find_kernel

    k = find_kernel(args.kernel)
    binding = parse_variant(",".join(v for v in args.variant if v))
    spec = k.variant(**binding) if binding else k.variant(**k.variants[0]) if k.variants else k.variant()
    ir = spec.ir
    overrides = {} if args.opt_level is None else {"opt_level": args.opt_level}
    if args.emit:
        if args.stage:
            raise IronError("--stage and --emit are two ways to ask for one output: give --stage with --target")
        return _show_stage(ir, by_language(args.emit).target, "binary" if args.asm else "source", args, overrides)
    if args.asm:
        raise IronError("--asm goes with --emit cuda|hip|glsl|msl")
    if args.stage:
        return _show_stage(ir, args.target, args.stage, args, overrides)
    ctx = PassContext.for_target(args.target, **overrides)
    if args.passes or args.optimized:
        stages = pipeline_stages(ir, ctx, legalise=args.passes)
        optimized = [(name, k) for name, k in stages if not name.startswith("legalize:")]
        shown = stages if args.passes else optimized[-1:]
        previous = None
        for name, stage_ir in shown:
            text = print_kernel(stage_ir)
            if name == "frontend":
                print("// ----- as written (frontend) -----")
            elif text == previous:
                print(f"// ----- after {name}: unchanged -----")
                continue
            else:
                print(f"// ----- after {name} -----")
            print(text, end="")
            previous = text
        print(f"// hash {kernel_hash(optimized[-1][1])}")
    else:
        print(print_kernel(ir), end="")
        print(f"// hash {kernel_hash(ir)}")
    return 0


def _show_stage(ir: Any, target: str, stage: str, args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    """The output of the compile driver's ``stage`` for ``target`` (iron.codegen.compiler); for ``binary``, the
    toolchain's listing and resource report."""
    from ..codegen.compiler import CompileOptions, compile as compile_kernel, stage_output
    from ..codegen.pipeline import PassContext
    from ..codegen.targets import profile as target_profile

    prof = target_profile(target, args.arch) if args.arch else None
    options = CompileOptions(profile=prof, passes=PassContext.for_target(target, **overrides),
                             stop="source" if stage == "binary" else stage)
    artifact = compile_kernel(ir, target, options)
    if stage != "binary":
        text, _ = stage_output(artifact)
        assert isinstance(text, str)
        print(text, end="" if text.endswith("\n") else "\n")
        return 0
    from ..codegen.toolchains import toolchain_of

    emitted = artifact.emitted
    assert emitted is not None
    text, title, report = toolchain_of(target).listing(emitted.source, arch=emitted.profile.arch,
                                                       name=f"{emitted.abi.entry}{get_target(target).source_suffix}")
    if text:
        print(text)
    _print_report(title, report)
    return 0


def _print_report(title: str, report: dict[str, Any]) -> None:
    print(f"// ----- {title} -----")
    for key in sorted(report):
        value = report[key]
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        print(f"// {key}: {value}")

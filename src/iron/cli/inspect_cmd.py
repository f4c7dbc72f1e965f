"""``iron inspect KERNEL``: the IR as written, after each pass, and its hash."""

from __future__ import annotations

import argparse
from typing import Any

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
    p.add_argument("--target", default="interp", choices=("interp", "cuda", "hip", "spirv", "metal"),
                   help="whose pipeline defaults to use (FMA contraction differs by target)")
    p.add_argument("--opt-level", type=int, choices=(0, 1, 2), default=None, help="override IRON_OPT_LEVEL")
    p.add_argument("--emit", choices=tuple(EMIT_TARGETS), default=None,
                   help="print the native source for this language instead of the IR")
    p.add_argument("--asm", action="store_true",
                   help="with --emit: compile it and print the compiled form and resource report "
                        "(PTX + registers/shared/spills, AMDGPU notes, SPIR-V disassembly)")
    p.add_argument("--arch", default=None, help="with --emit: the architecture (sm_90, gfx90a, gfx1030, ...)")


#: --emit language -> codegen target
EMIT_TARGETS = {"cuda": "cuda", "hip": "hip", "glsl": "spirv", "msl": "metal"}


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
        return _emit(ir, EMIT_TARGETS[args.emit], args, overrides)
    if args.asm:
        raise IronError("--asm goes with --emit cuda|hip|glsl|msl")
    ctx = PassContext.for_target(args.target, **overrides)
    if args.passes or args.optimized:
        stages = pipeline_stages(ir, ctx)
        shown = stages if args.passes else stages[-1:]
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
        print(f"// hash {kernel_hash(stages[-1][1])}")
    else:
        print(print_kernel(ir), end="")
        print(f"// hash {kernel_hash(ir)}")
    return 0


def _emit(ir: Any, target: str, args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    """The emitted source for ``target``, or with --asm its compiled form and resource report."""
    from ..codegen.emit import emit_kernel
    from ..codegen.pipeline import PassContext, run_pipeline
    from ..codegen.targets import profile as target_profile

    prof = target_profile(target, args.arch) if args.arch else None
    emitted = emit_kernel(run_pipeline(ir, PassContext.for_target(target, **overrides)), target, prof)
    if not args.asm:
        print(emitted.source, end="" if emitted.source.endswith("\n") else "\n")
        return 0
    arch = emitted.profile.arch
    name = emitted.abi.entry
    if target == "cuda":
        from ..codegen.toolchains import nvrtc

        art = nvrtc.compile_cuda(emitted.source, arch=arch, want="ptx", name=f"{name}.cu")
        print(art.binary.decode(errors="replace").rstrip("\x00"))
        cubin = nvrtc.compile_cuda(emitted.source, arch=arch, want="cubin", name=f"{name}.cu")
        _print_report(f"{cubin.tool} {cubin.version}, {arch}", cubin.report)
    elif target == "hip":
        from ..codegen.toolchains import hip

        art = hip.compile_hip(emitted.source, arch=arch, name=f"{name}.hip")
        _print_report(f"{art.tool} {art.version}, {arch} ({len(art.binary)} byte code object)", art.report)
    elif target == "spirv":
        from ..codegen.toolchains import spirv

        art = spirv.compile_glsl(emitted.source, name=f"{name}.comp")
        print(spirv.disassemble(art.binary))
        _print_report(f"{art.tool} {art.version}", art.report)
    else:
        from ..codegen.toolchains import metal

        art = metal.check_msl(emitted.source, name=f"{name}.metal")
        print("// Metal has no assembler outside macOS: the source type-checks against Iron's Metal shim.")
        _print_report(f"{art.tool} {art.version}", art.report)
    return 0


def _print_report(title: str, report: dict[str, Any]) -> None:
    print(f"// ----- {title} -----")
    for key in sorted(report):
        value = report[key]
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        print(f"// {key}: {value}")

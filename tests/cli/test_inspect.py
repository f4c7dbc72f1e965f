"""``iron inspect``: IR as written, per pass, variants, and clear errors for bad input."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iron.cli.main import main

KERNELS = textwrap.dedent('''
    from iron import kernel, variants, Tensor, In, T, f32, f16
    from iron.lang import program_id, exp

    @kernel(variants(T=[f32, f16], SCALE=[2, 4]))
    def scaled_exp(a: In[T], out: Tensor[T]):
        i = program_id(0)
        out[i] = exp(a[i]) * SCALE

    @kernel(variants(MODE=["exp", "neg"]))
    def unary(a: In[f32], out: Tensor[f32]):
        i = program_id(0)
        if MODE == "exp":
            out[i] = exp(a[i])
        else:
            out[i] = -a[i]

    @kernel
    def broken(a: In[f32], out: Tensor[f32]):
        i = program_id(0)
        out[i] = exq(a[i])
''')


@pytest.fixture
def kernels_file(tmp_path: Path) -> Path:
    p = tmp_path / "kernels.py"
    p.write_text(KERNELS)
    return p


def test_ir_as_written_for_a_chosen_variant(kernels_file, capsys):
    assert main(["inspect", f"{kernels_file}:scaled_exp", "--variant", "T=f16,SCALE=4"]) == 0
    out = capsys.readouterr().out
    assert "kernel @scaled_exp(%a: tensor<f16 readonly>, %out: tensor<f16>) [SCALE = 4, T = f16] {" in out
    assert "exp" in out and "const 4.0 : f16" in out
    assert "// hash " in out


def test_repeated_variant_flags_add_up(kernels_file, capsys):
    assert main(["inspect", f"{kernels_file}:scaled_exp", "--variant", "T=f16", "--variant", "SCALE=4"]) == 0
    assert "[SCALE = 4, T = f16] {" in capsys.readouterr().out


def test_passes_shows_every_stage_in_order(kernels_file, capsys):
    assert main(["inspect", f"{kernels_file}:scaled_exp", "--passes"]) == 0
    out = capsys.readouterr().out
    from iron.codegen.pipeline import PassContext, default_passes

    names = [p.name for p in default_passes(PassContext.for_target("interp"))]
    positions = [out.index(f"after {n}") for n in dict.fromkeys(names)]
    assert out.index("as written (frontend)") < positions[0]
    assert positions == sorted(positions)


def test_passes_for_an_emitting_target_show_its_legalisation_after_the_optimisation(kernels_file, capsys):
    from iron.codegen.backends import get_target

    assert main(["inspect", f"{kernels_file}:scaled_exp", "--passes", "--target", "spirv"]) == 0
    out = capsys.readouterr().out
    positions = [out.index(f"after legalize:{n}") for n in get_target("spirv").legalize]
    assert positions == sorted(positions) and out.index("after fma_contract") < positions[0]
    assert main(["inspect", f"{kernels_file}:scaled_exp", "--optimized", "--target", "spirv"]) == 0
    assert "legalize:" not in capsys.readouterr().out


def test_stage_prints_that_stage_of_the_compile_driver(kernels_file, capsys):
    from iron.codegen import CompileOptions, compile
    from iron.codegen.compiler import stage_output
    from iron.harness.discovery import find_kernel

    from iron import f16

    ir = find_kernel(f"{kernels_file}:scaled_exp").variant(T=f16, SCALE=2).ir
    for stage in ("optimise", "legalise", "source"):
        assert main(["inspect", f"{kernels_file}:scaled_exp", "--variant", "T=f16,SCALE=2", "--target", "spirv",
                     "--stage", stage]) == 0
        want, _ = stage_output(compile(ir, "spirv", CompileOptions(stop=stage)))
        assert capsys.readouterr().out == want
    legal = stage_output(compile(ir, "spirv", CompileOptions(stop="legalise")))[0]
    optimised = stage_output(compile(ir, "spirv", CompileOptions(stop="optimise")))[0]
    assert "= exp %0 : f16" in optimised and "= exp %1 : f32" in legal, "legalisation promotes f16 arithmetic"
    assert main(["inspect", f"{kernels_file}:scaled_exp", "--stage", "source"]) == 1
    assert "target 'interp' emits no code" in capsys.readouterr().err


def test_bad_kernel_gives_a_located_error_not_a_traceback(kernels_file):
    proc = subprocess.run([sys.executable, "-m", "iron", "inspect", f"{kernels_file}:broken"],
                          capture_output=True, text=True,
                          env={"PYTHONPATH": str(Path(__file__).parents[2] / "src"), "PATH": ""})
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    line = KERNELS.splitlines().index("    out[i] = exq(a[i])") + 1
    col = "    out[i] = exq(a[i])".index("exq") + 1
    assert f"{kernels_file}:{line}:{col}: unknown name" in proc.stderr
    assert "exp" in proc.stderr  # the close-match suggestion


@pytest.mark.parametrize("spec, message", [
    ("nope.py:k", "no such file"),
    ("{file}:missing", "kernels there: broken, scaled_exp"),
    ("bare_name", "iron.toml"),
])
def test_bad_kernel_names_say_what_to_do(kernels_file, capsys, monkeypatch, tmp_path, spec, message):
    monkeypatch.chdir(tmp_path)
    assert main(["inspect", spec.format(file=kernels_file)]) == 1
    assert message in capsys.readouterr().err


def test_a_string_variant_value_selects_its_variant(kernels_file, capsys):
    assert main(["inspect", f"{kernels_file}:unary", "--variant", "MODE=neg"]) == 0
    out = capsys.readouterr().out
    assert "[MODE = neg]" in out and "= exp" not in out and "neg %0" in out
    assert main(["inspect", f"{kernels_file}:unary", "--variant", "MODE=log"]) == 1
    assert "no variant with MODE='log'" in capsys.readouterr().err


def test_bad_variant_text_is_explained(kernels_file, capsys):
    assert main(["inspect", f"{kernels_file}:scaled_exp", "--variant", "T"]) == 1
    assert "expected NAME=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("lang, marker", [("cuda", 'extern "C" __global__ void scaled_exp__SCALE_2__T_f16('),
                                          ("hip", "scaled_exp__SCALE_2__T_f16("),
                                          ("glsl", "#version 450"),
                                          ("msl", "kernel void scaled_exp__SCALE_2__T_f16(")])
def test_emit_prints_the_native_source(kernels_file, capsys, lang, marker):
    assert main(["inspect", f"{kernels_file}:scaled_exp", "--variant", "T=f16", "--emit", lang]) == 0
    assert marker in capsys.readouterr().out


@pytest.mark.parametrize("lang, toolchain, marker", [("cuda", "nvrtc", "// registers: "),
                                                     ("hip", "hip", "// vgprs: "),
                                                     ("glsl", "spirv", "OpEntryPoint GLCompute"),
                                                     ("msl", "metal", "// kernels: ['scaled_exp__SCALE_2__T_f32']")])
def test_asm_compiles_with_the_real_toolchain(kernels_file, capsys, require_toolchain, lang, toolchain, marker):
    require_toolchain(toolchain)
    assert main(["inspect", f"{kernels_file}:scaled_exp", "--emit", lang, "--asm"]) == 0
    out = capsys.readouterr().out
    assert marker in out
    if lang == "cuda":
        assert ".visible .entry scaled_exp__SCALE_2__T_f32(" in out


def test_asm_without_emit_says_what_to_add(kernels_file, capsys):
    assert main(["inspect", f"{kernels_file}:scaled_exp", "--asm"]) == 1
    assert "--asm goes with --emit" in capsys.readouterr().err

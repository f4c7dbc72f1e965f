"""``iron build``: sources and artifacts per variant, a loadable manifest, Swift bindings, atomic output."""

import json
import textwrap
from pathlib import Path

import pytest

from iron.cli.main import main

KERNELS = textwrap.dedent('''
    from iron import kernel, variants, Tensor, In, T, f32, f16
    from iron.lang import program_id, exp

    @kernel(variants(T=[f32, f16]))
    def iron_exp(a: In[T], out: Tensor[T], n: int):
        i = program_id(0)
        if i < n:
            out[i] = exp(a[i])
''')

FRAGMENT = textwrap.dedent('''
    from iron import kernel, Tensor, In, f16, f32
    from iron.lang import frag_a, frag_b, frag_acc, frag_store, mma

    @kernel
    def tile(A: In[f16], B: In[f16], C: Tensor[f32]):
        acc = mma(frag_a(A, 0, 16, 16, 16), frag_b(B, 0, 8, 16, 8), frag_acc(f32, 16, 8))
        frag_store(C, 0, 8, acc)
''')


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "kernels.py").write_text(KERNELS)
    return tmp_path


def _build(project: Path, *extra: str) -> int:
    return main(["build", "-m", str(project / "kernels.py"), "--out", str(project / "out"), *extra])


def test_sources_and_manifest_for_every_variant(project, capsys):
    assert _build(project, "--emit", "cuda,glsl,msl,hip,ir,manifest") == 0
    out = project / "out"
    for entry in ("iron_exp__T_f32", "iron_exp__T_f16"):
        assert (out / "cuda" / f"{entry}.cu").read_text().count(f"void {entry}(") == 1
        assert (out / "msl" / f"{entry}.metal").exists() and (out / "hip" / f"{entry}.hip").exists()
        assert "#version 450" in (out / "glsl" / f"{entry}.comp").read_text()
        assert (out / "ir" / f"{entry}.ir").read_text().startswith("kernel @iron_exp(")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["schema"] == "iron.manifest/1"
    (k,) = manifest["kernels"]
    assert k["name"] == "iron_exp" and [v["binding"] for v in k["variants"]] == [{"T": "f32"}, {"T": "f16"}]
    v = k["variants"][1]
    assert v["entry"] == "iron_exp__T_f16" and len(v["ir_hash"]) == 64
    assert [t["name"] for t in v["abi"]["tensors"]] == ["a", "out"]
    assert set(v["targets"]) == {"cuda", "hip", "spirv", "metal"}
    assert "cuda/iron_exp__T_f16.cu" in v["files"]


def test_compiled_artifacts_and_swift(project, require_toolchain):
    require_toolchain("nvrtc")
    require_toolchain("spirv")
    assert _build(project, "--emit", "cubin,spirv,swift") == 0
    out = project / "out"
    assert (out / "cubin" / "iron_exp__T_f32.sm_90.cubin").read_bytes()[:4] == b"\x7fELF"
    assert (out / "spirv" / "iron_exp__T_f16.spv").read_bytes()[:4] == b"\x03\x02\x23\x07"
    swift = (out / "swift" / "IronKernels.swift").read_text()
    assert "public func iron_exp__T_f16(encoder: MTLComputeCommandEncoder, a: MTLBuffer, out: MTLBuffer, n: Int32" \
        in swift


def test_metallib_off_macos_is_one_clear_line(project, capsys):
    assert _build(project, "--emit", "metallib") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, "the missing tool is reported before any work, in one line"
    assert "xcrun metal" in err[0] and "--emit msl" in err[0]
    assert not (project / "out").exists()


def test_a_failed_build_writes_nothing_and_keeps_old_files(project, capsys):
    assert _build(project, "--emit", "cuda") == 0
    old = (project / "out" / "cuda" / "iron_exp__T_f32.cu").read_text()
    (project / "kernels.py").write_text(KERNELS.replace("exp(a[i])", "exq(a[i])"))
    assert _build(project, "--emit", "cuda") == 1
    assert "exq" in capsys.readouterr().err
    assert (project / "out" / "cuda" / "iron_exp__T_f32.cu").read_text() == old
    assert not list((project).glob(".iron-build-*"))


def test_unknown_emit_kind_lists_the_choices(project, capsys):
    assert _build(project, "--emit", "llvm") == 1
    assert "unknown --emit kind 'llvm'" in capsys.readouterr().err

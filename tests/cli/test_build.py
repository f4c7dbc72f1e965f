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


RULED = textwrap.dedent('''
    from iron import kernel, variants, Tensor, In, T, f32, f16, LaunchError
    from iron.lang import program_id

    def whole_vectors(v):
        """VEC divides N"""
        return v.N % v.VEC == 0

    @kernel(variants(T=[f32, f16], N=[4, 6], VEC=[2, 4], where=whole_vectors))
    def chunks(a: In[T], out: Tensor[T]):
        assert N % VEC == 0, "VEC divides N"  # N=6, VEC=4 fails to compile: the rule excludes it
        i = program_id(0)
        out[i] = a[i]
''')


def test_variant_rules_decide_what_is_built(tmp_path, capsys):
    """Combinations a rule of variants(where=...) rejects (here one whose static assertion fails) are not
    enumerated: the build succeeds and the manifest and the Swift bindings hold exactly the valid ones."""
    (tmp_path / "kernels.py").write_text(RULED)
    assert main(["build", "-m", str(tmp_path / "kernels.py"), "--out", str(tmp_path / "out"),
                 "--emit", "ir,msl,swift,manifest"]) == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    (k,) = manifest["kernels"]
    built = [(v["binding"]["T"], v["binding"]["N"], v["binding"]["VEC"]) for v in k["variants"]]
    assert built == [("f32", "4", "2"), ("f32", "4", "4"), ("f32", "6", "2"),
                     ("f16", "4", "2"), ("f16", "4", "4"), ("f16", "6", "2")]
    swift = (tmp_path / "out" / "swift" / "IronKernels.swift").read_text()
    entries = sorted(v["entry"] for v in k["variants"])
    assert sorted(e for e in entries if f"public func {e}(" in swift) == entries
    irs = [p.name for p in (tmp_path / "out" / "ir").iterdir()]
    assert len(irs) == 6 and not [name for name in irs if "N_6" in name and "VEC_4" in name]


def test_launching_an_excluded_combination_names_the_kernel_and_the_rule(tmp_path):
    import numpy as np

    from iron import LaunchError
    from iron.harness.discovery import load_source

    (tmp_path / "ruled.py").write_text(RULED)
    module = load_source(str(tmp_path / "ruled.py"))
    with pytest.raises(LaunchError, match=r"kernel 'chunks' has no variant T=f32, N=6, VEC=4: its rule "
                                          r"'whole_vectors: VEC divides N' excludes that combination"):
        module.chunks.variant(N=6, VEC=4).launch(np.zeros(4, np.float32), np.zeros(4, np.float32), grid=4,
                                                 backend="interp")
    with pytest.raises(LaunchError, match="whole_vectors"):
        module.chunks.variant(T=module.f16, N=6, VEC=4)
    module.chunks.variant(N=6, VEC=2).launch(np.ones(4, np.float32), out := np.zeros(4, np.float32), grid=4,
                                             backend="interp")
    assert out.tolist() == [1.0] * 4
    assert len(module.chunks.variants) == 6


def test_a_lambda_rule_is_named_by_its_source():
    from iron import f16, f32, variants

    v = variants(T=[f32, f16], V=[4, 8], where=lambda v: not (v.T == f16 and v.V == 4))
    assert [b for b in v.bindings()] == [{"T": f32, "V": 4}, {"T": f32, "V": 8}, {"T": f16, "V": 8}]
    assert "lambda v: not (v.T == f16 and v.V == 4)" in repr(v)
    # each parameter's values some valid combination takes, in the order listed (what a registry's rows use)
    assert v.values() == {"T": (f32, f16), "V": (4, 8)}
    narrow = variants(V=[4, 8, 16], T=[f32, f16], where=lambda v: v.V != 16)
    assert narrow.values() == {"V": (4, 8), "T": (f32, f16)}
    with pytest.raises(ValueError, match="reject every combination"):
        variants(T=[f32], where=lambda v: False).bindings()
    with pytest.raises(ValueError, match="takes a predicate"):
        variants(T=[f32], where=3)

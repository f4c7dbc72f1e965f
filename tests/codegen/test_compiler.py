"""The one compile driver: stages, the cache that remembers them and explains a miss, IRON_DUMP, clear errors."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from iron import Tensor, config, f32, kernel
from iron.codegen import STAGES, CompileOptions, compile
from iron.codegen.cache import ArtifactCache, ArtifactStore
from iron.codegen.compiler import stage_output
from iron.codegen.pipeline import PassContext
from iron.codegen.toolchains.common import CompiledArtifact, ToolchainMissing
from iron.core.errors import IronError
from iron.core.hashing import kernel_hash
from iron.lang import program_id

SRC = Path(__file__).resolve().parents[2] / "src" / "iron"


@kernel
def muladd(x: Tensor[f32], y: Tensor[f32], a: f32):
    i = program_id(0)
    y[i] = a * x[i] + y[i]


class FakeNvrtc:
    """A stand-in toolchain: counts its builds, makes a CUBIN-shaped binary from the source and options."""

    builds: list[tuple[str, tuple[str, ...]]] = []
    release = "fake nvrtc 1.0"

    @classmethod
    def version(cls) -> str:
        return cls.release

    @classmethod
    def build(cls, source: str, *, arch: str, kind: str, name: str, options=()) -> CompiledArtifact:
        cls.builds.append((arch, tuple(options)))
        binary = b"\x7fELF" + f"{kind} {arch} {options} {len(source)}".encode().ljust(120, b"\0")
        return CompiledArtifact(binary=binary, log="", tool="fake", version=cls.release,
                                report={"arch": arch, "kernels": {"muladd": {"registers": 12}}})


@pytest.fixture(autouse=True)
def fresh_fake():
    FakeNvrtc.builds = []
    FakeNvrtc.release = "fake nvrtc 1.0"


def cubin(cache: ArtifactCache, ir=None, **options) -> object:
    opts = CompileOptions(binary="cubin", **options)
    return compile(ir if ir is not None else muladd.ir(), "cuda", opts, cache=cache, toolchain=FakeNvrtc)


def test_each_stage_makes_its_own_output():
    cache = ArtifactCache(None)
    ir = muladd.ir()
    made = {stage: compile(ir, "cuda", CompileOptions(binary="cubin", stop=stage), cache=cache,
                           toolchain=FakeNvrtc) for stage in STAGES}
    assert [a.stage for a in made.values()] == list(STAGES)
    assert made["optimise"].kernel is made["binary"].kernel, "every stage builds on the one optimised kernel"
    assert made["legalise"].legal is not None and made["legalise"].emitted is None
    assert "__global__" in made["source"].source and made["source"].entry == "muladd"
    assert made["binary"].binary.startswith(b"\x7fELF") and made["binary"].report["kernel"] == {"registers": 12}
    assert made["binary"].source == made["source"].source and made["binary"].origin == "nvrtc"
    assert [stage_output(a)[1] for a in made.values()] == [".ir", ".ir", ".cu", ".cubin"]


def test_a_second_request_is_a_memory_hit_and_targets_that_agree_share_the_optimisation():
    cache = ArtifactCache(None)
    ir = muladd.ir()
    first = compile(ir, "cuda", cache=cache)
    hits = cache.memory_hits
    assert compile(ir, "cuda", cache=cache) is first and cache.memory_hits == hits + 1
    hip, spirv = compile(ir, "hip", cache=cache), compile(ir, "spirv", cache=cache)
    assert hip.kernel is first.kernel, "CUDA and HIP contract alike: one pipeline run"
    assert spirv.kernel is not first.kernel, "SPIR-V does not contract: a run of its own"
    assert kernel_hash(spirv.kernel) != kernel_hash(first.kernel)


def test_binaries_come_from_disk_in_a_second_process_and_a_miss_names_what_changed(tmp_path):
    first = ArtifactCache(tmp_path)
    built = cubin(first)
    assert built.origin == "nvrtc" and first.compiles == 1 and "never compiled" in first.last_miss
    second = ArtifactCache(tmp_path)
    again = cubin(second)
    assert again.origin == "disk" and again.binary == built.binary and second.compiles == 0
    assert again.report == built.report and len(FakeNvrtc.builds) == 1
    FakeNvrtc.release = "fake nvrtc 2.0"
    third = ArtifactCache(tmp_path)
    cubin(third, toolchain_options=("-lineinfo",))
    assert third.compiles == 1
    assert "toolchain version fake nvrtc 1.0 -> fake nvrtc 2.0" in third.last_miss
    assert "compile options [] (defaults) -> [-lineinfo]" in third.last_miss
    assert "architecture" not in third.last_miss


def test_a_damaged_file_is_rebuilt_and_replaced(tmp_path):
    built = cubin(ArtifactCache(tmp_path))
    (path,) = (tmp_path / "cuda").glob("*.cubin")
    path.write_bytes(path.read_bytes()[:-7])
    cache = ArtifactCache(tmp_path)
    assert cubin(cache).binary == built.binary
    assert cache.rebuilt == 1 and "checksum mismatch" in cache.last_miss and cache.last_miss.endswith("rebuilt")
    assert cubin(ArtifactCache(tmp_path)).origin == "disk"


def test_without_contraction_the_backend_adds_its_options():
    cache = ArtifactCache(None)
    apart = compile(muladd.ir(), "cuda", CompileOptions(passes=PassContext.for_target("cuda", fp_contract=False),
                                                        stop="optimise"), cache=cache).kernel
    assert apart.meta["contract"] is False
    cubin(cache, apart, optimised=True)
    cubin(cache, apart, optimised=True, toolchain_options=("--fmad=false",))
    cubin(cache)
    assert FakeNvrtc.builds == [("sm_90", ("--fmad=false",)), ("sm_90", ())], \
        "--fmad=false added once (a second request with it given is the same build), none when contracted"


def test_dump_writes_each_stage_made(tmp_path, monkeypatch):
    monkeypatch.setenv("IRON_DUMP", str(tmp_path / "dump"))
    config.reload()
    try:
        art = cubin(ArtifactCache(None))
    finally:
        monkeypatch.delenv("IRON_DUMP")
        config.reload()
    files = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert [f.split(".")[2] for f in files] == ["1-optimise", "2-legalise", "3-source", "4-binary"]
    assert all(f.startswith("muladd.cuda.") for f in files)
    (source,) = (tmp_path / "dump").glob("*.cu")
    (binary,) = (tmp_path / "dump").glob("*.cubin")
    assert source.read_text() == art.source and binary.read_bytes() == art.binary
    assert art.key[:12] in binary.name


def test_clear_errors():
    ir = muladd.ir()
    with pytest.raises(IronError, match="unknown compile stage 'link'"):
        compile(ir, "cuda", CompileOptions(stop="link"))
    with pytest.raises(IronError, match="the binary stage needs a kind: one of ptx, cubin"):
        compile(ir, "cuda", CompileOptions(stop="binary"))
    with pytest.raises(IronError, match="target 'interp' emits no code"):
        compile(ir, "interp", CompileOptions(stop="source"))
    with pytest.raises(IronError, match="makes no 'spirv'"):
        compile(ir, "cuda", CompileOptions(binary="spirv"))
    with pytest.raises(ValueError, match="pass context is for target 'hip'"):
        compile(ir, "cuda", CompileOptions(passes=PassContext.for_target("hip")))


def test_a_missing_toolchain_says_how_to_install_it(monkeypatch):
    from iron.codegen.toolchains import nvrtc

    monkeypatch.setattr(nvrtc, "available", lambda: False)
    monkeypatch.setattr(nvrtc, "unavailable_reason", lambda: "not here")
    with pytest.raises(ToolchainMissing, match="nvrtc is not available \\(not here\\); install it with: "):
        compile(muladd.ir(), "cuda", CompileOptions(binary="cubin"), cache=ArtifactCache(None))


def test_the_store_index_keys_on_the_kernel_name_even_where_the_entry_is_main(tmp_path, require_toolchain):
    require_toolchain("spirv")
    art = compile(muladd.ir(), "spirv", CompileOptions(binary="spirv"), cache=ArtifactCache(tmp_path))
    assert art.entry == "main" and art.binary[:4] == (0x07230203).to_bytes(4, "little")
    assert ArtifactStore(tmp_path / "spirv").last_build("muladd")["kind"] == "spirv"


def _calls(tree: ast.AST, names: set[str]) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in names:
                found.append(f"{name} (line {node.lineno})")
    return found


def test_only_the_driver_runs_the_stages():
    """The pipeline, legalisation, emission and toolchain builds are called from iron.codegen alone: every other
    layer (the jit, the devices, iron build, iron inspect) goes through compile()."""
    stages = {"run_pipeline", "emit_kernel", "emit_legal", "legalise", "legalize", "compile_cuda", "compile_glsl",
              "compile_hip"}
    # Not a kernel: the Vulkan device's hand-written GLSL that measures the driver's loop limit.
    allowed = {"runtime/vulkan/loop_limit.py": ["compile_glsl (line 68)"]}
    offenders = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] == "codegen":
            continue
        found = _calls(ast.parse(path.read_text()), stages)
        if found:
            offenders[str(rel)] = found
    assert offenders == allowed


@kernel(name="double")
def keyword_named(x: Tensor[f32]):
    i = program_id(0)
    x[i] = x[i] + x[i]


@pytest.mark.parametrize("target, binary", [("cuda", "cubin"), ("spirv", "spirv"), ("hip", "hsaco")])
def test_a_kernel_named_like_a_keyword_gets_an_entry_every_compiler_takes(target, binary, require_toolchain):
    """`double`, `main`, `kernel` ... are kernel names a user may choose; the entry point may not be one."""
    from iron.codegen.abi import entry_name

    ir = keyword_named.ir()
    assert entry_name(ir) == "iron_k_double"
    require_toolchain({"cuda": "nvrtc", "spirv": "spirv", "hip": "hip"}[target])
    art = compile(ir, target, CompileOptions(binary=binary), cache=ArtifactCache(None))
    assert len(art.binary) > 0

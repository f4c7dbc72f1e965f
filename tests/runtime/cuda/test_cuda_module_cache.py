"""CUDA binaries in the compile driver's cache: keys, miss reasons, corruption, atomic writes, concurrent fills
(no GPU needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cudakernels import add, axpy, ir, muladd

from iron import _version
from iron.codegen import cache as cachekey
from iron.codegen import diskcache
from iron.codegen.cache import KIND, ArtifactCache, ArtifactStore, Entry, encode
from iron.codegen.compiler import Artifact, CompileOptions, compile
from iron.codegen.targets import profile
from iron.runtime.cuda.arch import fmad_options

SM90 = profile("cuda", "sm_90")


class Compiler:
    """What a CUDA device does: the driver with its options and its own cache (a fresh memory)."""

    def __init__(self, directory: Path | None, options=(), fmt: str = "cubin", arch: str = "sm_90",
                 toolchain=None) -> None:
        self.cache = ArtifactCache(directory)
        self.options = CompileOptions(profile=SM90, binary=fmt, arch=arch, toolchain_options=tuple(options),
                                      optimised=True)
        self.toolchain = toolchain

    def compile(self, kernel) -> Artifact:
        return compile(kernel, "cuda", self.options, cache=self.cache, toolchain=self.toolchain)

    def __getattr__(self, name):
        return getattr(self.cache, name)


def compiler(tmp_path: Path, options=(), fmt: str = "cubin", arch: str = "sm_90", toolchain=None) -> Compiler:
    return Compiler(tmp_path, options, fmt, arch, toolchain)


def entry_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cuda").glob("*.cubin"))


def _parts(**changes):
    base = dict(target="cuda", ir_hash="a" * 64, source="src", toolchain="nvrtc 13.0", arch="sm_90", kind="cubin",
                options=[], profile="cuda:sm_90", variant="")
    return cachekey.components(**{**base, **changes})


# ------------------------------------------------------------ keys
def test_every_key_component_changes_the_digest():
    digests = {cachekey.digest(_parts())}
    changes = [("target", "hip"), ("ir_hash", "b" * 64), ("source", "src2"), ("toolchain", "nvrtc 13.5"),
               ("arch", "sm_80"), ("kind", "ptx"), ("options", ["--fmad=false"]), ("profile", "cuda:sm_90a"),
               ("variant", "loop-guard")]
    for name, other in changes:
        digests.add(cachekey.digest(_parts(**{name: other})))
    assert len(digests) == len(changes) + 1
    parts = _parts()
    assert parts["iron"] == _version.__version__ and set(parts) == set(cachekey.LABELS)


def test_a_miss_says_which_components_changed():
    old = _parts()
    new = _parts(toolchain="nvrtc 13.5", options=["--fmad=false"])
    why = cachekey.explain_miss("k", old, new)
    assert "toolchain version nvrtc 13.0 -> nvrtc 13.5" in why
    assert "compile options [] (defaults) -> [--fmad=false]" in why
    assert "architecture" not in why
    assert "never compiled" in cachekey.explain_miss("k", None, new)
    assert "is gone" in cachekey.explain_miss("k", new, new)


# ------------------------------------------------------------ the compiler and its caches
def test_memory_then_disk_then_nvrtc(nvrtc, tmp_path):
    kir = ir(axpy)
    first = compiler(tmp_path)
    m = first.compile(kir)
    assert m.origin == "nvrtc" and m.binary[:4] == b"\x7fELF" and m.entry == "axpy"
    assert "never compiled" in first.last_miss and first.stats["compiles"] == 1
    assert m.report["kernel"]["registers"] > 0, "ptxas's report travels with the module"
    assert first.compile(kir) is m and first.memory_hits == 1
    second = compiler(tmp_path)
    again = second.compile(kir)
    assert again.origin == "disk" and again.binary == m.binary and again.report == m.report
    assert second.stats["compiles"] == 0 and second.disk_hits == 1
    assert [p.name for p in (tmp_path / "cuda").iterdir() if p.name.startswith(".")] == [diskcache.MARKER], \
        "temporary files left"


@pytest.mark.parametrize("change", ["fmad", "nvrtc", "iron", "ir"])
def test_each_reason_to_recompile_is_named(nvrtc, tmp_path, monkeypatch, change):
    compiler(tmp_path).compile(ir(axpy))
    options, toolchain = (), None
    kernel = ir(axpy)
    if change == "fmad":
        options = fmad_options(False)
    elif change == "nvrtc":
        from iron.codegen.toolchains import nvrtc as real

        class Newer:
            version = staticmethod(lambda: real.version() + " (patched)")
            build = staticmethod(real.build)
        toolchain = Newer
    elif change == "iron":
        monkeypatch.setattr(_version, "__version__", "99.0.0")
    else:
        kernel = ir(axpy, fp_contract=False)  # the same entry point, other IR and source
    c = compiler(tmp_path, options, toolchain=toolchain)
    m = c.compile(kernel)
    assert m.origin == "nvrtc"
    label = {"fmad": "compile options", "nvrtc": "toolchain version", "iron": "Iron version", "ir": "kernel IR hash"}
    assert "'axpy' changed since its last cached build: " in c.last_miss and label[change] in c.last_miss
    if change == "ir":
        assert "emitted source" in c.last_miss
    assert len(entry_files(tmp_path)) == 2


def test_fmad_off_builds_other_machine_code(nvrtc, tmp_path):
    kir = ir(muladd, fp_contract=False)  # a separate multiply and add in the source: NVRTC decides
    del kir.meta["contract"]  # as for IR that does not say (else fp_contract=False alone turns fmad off)
    on = compiler(tmp_path).compile(kir)
    off = compiler(tmp_path, fmad_options(False)).compile(kir)
    assert fmad_options(True) == [] and fmad_options(False) == ["--fmad=false"]
    assert on.binary != off.binary


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "foreign_key", "not_elf"])
def test_damaged_entries_are_detected_and_rebuilt(nvrtc, tmp_path, damage):
    kir = ir(axpy)
    good = compiler(tmp_path).compile(kir)
    (path,) = entry_files(tmp_path)
    data = path.read_bytes()
    if damage == "flip":
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:])
    elif damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "foreign_key":  # a sound envelope holding another kernel's entry
        other = compiler(tmp_path / "other").compile(ir(add))
        path.write_bytes(diskcache.wrap(KIND, encode(Entry({"other": 1}, "add", other.binary, {}))))
    else:
        parts = ArtifactStore(tmp_path / "cuda").last_build("axpy")
        path.write_bytes(diskcache.wrap(KIND, encode(Entry(parts, "axpy", b"garbage" * 20, {}))))
    c = compiler(tmp_path)
    rebuilt = c.compile(kir)
    assert rebuilt.origin == "nvrtc" and rebuilt.binary == good.binary
    assert c.rebuilt == 1 and str(path) in c.last_miss and c.last_miss.endswith("rebuilt")
    expected = {"flip": "checksum mismatch", "truncate": "checksum mismatch", "empty": "not an Iron cache file",
                "foreign_key": "stored under another key", "not_elf": "not a CUBIN"}[damage]
    assert expected in c.last_miss
    assert compiler(tmp_path).compile(kir).origin == "disk", "the rebuilt entry replaced the damaged one"


def test_cache_off_and_unwritable_cache_still_compile(nvrtc, tmp_path):
    off = Compiler(None)
    assert off.compile(ir(axpy)).origin == "nvrtc" and "cache is off" in off.last_miss
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    c = compiler(blocker)
    assert c.compile(ir(axpy)).origin == "nvrtc"
    assert c.write_failures == 1 and "not stored: cannot write" in c.last_miss


def test_ptx_for_a_virtual_architecture(nvrtc, tmp_path):
    c = compiler(tmp_path, fmt="ptx", arch="compute_90")
    m = c.compile(ir(axpy))
    assert m.kind == "ptx" and b".target sm_90" in m.binary
    assert compiler(tmp_path, fmt="ptx", arch="compute_90").compile(ir(axpy)).origin == "disk"
    # NVRTC's empty log for PTX once went into `b" " * 1`, the interned b" ", turning every b" " in the
    # process into b"\0" (seen as a torn cache read in the test below).
    assert bytes([32]) == b" " and b" ".isspace()


# ------------------------------------------------------------ two processes at once
_FILL = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from cudakernels import add, axpy, ir, muladd
    from iron.codegen.cache import ArtifactCache
    from iron.codegen.compiler import CompileOptions, compile
    from iron.codegen.targets import profile
    go = Path({go!r})
    while not go.exists():
        time.sleep(0.005)
    cache = ArtifactCache(Path({cache!r}))
    options = CompileOptions(profile=profile("cuda", "sm_90"), binary="cubin", optimised=True)
    origins = [compile(ir(k, fp_contract=fc), "cuda", options, cache=cache).origin
               for k in (axpy, add, muladd) for fc in (True, False)]
    print(json.dumps({{"origins": origins, "stats": cache.stats}}))
""")


def test_two_processes_filling_one_cache_at_once(nvrtc, tmp_path):
    go = tmp_path / "go"
    script = _FILL.format(tests=str(Path(__file__).parent), go=str(go), cache=str(tmp_path))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env, text=True) for _ in range(2)]
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    assert all(len(r["origins"]) == 6 for r in results)
    names = [p.name for p in (tmp_path / "cuda").iterdir()]
    # Between them the processes compiled something, and everything else came from what one of them wrote
    # (a compile may serve two entries whose sources are the same, so compiles need not match entries).
    assert sum(r["stats"]["compiles"] for r in results) >= 1
    assert all(set(r["origins"]) <= {"nvrtc", "disk"} for r in results), results
    assert all(r["stats"]["rebuilt"] == 0 for r in results), "no process ever read a partial entry"
    assert not [n for n in names if n.startswith(".") and n != diskcache.MARKER], f"temporary files left: {names}"
    reader = compiler(tmp_path)
    for k in (axpy, add, muladd):
        for fc in (True, False):
            assert reader.compile(ir(k, fp_contract=fc)).origin == "disk"
    assert reader.compiles == 0 and reader.rebuilt == 0


_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from iron.codegen.cache import ArtifactStore, Entry
    store = ArtifactStore(Path({cache!r}))
    parts = {{"kind": "cubin", "n": 1}}
    for i in range(150):
        blob = b"\\x7fELF" + bytes([i % 251]) * (2 << 20)
        assert store.write("d" * 64, Entry(parts, "k", blob, {{"i": i}}), ".cubin") is None
""")


def test_a_reader_never_sees_a_half_written_entry(tmp_path):
    """One process rewrites a 2 MB entry over and over while this one reads it: every read is whole."""
    parts = {"kind": "cubin", "n": 1}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    writer = subprocess.Popen([sys.executable, "-c", _WRITER.format(cache=str(tmp_path))], env=env,
                              stderr=subprocess.PIPE, text=True)
    store = ArtifactStore(tmp_path)
    seen = set()
    while writer.poll() is None:
        entry, why = store.read("d" * 64, parts, ".cubin")
        assert entry is not None or why == "no file yet", why
        if entry is not None:
            assert entry.binary == b"\x7fELF" + bytes([entry.report["i"] % 251]) * (2 << 20)
            seen.add(entry.report["i"])
    assert writer.returncode == 0, writer.stderr.read()
    assert len(seen) > 1, "the reader raced the writer"


def test_without_contraction_nvrtc_is_told_not_to_fuse(nvrtc, tmp_path):
    """fp_contract off leaves a*b + c apart in the IR; NVRTC's default --fmad would fuse them anyway."""
    fused, apart = ir(muladd, fp_contract=True), ir(muladd, fp_contract=False)
    assert fused.meta["contract"] is True and apart.meta["contract"] is False
    c = compiler(tmp_path)
    c.compile(fused)
    parts = ArtifactStore(tmp_path / "cuda").last_build("muladd")
    assert parts["options"] == [], "a contracted kernel builds with NVRTC's defaults"
    c.compile(apart)
    parts = ArtifactStore(tmp_path / "cuda").last_build("muladd")
    assert parts["options"] == ["--fmad=false"], "the backend's uncontracted options were added"
    told = compiler(tmp_path / "b", options=("--fmad=false",))
    assert c.compile(apart).binary == told.compile(apart).binary
    assert ArtifactStore(tmp_path / "b" / "cuda").last_build("muladd")["options"] == ["--fmad=false"], \
        "an option given is not repeated"

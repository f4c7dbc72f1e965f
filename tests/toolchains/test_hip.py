"""HIP through ROCm's clang: code objects for CDNA2 (wave64), RDNA2 and RDNA3 (wave32) with their register counts."""

from __future__ import annotations

import dataclasses

import pytest

from iron.codegen.toolchains import hip
from iron.codegen.toolchains.common import ToolchainError, ToolchainMissing
from toolchain_testing import mutate


@pytest.fixture(autouse=True)
def _hip_here(require_toolchain):
    require_toolchain("hip")


# half and bfloat16 loads, a wave shuffle reduction, LDS (256 floats) and an atomic add.
REDUCE = r'''
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bfloat16.h>
extern "C" __global__ void scaled_sum(const __half* x, const hip_bfloat16* w, float* total, int n) {
    __shared__ float partial[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? __half2float(x[i]) * static_cast<float>(w[i]) : 0.0f;
    for (int offset = warpSize / 2; offset > 0; offset >>= 1)
        v += __shfl_xor(v, offset);
    partial[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int k = 0; k < blockDim.x; k += warpSize) s += partial[k];
        atomicAdd(total, s);
    }
}

extern "C" __global__ void count_positive(const float* x, unsigned int* count, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] > 0.0f) atomicAdd(count, 1u);
}
'''

EM_AMDGPU = 0xE0


@pytest.mark.parametrize("arch, wave", [("gfx90a", 64), ("gfx1030", 32), ("gfx1100", 32)])
def test_code_object_with_register_report(arch, wave):
    art = hip.compile_hip(REDUCE, arch=arch)
    assert art.binary[:4] == b"\x7fELF"
    assert int.from_bytes(art.binary[18:20], "little") == EM_AMDGPU  # e_machine
    assert art.report["target"] == f"amdgcn-amd-amdhsa--{arch}"
    assert set(art.report["kernels"]) == {"scaled_sum", "count_positive"}
    k = art.report["kernels"]["scaled_sum"]
    assert k["wavefront_size"] == wave == art.report["wavefront_size"]
    assert k["lds_bytes"] == 256 * 4
    assert art.report["kernels"]["count_positive"]["lds_bytes"] == 0
    assert 0 < k["vgprs"] <= 256 and 0 < k["sgprs"] <= 106
    assert art.report["spills"] == 0
    assert art.version.startswith("clang 15.")


def test_disassembly_lists_the_code_objects_instructions():
    art = hip.compile_hip(REDUCE, arch="gfx90a")
    text = hip.disassemble(art.binary, "gfx90a")
    assert "<scaled_sum>:" in text and "<count_positive>:" in text
    assert "ds_write_b32" in text and "s_endpgm" in text  # the LDS store of partial[], the kernel's end
    with pytest.raises(ValueError):
        hip.disassemble(art.binary, "mi250")
    with pytest.raises(ToolchainError, match="llvm-objdump could not read"):
        hip.disassemble(b"not an ELF file", "gfx90a")


def test_gfx11_gets_only_the_isa_version_library_rocm_5_2_lacks():
    """ROCm 5.2 ships no oclc_isa_version_1100.bc: the overlay adds it (11000) and links every other library."""
    from pathlib import Path

    assert hip.compile_hip(REDUCE, arch="gfx1030").report["device_libs"] == "rocm-device-libs"
    report = hip.compile_hip(REDUCE, arch="gfx1100").report
    assert report["device_libs"] == "rocm-device-libs + Iron's oclc_isa_version_1100 (11000)"
    paths = hip._probe().found
    overlay, used = hip._device_libs("gfx1100", paths)
    assert used and overlay != paths["device_libs"]
    installed = {p.name for p in Path(paths["device_libs"]).glob("*.bc")}
    assert "oclc_isa_version_1100.bc" not in installed
    links = {p.name: p for p in Path(overlay).glob("*.bc")}
    assert set(links) == installed | {"oclc_isa_version_1100.bc"}
    assert all(links[n].is_symlink() and links[n].resolve() == Path(paths["device_libs"], n).resolve()
               for n in installed)
    ir = hip.run_tool([paths["llvm_dis"], str(links["oclc_isa_version_1100.bc"]), "-o", "-"], tool="t", install="")
    assert "@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 11000" in \
        ir.stdout.decode()


def test_gfx11_without_llvm_as_says_what_is_missing(monkeypatch):
    probe = hip._probe()
    without = {k: v for k, v in probe.found.items() if k != "llvm_as"}
    monkeypatch.setattr(hip, "_probe", lambda: dataclasses.replace(probe, found=without))
    with pytest.raises(ToolchainMissing, match="gfx1101 needs llvm-as-15"):
        hip.compile_hip(REDUCE, arch="gfx1101")
    hip.compile_hip(REDUCE, arch="gfx1030")  # archs ROCm 5.2 has need no overlay


def test_error_names_the_emitted_line():
    bad, line = mutate(REDUCE, "atomicAdd(count, 1u);", "atomicAdd(count, one);")
    with pytest.raises(ToolchainError) as info:
        hip.compile_hip(bad, arch="gfx1030", name="out/count.hip")
    err = info.value
    assert (err.file, err.line) == ("out/count.hip", line)
    assert "undeclared identifier 'one'" in err.message
    assert "atomicAdd(count, one);" in err.source_line


def test_notes_parser_reads_only_kernel_level_keys():
    notes = """amdhsa.kernels:
  - .agpr_count:     4
    .args:
      - .offset:         0
        .size:           8
        .value_kind:     global_buffer
    .group_segment_fixed_size: 512
    .name:           first
    .sgpr_count:     20
    .vgpr_count:     33
    .vgpr_spill_count: 2
    .wavefront_size: 64
  - .args:           []
    .name:           second
    .sgpr_count:     8
    .vgpr_count:     3
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa--gfx90a
"""
    r = hip.parse_amdgpu_notes(notes)
    assert r["kernels"]["first"] == {"agprs": 4, "lds_bytes": 512, "sgprs": 20, "vgprs": 33, "vgpr_spills": 2,
                                     "wavefront_size": 64}
    assert r["kernels"]["second"] == {"sgprs": 8, "vgprs": 3, "wavefront_size": 64}
    assert (r["vgprs"], r["sgprs"], r["spills"], r["target"]) == (33, 20, 2, "amdgcn-amd-amdhsa--gfx90a")


def test_bad_arch_is_rejected():
    with pytest.raises(ValueError):
        hip.compile_hip(REDUCE, arch="mi250")


def test_a_compiler_crash_is_tried_again(monkeypatch):
    """clang 15 crashes now and then on gfx11 (hip.py): a compile it abandons on a signal runs again."""
    import subprocess

    real = hip.run_tool
    crashes = {"left": 2}

    def flaky(argv, **kw):
        if argv[0] == hip._probe().found["clang"] and crashes["left"]:
            crashes["left"] -= 1
            return subprocess.CompletedProcess(argv, 254, b"", b"malloc(): unsorted double linked list corrupted\n"
                                               b"clang: error: clang frontend command failed due to signal\n")
        return real(argv, **kw)

    monkeypatch.setattr(hip, "run_tool", flaky)
    art = hip.compile_hip(REDUCE, arch="gfx1030")
    assert art.report["crash_retries"] == 2 and crashes["left"] == 0
    crashes["left"] = hip.CRASH_RETRIES + 1  # one crash more than the retries: the crash is reported
    with pytest.raises(ToolchainError, match="failed due to signal"):
        hip.compile_hip(REDUCE, arch="gfx1030")

"""NVRTC: real CUDA kernels compile to CUBIN/PTX with a resource report; errors point at the line."""

from __future__ import annotations

import pytest

from iron import In, Tensor, f32, kernel
from iron.codegen.emit import emit_kernel
from iron.codegen.toolchains import cubin, nvrtc
from iron.lang import lane_id, program_id, simd_sum
from iron.codegen.toolchains.common import ToolchainError
from toolchain_testing import mutate

pytestmark = pytest.mark.usefixtures("_nvrtc_here")


@pytest.fixture
def _nvrtc_here(require_toolchain):
    require_toolchain("nvrtc")


# half and bf16 loads, a warp-shuffle reduction, shared memory (256 floats) and an atomic.
REDUCE = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void scaled_sum(const __half* x, const __nv_bfloat16* w, float* total, int n) {
    __shared__ float partial[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? __half2float(x[i]) * __bfloat162float(w[i]) : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    partial[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int k = 0; k < blockDim.x; k += 32) s += partial[k];
        atomicAdd(total, s);
    }
}

extern "C" __global__ void to_half2(const float* x, __half2* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __floats2half2_rn(x[2 * i], x[2 * i + 1]);
}
'''


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a"])
def test_cubin_with_resource_report(arch):
    art = nvrtc.compile_cuda(REDUCE, arch=arch)
    assert art.binary[:4] == b"\x7fELF"
    assert art.tool == "nvrtc" and art.version.startswith("nvrtc 13.")
    assert set(art.report["kernels"]) == {"scaled_sum", "to_half2"}
    k = art.report["kernels"]["scaled_sum"]
    assert k["shared_bytes"] == 256 * 4
    assert k["barriers"] == 1
    assert 0 < k["registers"] <= 255
    assert k["spill_stores"] == k["spill_loads"] == 0
    assert art.report["kernels"]["to_half2"]["shared_bytes"] == 0
    assert art.report["shared_bytes"] == 1024 and art.report["arch"] == arch


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_cubin_holds_the_register_counts_ptxas_reports(arch):
    art = nvrtc.compile_cuda(REDUCE, arch=arch)
    assert art.report["source"] == "ptxas"
    want = {name: k["registers"] for name, k in art.report["kernels"].items()}
    assert cubin.register_counts(art.binary) == want


def test_without_ptxas_report_the_registers_come_from_the_cubin(monkeypatch):
    """NVRTC 13.0 sometimes returns an empty log: the report then says so instead of showing zeros."""
    want = nvrtc.compile_cuda(REDUCE, arch="sm_90").report
    monkeypatch.setattr(nvrtc, "_program_log", lambda *_: "")
    report = nvrtc.compile_cuda(REDUCE, arch="sm_90").report
    assert report["source"] == "cubin"
    assert {n: k["registers"] for n, k in report["kernels"].items()} == \
        {n: k["registers"] for n, k in want["kernels"].items()}
    assert report["spill_stores"] is None and any("no resource report" in w for w in report["warnings"])


def test_ptx_for_the_requested_architecture():
    art = nvrtc.compile_cuda(REDUCE, arch="sm_90", want="ptx")
    text = art.binary.decode()
    assert ".target sm_90" in text and ".visible .entry scaled_sum(" in text
    assert not art.binary.endswith(b"\0")
    assert art.report["kernels"]["scaled_sum"]["registers"] > 0  # ptxas still ran for the report


def test_virtual_architecture_gives_ptx_without_report():
    art = nvrtc.compile_cuda(REDUCE, arch="compute_90", want="ptx")
    assert b".target sm_90" in art.binary
    assert art.report["kernels"] == {}
    with pytest.raises(ValueError, match="real architecture"):
        nvrtc.compile_cuda(REDUCE, arch="compute_90")


def test_register_cap_makes_spills_visible():
    # 64 live accumulators cannot fit in 32 registers: ptxas must spill, and the report says so.
    body = "\n".join(f"    acc[{k}] = acc[{k}] * x[i + {k}] + acc[{(k + 1) % 64}];" for k in range(64))
    src = f'''
extern "C" __global__ void pressure(const float* x, float* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[64];
    #pragma unroll
    for (int k = 0; k < 64; ++k) acc[k] = x[i * 64 + k];
    for (int r = 0; r < n; ++r) {{
{body}
    }}
    float s = 0.0f;
    #pragma unroll
    for (int k = 0; k < 64; ++k) s += acc[k];
    y[i] = s;
}}
'''
    capped = nvrtc.compile_cuda(src, options=["--maxrregcount=32"]).report
    free = nvrtc.compile_cuda(src).report
    assert capped["registers"] <= 32
    assert capped["spill_stores"] > 0 and capped["spill_loads"] > 0
    assert free["spill_stores"] == 0 and free["registers"] > 32


def test_error_names_the_emitted_line():
    bad, line = mutate(REDUCE, "partial[threadIdx.x] = v;", "partial[threadIdx.x] = vv;")
    with pytest.raises(ToolchainError) as info:
        nvrtc.compile_cuda(bad, name="build/scaled_sum.cu")
    err = info.value
    assert (err.file, err.line) == ("build/scaled_sum.cu", line)
    assert '"vv" is undefined' in err.message
    assert err.source_line.strip() == "partial[threadIdx.x] = vv;"
    assert str(err).startswith(f"build/scaled_sum.cu:{line}: nvrtc:")


def test_type_error_in_half_arithmetic_is_located():
    bad, line = mutate(REDUCE, "y[i] = __floats2half2_rn(x[2 * i], x[2 * i + 1]);", "y[i] = x;")
    with pytest.raises(ToolchainError) as info:
        nvrtc.compile_cuda(bad)
    assert info.value.line == line


def test_ptxas_report_parser_on_a_recorded_log():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'a' for 'sm_90'
ptxas info    : Function properties for a
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'b' for 'sm_90'
ptxas info    : Function properties for b
ptxas         .     0 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 12 registers, 360 bytes cmem[0]
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma \
instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in the function 'b' \
in line 1367
"""
    r = nvrtc.parse_ptxas_report(log)
    assert r["kernels"]["a"] == {"registers": 40, "shared_bytes": 2048, "constant_bytes": 368, "barriers": 1,
                                 "stack_bytes": 16, "spill_stores": 8, "spill_loads": 12}
    assert r["kernels"]["b"]["shared_bytes"] == 0 and r["kernels"]["b"]["barriers"] == 0
    assert (r["registers"], r["shared_bytes"], r["spill_stores"], r["spill_loads"]) == (40, 2048, 12, 16)
    assert r["wgmma_serialized"] == {"b": "non wgmma instructions defining accumulator registers of a wgmma between "
                                          "start and end of the pipeline stage"}
    assert nvrtc.parse_ptxas_report(log.split("ptxas info    : (C7515)")[0])["wgmma_serialized"] == {}
    assert r["setmaxnreg_ignored"] is False
    # The note ptxas gave on 2026-12-04 when gemm_ws set its budgets before the branch on the role (NVRTC 13.5).
    dropped = ("ptxas info    : (C7507) Potential Performance Loss: 'setmaxnreg' ignored to maintain minimum "
               "register requirements.\n" + log)
    assert nvrtc.parse_ptxas_report(dropped)["setmaxnreg_ignored"] is True


def test_bad_arguments_are_rejected_before_compiling():
    with pytest.raises(ValueError):
        nvrtc.compile_cuda(REDUCE, want="sass")
    with pytest.raises(ValueError):
        nvrtc.compile_cuda(REDUCE, arch="90")


def test_a_subgroup_sum_inside_nested_loops_compiles_for_sm_90():
    """ptxas (NVRTC 13.5) failed register allocation on simd_sum's old partial-subgroup fallback (a shuffle
    from every lane) when the reduction sat in a loop holding another loop: std.gemv's row loop met it."""
    @kernel
    def rows_sum(a: In[f32], out: Tensor[f32], m: int, k: int):
        r = program_id(0) // 32
        while r < m:
            s = 0.0
            for c in range(lane_id(), k, 32):
                s += a[r * k + c]
            s = simd_sum(s)
            if lane_id() == 0:
                out[r] = s
            r += 7

    nvrtc.compile_cuda(emit_kernel(rows_sum.variant().compiled("cuda"), "cuda").source, arch="sm_90")


def test_sass_loops_are_found_by_their_backward_branches():
    """iron.codegen.toolchains.sass on a recorded fragment of nvdisasm's listing (gemm_ws, 2026-12-04)."""
    from iron.codegen.toolchains import sass

    listing = """
.L_x_4:
        /*0ab0*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8+0x34400], R11 ;
        /*0c60*/                   WARPGROUP.ARRIVE ;
        /*0ca0*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR16], R24 ;
        /*0f50*/               @!P0 SYNCS.ARRIVE.TRANS64.A1T0 RZ, [R10+URZ+0x34420], RZ ;
        /*0f70*/               @!P0 BRA `(.L_x_4) ;
.L_x_2:
        /*0fb0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0fc0*/                   BRA `(.L_x_5) ;
.L_x_5:
        /*0fd0*/                   EXIT ;
"""
    ops = [i.opcode for i in sass.instructions(listing)]
    assert ops == ["SYNCS.PHASECHK.TRANS64.TRYWAIT", "WARPGROUP.ARRIVE", "HGMMA.64x256x16.F32.BF16",
                   "SYNCS.ARRIVE.TRANS64.A1T0", "BRA", "WARPGROUP.DEPBAR.LE", "BRA", "EXIT"]
    (loop,) = sass.loops(listing)  # the forward branch to .L_x_5 is no loop
    assert [i.address for i in loop] == [0x0ab0, 0x0c60, 0x0ca0, 0x0f50, 0x0f70]
    assert loop[2].operands == "R24, gdesc[UR16], R24"

"""The Metal shim: clang++-19 accepts realistic MSL kernels and rejects the common mistakes at their line."""

from __future__ import annotations

import pytest

from iron.codegen.toolchains import metal
from iron.codegen.toolchains.common import ToolchainError
from toolchain_testing import mutate


@pytest.fixture(autouse=True)
def _metal_here(require_toolchain):
    require_toolchain("metal")


SAXPY = """#include <metal_stdlib>
using namespace metal;

struct Params { uint n; float alpha; };

kernel void saxpy(device const float* x [[buffer(0)]],
                  device float* y [[buffer(1)]],
                  constant Params& params [[buffer(2)]],
                  uint gid [[thread_position_in_grid]]) {
    if (gid >= params.n) return;
    y[gid] = fma(params.alpha, x[gid], y[gid]);
}
"""

# Threadgroup memory, SIMD-group reductions and shuffles, a barrier and a device atomic.
REDUCE = """#include <metal_stdlib>
using namespace metal;

kernel void sum_rows(device const half4* x [[buffer(0)]],
                     device atomic_float* total [[buffer(1)]],
                     constant uint& n [[buffer(2)]],
                     uint tid [[thread_position_in_threadgroup]],
                     uint3 group [[threadgroup_position_in_grid]],
                     uint3 group_size [[threads_per_threadgroup]],
                     uint lane [[thread_index_in_simdgroup]],
                     uint simd [[simdgroup_index_in_threadgroup]],
                     uint simd_width [[threads_per_simdgroup]]) {
    threadgroup float partial[32];
    uint i = group.x * group_size.x + tid;
    float4 v = i < n ? float4(x[i]) : float4(0.0f);
    float s = simd_sum(v.x + v.y + v.z + v.w);
    s = max(s, simd_shuffle_xor(s, ushort(1)));
    s += simd_shuffle_down(s, ushort(simd_width / 2)) * 0.0f;
    if (lane == 0) partial[simd] = s;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) {
        float acc = 0.0f;
        for (uint k = 0; k < (group_size.x + simd_width - 1) / simd_width; ++k) acc += partial[k];
        atomic_fetch_add_explicit(total, acc, memory_order_relaxed);
    }
}
"""

# Row softmax: metal:: math, fast:: and precise:: namespaces, simd_max/simd_broadcast.
SOFTMAX = """#include <metal_stdlib>
using namespace metal;

kernel void softmax_row(device const float* x [[buffer(0)]],
                        device float* y [[buffer(1)]],
                        constant uint& cols [[buffer(2)]],
                        uint2 pos [[thread_position_in_grid]],
                        uint lane [[thread_index_in_simdgroup]]) {
    uint row = pos.y;
    float m = -INFINITY_PLACEHOLDER;
    for (uint c = lane; c < cols; c += 32) m = fmax(m, x[row * cols + c]);
    m = simd_max(m);
    float denom = 0.0f;
    for (uint c = lane; c < cols; c += 32) denom += fast::exp(x[row * cols + c] - m);
    denom = simd_broadcast(simd_sum(denom), ushort(0));
    float inv = 1.0f / denom;
    for (uint c = lane; c < cols; c += 32) {
        float e = precise::exp2((x[row * cols + c] - m) * 1.442695f);
        y[row * cols + c] = clamp(e * inv, 0.0f, 1.0f) + 0.0f * rsqrt(denom) + 0.0f * tanh(m);
    }
}
""".replace("INFINITY_PLACEHOLDER", "3.0e38f")

# Mixed precision: half and bfloat scalars and vectors with explicit conversions, select, as_type.
CONVERT = """#include <metal_stdlib>
using namespace metal;

kernel void gelu_mixed(device const half4* x [[buffer(0)]],
                       device bfloat4* y [[buffer(1)]],
                       device uint* bits [[buffer(2)]],
                       uint gid [[thread_position_in_grid]]) {
    float4 v = float4(x[gid]);
    float4 t = tanh(0.7978845608f * (v + 0.044715f * v * v * v));
    float4 g = 0.5f * v * (1.0f + t);
    g = select(g, float4(0.0f), v < float4(-10.0f));
    bfloat4 b = bfloat4(g);
    b = b * bfloat(2.0f) - bfloat4(g);
    y[gid] = b;
    half h = half(g.x);
    half4 h4 = half4(h, h, half(g.y), half(0.0f));
    bits[gid] = as_type<uint>(g.w) ^ as_type<uint>(half2(h4.xy));
}
"""

# simdgroup_matrix 8x8 multiply-accumulate from device and threadgroup memory.
MATMUL = """#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

kernel void matmul_8x8(device const half* a [[buffer(0)]],
                       device const half* b [[buffer(1)]],
                       device float* c [[buffer(2)]],
                       constant uint& k_tiles [[buffer(3)]],
                       uint lane [[thread_index_in_simdgroup]]) {
    threadgroup half tile[64];
    simdgroup_float8x8 acc = simdgroup_float8x8(0.0f);
    for (uint t = 0; t < k_tiles; ++t) {
        simdgroup_half8x8 ma;
        simdgroup_half8x8 mb;
        simdgroup_load(ma, a + t * 8, 8 * k_tiles);
        tile[lane] = b[t * 64 + lane];
        tile[lane + 32] = b[t * 64 + lane + 32];
        simdgroup_barrier(mem_flags::mem_threadgroup);
        simdgroup_load(mb, tile, 8);
        simdgroup_multiply_accumulate(acc, ma, mb, acc);
    }
    simdgroup_store(acc, c, 8);
}
"""

# Histogram: threadgroup atomics, a dynamic threadgroup buffer and integer atomics on device memory.
HISTOGRAM = """#include <metal_stdlib>
using namespace metal;

kernel void histogram(device const uchar* data [[buffer(0)]],
                      device atomic_uint* bins [[buffer(1)]],
                      constant uint& n [[buffer(2)]],
                      threadgroup atomic_uint* local_bins [[threadgroup(0)]],
                      uint gid [[thread_position_in_grid]],
                      uint tid [[thread_index_in_threadgroup]],
                      uint threads [[threads_per_threadgroup]]) {
    threadgroup atomic_int seen;
    if (tid == 0) atomic_store_explicit(&seen, 0, memory_order_relaxed);
    for (uint b = tid; b < 256; b += threads) atomic_store_explicit(&local_bins[b], 0u, memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    if (gid < n) {
        atomic_fetch_add_explicit(&local_bins[data[gid]], 1u, memory_order_relaxed);
        atomic_fetch_max_explicit(&seen, int(data[gid]), memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint b = tid; b < 256; b += threads) {
        uint count = atomic_load_explicit(&local_bins[b], memory_order_relaxed);
        if (count != 0) atomic_fetch_add_explicit(&bins[b], count, memory_order_relaxed);
    }
}
"""

# A tiled transpose: 2D positions, a threadgroup tile and integer vector arithmetic.
TRANSPOSE = """#include <metal_stdlib>
using namespace metal;

constant uint TILE = 16;

kernel void transpose(device const float* src [[buffer(0)]],
                      device float* dst [[buffer(1)]],
                      constant uint2& shape [[buffer(2)]],
                      uint2 gid [[thread_position_in_grid]],
                      uint2 tid [[thread_position_in_threadgroup]],
                      uint2 group [[threadgroup_position_in_grid]],
                      uint2 groups [[threadgroups_per_grid]]) {
    threadgroup float tile[16][17];  // padded against bank conflicts
    if (all(gid < shape)) tile[tid.y][tid.x] = src[gid.y * shape.x + gid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint2 out = uint2(group.y, group.x) * TILE + tid;
    if (out.x < shape.y && out.y < shape.x && groups.x > 0) dst[out.y * shape.y + out.x] = tile[tid.x][tid.y];
}
"""

# SAXPY with a read-only (constant) buffer it does not write: the base of the constant-write mistake.
SAXPY_WITH_TABLE = SAXPY.replace("constant Params& params [[buffer(2)]],",
                                 "constant Params& params [[buffer(2)]],\n                  constant float* table [[buffer(3)]],"
                                 ).replace("y[gid] = fma(", "y[gid] = table[0] + fma(")

VALID = {"saxpy": SAXPY, "sum_rows": REDUCE, "softmax_row": SOFTMAX, "gelu_mixed": CONVERT,
         "matmul_8x8": MATMUL, "histogram": HISTOGRAM, "transpose": TRANSPOSE}


@pytest.mark.parametrize("kernel", sorted(VALID))
def test_valid_kernels_pass(kernel):
    art = metal.check_msl(VALID[kernel], name=f"{kernel}.metal")
    assert art.binary is None
    assert art.report["kernels"] == [kernel]
    assert art.report["warnings"] == []
    assert art.version.startswith("clang 19.") and "shim" in art.version


# Each mistake is a one-line mutation of a kernel above that passes; the error must land on that line.
MISTAKES = {
    "undeclared name": (SAXPY, "y[gid] = fma(params.alpha, x[gid], y[gid]);",
                        "y[gid] = fma(params.alpha, x[gid], z[gid]);", "undeclared identifier 'z'"),
    "implicit vector element conversion": (REDUCE, "float4 v = i < n ? float4(x[i]) : float4(0.0f);",
                                           "float4 v = x[i];", "half4"),
    "implicit conversion on return to a narrower vector": (CONVERT, "bfloat4 b = bfloat4(g);",
                                                           "bfloat4 b = g;", "bfloat4"),
    "write through a constant pointer": (SAXPY_WITH_TABLE, "y[gid] = table[0] + fma(",
                                         "table[gid] = 0.0f; y[gid] = fma(", "read-only variable is not assignable"),
    "threadgroup atomic assigned like a number": (HISTOGRAM, "if (tid == 0) atomic_store_explicit(&seen, 0, memory_order_relaxed);",
                                                  "if (tid == 0) seen = 0;", "seen"),
    "misspelt attribute": (SAXPY, "device float* y [[buffer(1)]],", "device float* y [[bufer(1)]],",
                           "unknown attribute 'bufer'"),
    "misspelt position attribute": (TRANSPOSE, "uint2 gid [[thread_position_in_grid]],",
                                    "uint2 gid [[thread_positon_in_grid]],", "unknown attribute"),
    "missing address space on a kernel pointer": (SAXPY, "device float* y [[buffer(1)]],",
                                                  "float* y [[buffer(1)]],", "needs an address space"),
    "device pointer into a thread pointer": (SAXPY, "if (gid >= params.n) return;",
                                             "float* p = y; if (gid >= params.n) return;", "device float *"),
    "vector constructor with too few components": (TRANSPOSE, "uint2 out = uint2(group.y, group.x) * TILE + tid;",
                                                   "uint2 out = uint2(group.y, group.x, 1u) * TILE + tid;",
                                                   "as many components"),
    "math on an integer": (SOFTMAX, "float inv = 1.0f / denom;", "float inv = 1.0f / exp(cols);",
                           "no matching function"),
    "unknown memory flag": (REDUCE, "threadgroup_barrier(mem_flags::mem_threadgroup);",
                            "threadgroup_barrier(mem_flags::mem_shared);", "mem_shared"),
    "float atomic max (Metal has none)": (REDUCE, "atomic_fetch_add_explicit(total, acc, memory_order_relaxed);",
                                          "atomic_fetch_max_explicit(total, acc, memory_order_relaxed);",
                                          "no matching function"),
    "double precision": (SAXPY, "if (gid >= params.n) return;", "double d = 1; if (gid >= params.n) return;",
                         "iron_metal_has_no_double"),
    "non-void kernel": (SAXPY, "kernel void saxpy(", "kernel int saxpy(", None),
    "simdgroup matrix from constant memory": (MATMUL, "simdgroup_load(ma, a + t * 8, 8 * k_tiles);",
                                              "simdgroup_load(ma, &k_tiles, 8);", "no matching function"),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_common_mistakes_are_rejected_at_their_line(mistake):
    source, old, new, expect = MISTAKES[mistake]
    metal.check_msl(source)  # the unmutated kernel passes: the mutation alone is what fails
    bad, line = mutate(source, old, new)
    with pytest.raises(ToolchainError) as info:
        metal.check_msl(bad, name="emitted.metal")
    err = info.value
    assert (err.file, err.line) == ("emitted.metal", line), str(err)
    if expect:
        assert expect in str(err)
    assert err.source_line == bad.splitlines()[line - 1]


def test_errors_in_a_comment_or_string_do_not_confuse_the_checks():
    source = SAXPY.replace("struct Params", "// kernel int fake(float* p); threadgroup float x;\nstruct Params")
    assert metal.check_msl(source).report["kernels"] == ["saxpy"]

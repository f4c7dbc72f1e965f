"""Source text the C++-family dialects (CUDA, HIP, and MSL's parameter block) put before the kernel.

Helpers are emitted only when a kernel uses them, each once.  The subgroup
reductions and float atomics spell out the IR's meaning where the vendor
intrinsics do not match it: reductions combine only the *active* lanes (a
butterfly when the whole subgroup is active, lane order otherwise, which is
also the interpreter's order), and float ``atomic_max``/``atomic_min`` ignore
NaN like ``max``/``min`` through a compare-and-swap loop on the bits.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from ...core import dtypes as D
from ...core.ir import Kernel
from ...core.types import ScalarType, TensorType, VarType, VectorType
from ..abi import KernelABI
from ..targets import TargetProfile
from .names import field_ident
from .cstyle import ModuleParts

IRON_VEC = """\
// A vector of N elements, aligned so that a reinterpreted pointer loads or stores it in one access.
template <typename T, int N>
struct alignas(sizeof(T) * N) iron_vec {
  T e[N];
};"""

ROUND_BF16 = """\
// f32 rounded to the nearest bf16 (ties to even; NaN stays a quiet NaN of the same sign), as f32 again.
__device__ inline float iron_round_bf16(float x) {
  const unsigned int u = __float_as_uint(x);
  if (__builtin_isnan(x)) {
    return __uint_as_float((u | 0x00400000u) & 0xffff0000u);
  }
  return __uint_as_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}"""


#: ``iron_wgmma_desc(address, leading, stride)``: a wgmma shared-memory matrix descriptor with the 128-byte
#: swizzle (PTX ISA 9.7.15.5.1.2.2: 14-bit fields of byte values >> 4 at bits 0, 16 and 32, the swizzle mode
#: 1 at bits 62-63, base offset 0: tiles start on 1024-byte atoms).
WGMMA_DESC = """\
// A wgmma shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte offsets.
__device__ __forceinline__ unsigned long long iron_wgmma_desc(unsigned int address, unsigned int leading,
                                                              unsigned int stride) {
  return (unsigned long long)((address & 0x3FFFFu) >> 4) | ((unsigned long long)((leading & 0x3FFFFu) >> 4) << 16)
         | ((unsigned long long)((stride & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}"""

def mbarrier_wait(native_try: bool) -> str:
    """``iron_mbarrier_wait(bar, parity)``: spin until the phase of ``parity`` of the mbarrier at shared address
    ``bar`` completed.  ``try_wait`` (sm_90) suspends the thread for a while inside each test; ``test_wait``
    (sm_80) returns at once."""
    test = "try_wait" if native_try else "test_wait"
    return f"""\
// Wait until the mbarrier at shared address bar completed its phase of this parity.
__device__ __forceinline__ void iron_mbarrier_wait(unsigned int bar, unsigned int parity) {{
  unsigned int done;
  do {{
    asm volatile("{{\\n.reg .pred p;\\nmbarrier.{test}.parity.shared::cta.b64 p, [%1], %2;\\nselp.u32 %0, 1, 0, p;\\n}}"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  }} while (!done);
}}"""


#: ``iron_cluster_rank()``: the group's rank in its cluster (sm_90).
CLUSTER_RANK = """\
// This group's rank in its cluster.
__device__ __forceinline__ unsigned int iron_cluster_rank() {
  unsigned int r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}"""


#: ``iron_async_proxy_barrier()``: a group barrier after which wgmma (the async proxy) sees shared writes.
ASYNC_PROXY_BARRIER = """\
// A barrier whose shared-memory writes before it are visible to wgmma's async-proxy reads after it.
__device__ __forceinline__ void iron_async_proxy_barrier() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
}"""


#: ``iron_fast_exp2(x)``: ``fast_exp2`` as the one MUFU.EX2 (exp2f adds a compare and two multiplies for denormals).
FAST_EXP2 = """\
// 2^x, results under 2^-126 flushed to 0.
__device__ __forceinline__ float iron_fast_exp2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}"""


def pack_x2(dt: D.DType) -> str:
    """``iron_pack_<dt>x2(lo, hi)``: two f32 registers rounded to ``dt`` as one .f16x2/.bf16x2 word, in one
    conversion (``F2FP.PACK_AB``; rounding each, then packing, took three instructions a value)."""
    kind, pair = ("half2", "__floats2half2_rn") if dt == D.f16 else ("nv_bfloat162", "__floats2bfloat162_rn")
    return (f"// Two f32 values rounded to {dt} (to nearest even) as one 32-bit register, the lower-numbered slot "
            f"low.\n__device__ __forceinline__ unsigned int iron_pack_{dt.name}x2(float lo, float hi) {{\n"
            f"  const __{kind} v = {pair}(lo, hi);\n"
            f"  return *reinterpret_cast<const unsigned int*>(&v);\n}}")


def bitcast_helper(memcpy: str) -> str:
    """``iron_bitcast<To>(from)``: the bits of ``from`` as a ``To`` of the same size."""
    return f"""\
// Reinterprets the bits of a value as another type of the same size.
template <typename To, typename From>
__device__ __forceinline__ To iron_bitcast(From from) {{
  static_assert(sizeof(To) == sizeof(From), "bitcast between different sizes");
  To to;
  {memcpy}(&to, &from, sizeof(To));
  return to;
}}"""

THREAD_INDEX = """\
// The thread's linear index in its group: x + y * gx + z * gx * gy (docs/ir.md).
__device__ __forceinline__ unsigned int iron_thread_index() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}"""


def banner(parts: ModuleParts, language: str, profile: TargetProfile) -> list[str]:
    """The comment that opens every emitted file: what it is and where it came from."""
    k = parts.kernel
    variant = k.meta.get("variant") or {}
    bound = ", ".join(f"{key}={getattr(v, 'name', v)}" for key, v in sorted(variant.items()))
    what = f"kernel '{k.name}'" + (f" [{bound}]" if bound else "")
    # The file's name only: the source must not depend on where the project is checked out.
    where = f" ({PurePath(k.loc.file).name}:{k.loc.line})" if k.loc else ""
    return [f"// Generated by Iron from {what}{where}.",
            f"// Target: {language}, {profile.arch}. Do not edit: change the kernel and emit again.", ""]


def used_dtypes(k: Kernel) -> set[D.DType]:
    """Every dtype a (legalised) kernel's values, slots and tensors use."""
    found: set[D.DType] = set()

    def add(t: Any) -> None:
        if isinstance(t, (ScalarType, VectorType, TensorType)):
            found.add(t.dtype)
        elif isinstance(t, VarType):
            add(t.elem)

    for p in k.params:
        add(p.type)
    for op in k.walk():
        if op.result is not None:
            add(op.result.type)
        if op.opcode == "var":
            add(op.attrs["type"])
        for r in op.regions:
            for a in r.args:
                add(a.type)
    return found


def params_struct(dialect: Any, abi: KernelABI) -> list[str]:
    """``struct IronParams`` with abi.py's field order and offsets, padded to its size and checked."""
    lines = ["// The parameter block (iron/codegen/abi.py): scalars, then the grid, then tensor sizes.",
             "struct IronParams {"]
    end, align = 0, 4
    for f in abi.fields:
        member = field_ident(f.name, dialect.reserved)
        lines.append(f"{dialect.indent}{dialect.scalar_names[f.storage]} {member};  // offset {f.offset}")
        end = f.offset + f.storage.itemsize
        align = max(align, f.storage.itemsize)
    if abi.maps:  # tensor maps: opaque 128-byte descriptors the host encodes (codegen/tensor_maps.py)
        lines[:0] = ["// A tensor map (CUtensorMap): an opaque TMA descriptor, 64-byte aligned.",
                     "struct alignas(64) iron_tensor_map { unsigned long long opaque[16]; };", ""]
        for m in abi.maps:
            lines.append(f"{dialect.indent}iron_tensor_map {m.name};  // offset {m.offset}: {m.tensor}, box "
                         f"{m.box[0]} x {m.box[1]}, {m.layout}")
        end, align = abi.maps[-1].offset + 128, 64
    natural = (end + align - 1) // align * align
    for n in range((abi.params_size - natural) // 4):
        lines.append(f"{dialect.indent}{dialect.scalar_names[D.u32]} iron_pad{n};")
    lines += ["};",
              f'static_assert(sizeof(IronParams) == {abi.params_size}, "parameter block layout (abi.py)");']
    return lines


def atomic_float_extreme(dialect: Any, kind: str, dt: D.DType) -> str:
    """``iron_atomic_max_f32(float*, float)``: a CAS loop on the bits, NaN ignored like ``fmaxf``."""
    t = dialect.scalar_names[dt]
    word = dialect.scalar_names[D.u32 if dt == D.f32 else D.u64]
    fn = dialect.math(kind, dt)
    dialect.require_bitcast()
    return f"""\
// atomic_{kind} on {dt}: NaN is ignored, as {fn} does; returns the old value.
__device__ inline {t} iron_atomic_{kind}_{dt.name}({t}* address, {t} value) {{
  {word}* bits = reinterpret_cast<{word}*>(address);
  {word} old = *bits;
  while (true) {{
    const {t} current = iron_bitcast<{t}>(old);
    const {word} desired = iron_bitcast<{word}>({fn}(current, value));
    const {word} seen = atomicCAS(bits, old, desired);
    if (seen == old) {{
      return current;
    }}
    old = seen;
  }}
}}"""


def simd_reduce(dialect: Any, kind: str, dt: D.DType) -> str:
    """``iron_simd_sum_f32(x)`` and friends over the active lanes of the caller's subgroup."""
    t = dialect.scalar_names[dt]
    w = dialect.lane_width
    mask, mask_t, full = dialect.active_mask()
    one = "1ull" if mask_t == "unsigned long long" else "1u"
    if kind == "sum":
        combine = "{a} + {b}"
        start = dialect.literal(-0.0, dt) if dt.is_float else dialect.literal(0, dt)
        note = "lane order (the interpreter's) when some are inactive"
    else:
        combine = (f"{dialect.math(kind, dt)}({{a}}, {{b}})" if dt.is_float
                   else "{a} " + ("<" if kind == "min" else ">") + " {b} ? {a} : {b}")
        start = "value"
        note = "ignores NaN like " + (dialect.math(kind, dt) if dt.is_float else kind)
    # A partial subgroup reads only its active lanes, in lane order: a shuffle from an inactive lane is
    # undefined, and the condition is the same in every active lane, so they all take each shuffle.
    # Fully unrolled on purpose, measured with NVRTC 13.5 for sm_90: reading every lane unconditionally
    # made ptxas fail register allocation when the reduction sat in nested loops, and any loop left
    # rolled here (over the lanes or the mask's bits) took std.softmax's 64-value rows from 109 registers
    # to 172 (two groups of 256 per SM down to one).
    # The shuffle goes into a local first: inside a ternary it would run in only some lanes,
    # and a shuffle executed by part of the mask it names is undefined (it broke int max/min).
    tree = combine.format(a="value", b="other")
    ordered = combine.format(a="total", b="other")
    return f"""\
// simd_{kind} over the active lanes; {note}.
__device__ inline {t} iron_simd_{kind}_{dt.name}({t} value) {{
  const {mask_t} active = {mask};
  if (active == {full}) {{
    for (int offset = {w // 2}; offset > 0; offset /= 2) {{
      const {t} other = {dialect.shuffle_xor("active", "value", "offset")};
      value = {tree};
    }}
    return value;
  }}
  {t} total = {start};
  #pragma unroll
  for (int lane = 0; lane < {w}; ++lane) {{
    if ((active >> lane) & {one}) {{
      const {t} other = {dialect.shuffle_from("active", "value", "lane")};
      total = {ordered};
    }}
  }}
  return total;
}}"""

"""CUDA C++ (NVRTC) and HIP C++ (hipRTC / hipcc): one C++ dialect, two vendors' spellings.

The kernel is ``extern "C" __global__`` with the buffers as pointers (``const``
when only read; no ``__restrict__``, since a buffer may legally be passed
twice) and the parameter block as a by-value struct whose layout is checked
against abi.py with ``static_assert``.  Vectors are ``iron_vec<T, N>``: an
aligned array that a reinterpreted pointer loads in one access.

f16 is ``__half`` on CUDA (cuda_fp16.h) and clang's ``_Float16`` on HIP (no
header, so hipRTC needs none); bf16 is ``__nv_bfloat16`` on CUDA and u16 bits
on HIP (legalize.lower_bf16_to_bits).  Their arithmetic already runs in f32
(legalize.promote_narrow_floats): only conversions, loads and stores remain.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ... import config
from ...core import dtypes as D
from ...core.ir import Op
from ...core.ops import entry_registers
from ...core.types import TILE_LAYOUTS, FragmentType, VectorType, wg_k_step
from ..mma import get_strategy
from ..tensor_maps import map_name
from . import cxx_helpers as H
from .cstyle import ModuleParts, Operand
from .dialect import Dialect, box_text
from .fragments import static_scratch_floats

#: The dynamic shared block of a CUDA kernel whose shared arrays pass the static limit.
DYNAMIC_SHARED = "iron_dynamic_shared"

_C_NAMES = {D.f32: "float", D.f64: "double", D.i8: "signed char", D.i16: "short", D.i32: "int",
            D.i64: "long long", D.u8: "unsigned char", D.u16: "unsigned short", D.u32: "unsigned int",
            D.u64: "unsigned long long", D.bool_: "bool",
            # 8-bit floats reach the emitter only as the bytes of tiles a warpgroup multiply reads (f8_bits)
            D.f8e4m3: "unsigned char", D.f8e5m2: "unsigned char"}
_INT_SUFFIX = {D.i32: "", D.u32: "u", D.i64: "LL", D.u64: "ULL"}
#: PTX's names of the element types ``wgmma`` reads.
_WGMMA_KIND = {D.f16: "f16", D.bf16: "bf16", D.f8e4m3: "e4m3", D.f8e5m2: "e5m2"}
_INT_MIN = {D.i32: "(-2147483647 - 1)", D.i64: "(-9223372036854775807LL - 1LL)"}
_ATOMIC_KIND = {"atomic_add": "add", "atomic_max": "max", "atomic_min": "min", "atomic_xchg": "xchg",
                "atomic_cas": "cas"}
_NATIVE_ATOMIC = {"add": "atomicAdd", "max": "atomicMax", "min": "atomicMin", "xchg": "atomicExch",
                  "cas": "atomicCAS"}


#: Bit casts both CUDA and HIP offer as intrinsics.
_BITCAST_INTRINSICS = {(D.f32, D.u32): "__float_as_uint", (D.f32, D.i32): "__float_as_int",
                       (D.u32, D.f32): "__uint_as_float", (D.i32, D.f32): "__int_as_float",
                       (D.f64, D.i64): "__double_as_longlong", (D.i64, D.f64): "__longlong_as_double"}

#: AMD matrix instructions (``MmaCombo.instruction``) -> clang builtin and its trailing immediates
#: (MFMA's cbsz, abid, blgp: no broadcast, no lane-group permutation).
_AMD_MATRIX_BUILTINS = {
    "v_mfma_f32_16x16x16f16": ("__builtin_amdgcn_mfma_f32_16x16x16f16", (0, 0, 0)),
    "v_mfma_f32_16x16x16bf16_1k": ("__builtin_amdgcn_mfma_f32_16x16x16bf16_1k", (0, 0, 0)),
    "v_wmma_f32_16x16x16_f16": ("__builtin_amdgcn_wmma_f32_16x16x16_f16_w32", ()),
    "v_wmma_f32_16x16x16_bf16": ("__builtin_amdgcn_wmma_f32_16x16x16_bf16_w32", ()),
}
#: Element type of the builtins' vectors: bf16 travels as its 16 bits in a short.
_AMD_VECTOR_ELEMENT = {D.f16: "_Float16", D.bf16: "short", D.f32: "float"}


class CxxDialect(Dialect):
    """What CUDA and HIP share."""

    language = "cuda"
    reserved = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "iron_vec", DYNAMIC_SHARED})
    #: 16-bit float types with conversion intrinsics (CUDA); HIP's _Float16 converts by C casts.
    narrow_intrinsics: ClassVar[dict[D.DType, str]] = {}

    def __init__(self, profile: Any, kernel_name: str) -> None:
        super().__init__(profile, kernel_name)
        self.scalar_names = {**_C_NAMES, **self.narrow_names()}
        self.lane_width = profile.lane_width
        #: ``__launch_bounds__(...)`` when the kernel fixes its group size (warp roles), else empty; and
        #: ``__cluster_dims__(...)`` when it joins groups into clusters (CUDA sm_90).
        self.launch_bounds = ""
        self.cluster_dims = ""

    def narrow_names(self) -> dict[D.DType, str]:
        raise NotImplementedError

    # ------------------------------------------------------------ types and literals

    def vector_type(self, dt: D.DType, width: int) -> str:
        self.require("iron_vec", H.IRON_VEC)
        return f"iron_vec<{self.scalar_names[dt]}, {width}>"

    def vector_zero(self, t: VectorType) -> str:
        return "{}"

    def int_literal(self, v: int, dt: D.DType) -> str:
        if dt in _INT_MIN and v == D.min_value(dt):
            return _INT_MIN[dt]
        if dt in _INT_SUFFIX:
            return f"{v}{_INT_SUFFIX[dt]}"
        return f"({self.scalar_names[dt]}){v}"

    def float_literal(self, text: str, dt: D.DType) -> str:
        if dt == D.f64:
            return text
        f32 = f"{text}f"
        return f32 if dt == D.f32 else self.from_f32(f32, dt)

    def nonfinite_literal(self, bits: int, dt: D.DType) -> str:
        if dt == D.f64:
            return f"__longlong_as_double(0x{bits:016x}LL)"
        if dt == D.f32:
            return f"__uint_as_float(0x{bits:08x}u)"
        return self.narrow_from_bits(f"(unsigned short)0x{bits:04x}", dt)

    def from_f32(self, text: str, dt: D.DType) -> str:
        raise NotImplementedError

    def narrow_from_bits(self, bits: str, dt: D.DType) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------ conversions

    def convert(self, x: Operand, src: D.DType, dst: D.DType) -> str:
        if src == dst:
            return x.text
        narrow = self.narrow_intrinsics
        if dst.is_bool:
            value = self.to_f32(x.text, src) if src in narrow else x.atom
            zero = "0.0f" if src in narrow else self.literal(0, src)
            return f"{value} != {zero}"
        if src.is_bool:
            return self.from_f32(f"({x.atom} ? 1.0f : 0.0f)", dst) if dst in narrow else \
                f"({self.scalar_names[dst]}){x.atom}"
        if src in narrow:
            as_f32 = self.to_f32(x.text, src)
            return as_f32 if dst == D.f32 else self.convert(Operand(as_f32, None), D.f32, dst)
        if dst in narrow:
            return self.to_narrow(x, src, dst)
        return f"({self.scalar_names[dst]}){x.atom}"

    def to_f32(self, text: str, src: D.DType) -> str:
        raise NotImplementedError

    def to_narrow(self, x: Operand, src: D.DType, dst: D.DType) -> str:
        raise NotImplementedError

    def bitcast(self, x: Operand, src: D.DType, dst: D.DType) -> str:
        if dst.is_bool:
            return f"{x.atom} != {self.literal(0, src)}"
        if src.is_bool or (src.is_int and dst.is_int):
            return f"({self.scalar_names[dst]}){x.atom}"
        if self.scalar_names[src] == self.scalar_names[dst]:  # an f8 byte and a u8 (f8_bits): the same type here
            return x.text
        native = _BITCAST_INTRINSICS.get((src, dst))
        if native:
            return f"{native}({x.text})"
        self.require_bitcast()
        return f"iron_bitcast<{self.scalar_names[dst]}>({x.text})"

    #: The function that copies bytes in device code.
    memcpy = "memcpy"

    def require_bitcast(self) -> None:
        self.require("iron_bitcast", H.bitcast_helper(self.memcpy))

    # ------------------------------------------------------------ vectors and memory

    def vec_make(self, t: VectorType, args: list[Operand]) -> str:
        return "{{" + ", ".join(a.text for a in args) + "}}"

    def vec_extract(self, v: Operand, index: int) -> str:
        return f"{v.text}.e[{index}]"

    def vload(self, t: Operand, i: Operand, width: int) -> str:
        vt = self.vector_type(t.dtype, width)
        return f"*reinterpret_cast<const {vt}*>(&{t.text}[{i.text}])"

    def vstore(self, t: Operand, i: Operand, v: Operand) -> str:
        vt = self.vector_type(t.dtype, v.type.width)
        return f"*reinterpret_cast<{vt}*>(&{t.text}[{i.text}]) = {v.text}"

    def barrier(self) -> str:
        return "__syncthreads()"

    def fence(self, op: Op) -> str:
        return "__threadfence()"

    def loop_hint(self, unroll: int | None) -> list[str]:
        return [f"#pragma unroll {unroll}"] if unroll else []

    # ------------------------------------------------------------ indices

    def global_id_unsigned(self, axis: int) -> str:
        c = "xyz"[axis]
        return f"blockIdx.{c} * blockDim.{c} + threadIdx.{c}"

    def index(self, code: str, axis: int | None) -> str:
        c = "xyz"[axis] if axis is not None else ""
        w = self.lane_width
        if code == "program_id":
            return f"(int)({self.global_id_unsigned(axis)})"
        simple = {"thread_id": f"threadIdx.{c}", "group_id": f"blockIdx.{c}", "group_size": f"blockDim.{c}",
                  "num_groups": f"gridDim.{c}", "grid_size": f"p.iron_grid_{c}"}
        if code in simple:
            return f"(int){simple[code]}"
        if code == "simd_size":
            return str(w)
        if code == "num_simd_groups":
            return f"(int)((blockDim.x * blockDim.y * blockDim.z + {w - 1}u) / {w}u)"
        self.require("iron_thread_index", H.THREAD_INDEX)
        if code == "lane_id":
            return f"(int)(iron_thread_index() % {w}u)"
        return f"(int)(iron_thread_index() / {w}u)"  # simd_group_id

    def flat_thread_index(self) -> str:
        self.require("iron_thread_index", H.THREAD_INDEX)
        return "(int)iron_thread_index()"

    def role_registers(self, op: Op, role: str) -> list[str]:
        """The group size is fixed (``sum(sizes)``): say so, so the compiler may give each thread the registers
        one group per multiprocessor leaves."""
        self.launch_bounds = f"__launch_bounds__({sum(op.attrs['sizes'])}) "
        return []

    # ------------------------------------------------------------ atomics

    def atomic(self, op: Op, args: list[Operand]) -> str:
        t, i, *vals = args
        dt = t.dtype
        kind = _ATOMIC_KIND[op.opcode]
        ptr = f"&{t.text}[{i.text}]"
        texts = [v.text for v in vals]
        if dt.is_float and kind in ("max", "min"):
            name = self.require(f"iron_atomic_{kind}_{dt.name}", H.atomic_float_extreme(self, kind, dt))
            return f"{name}({ptr}, {texts[0]})"
        if dt in (D.f32, D.f64) and kind == "cas" or dt == D.f64 and kind == "xchg":
            bits = D.u32 if dt == D.f32 else D.u64
            self.require_bitcast()
            word = self.scalar_names[bits]
            words = [f"iron_bitcast<{word}>({v})" for v in texts]
            call = f"{_NATIVE_ATOMIC[kind]}(reinterpret_cast<{word}*>({ptr}), {', '.join(words)})"
            return f"iron_bitcast<{self.scalar_names[dt]}>({call})"
        if dt == D.i64 and kind in ("add", "xchg", "cas"):
            # 64-bit add, exchange and compare-and-swap exist for unsigned long long: same bits.
            words = [f"(unsigned long long){v}" for v in texts]
            return f"(long long){_NATIVE_ATOMIC[kind]}((unsigned long long*){ptr}, {', '.join(words)})"
        return f"{_NATIVE_ATOMIC[kind]}({ptr}, {', '.join(texts)})"

    # ------------------------------------------------------------ subgroups

    def subgroup(self, op: Op, args: list[Operand]) -> str:
        code = op.opcode
        x = args[0]
        if code in ("simd_sum", "simd_max", "simd_min"):
            name = self.require(f"iron_{code}_{x.dtype.name}", H.simd_reduce(self, code[5:], x.dtype))
            return f"{name}({x.text})"
        if code in ("simd_any", "simd_all"):
            return self.vote(code[5:], x.text)
        return self.shuffle(x.text, args[1].text)

    def vote(self, kind: str, pred: str) -> str:
        raise NotImplementedError

    def frag_lane_xor(self, value: str, mask: int) -> str:
        return self.shuffle_xor(self.active_mask()[2], value, str(mask))

    def shuffle(self, value: str, lane: str) -> str:
        raise NotImplementedError

    def active_mask(self) -> tuple[str, str, str]:
        """(the active-lane mask expression, its type, the full mask literal)."""
        raise NotImplementedError

    def shuffle_from(self, mask: str, value: str, lane: str) -> str:
        raise NotImplementedError

    def shuffle_xor(self, mask: str, value: str, offset: str) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------ module

    def prelude(self, parts: ModuleParts) -> list[str]:
        raise NotImplementedError

    def shared_lines(self, arrays: list[tuple[str, str, int, int, int]]) -> list[str]:
        """Declarations of the shared arrays ``(name, C type, bytes, align, element bytes)``.

        Static ``__shared__`` arrays while they fit the profile's static limit; past it (CUDA's 48 KiB), or when
        one needs more than 16-byte alignment, pointers into one dynamic ``extern __shared__`` block (those
        aligned past 16 bytes first, the rest in order), each at an offset aligned to 16 bytes or its own
        alignment (1024 for ``mma_wg``'s tiles), whose size goes in ``dynamic_shared_bytes`` for the runtime to
        opt in to and launch with.
        """
        total = sum(size for _, _, size, _, _ in arrays)
        self.dynamic_shared_bytes = 0
        # Arrays aligned past 16 bytes (swizzled and TMA tiles) go in the dynamic block too: its base is aligned,
        # whereas static __shared__ arrays are not reliably placed on 128- or 1024-byte boundaries.
        wide = any(align > 16 for _, _, _, align, _ in arrays)
        if (total <= self.profile.max_shared_bytes and not wide) or not self.profile.max_shared_bytes_optin:
            # alignas first: hip-clang rejects an attribute list after __shared__ (NVRTC takes either order).
            return [f"{f'alignas({align}) ' if align > item else ''}__shared__ {ctype} {name}[{size // item}];"
                    for name, ctype, size, align, item in arrays]
        block_align = max([16] + [align for _, _, _, align, _ in arrays])
        lines = [f"extern __shared__ __align__({block_align}) unsigned char {DYNAMIC_SHARED}[];"]
        offset = 0
        for name, ctype, size, align, _ in sorted(arrays, key=lambda a: -max(a[3], 16)):
            offset = -(-offset // max(align, 16)) * max(align, 16)
            lines.append(f"{ctype}* const {name} = reinterpret_cast<{ctype}*>({DYNAMIC_SHARED} + {offset});")
            offset += -(-size // 16) * 16
        self.dynamic_shared_bytes = offset
        return lines

    def module(self, parts: ModuleParts) -> str:
        abi = parts.abi
        lines = self.prelude(parts)
        lines += [*H.params_struct(self, abi), ""]
        params = []
        for (name, value), arg in zip(parts.tensors, abi.tensors):
            const = "const " if arg.access == "read" else ""
            params.append(f"{const}{self.scalar_names[value.type.dtype]}* {name}")
        # Tensor maps must stay in parameter memory, where TMA reads them: a grid constant, never copied.
        params.append("const __grid_constant__ IronParams p" if abi.maps else "IronParams p")
        head = f'extern "C" __global__ void {self.cluster_dims}{self.launch_bounds}{abi.entry}('
        if len(head) + sum(len(q) + 2 for q in params) <= 100:
            lines.append(f'{head}{", ".join(params)}) {{')
        else:  # one parameter per line
            lines.append(head)
            lines += [f"{self.indent * 2}{q}{',' if n + 1 < len(params) else ') {'}" for n, q in enumerate(params)]
        arrays = [(s.name, self.scalar_names[s.dtype], s.count * s.dtype.itemsize, s.align, s.dtype.itemsize)
                  for s in parts.shared]
        if "mma_scratch" in parts.extra:
            count = static_scratch_floats(parts, self.profile)
            arrays.append((parts.extra["mma_scratch"].name, "float", count * 4, 4, 4))
        lines += [self.indent + line for line in self.shared_lines(arrays)]
        lines += [self.indent + line for line in self.entry_lines()]
        lines += parts.body
        lines.append("}")
        return "\n".join(lines) + "\n"

    def entry_lines(self) -> list[str]:
        """Statements every thread runs first (none here)."""
        return []

    def helper_lines(self) -> list[str]:
        out: list[str] = []
        for text in self.helpers.values():
            out += [*text.rstrip("\n").split("\n"), ""]
        return out


class CudaDialect(CxxDialect):
    target = "cuda"
    language = "cuda"
    narrow_intrinsics: ClassVar[dict[D.DType, str]] = {D.f16: "half", D.bf16: "bfloat16"}

    def __init__(self, profile: Any, kernel_name: str) -> None:
        super().__init__(profile, kernel_name)
        #: With the ``pdl`` option every kernel starts by waiting for the grid before it in the stream
        #: (griddepcontrol.wait, sm_90+), so the runtime may launch it early (programmatic dependent launch): its
        #: blocks reach the SMs while that grid drains, and nothing of the kernel runs before that grid's writes
        #: are visible.  Without the launch attribute both instructions do nothing.
        self.waits_upstream = bool(config.get("pdl"))

    def entry_lines(self) -> list[str]:
        """The wait for the previous grid, then leave to launch the next one early (sm_90+; :attr:`waits_upstream`).
        The next grid's blocks then take only what this grid's resident blocks leave free, and wait in turn."""
        if not self.waits_upstream:
            return []
        return ["#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900",
                'asm volatile("griddepcontrol.wait;" ::: "memory");',
                'asm volatile("griddepcontrol.launch_dependents;" ::: "memory");',
                "#endif"]

    def narrow_names(self) -> dict[D.DType, str]:
        return {D.f16: "__half", D.bf16: "__nv_bfloat16"}

    def from_f32(self, text: str, dt: D.DType) -> str:
        return f"__float2{self.narrow_intrinsics[dt]}_rn({text})"

    def to_f32(self, text: str, src: D.DType) -> str:
        return f"__{self.narrow_intrinsics[src]}2float({text})"

    def narrow_from_bits(self, bits: str, dt: D.DType) -> str:
        return f"__ushort_as_{self.narrow_intrinsics[dt]}({bits})"

    def to_narrow(self, x: Operand, src: D.DType, dst: D.DType) -> str:
        kind = self.narrow_intrinsics[dst]
        if src == D.f32:
            return f"__float2{kind}_rn({x.text})"
        if src == D.f64:
            return f"__double2{kind}({x.text})"
        if src in self.narrow_intrinsics:  # f16 <-> bf16: exact to f32, then one rounding
            return f"__float2{kind}_rn({self.to_f32(x.text, src)})"
        widened = {D.i8: (D.i16, "short"), D.u8: (D.u16, "ushort"), D.i16: (D.i16, "short"),
                   D.u16: (D.u16, "ushort"), D.i32: (D.i32, "int"), D.u32: (D.u32, "uint"),
                   D.i64: (D.i64, "ll"), D.u64: (D.u64, "ull")}
        via, prefix = widened[src]
        text = x.text if via == src else f"({self.scalar_names[via]}){x.atom}"
        return f"__{prefix}2{kind}_rn({text})"

    def math(self, name: str, dt: D.DType) -> str:
        if name == "fast_exp2" and dt == D.f32:
            return self.require("iron_fast_exp2", H.FAST_EXP2)
        return super().math(name, dt)

    def vote(self, kind: str, pred: str) -> str:
        return f"__{kind}_sync(__activemask(), {pred}) != 0"

    def frag_subgroup_sync(self) -> list[str]:
        return ["__syncwarp(__activemask());"]

    packs_fragments = True

    def frag_pack(self, lo: str, hi: str, dt: D.DType) -> str:
        return f"{self.require(f'iron_pack_{dt.name}x2', H.pack_x2(dt))}({lo}, {hi})"

    def frag_ldmatrix(self, instruction: str, words: list[str], address: str) -> list[str]:
        outs = ", ".join(f"%{i}" for i in range(len(words)))
        regs = ", ".join(f'"=r"({w})' for w in words)
        return [f'asm volatile("{instruction} {{{outs}}}, [%{len(words)}];"',
                f'{self.indent * 2}: {regs}',
                f'{self.indent * 2}: "r"((unsigned int)__cvta_generic_to_shared({address})));']

    def copy_async(self, op: Op, args: list[Operand]) -> None:
        """``cp.async`` (sm_80+, every CUDA target here: global -> shared without registers; a source size of
        0 writes zeros and reads nothing), ``cp.async.commit_group`` and ``cp.async.wait_group`` (``wait_all``
        for 0 pending, which also waits for copies not committed yet)."""
        p = self.printer
        if op.opcode == "copy_async_commit":
            p.line('asm volatile("cp.async.commit_group;" ::: "memory");')
            return
        if op.opcode == "copy_async_wait":
            pending = op.attrs["pending"]
            wait = "cp.async.wait_all" if pending == 0 else f"cp.async.wait_group {pending}"
            p.line(f'asm volatile("{wait};" ::: "memory");')
            return
        dst, di, src, si, valid = args
        size = op.attrs["width"] * dst.dtype.itemsize
        cache = "cg" if size == 16 else "ca"  # .cg (L2 only) takes 16 bytes alone
        shared = f"(unsigned int)__cvta_generic_to_shared(&{dst.text}[{self.index_text(di)}])"
        source = f"{valid.atom} ? &{src.text}[{self.index_text(si)}] : {src.text}"
        p.line(f'asm volatile("cp.async.{cache}.shared.global [%0], [%1], {size}, %2;"')
        p.line(f'{self.indent * 2}:: "r"({shared}), "l"({source}), "r"({valid.atom} ? {size} : 0) : "memory");')

    def frag_native_mma(self, combo: Any, out: str, a: Operand, b: Operand, c: Operand) -> list[str]:
        """``mma.sync`` m16n8k16 on registers in the PTX layout: 16-bit slots packed in pairs, low slot first.  A
        16x16x16 multiply is two of them on the same A: columns 8 h .. 8 h + 7 from b's words 2 h, 2 h + 1 into the
        accumulator's registers 4 h .. 4 h + 3 (``iron.codegen.mma``'s 16 x 16 layouts)."""
        ind = self.indent
        lines = []
        for h in range(combo.n // 8):
            outs = [f'"=f"({out}[{4 * h + i}])' for i in range(4)]
            ins = [f'"r"({a.text}[{i}])' for i in range(4)] + [f'"r"({b.text}[{2 * h + i}])' for i in range(2)]
            ins += [f'"f"({c.text}[{4 * h + i}])' for i in range(4)]
            lines += [f'asm volatile("{combo.instruction} "',
                      f'{ind * 2}"{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%10, %11, %12, %13}};"',
                      f"{ind * 2}: {', '.join(outs)}",
                      f"{ind * 2}: {', '.join(ins[:6])},",
                      f"{ind * 4}{', '.join(ins[6:])});"]
        return lines

    def frag_warpgroup_mma(self, op: Op, out: str, args: list[Any]) -> list[str]:
        """``mma_wg`` as ``wgmma.mma_async`` (sm_90a) on shared-memory descriptors, one per K slice of 16.

        Both tiles use the 128-byte swizzle (``sw128``): a K-major tile (A; B stored n-by-k) keeps 8-row
        atoms 1024 bytes apart (the stride byte offset) and a K slice starts 32 bytes further in the row;
        a k-by-n (N-major, ``trans-b``) B keeps its 64-column blocks ``b_block`` elements apart (the leading
        byte offset) and its 8-row atoms 1024 bytes apart, a K slice two atoms further.  The slices are
        committed as one group, and ``wgmma.wait_group`` leaves ``pending`` groups in flight (0: the
        multiply is done when ``mma_wg`` returns).  A tile off a 1024-byte boundary would be read wrongly
        (the swizzle follows address bits), so the kernel traps instead.
        """
        a, a_tile, b, b_tile, c = args
        n, k, major, block = op.result.type.cols, op.attrs["k"], op.attrs["b_major"], op.attrs["b_block"]
        registers = isinstance(a.type, FragmentType)
        kind = _WGMMA_KIND[a.type.dtype if registers else a.dtype]
        b_kind = _WGMMA_KIND[b.dtype]
        desc = self.require("iron_wgmma_desc", H.WGMMA_DESC)
        p, ind = self.printer, self.indent
        wa, wb, r = p.temp("wg_a"), p.temp("wg_b"), p.temp("r")
        # A fresh zero accumulator (a gemm folding each K step into a total) is not copied: the first slice
        # ignores its input (wgmma's scale-d 0), so the registers start as that slice's products, and its
        # constraints are outputs only ("=f"): read-write ones on registers never written made the compiler
        # copy a result carried round a loop while its multiply ran, which ptxas serialises (C7515).
        zero = _zero_fill(op.operands[4]) and not isinstance(a.type, FragmentType)
        lines = [] if zero else \
            ["#pragma unroll", f"for (int {r} = 0; {r} < {n // 2}; ++{r}) {out}[{r}] = {c.text}[{r}];"]
        for name, t, at in ((wa, a, a_tile), (wb, b, b_tile))[1 if registers else 0:]:
            lines.append(f"const unsigned int {name} = "
                         f"(unsigned int)__cvta_generic_to_shared(&{t.text}[{self.index_text(at)}]);")
        lines += [f"if (({wb if registers else f'{wa} | {wb}'}) & 1023u) __trap();  // a tile off its 1024-byte "
                  "swizzle atom", 'asm volatile("wgmma.fence.sync.aligned;" ::: "memory");']
        d = n // 2
        regs = ", ".join(f"%{i}" for i in range(d))
        outs = ", ".join(f'"+f"({out}[{i}])' for i in range(d))
        first = op.attrs.get("k0", 0) // 16  # the first K slice of 16 in the tiles
        if registers:  # A in this subgroup's mma A layout: four words of two 16-bit values, no transpose
            item = b.dtype.itemsize
            b_desc, trans = (f"{desc}({wb} + {first * 16 * item}u, 16u, 1024u)", 0) if major == "k" else \
                (f"{desc}({wb} + {first * 16 * 64 * item}u, {block * item}u, 1024u)", 1)
            lines += ["asm volatile(",
                      f'{ind}"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{d + 5}, 0;\\n"',
                      f'{ind}"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind} "',
                      f'{ind}"{{{regs}}}, {{%{d}, %{d + 1}, %{d + 2}, %{d + 3}}}, %{d + 4}, p, 1, 1, {trans};\\n}}"',
                      f"{ind}: {outs}",
                      f'{ind}: ' + ", ".join(f'"r"({a.text}[{w}])' for w in range(4)) +
                      f', "l"({b_desc}), "r"(1) : "memory");', *self.warpgroup_commit(op)]
            layout = "k-major" if major == "k" else "n-major"
            return ["{  // mma_wg: " + f"64x{n}x16 {kind}, A from registers, B {layout}",
                    *(ind + line for line in lines), "}"]
        item = a.dtype.itemsize
        step = wg_k_step(a.dtype)  # K columns per instruction: 32 bytes of a row
        # 8-bit tiles take no transpose operands (both K-major); 16-bit ones say whether B is transposed.
        slices = range(first * 16 // step, (first * 16 + k) // step)
        for ks in slices:
            a_desc = f"{desc}({wa} + {ks * 32}u, 16u, 1024u)"
            if major == "k":
                b_desc, trans = f"{desc}({wb} + {ks * 32}u, 16u, 1024u)", 0
            else:
                b_desc, trans = f"{desc}({wb} + {ks * 16 * 64 * item}u, {block * item}u, 1024u)", 1
            transposes = "" if item == 1 else f", 0, {trans}"
            lines += ["asm volatile(",
                      f'{ind}"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{d + 2}, 0;\\n"',
                      f'{ind}"wgmma.mma_async.sync.aligned.m64n{n}k{step}.f32.{kind}.{b_kind} "',
                      f'{ind}"{{{regs}}}, %{d}, %{d + 1}, p, 1, 1{transposes};\\n}}"',
                      f"{ind}: {outs.replace('+f', '=f') if zero and ks == slices[0] else outs}",
                      f'{ind}: "l"({a_desc}), "l"({b_desc}), "r"({0 if zero and ks == slices[0] else 1}) : "memory");']
        lines += self.warpgroup_commit(op)
        kinds = kind if kind == b_kind else f"{kind}.{b_kind}"
        return ["{  // mma_wg: " + f"64x{n}x{k} {kinds}, B {'k-major' if major == 'k' else 'n-major'}",
                *(ind + line for line in lines), "}"]

    @property
    def barrier_words(self) -> bool:  # type: ignore[override]
        return "mbarrier" in self.profile.features

    def role_registers(self, op: Op, role: str) -> list[str]:
        """Each role's warpgroups move to their register budget with ``setmaxnreg`` (sm_90a): down from what the
        compiler gave every thread (``__launch_bounds__(threads, 1)``: the register file over the group, in
        steps of 8), or up into what the others released.  The instructions open the branches of the first
        ``if`` on the role (:meth:`branch_prologue`): ptxas drops a budget that code after it could exceed, and
        only inside the branch does it know that code is the role's own.  Elsewhere only the launch bounds."""
        lines = super().role_registers(op, role)
        if op.attrs["registers"] is not None and "setmaxnreg" in self.profile.features:
            self.launch_bounds = f"__launch_bounds__({sum(op.attrs['sizes'])}, 1) "
            self._role_split = op
        return lines

    _role_split: Op | None = None

    def branch_prologue(self, op: Op) -> tuple[list[str], list[str]]:
        """``setmaxnreg`` at the top of each branch of the first top-level ``if role == i`` (or ``!=``) after the
        split: the then-side's roles and the else-side's, where they share one budget.  Each role's work belongs
        in its branch: code after the ``if`` that needs more registers than a lowered budget makes ptxas drop
        the budgets (C7507, ``setmaxnreg_ignored``)."""
        split = self._role_split
        cond = op.operands[0].owner
        if split is None or cond is None or cond.opcode not in ("eq", "ne"):
            return [], []
        role, other = cond.operands
        if other is split.result:
            role, other = other, role
        if role is not split.result or other.owner is None or other.owner.opcode != "const":
            return [], []
        self._role_split = None
        n = len(split.attrs["sizes"])
        chosen = {int(other.owner.attrs["value"])} & set(range(n))
        then_roles = chosen if cond.opcode == "eq" else set(range(n)) - chosen
        return (self._budget_lines(split, then_roles), self._budget_lines(split, set(range(n)) - then_roles))

    def _budget_lines(self, split: Op, roles: set[int]) -> list[str]:
        budgets = {split.attrs["registers"][r] for r in roles}
        share = entry_registers(sum(split.attrs["sizes"]))
        if len(budgets) != 1 or budgets == {share}:
            return []
        r = budgets.pop()
        return [f'asm volatile("setmaxnreg.{"dec" if r < share else "inc"}.sync.aligned.u32 {r};\\n" ::: "memory");']

    def role_barrier(self, op: Op) -> list[str]:
        """``bar.sync`` on the named barrier of the caller's role (1 + role; 0 is ``__syncthreads``), counting the
        role's threads (whole warps, which the capability check makes sure of); in a kernel with tile stores
        first a proxy fence, as ``barrier``."""
        ids, count = self.warp_role(op), self.by_role(op, list(op.attrs["sizes"]))
        fence = ['asm volatile("fence.proxy.async.shared::cta;" ::: "memory");'] \
            if self.printer is not None and self.printer.uses_tile_store else []
        return [*fence, f'asm volatile("bar.sync %0, %1;" :: "r"(1 + {ids}), "r"({count}) : "memory");']

    def tile_copy(self, op: Op, args: list[Operand]) -> None:
        """``cp.async.bulk.tensor`` (TMA, sm_90) from the launch's tensor map into the shared tile, completing
        its bytes on the barrier; the portable copy loop before sm_90.  A tile off its layout's alignment
        would be written wrongly, so the kernel traps instead."""
        if "tma" not in self.profile.features:
            super().tile_copy(op, args)
            return
        p = self.printer
        dst, di, _, _, _, _, row, col, bars, bi = args[:10]
        coords = _tma_coords(op, row, col, args[10:])
        name = map_name(op, p.kernel, p.abi.maps)
        align = TILE_LAYOUTS[op.attrs["layout"]].align
        tile, bar = p.temp("tile"), p.temp("bar")
        n = len(coords)
        # A multicast lands at the same offsets in every group of the cluster, completing each one's barrier.
        cast, mask = (".multicast::cluster", f', %{3 + n}') if op.attrs.get("multicast") and self.cluster_size > 1 \
            else ("", "")
        mask_arg = f', "h"((unsigned short){(1 << self.cluster_size) - 1})' if mask else ""
        for line in [
            f"{{  // copy_tile: {box_text(op)} {dst.dtype}, {op.attrs['layout']}{', to the cluster' if mask else ''}",
            f"  const unsigned int {tile} = (unsigned int)__cvta_generic_to_shared(&{dst.text}[{self.index_text(di)}]);",
            f"  const unsigned int {bar} = (unsigned int)__cvta_generic_to_shared(&{bars.text}[{self.index_text(bi)}]);",
            f"  if ({tile} & {align - 1}u) __trap();  // a tile off its {align}-byte alignment",
            f'  asm volatile("cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"',
            f'               "{cast} "',
            f'               "[%0], [%1, {{{", ".join(f"%{2 + j}" for j in range(n))}}}], [%{2 + n}]{mask};"',
            f'               :: "r"({tile}), "l"(reinterpret_cast<unsigned long long>(&p.{name})), '
            f'{", ".join(coords)}, "r"({bar}){mask_arg} : "memory");',
                "}"]:
            p.line(line)

    def tile_store(self, op: Op, args: list[Operand]) -> None:
        """``cp.async.bulk.tensor`` from the shared tile to the launch's tensor map of the destination (TMA, sm_90;
        the hardware skips elements past the matrix's far edges), committed as a bulk group; the portable loop
        before sm_90.  A box that starts at a negative coordinate faults in TMA (an illegal instruction, probed on
        an H100: scripts/device/tma_store_probe.py), so such a store takes the portable loop at run time.  The
        issuing thread first fences its own tile writes to the async proxy; the group's barriers fence
        everyone's (``barrier``)."""
        if "tma_store" not in self.profile.features:  # the option tma_store
            super().tile_store(op, args)
            return
        p = self.printer
        _, _, _, _, row, col, src, si = args[:8]
        outer = args[8:][len(op.attrs.get("box_outer", ())):]
        coords = _tma_coords(op, row, col, args[8:])
        name = map_name(op, p.kernel, p.abi.maps)
        align = TILE_LAYOUTS[op.attrs["layout"]].align
        tile = p.temp("tile")
        n = len(coords)
        starts = " && ".join(f"(int)({v.text}) >= 0" for v in (row, col, *outer))
        for line in [
            f"if ({starts}) {{  // store_tile: {box_text(op)} {src.dtype}, {op.attrs['layout']}",
            f"  const unsigned int {tile} = (unsigned int)__cvta_generic_to_shared(&{src.text}[{self.index_text(si)}]);",
            f"  if ({tile} & {align - 1}u) __trap();  // a tile off its {align}-byte alignment",
            '  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");',
            f'  asm volatile("cp.async.bulk.tensor.{n}d.global.shared::cta.bulk_group '
            f'[%0, {{{", ".join(f"%{1 + j}" for j in range(n))}}}], [%{1 + n}];"',
            f'               :: "l"(reinterpret_cast<unsigned long long>(&p.{name})), {", ".join(coords)}, '
            f'"r"({tile}) : "memory");',
            '  asm volatile("cp.async.bulk.commit_group;" ::: "memory");',
                "} else"]:
            p.line(line)
        super().tile_store(op, args)

    def tile_store_wait(self, op: Op) -> list[str]:
        """Every bulk group of this thread complete: its tiles read, its matrices written."""
        if "tma_store" not in self.profile.features:
            return super().tile_store_wait(op)
        return ['asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");']

    def async_barrier(self, op: Op, args: list[Operand], name: str) -> list[str]:
        """``mbarrier`` objects in shared memory (sm_80+; arrivals with bytes and ``try_wait`` on sm_90).

        They are 8-byte words among the shared arrays; ``abar_alloc`` has one thread initialise them, then a
        group barrier (with
        ``fence.mbarrier_init`` on sm_90, so the async proxy sees them too); an arrival with bytes is
        ``arrive.expect_tx``, a wait spins on its parity, and ``copy_async_barrier`` is
        ``cp.async.mbarrier.arrive`` without ``.noinc``: the phase waits for the copies, net arrivals 0.
        In a kernel with ``mma_wg``, a wait is followed by a proxy fence: ``wgmma`` reads shared memory
        through the async proxy, and the copies that completed the phase wrote it through the generic one;
        except where TMA tile copies are the only writers of ``mma_wg``'s tiles (they write through the async
        proxy too, and the barrier's completion makes their bytes visible).
        """
        code, tx = op.opcode, "mbarrier_tx" in self.profile.features
        tx_copies = "tma" in self.profile.features
        if code == "abar_alloc":
            n, arrivals = op.attrs["count"], op.attrs["arrivals"]
            lines = ["if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {",
                     f"{self.indent}for (int iron_b = 0; iron_b < {n}; ++iron_b) {{",
                     f'{self.indent * 2}asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" '
                     f':: "r"((unsigned int)__cvta_generic_to_shared(&{name}[iron_b])), "r"({arrivals}) : "memory");',
                     f"{self.indent}}}"]
            if tx:
                lines.append(f'{self.indent}asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");')
            return [*lines, "}", "__syncthreads();"]
        bar = f"(unsigned int)__cvta_generic_to_shared(&{args[0].text}[{self.index_text(args[1])}])"
        if code == "abar_wait":
            wait = self.require("iron_mbarrier_wait", H.mbarrier_wait(tx))
            lines = [f"{wait}({bar}, (unsigned int)({args[2].text}) & 1u);"]
            p = self.printer
            if p is not None and p.uses_warpgroup_mma and not (p.warpgroup_tiles_copied and tx_copies):
                lines.append('asm volatile("fence.proxy.async.shared::cta;" ::: "memory");')
            return lines
        if code == "abar_copies":
            return [f'asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];" :: "r"({bar}) : "memory");']
        # The barrier at the same offset in that group; the arrival releases at the group's scope, as CUTLASS's
        # cluster barriers do.  With .release.cluster gemm_ws in clusters took 2.3x as long on an H100 (4096^3:
        # 423 us against 191; benchmarks/h100-gemm-clusters-*-2026-12-06.jsonl).
        if code == "abar_arrive_peer" and self.cluster_size > 1:
            return ['asm volatile("{\\n.reg .b32 ra;\\nmapa.shared::cluster.u32 ra, %0, %1;\\n"',
                    '             "mbarrier.arrive.shared::cluster.b64 _, [ra];\\n}"',
                    f'             :: "r"({bar}), "r"((unsigned int)({args[2].text})) : "memory");']
        nbytes = op.attrs.get("bytes", 0)  # a peer's barrier in a cluster of one group is this group's
        if nbytes and tx:
            arrive = f'"mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\\n}}" :: "r"({bar}), "r"({nbytes})'
        else:  # before sm_90 a tile copy holds the phase with cp.async.mbarrier.arrive instead of bytes
            arrive = f'"mbarrier.arrive.shared::cta.b64 st, [%0];\\n}}" :: "r"({bar})'
        return [f'asm volatile("{{\\n.reg .b64 st;\\n" {arrive} : "memory");']

    def cluster_rank(self, op: Op) -> str:
        """``%cluster_ctarank``, the kernel declared with ``__cluster_dims__`` (sm_90; a launch of a grid that is
        no multiple of it fails); a cluster of one group is no cluster."""
        super().cluster_rank(op)
        if self.cluster_size == 1:
            return "0"
        self.cluster_dims = f"__cluster_dims__({self.cluster_size}, 1, 1) "
        return f"(int){self.require('iron_cluster_rank', H.CLUSTER_RANK)}()"

    def cluster_sync(self, op: Op) -> list[str]:
        """``barrier.cluster`` arrive (release) and wait (acquire) by every thread of the cluster's groups."""
        if self.cluster_size == 1:
            return super().cluster_sync(op)
        return ['asm volatile("barrier.cluster.arrive.release;\\nbarrier.cluster.wait.acquire;" ::: "memory");']

    def warpgroup_commit(self, op: Op) -> list[str]:
        """The end of an ``mma_wg``: commit its group and wait, unless ``commit=False`` leaves the group open for
        the next one's multiplies."""
        if op.attrs.get("commit", True) is False:
            return []
        return ['asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");', *self.warpgroup_wait(op)]

    def warpgroup_wait(self, op: Op) -> list[str]:
        return [f'asm volatile("wgmma.wait_group.sync.aligned {op.attrs["pending"]};" ::: "memory");']

    def barrier(self) -> str:
        """``__syncthreads``; in a kernel with ``mma_wg`` or tile stores first a proxy fence, so shared-memory
        writes made before the barrier (stores, landed ``cp.async`` copies) are visible to ``wgmma``'s and
        the tile stores' reads, which go through the async proxy (PTX ISA: accesses across proxies need a
        fence)."""
        if self.printer is not None and self.printer.uses_async_proxy:
            return f"{self.require('iron_async_proxy_barrier', H.ASYNC_PROXY_BARRIER)}()"
        return "__syncthreads()"

    def shuffle(self, value: str, lane: str) -> str:
        return f"__shfl_sync(__activemask(), {value}, {lane})"

    def active_mask(self) -> tuple[str, str, str]:
        return "__activemask()", "unsigned int", "0xffffffffu"

    def shuffle_from(self, mask: str, value: str, lane: str) -> str:
        return f"__shfl_sync({mask}, {value}, {lane})"

    def shuffle_xor(self, mask: str, value: str, offset: str) -> str:
        return f"__shfl_xor_sync({mask}, {value}, {offset})"

    def prelude(self, parts: ModuleParts) -> list[str]:
        used = H.used_dtypes(parts.kernel)
        lines = H.banner(parts, "CUDA C++ (NVRTC)", self.profile)
        if D.f16 in used:
            lines.append("#include <cuda_fp16.h>")
        if D.bf16 in used:
            lines.append("#include <cuda_bf16.h>")
        if D.f16 in used or D.bf16 in used:
            lines.append("")
        return lines + self.helper_lines()


class HipDialect(CxxDialect):
    target = "hip"
    language = "hip"
    memcpy = "__builtin_memcpy"
    BF16_BITS = ("__uint_as_float((unsigned int)({}) << 16)", "(unsigned short)(__float_as_uint({}) >> 16)",
                 H.ROUND_BF16)

    def narrow_names(self) -> dict[D.DType, str]:
        # bf16 remains only as the storage of tensors that fragments access (legalize.py).
        return {D.f16: "_Float16", D.bf16: "unsigned short"}

    def float_literal(self, text: str, dt: D.DType) -> str:
        return f"(_Float16){text}f" if dt == D.f16 else super().float_literal(text, dt)

    def from_f32(self, text: str, dt: D.DType) -> str:
        return f"(_Float16){text}"

    def narrow_from_bits(self, bits: str, dt: D.DType) -> str:
        return f"__builtin_bit_cast(_Float16, {bits})"

    def vote(self, kind: str, pred: str) -> str:
        return f"__{kind}({pred}) != 0"

    def frag_subgroup_sync(self) -> list[str]:
        # A wavefront runs in lock step; the barrier keeps the compiler from moving LDS accesses across it.
        return ["__builtin_amdgcn_fence(__ATOMIC_RELEASE, \"wavefront\");", "__builtin_amdgcn_wave_barrier();",
                "__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, \"wavefront\");"]

    def frag_native_mma(self, combo: Any, out: str, a: Operand, b: Operand, c: Operand) -> list[str]:
        """MFMA (CDNA) or WMMA (RDNA3) through clang's builtin, on registers in the unit's layout.

        Register slot i is element i of the builtin's vector operand (the even slot in the low half of
        a VGPR, as the ISA numbers 16-bit items).  The f32 registers hold values of their dtype, so the
        16-bit conversions are exact: f16 by a cast, bf16 by taking the upper half of the f32 bits.
        """
        builtin, immediates = _AMD_MATRIX_BUILTINS[combo.instruction]
        strategy = get_strategy(self.profile.mma_strategy)
        words = {role: strategy.layout(role, combo.shape, dt).registers_per_lane
                 for role, dt in (("a", combo.in_dtype), ("b", combo.in_dtype), ("acc", combo.acc_dtype))}
        ind = self.indent
        lines = [f"{{  // {combo.instruction}: register slot i is element i of each vector operand"]
        for name, operand, role in (("iron_mma_a", a, "a"), ("iron_mma_b", b, "b"), ("iron_mma_c", c, "acc")):
            dt = combo.acc_dtype if role == "acc" else combo.in_dtype
            vector = self._amd_vector(dt, words[role])
            elements = [self._amd_pack(f"{operand.text}[{i}]", dt) for i in range(words[role])]
            lines += _wrapped(f"{ind}const {vector} {name} = {{", elements, "};", ind * 3)
        args = ", ".join(["iron_mma_a", "iron_mma_b", "iron_mma_c", *map(str, immediates)])
        lines.append(f"{ind}const {self._amd_vector(combo.acc_dtype, words['acc'])} iron_mma_d = {builtin}({args});")
        lines += [f"{ind}{out}[{i}] = iron_mma_d[{i}];" for i in range(words["acc"])]
        return [*lines, "}"]

    def _amd_vector(self, dt: D.DType, width: int) -> str:
        """The clang vector type (``ext_vector_type``) a matrix builtin takes for ``width`` values of ``dt``."""
        name = f"iron_{dt.name}x{width}"
        bits = " (bf16 bits)" if dt == D.bf16 else ""
        text = (f"// {width} {dt} values{bits}: an operand of AMD's matrix builtins.\n"
                f"typedef {_AMD_VECTOR_ELEMENT[dt]} {name} __attribute__((ext_vector_type({width})));")
        return self.require(name, text)

    @staticmethod
    def _amd_pack(register: str, dt: D.DType) -> str:
        if dt == D.f16:
            return f"(_Float16){register}"
        if dt == D.bf16:  # exact: the register holds a bf16 value
            return f"(short)(__float_as_uint({register}) >> 16)"
        return register

    def shuffle(self, value: str, lane: str) -> str:
        return f"__shfl({value}, {lane})"

    def active_mask(self) -> tuple[str, str, str]:
        if self.lane_width == 64:
            return "__ballot(1)", "unsigned long long", "0xffffffffffffffffull"
        return "(unsigned int)__ballot(1)", "unsigned int", "0xffffffffu"

    def shuffle_from(self, mask: str, value: str, lane: str) -> str:
        return f"__shfl({value}, {lane})"

    def shuffle_xor(self, mask: str, value: str, offset: str) -> str:
        return f"__shfl_xor({value}, {offset})"

    def prelude(self, parts: ModuleParts) -> list[str]:
        lines = H.banner(parts, "HIP C++ (hipRTC / hipcc)", self.profile)
        lines += ["#ifndef __HIPCC_RTC__", "#include <hip/hip_runtime.h>", "#endif", ""]
        return lines + self.helper_lines()


def _wrapped(head: str, items: list[str], tail: str, indent: str, width: int = 110) -> list[str]:
    """``head`` + comma-separated ``items`` + ``tail``, wrapped to ``width`` with continuation lines at ``indent``."""
    lines, line = [], head
    for n, item in enumerate(items):
        piece = item + (", " if n + 1 < len(items) else "")
        if len(line) + len(piece.rstrip()) > width and line.strip() and not line.endswith("{"):
            lines.append(line.rstrip())
            line = indent
        line += piece
    lines.append(line + tail)
    return lines


def _zero_fill(v: Any) -> bool:
    """Whether ``v`` is a fragment filled with the constant 0 (``frag_acc``'s default)."""
    fill = v.owner
    if fill is None or fill.opcode != "frag_fill":
        return False
    value = fill.operands[0].owner
    return value is not None and value.opcode == "const" and value.attrs["value"] == 0


def _tma_coords(op: Op, row: Operand, col: Operand, outer: list[Operand]) -> list[str]:
    """A tile copy's or store's coordinates as ``cp.async.bulk.tensor`` operands, innermost axis first (the
    column, the row, then the outer axes from the innermost out)."""
    coords = outer[len(op.attrs.get("box_outer", ())):]
    return [f'"r"((int)({v.text}))' for v in (col, row, *reversed(coords))]


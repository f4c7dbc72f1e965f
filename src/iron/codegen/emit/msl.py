"""Metal Shading Language 3.1 compute kernels.

``kernel void`` with buffer ``i`` as a ``device`` pointer at ``[[buffer(i)]]``
(``device const`` when only read) and the parameter block as
``constant IronParams& p [[buffer(len(tensors))]]``; the thread-position
builtins the body uses arrive as attributed parameters.  Shared arrays are
``threadgroup`` arrays declared at the top of the kernel body.  f16 is
``half`` and bf16 ``bfloat`` (MSL 3.1); vectors of 2 and 4 are Metal's
vector types, reached by casting a device or threadgroup pointer, and
vectors of 8 are ``iron_vec<T, 8>``.

``group_size`` reads ``dispatch_threads_per_threadgroup`` (the declared group
size, also in a partial edge group).  The runtime compiles with fast math
off, since fast math lets the compiler ignore NaN and infinities.
"""

from __future__ import annotations

from typing import Any

from ...core import dtypes as D
from ...core.ir import Op
from ...core.types import FragmentType, TensorType, VectorType
from . import portable_math
from .cstyle import ModuleParts, Operand
from .cxx_helpers import IRON_VEC, banner, params_struct
from .dialect import Dialect
from .fragments import static_scratch_floats

_NAMES = {D.f16: "half", D.bf16: "bfloat", D.f32: "float", D.i8: "char", D.i16: "short", D.i32: "int",
          D.i64: "long", D.u8: "uchar", D.u16: "ushort", D.u32: "uint", D.u64: "ulong", D.bool_: "bool"}
_INT_SUFFIX = {D.i32: "", D.u32: "u", D.i64: "l", D.u64: "ul"}
_INT_MIN = {D.i32: "(-2147483647 - 1)", D.i64: "(-9223372036854775807l - 1l)"}
_MATH = {"exp": "exp", "exp2": "exp2", "fast_exp2": "exp2",
         "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt",
         "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh",
         "cosh": "cosh", "tanh": "tanh", "floor": "floor", "ceil": "ceil", "round": "rint", "trunc": "trunc",
         "abs": "fabs", "pow": "pow", "atan2": "atan2", "rem": "fmod", "min": "fmin", "max": "fmax", "fma": "fma"}
_HELPER_MATH = {"log1p": "iron_log1p", "expm1": "iron_expm1", "erf": "iron_erf"}
#: (attribute name, parameter type, builtin attribute), in signature order.
_BUILTINS = {
    "iron_gid": ("uint3", "thread_position_in_grid"),
    "iron_tid": ("uint3", "thread_position_in_threadgroup"),
    "iron_tindex": ("uint", "thread_index_in_threadgroup"),
    "iron_group": ("uint3", "threadgroup_position_in_grid"),
    "iron_group_size": ("uint3", "dispatch_threads_per_threadgroup"),
    "iron_num_groups": ("uint3", "threadgroups_per_grid"),
    "iron_lane": ("uint", "thread_index_in_simdgroup"),
    "iron_simd_width": ("uint", "threads_per_simdgroup"),
    "iron_simd_group": ("uint", "simdgroup_index_in_threadgroup"),
    "iron_num_simd_groups": ("uint", "simdgroups_per_threadgroup"),
}
_ATOMIC_TYPE = {D.i32: "atomic_int", D.u32: "atomic_uint", D.f32: "atomic_float"}
_ATOMIC_FN = {"atomic_add": "atomic_fetch_add_explicit", "atomic_max": "atomic_fetch_max_explicit",
              "atomic_min": "atomic_fetch_min_explicit", "atomic_xchg": "atomic_exchange_explicit"}


class MslDialect(Dialect):
    target = "metal"
    language = "msl"
    reserved = frozenset({"metal", "simd_sum", "half", "bfloat", "uint3", "device", "threadgroup", "constant",
                          "thread", "kernel", "vertex", "fragment", "as_type", "iron_vec"})
    SCALAR_NAMES = _NAMES

    def __init__(self, profile: Any, kernel_name: str) -> None:
        super().__init__(profile, kernel_name)
        self.builtins: set[str] = {"iron_gid"}

    # ------------------------------------------------------------ types and literals

    def vector_type(self, dt: D.DType, width: int) -> str:
        if width in (2, 4):
            return f"{_NAMES[dt]}{width}"
        self.require("iron_vec", IRON_VEC)
        return f"iron_vec<{_NAMES[dt]}, {width}>"

    def vector_zero(self, t: VectorType) -> str:
        return f"{self.vector_type(t.dtype, t.width)}(0)" if t.width in (2, 4) else "{}"

    def int_literal(self, v: int, dt: D.DType) -> str:
        if dt in _INT_MIN and v == D.min_value(dt):
            return _INT_MIN[dt]
        if dt in _INT_SUFFIX:
            return f"{v}{_INT_SUFFIX[dt]}"
        return f"{_NAMES[dt]}({v})"

    def float_literal(self, text: str, dt: D.DType) -> str:
        if dt in (D.f16, D.bf16):  # exact: the IR holds the value already rounded to the type
            return f"{_NAMES[dt]}({text}f)"
        return f"{text}f"

    def nonfinite_literal(self, bits: int, dt: D.DType) -> str:
        if dt == D.f32:
            return f"as_type<float>(0x{bits:08x}u)"
        return f"as_type<{_NAMES[dt]}>(ushort(0x{bits:04x}))"

    # ------------------------------------------------------------ conversions

    def convert(self, x: Operand, src: D.DType, dst: D.DType) -> str:
        if src == dst:
            return x.text
        if dst.is_bool:
            return f"{x.atom} != {self.literal(0, src)}"
        if {src, dst} == {D.f16, D.bf16}:  # MSL converts neither way directly; through float is exact, one rounding
            return f"{_NAMES[dst]}(float({x.text}))"
        return f"{_NAMES[dst]}({x.text})"

    def bitcast(self, x: Operand, src: D.DType, dst: D.DType) -> str:
        if dst.is_bool:
            return f"{x.atom} != {self.literal(0, src)}"
        if src.is_bool:
            return f"{_NAMES[dst]}({x.text})"
        return f"as_type<{_NAMES[dst]}>({x.text})"

    # ------------------------------------------------------------ arithmetic

    def math(self, name: str, dt: D.DType) -> str:
        if name in _HELPER_MATH:
            text = portable_math.helper_text(_HELPER_MATH[name], "f", "as_type<int>",
                                             "as_type<float>(0x7f800000u)", "as_type<float>(0x7fc00000u)")
            return self.require(_HELPER_MATH[name], text)
        return _MATH[name]

    # ------------------------------------------------------------ vectors and memory

    def vec_make(self, t: VectorType, args: list[Operand]) -> str:
        items = ", ".join(a.text for a in args)
        return f"{self.vector_type(t.dtype, t.width)}({items})" if t.width in (2, 4) else "{{" + items + "}}"

    def vec_extract(self, v: Operand, index: int) -> str:
        return f"{v.atom}[{index}]" if v.type.width in (2, 4) else f"{v.atom}.e[{index}]"

    def _space(self, t: Operand) -> str:
        tt = t.type
        if isinstance(tt, TensorType) and tt.space == "shared":
            return "threadgroup"
        return "device const" if self.printer.tensor_access.get(t.text) == "read" else "device"

    def vload(self, t: Operand, i: Operand, width: int) -> str:
        vt = self.vector_type(t.dtype, width)
        if width in (2, 4):
            return f"*(({self._space(t)} {vt}*)({t.text} + {i.atom}))"
        # iron_vec is a struct: build it from the elements (the compiler merges adjacent loads).
        return "{{" + ", ".join(f"{t.text}[{self._element(i, k)}]" for k in range(width)) + "}}"

    def vstore(self, t: Operand, i: Operand, v: Operand) -> str:
        width = v.type.width
        vt = self.vector_type(t.dtype, width)
        if width in (2, 4):
            return f"*(({self._space(t)} {vt}*)({t.text} + {i.atom})) = {v.text}"
        for k in range(width):
            self.printer.line(f"{t.text}[{self._element(i, k)}] = {v.atom}.e[{k}];")
        return ""

    @staticmethod
    def _element(i: Operand, k: int) -> str:
        if k == 0:
            return i.text
        return str(i.const + k) if i.is_const else f"{i.atom} + {k}"

    def barrier(self) -> str:
        return "threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device)"

    def fence(self, op: Op) -> str:
        raise self.unsupported(op, "fence(): MSL 3.1 orders device memory only within a threadgroup (a "
                                   "device-scope atomic_thread_fence needs MSL 3.2)")

    def frag_subgroup_sync(self) -> list[str]:
        return ["simdgroup_barrier(mem_flags::mem_threadgroup);"]

    # simdgroup_matrix<T, 8, 8>: whole-matrix values (fragments.py, metal_simdgroup_8x8)

    def frag_matrix_type(self, t: FragmentType) -> str:
        return f"simdgroup_matrix<{_NAMES[t.dtype]}, {t.rows}, {t.cols}>"

    def frag_matrix_fill(self, t: FragmentType, value: str) -> str:
        return f"make_filled_simdgroup_matrix<{_NAMES[t.dtype]}, {t.rows}, {t.cols}>({value})"

    def frag_matrix_load(self, name: str, t: Operand, base: Operand, ld: Operand, transpose: bool) -> str:
        # Column layout: element (r, c) at base + c*ld + r is the transpose of a row-major read.
        return (f"simdgroup_load({name}, {t.text} + {base.atom}, ulong({ld.text}), ulong2(0, 0), "
                f"{'true' if transpose else 'false'})")

    def frag_matrix_store(self, frag: str, t: Operand, base: Operand, ld: Operand, transpose: bool) -> str:
        return (f"simdgroup_store({frag}, {t.text} + {base.atom}, ulong({ld.text}), ulong2(0, 0), "
                f"{'true' if transpose else 'false'})")

    def frag_matrix_mma(self, out: str, a: str, b: str, c: str) -> str:
        return f"simdgroup_multiply_accumulate({out}, {a}, {b}, {c})"

    # ------------------------------------------------------------ indices

    def global_id_unsigned(self, axis: int) -> str:
        return f"iron_gid.{'xyz'[axis]}"

    def flat_thread_index(self) -> str:
        self.builtins.add("iron_tindex")
        return "int(iron_tindex)"

    def index(self, code: str, axis: int | None) -> str:
        c = "xyz"[axis] if axis is not None else ""
        if code == "grid_size":
            return f"int(p.iron_grid_{c})"
        builtin, component = {
            "program_id": ("iron_gid", c), "thread_id": ("iron_tid", c), "group_id": ("iron_group", c),
            "group_size": ("iron_group_size", c), "num_groups": ("iron_num_groups", c),
            "lane_id": ("iron_lane", ""), "simd_size": ("iron_simd_width", ""),
            "simd_group_id": ("iron_simd_group", ""), "num_simd_groups": ("iron_num_simd_groups", ""),
        }[code]
        self.builtins.add(builtin)
        return f"int({builtin}{'.' + component if component else ''})"

    # ------------------------------------------------------------ atomics

    def atomic(self, op: Op, args: list[Operand]) -> str:
        t, i, *vals = args
        dt = t.dtype
        space = self._space(t)
        texts = [v.text for v in vals]
        if op.opcode == "atomic_cas" or (dt.is_float and op.opcode in ("atomic_max", "atomic_min")):
            word = "atomic_uint" if dt.is_float else _ATOMIC_TYPE[dt]
            kind = op.opcode[len("atomic_"):]
            name = self.require(f"iron_atomic_{kind}_{dt.name}_{space.split()[0]}",
                                _atomic_loop(self, kind, dt, space.split()[0]))
            return f"{name}(({space.split()[0]} {word}*)({t.text} + {i.atom}), {', '.join(texts)})"
        ptr = f"({space.split()[0]} {_ATOMIC_TYPE[dt]}*)({t.text} + {i.atom})"
        return f"{_ATOMIC_FN[op.opcode]}({ptr}, {texts[0]}, memory_order_relaxed)"

    # ------------------------------------------------------------ subgroups

    def frag_lane_xor(self, value: str, mask: int) -> str:
        return f"simd_shuffle_xor({value}, ushort({mask}))"

    def subgroup(self, op: Op, args: list[Operand]) -> str:
        code = op.opcode
        if code in ("simd_shuffle", "simd_broadcast"):
            return f"{code}({args[0].text}, ushort({args[1].text}))"
        return f"{code}({args[0].text})"

    # ------------------------------------------------------------ module

    def module(self, parts: ModuleParts) -> str:
        abi = parts.abi
        lines = banner(parts, "Metal Shading Language 3.1", self.profile)
        lines += ["#include <metal_stdlib>", "using namespace metal;", ""]
        for text in self.helpers.values():
            lines += [*text.split("\n"), ""]
        lines += [*params_struct(self, abi), ""]
        params = []
        for (name, value), arg in zip(parts.tensors, abi.tensors):
            space = "device const" if arg.access == "read" else "device"
            params.append(f"{space} {_NAMES[value.type.dtype]}* {name} [[buffer({arg.binding})]]")
        params.append(f"constant IronParams& p [[buffer({abi.params_binding})]]")
        for name, (ty, attr) in _BUILTINS.items():
            if name in self.builtins:
                params.append(f"{ty} {name} [[{attr}]]")
        lines.append(f"kernel void {abi.entry}(")
        lines += [f"{self.indent * 2}{p}{',' if n + 1 < len(params) else ') {'}" for n, p in enumerate(params)]
        for s in parts.shared:
            align = f"alignas({s.align}) " if s.align > s.dtype.itemsize else ""
            lines.append(f"{self.indent}{align}threadgroup {_NAMES[s.dtype]} {s.name}[{s.count}];")  # alignas first, as C++ wants
        if "mma_scratch" in parts.extra:
            count = static_scratch_floats(parts, self.profile)
            lines.append(f"{self.indent}threadgroup float {parts.extra['mma_scratch'].name}[{count}];")
        lines += parts.body
        lines.append("}")
        return "\n".join(lines) + "\n"


def _atomic_loop(d: MslDialect, kind: str, dt: D.DType, space: str) -> str:
    """A compare-and-swap loop: float max/min (NaN ignored like fmax/fmin) or a strong CAS (any type)."""
    t = _NAMES[dt]
    word_t = "uint" if dt.is_float else t
    atomic_t = "atomic_uint" if dt.is_float else _ATOMIC_TYPE[dt]
    to_word = (lambda x: f"as_type<uint>({x})") if dt.is_float else (lambda x: x)
    from_word = (lambda x: f"as_type<float>({x})") if dt.is_float else (lambda x: x)
    ind = d.indent
    exchange = ["if (atomic_compare_exchange_weak_explicit(address, &old, desired,",
                f"{ind * 4}memory_order_relaxed, memory_order_relaxed)) {{"]
    if kind == "cas":
        return "\n".join([
            f"// atomic_cas on {dt}: compares bit patterns; retries spurious failures of the weak exchange.",
            f"{t} iron_atomic_cas_{dt.name}_{space}({space} {atomic_t}* address, {t} expected, {t} value) {{",
            f"{ind}const {word_t} desired = {to_word('value')};",
            f"{ind}{word_t} old = {to_word('expected')};",
            f"{ind}while (true) {{",
            *(f"{ind * 2}{text}" for text in exchange),
            f"{ind * 3}break;", f"{ind * 2}}}",
            f"{ind * 2}if (old != {to_word('expected')}) {{",
            f"{ind * 3}break;", f"{ind * 2}}}", f"{ind}}}",
            f"{ind}return {from_word('old')};", "}"])
    fn = "fmax" if kind == "max" else "fmin"
    return "\n".join([
        f"// atomic_{kind} on {dt}: NaN is ignored, as {fn} does; returns the old value.",
        f"{t} iron_atomic_{kind}_{dt.name}_{space}({space} {atomic_t}* address, {t} value) {{",
        f"{ind}uint old = atomic_load_explicit(address, memory_order_relaxed);",
        f"{ind}while (true) {{",
        f"{ind * 2}const uint desired = as_type<uint>({fn}(as_type<float>(old), value));",
        *(f"{ind * 2}{text}" for text in exchange),
        f"{ind * 3}return as_type<float>(old);", f"{ind * 2}}}", f"{ind}}}", "}"])

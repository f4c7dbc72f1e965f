"""GLSL 4.50 compute shaders for Vulkan (compiled to SPIR-V by glslc).

* One SPIR-V serves every group size: ``local_size_{x,y,z}_id = 0, 1, 2``
  are specialization constants the runtime sets per pipeline.
* Buffer ``i`` is ``layout(std430, set = 0, binding = i) buffer``, ``readonly``
  or ``writeonly`` from the ABI's access.  Vector accesses of width 2 and 4
  go through a second, aliased declaration of the same binding with a vector
  element type; atomics that need a compare-and-swap on float bits go
  through an aliased ``uint`` declaration.  Width-8 vectors (no GLSL type)
  are arrays, loaded and stored element by element.
* The parameter block is the ``push_constant`` block ``p``, with the ABI's
  offsets spelled out.
* Only the extensions a kernel needs are enabled.
* bool buffers and bf16 were legalised away (u8 and u16 bits); f16 is
  ``float16_t``, used for storage and conversions only (arithmetic runs in
  f32 after legalisation).
* With ``loop_guard`` (for a driver that ends long loops early: lavapipe), a
  shader that runs loops reports the ones the driver cut short in a status
  buffer bound after the kernel's own (:mod:`.glsl_loops`).
"""

from __future__ import annotations

import math
from typing import Any

from ...core import dtypes as D
from ...core.ir import Op
from ...core.types import FragmentType, ScalarType, TensorType, VectorType
from . import portable_math
from .cstyle import ModuleParts, Operand
from .cxx_helpers import banner, used_dtypes
from .dialect import Dialect
from .glsl_loops import LOOP_CHECK, LOOP_CHECK_NAME, check_unguarded, loop_guard_globals, writes_loops
from .names import field_ident

#: bf16 remains only as the storage of tensors that fragments access (legalize.py).
#: ``frag_binary``'s fn as a GLSL operator on cooperative matrices.
_FRAG_SIGNS = {"add": "+", "sub": "-", "mul": "*"}
_NAMES = {D.bf16: "uint16_t", D.f16: "float16_t", D.f32: "float", D.f64: "double", D.i8: "int8_t",
          D.i16: "int16_t", D.i32: "int", D.i64: "int64_t", D.u8: "uint8_t", D.u16: "uint16_t", D.u32: "uint", D.u64: "uint64_t", D.bool_: "bool"}
_VEC_PREFIX = {D.f16: "f16vec", D.f32: "vec", D.f64: "dvec", D.i8: "i8vec", D.i16: "i16vec", D.i32: "ivec",
               D.i64: "i64vec", D.u8: "u8vec", D.u16: "u16vec", D.u32: "uvec", D.u64: "u64vec", D.bool_: "bvec"}
_INT_SUFFIX = {D.i32: "", D.u32: "u", D.i64: "l", D.u64: "ul"}
_INT_MIN = {D.i32: "(-2147483647 - 1)", D.i64: "(-9223372036854775807l - 1l)"}
_MATH = {"exp": "exp", "exp2": "exp2", "fast_exp2": "exp2",
         "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "inversesqrt",
         "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan",
         "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "floor": "floor", "ceil": "ceil", "round": "roundEven",
         "trunc": "trunc", "abs": "abs", "atan2": "atan", "fma": "fma"}
_HELPER_MATH = {"log1p": "iron_log1p", "expm1": "iron_expm1", "erf": "iron_erf", "pow": "iron_pow", "atan2": "iron_atan2",
                "rem": "iron_fmod", "min": "iron_fmin", "max": "iron_fmax"}
#: What GLSL offers on double: no transcendental functions.
_F64_MATH = frozenset({"sqrt", "rsqrt", "floor", "ceil", "round", "trunc", "abs", "fma"})
#: (from, to) -> GLSL bit-cast function.
_BITCASTS = {(D.f32, D.i32): "floatBitsToInt", (D.f32, D.u32): "floatBitsToUint", (D.i32, D.f32): "intBitsToFloat",
             (D.u32, D.f32): "uintBitsToFloat", (D.f64, D.i64): "doubleBitsToInt64",
             (D.f64, D.u64): "doubleBitsToUint64", (D.i64, D.f64): "int64BitsToDouble",
             (D.u64, D.f64): "uint64BitsToDouble", (D.f16, D.i16): "float16BitsToInt16",
             (D.f16, D.u16): "float16BitsToUint16", (D.i16, D.f16): "int16BitsToFloat16",
             (D.u16, D.f16): "uint16BitsToFloat16"}
_COOPMAT_USE = {"a": "gl_MatrixUseA", "b": "gl_MatrixUseB", "acc": "gl_MatrixUseAccumulator"}
_ATOMIC = {"atomic_add": "atomicAdd", "atomic_max": "atomicMax", "atomic_min": "atomicMin",
           "atomic_xchg": "atomicExchange", "atomic_cas": "atomicCompSwap"}
_SUBGROUP = {"simd_sum": ("subgroupAdd", "arithmetic"), "simd_max": ("subgroupMax", "arithmetic"),
             "simd_min": ("subgroupMin", "arithmetic"), "simd_any": ("subgroupAny", "vote"),
             "simd_all": ("subgroupAll", "vote")}


_ROUND_BF16 = """\
// f32 rounded to the nearest bf16 (ties to even; NaN stays a quiet NaN of the same sign), as f32 again.
float iron_round_bf16(float x) {
  const uint u = floatBitsToUint(x);
  if (isnan(x)) {
    return uintBitsToFloat((u | 0x00400000u) & 0xffff0000u);
  }
  return uintBitsToFloat((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}"""


_ROUND_F16 = """\
// f32 rounded to the nearest f16 value (ties to even; past 65504 to infinity; f16 subnormals
// in steps of 2^-24), as f32: converting it to float16_t is then exact, whatever the driver
// does with a float -> half -> float round trip.
float iron_round_f16(float x) {
  const uint u = floatBitsToUint(x);
  uint a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) {
    return x;
  }
  if (a >= 0x477ff000u) {
    return uintBitsToFloat((u & 0x80000000u) | 0x7f800000u);
  }
  if (a < 0x38800000u) {
    precise float steps = roundEven(x * 16777216.0);
    return steps * 5.9604644775390625e-8;
  }
  a = (a + 0x00000fffu + ((a >> 13) & 1u)) & 0xffffe000u;
  return uintBitsToFloat((u & 0x80000000u) | a);
}"""


#: Arithmetic with a literal zero, spelled without float arithmetic: drivers fold ``x * 0.0`` to 0, ``x + 0.0``
#: to ``x`` and ``0.0 / x`` to 0 as if every value were finite and zeros unsigned, even where the shader asks
#: for IEEE behaviour (lavapipe's gallivm does), so Iron writes out the IEEE result instead.
_ZERO_HELPERS = {
    "iron_times_zero": """\
// x * z for a zero z of sign zsign (0 or 0x80000000u): NaN for NaN and infinities, else a zero of the product's sign.
float iron_times_zero(float x, uint zsign) {
  if (isnan(x) || isinf(x)) {
    return uintBitsToFloat(0x7fc00000u);
  }
  return uintBitsToFloat((floatBitsToUint(x) & 0x80000000u) ^ zsign);
}""",
    "iron_over_zero": """\
// x / z for a zero z of sign zsign: NaN for NaN and zeros, else an infinity of the quotient's sign.
float iron_over_zero(float x, uint zsign) {
  if (isnan(x) || x == 0.0) {
    return uintBitsToFloat(0x7fc00000u);
  }
  return uintBitsToFloat(((floatBitsToUint(x) & 0x80000000u) ^ zsign) | 0x7f800000u);
}""",
    "iron_zero_over": """\
// z / x for a zero z of sign zsign: NaN for NaN and zeros, else a zero of the quotient's sign.
float iron_zero_over(uint zsign, float x) {
  if (isnan(x) || x == 0.0) {
    return uintBitsToFloat(0x7fc00000u);
  }
  return uintBitsToFloat((floatBitsToUint(x) & 0x80000000u) ^ zsign);
}""",
    "iron_plus_zero": """\
// x + 0.0: x, but -0 + 0 is +0.
float iron_plus_zero(float x) {
  return floatBitsToUint(x) == 0x80000000u ? 0.0 : x;
}""",
    "iron_zero_minus": """\
// 0.0 - x: -x, but 0 - 0 is +0 for either zero.
float iron_zero_minus(float x) {
  return (floatBitsToUint(x) & 0x7fffffffu) == 0u ? 0.0 : -x;
}""",
}


class GlslDialect(Dialect):
    target = "spirv"
    language = "glsl"
    reserved = frozenset({"float16_t", "int8_t", "int16_t", "int64_t", "uint8_t", "uint16_t", "uint64_t",
                          "double", "uint", "dvec4", "sampler", "image"})
    SCALAR_NAMES = _NAMES
    BF16_BITS = ("uintBitsToFloat(uint({}) << 16)", "uint16_t(floatBitsToUint({}) >> 16)", _ROUND_BF16)

    def __init__(self, profile: Any, kernel_name: str, loop_guard: bool = False) -> None:
        super().__init__(profile, kernel_name)
        self.extensions: set[str] = set()
        #: tensor name -> {element type of an aliased view: view name}
        self.views: dict[str, dict[str, str]] = {}
        #: Whether the kernel has a fence() (its written buffers are then declared coherent).
        self.fenced = False
        self.loop_guard = loop_guard
        #: The loop guard's status buffer binding, where this kernel has one (set in :meth:`attach`).
        self.loop_status_binding: int | None = None

    def attach(self, printer: Any) -> None:
        super().attach(printer)
        if self.loop_guard and writes_loops(printer.kernel):
            self.loop_status_binding = max((t.binding for t in printer.abi.tensors), default=-1) + 1
            printer.exit_lines = [f"{self.require(LOOP_CHECK_NAME, LOOP_CHECK)}();"]

    # ------------------------------------------------------------ types and literals

    def qualifier(self, t: Any) -> str:
        """``precise`` on every float local: GLSL lets a driver fuse ``a*b + c`` into one rounding unless the
        result is precise, and NVIDIA's does, so without it results would depend on the driver.  Iron
        contracts only where the pipeline made an explicit ``fma`` (the ``fp_contract`` option)."""
        dt = getattr(t, "dtype", None)
        return "precise " if isinstance(t, (ScalarType, VectorType)) and dt is not None and dt.is_float else ""

    def vector_type(self, dt: D.DType, width: int) -> str:
        return f"{_VEC_PREFIX[dt]}{width}" if width in (2, 4) else f"{_NAMES[dt]}[{width}]"

    def vector_zero(self, t: VectorType) -> str:
        zero = self.literal(False if t.dtype.is_bool else 0, t.dtype)
        if t.width in (2, 4):
            return f"{self.vector_type(t.dtype, t.width)}({zero})"
        return f"{self.vector_type(t.dtype, t.width)}({', '.join([zero] * t.width)})"

    def int_literal(self, v: int, dt: D.DType) -> str:
        if dt in _INT_MIN and v == D.min_value(dt):
            return _INT_MIN[dt]
        if dt in _INT_SUFFIX:
            return f"{v}{_INT_SUFFIX[dt]}"
        return f"{_NAMES[dt]}({v})"

    def float_literal(self, text: str, dt: D.DType) -> str:
        if dt == D.f64:
            return f"{text}lf"
        if dt == D.f16:
            return f"{text}hf"
        return text

    def nonfinite_literal(self, bits: int, dt: D.DType) -> str:
        if dt == D.f64:
            return f"uint64BitsToDouble({bits}ul)"
        if dt == D.f16:
            return f"uint16BitsToFloat16(uint16_t({bits}))"
        return f"uintBitsToFloat(0x{bits:08x}u)"

    # ------------------------------------------------------------ conversions

    def convert(self, x: Operand, src: D.DType, dst: D.DType) -> str:
        if src == dst:
            return x.text
        if dst.is_bool:
            return f"{x.atom} != {self.literal(0, src)}"
        if src.is_bool:
            return f"{x.atom} ? {self.literal(1, dst)} : {self.literal(0, dst)}"
        if dst == D.f16 and src == D.f32:
            # Round in software first: NVIDIA's driver folds float(float16_t(x)) to x, dropping the rounding.
            return f"float16_t({self.require('iron_round_f16', _ROUND_F16)}({x.text}))"
        return f"{_NAMES[dst]}({x.text})"

    def bitcast(self, x: Operand, src: D.DType, dst: D.DType) -> str:
        if dst.is_bool:
            return f"{x.atom} != {self.literal(0, src)}"
        if src.is_bool or (src.is_int and dst.is_int):
            return self.convert(x, src, dst)
        return f"{_BITCASTS[(src, dst)]}({x.text})"

    # ------------------------------------------------------------ arithmetic

    def math(self, name: str, dt: D.DType) -> str:
        if dt == D.f64:
            if name not in _F64_MATH:
                raise self.unsupported_math(name)
            return _MATH[name]
        if name == "fma" and "f64" in self.profile.features:
            # Vulkan may round fma() twice; with f64 the helper rounds once.
            self.extensions.add("GL_EXT_shader_explicit_arithmetic_types_int64")  # doubleBitsToUint64
            return self.require("iron_fma", portable_math.helper_text("iron_fma_f64", "", "", "", ""))
        if name == "sqrt" and "f64" in self.profile.features:
            return self._f64_helper("iron_sqrt")  # Vulkan's sqrt() may be ulps off
        if name in ("sin", "cos"):
            self.require("iron_sincos", portable_math.sincos_text("", "f64" in self.profile.features))
            return f"iron_{name}"
        if name in _HELPER_MATH:
            return self.math_helper(_HELPER_MATH[name])
        return _MATH[name]

    def _f64_helper(self, name: str) -> str:
        """A correctly rounded f32 operation through double (``portable_math``: ``iron_sqrt``, ``iron_div``)."""
        self.extensions.add("GL_EXT_shader_explicit_arithmetic_types_int64")  # uint64BitsToDouble
        self.require("iron_nearest_f32", portable_math.helper_text("iron_nearest_f32", "", "", "", ""))
        return self.require(name, portable_math.helper_text(f"{name}_f64", "", "", "", ""))

    def unsupported_math(self, name: str) -> Exception:
        from ...core.errors import UnsupportedOnTarget

        return UnsupportedOnTarget(f"'{name}' on f64: GLSL has no double-precision {name}", None,
                                   "compute it in f32", kernel=self.kernel_name)

    def math_helper(self, name: str) -> str:
        for needed in portable_math.REQUIRES.get(name, ()):
            self.math_helper(needed)
        text = portable_math.helper_text(name, "", "floatBitsToInt", "uintBitsToFloat(0x7f800000u)",
                                         "uintBitsToFloat(0x7fc00000u)")
        return self.require(name, text)

    def classify(self, code: str, a: Operand) -> str:
        if code == "isfinite":
            return f"!isnan({a.text}) && !isinf({a.text})"
        return f"{code}({a.text})"

    def float_binary(self, code: str, a: Operand, b: Operand) -> str:
        if code in ("min", "max") and a.dtype == D.f64:
            raise self.unsupported_math(code)  # the NaN-aware helpers are f32 only
        return f"{self.math(code, a.dtype)}({a.text}, {b.text})"

    def unary(self, code: str, a: Operand) -> str:
        if code == "atan" and a.dtype == D.f32:
            # Vulkan lets atan() be 4096 ulp off (lavapipe: ~50, and atan(-0) = +0): atan2(x, 1) is 4 ulp.
            return f"{self.math_helper('iron_atan2')}({a.text}, 1.0)"
        return super().unary(code, a)

    def binary(self, code: str, a: Operand, b: Operand) -> str:
        if a.dtype == D.f32 and code in ("add", "sub", "mul", "div") and a.is_const != b.is_const:
            exact = self._with_zero(code, a, b)
            if exact is not None:
                return exact
        if a.dtype == D.f32 and code == "div" and "f64" in self.profile.features:
            return self._division(a, b)
        return super().binary(code, a, b)

    def _division(self, a: Operand, b: Operand) -> str:
        """Correctly rounded ``a / b`` (Vulkan's ``/`` may be 2.5 ulp off): a product by a power of two whose
        inverse is a normal f32 is already exact (one correctly rounded multiply), anything else is ``iron_div``."""
        if b.is_const and math.isfinite(float(b.const)) and b.const != 0:
            mantissa, exponent = math.frexp(abs(float(b.const)))
            if mantissa == 0.5 and -126 <= 1 - exponent <= 127:
                return f"{a.atom} * {self.literal(1.0 / float(b.const), D.f32)}"
        return f"{self._f64_helper('iron_div')}({a.text}, {b.text})"

    def _with_zero(self, code: str, a: Operand, b: Operand) -> str | None:
        """IEEE ``a op b`` where one side is a literal zero (see ``_ZERO_HELPERS``); None otherwise."""
        zero, x = (a, b) if a.is_const else (b, a)
        if zero.const != 0:
            return None
        negative = math.copysign(1.0, float(zero.const)) < 0
        sign = "0x80000000u" if negative else "0u"
        if code == "mul":
            return f"{self._zero_helper('iron_times_zero')}({x.text}, {sign})"
        if code == "div":
            if zero is b:
                return f"{self._zero_helper('iron_over_zero')}({x.text}, {sign})"
            return f"{self._zero_helper('iron_zero_over')}({sign}, {x.text})"
        if code == "sub" and zero is a:  # -0 - x is exactly -x
            return f"-{x.atom}" if negative else f"{self._zero_helper('iron_zero_minus')}({x.text})"
        # x + z, z + x, x - z: x itself, but -0 + +0 is +0
        plus_positive_zero = negative == (code == "sub")
        return f"{self._zero_helper('iron_plus_zero')}({x.text})" if plus_positive_zero else x.text

    def _zero_helper(self, name: str) -> str:
        return self.require(name, _ZERO_HELPERS[name])

    def int_rem(self, a: Operand, b: Operand) -> str:
        if a.dtype.is_signed:  # GLSL's % is undefined for negative operands; truncate like C
            return f"{a.atom} - ({a.atom} / {b.atom}) * {b.atom}"
        return f"{a.atom} % {b.atom}"

    def index_text(self, i: Operand) -> str:
        return i.text if i.dtype in (D.i32, D.u32) else f"int({i.text})"

    # ------------------------------------------------------------ vectors and memory

    def vec_make(self, t: VectorType, args: list[Operand]) -> str:
        return f"{self.vector_type(t.dtype, t.width)}({', '.join(a.text for a in args)})"

    def vec_extract(self, v: Operand, index: int) -> str:
        return f"{v.atom}[{index}]"

    def _view(self, t: Operand, element: str, suffix: str) -> str:
        views = self.views.setdefault(t.text, {})
        return views.setdefault(element, f"{t.text}_{suffix}")

    def _element_index(self, i: Operand, k: int) -> str:
        if k == 0:
            return self.index_text(i)
        if i.is_const:
            return str(i.const + k)
        return f"{self.index_text(i)} + {k}"

    def _has_view(self, t: Operand, width: int) -> bool:
        return width in (2, 4) and isinstance(t.type, TensorType) and t.type.space == "global"

    def vload(self, t: Operand, i: Operand, width: int) -> str:
        vt = self.vector_type(t.dtype, width)
        if self._has_view(t, width):
            return f"{self._view(t, vt, f'v{width}')}[{self.index_text(i)} / {width}]"
        return f"{vt}({', '.join(f'{t.text}[{self._element_index(i, k)}]' for k in range(width))})"

    def vstore(self, t: Operand, i: Operand, v: Operand) -> str:
        width = v.type.width
        vt = self.vector_type(t.dtype, width)
        if self._has_view(t, width):
            return f"{self._view(t, vt, f'v{width}')}[{self.index_text(i)} / {width}] = {v.text}"
        for k in range(width):
            self.printer.line(f"{t.text}[{self._element_index(i, k)}] = {v.atom}[{k}];")
        return ""

    def tensor_size(self, t: Operand) -> str:
        return f"int(p.iron_size_{t.text})"

    # ------------------------------------------------------------ matrix fragments (fragments.py)

    def frag_subgroup_sync(self) -> list[str]:
        self.extensions.add("GL_KHR_shader_subgroup_basic")
        return ["subgroupMemoryBarrierShared();", "subgroupBarrier();"]

    # KHR cooperative matrices: whole-matrix values (fragments.py, vulkan_khr_cooperative_matrix)

    def frag_matrix_type(self, t: FragmentType) -> str:
        self.extensions.update(("GL_KHR_cooperative_matrix", "GL_KHR_memory_scope_semantics"))
        if t.dtype == D.f16:
            self.extensions.add("GL_EXT_shader_explicit_arithmetic_types_float16")
        use = _COOPMAT_USE[t.role]
        return f"coopmat<{_NAMES[t.dtype]}, gl_ScopeSubgroup, {t.rows}, {t.cols}, {use}>"

    def frag_matrix_fill(self, t: FragmentType, value: str) -> str:
        return f"{self.frag_matrix_type(t)}({_NAMES[t.dtype]}({value}))"

    def frag_matrix_load(self, name: str, t: Operand, base: Operand, ld: Operand, transpose: bool) -> str:
        return f"coopMatLoad({name}, {t.text}, {self._coopmat_place(base, ld, transpose)})"

    def frag_matrix_store(self, frag: str, t: Operand, base: Operand, ld: Operand, transpose: bool) -> str:
        return f"coopMatStore({frag}, {t.text}, {self._coopmat_place(base, ld, transpose)})"

    def frag_matrix_convert(self, op: Op, t: FragmentType, dt: D.DType, value: str) -> str:
        """The KHR conversion constructor (f32 to f16, rounding each element); bf16 tensors are 16-bit words here,
        which no cooperative matrix type holds."""
        if dt != D.f16:
            return super().frag_matrix_convert(op, t, dt, value)
        return f"{self.frag_matrix_type(FragmentType(t.role, dt, t.rows, t.cols))}({value})"

    def frag_matrix_binary(self, op: Op, t: FragmentType, x: str, y: str) -> str:
        """Cooperative matrices of one type add, subtract and multiply component-wise (GLSL_KHR_cooperative_matrix)."""
        return f"({x}) {_FRAG_SIGNS[op.attrs['fn']]} ({y})"

    def frag_matrix_mma(self, out: str, a: str, b: str, c: str) -> str:
        return f"{out} = coopMatMulAdd({a}, {b}, {c})"

    def _coopmat_place(self, base: Operand, ld: Operand, column: bool) -> str:
        """Element offset, stride (in elements of the buffer) and layout: (r, c) at base + r*ld + c, or + c*ld + r."""
        layout = "gl_CooperativeMatrixLayoutColumnMajor" if column else "gl_CooperativeMatrixLayoutRowMajor"
        return f"uint({base.text}), uint({ld.text}), {layout}"

    def scratch_decl(self, name: str, floats_per_subgroup: int) -> str:
        """The mma scratch, sized from the pipeline's group size (a specialization constant)."""
        w = self.profile.lane_width
        threads = "gl_WorkGroupSize.x * gl_WorkGroupSize.y * gl_WorkGroupSize.z"
        return f"shared float {name}[({threads} + {w - 1}u) / {w}u * {floats_per_subgroup}u];"

    def barrier(self) -> str:
        self.printer.line("groupMemoryBarrier();")
        return "barrier()"

    def fence(self, op: Op) -> str:
        """memoryBarrierBuffer() orders this invocation's buffer accesses; a kernel with a fence declares its
        written buffers ``coherent`` so other workgroups' reads see them (GLSL 4.50, 4.10 "Memory Qualifiers")."""
        self.fenced = True
        return "memoryBarrierBuffer()"

    # ------------------------------------------------------------ indices

    def global_id_unsigned(self, axis: int) -> str:
        return f"gl_GlobalInvocationID.{'xyz'[axis]}"

    def flat_thread_index(self) -> str:
        return "int(gl_LocalInvocationIndex)"

    def index(self, code: str, axis: int | None) -> str:
        c = "xyz"[axis] if axis is not None else ""
        builtin = {"program_id": f"gl_GlobalInvocationID.{c}", "thread_id": f"gl_LocalInvocationID.{c}",
                   "group_id": f"gl_WorkGroupID.{c}", "group_size": f"gl_WorkGroupSize.{c}",
                   "num_groups": f"gl_NumWorkGroups.{c}", "grid_size": f"p.iron_grid_{c}",
                   "lane_id": "gl_SubgroupInvocationID", "simd_size": "gl_SubgroupSize",
                   "simd_group_id": "gl_SubgroupID", "num_simd_groups": "gl_NumSubgroups"}[code]
        if builtin.startswith(("gl_Subgroup", "gl_NumSubgroups")):
            self.extensions.add("GL_KHR_shader_subgroup_basic")
        return f"int({builtin})"

    # ------------------------------------------------------------ atomics

    def atomic(self, op: Op, args: list[Operand]) -> str:
        t, i, *vals = args
        dt = t.dtype
        at = f"{t.text}[{self.index_text(i)}]"
        texts = [v.text for v in vals]
        if dt.bits == 64:
            self.extensions.add("GL_EXT_shader_atomic_int64")
        if dt.is_float and op.opcode in ("atomic_add", "atomic_xchg"):
            self.extensions.add("GL_EXT_shader_atomic_float")
        if not dt.is_float or op.opcode in ("atomic_add", "atomic_xchg"):
            return f"{_ATOMIC[op.opcode]}({at}, {', '.join(texts)})"
        # max/min/cas on f32: compare-and-swap on an aliased uint view of the buffer.
        bits = f"{self._view(t, 'uint', 'bits')}[{self.index_text(i)}]"
        if op.opcode == "atomic_cas":
            cmp, new = (f"floatBitsToUint({v})" for v in texts)
            return f"uintBitsToFloat(atomicCompSwap({bits}, {cmp}, {new}))"
        extreme = self.math("max" if op.opcode == "atomic_max" else "min", dt)
        old = self.printer.temp("old_bits")
        seen = self.printer.temp("seen_bits")
        ind = self.indent
        desired = f"floatBitsToUint({extreme}(uintBitsToFloat({old}), {texts[0]}))"
        for text in (f"uint {old} = {bits};", "while (true) {",
                     f"{ind}uint {seen} = atomicCompSwap({bits}, {old}, {desired});",
                     f"{ind}if ({seen} == {old}) {{", f"{ind}{ind}break;", f"{ind}}}", f"{ind}{old} = {seen};", "}"):
            self.printer.line(text)
        return f"uintBitsToFloat({old})"

    # ------------------------------------------------------------ subgroups

    def frag_lane_xor(self, value: str, mask: int) -> str:
        self.extensions.update(("GL_KHR_shader_subgroup_basic", "GL_KHR_shader_subgroup_shuffle"))
        return f"subgroupShuffleXor({value}, {mask}u)"

    def subgroup(self, op: Op, args: list[Operand]) -> str:
        code = op.opcode
        x = args[0]
        self.extensions.add("GL_KHR_shader_subgroup_basic")
        if x.type is not None and x.dtype.bits == 64:
            self.extensions.add("GL_EXT_shader_subgroup_extended_types_int64"
                                if x.dtype.is_int else "GL_EXT_shader_subgroup_extended_types_float64")
        if code in _SUBGROUP:
            fn, ext = _SUBGROUP[code]
            self.extensions.add(f"GL_KHR_shader_subgroup_{ext}")
            return f"{fn}({x.text})"
        lane = args[1]
        if code == "simd_broadcast" and lane.is_const:
            self.extensions.add("GL_KHR_shader_subgroup_ballot")
            return f"subgroupBroadcast({x.text}, {lane.const}u)"
        self.extensions.add("GL_KHR_shader_subgroup_shuffle")
        return f"subgroupShuffle({x.text}, uint({lane.text}))"

    # ------------------------------------------------------------ module

    def module(self, parts: ModuleParts) -> str:
        abi = parts.abi
        used = used_dtypes(parts.kernel)
        tensor_types = {a.dtype for a in abi.tensors} | {v.type.dtype for _, v in parts.tensors}
        ext = set(self.extensions)
        for dt, kind in ((D.f16, "float16"), (D.i8, "int8"), (D.u8, "int8"), (D.i16, "int16"), (D.u16, "int16"),
                         (D.i64, "int64"), (D.u64, "int64")):
            if dt in used:
                ext.add(f"GL_EXT_shader_explicit_arithmetic_types_{kind}")
        if tensor_types & {D.f16, D.i16, D.u16, D.bf16}:
            ext.add("GL_EXT_shader_16bit_storage")
        if D.bf16 in tensor_types:  # bf16 fragment storage: uint16_t
            ext.add("GL_EXT_shader_explicit_arithmetic_types_int16")
        if tensor_types & {D.i8, D.u8}:
            ext.add("GL_EXT_shader_8bit_storage")
        lines = ["#version 450"] + [f"#extension {e} : require" for e in sorted(ext)] + [""]
        lines += banner(parts, "GLSL 4.50 compute for Vulkan (SPIR-V)", self.profile)
        lines += ["// The group size is set per pipeline through specialization constants 0, 1, 2.",
                  "layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;", ""]
        for (name, value), arg in zip(parts.tensors, abi.tensors):
            access = {"read": "readonly ", "write": "writeonly "}.get(arg.access, "")
            if self.fenced and arg.access != "read":
                access = "coherent " + access
            layout = f"layout(std430, set = 0, binding = {arg.binding}) {access}buffer"
            element = _NAMES[value.type.dtype]
            lines.append(f"{layout} IronBuffer{arg.binding} {{ {element} {name}[]; }};")
            for view_type, view in sorted(self.views.get(name, {}).items()):
                lines.append(f"{layout} IronBuffer{arg.binding}_{view.rsplit('_', 1)[1]} {{ {view_type} {view}[]; }};")
        if self.loop_status_binding is not None:
            lines += loop_guard_globals(self.loop_status_binding)
        elif self.loop_guard:
            check_unguarded(parts.kernel, [*parts.body, *"\n".join(self.helpers.values()).split("\n")])
        lines += ["", "layout(push_constant) uniform IronParams {"]
        for f in abi.fields:
            lines.append(f"{self.indent}layout(offset = {f.offset}) {_NAMES[f.storage]} {field_ident(f.name, self.reserved)};")
        lines += ["} p;", ""]
        for s in parts.shared:
            lines.append(f"shared {_NAMES[s.dtype]} {s.name}[{s.count}];")
        if "mma_scratch" in parts.extra:
            scratch = parts.extra["mma_scratch"]
            lines.append(self.scratch_decl(scratch.name, scratch.floats_per_subgroup))
        if parts.shared or "mma_scratch" in parts.extra:
            lines.append("")
        for text in self.helpers.values():
            lines += [*text.split("\n"), ""]
        lines += ["void main() {", *parts.body, "}"]
        return "\n".join(lines) + "\n"


// Iron's Metal shim: enough of the Metal Shading Language, declared in C++17, for clang++ to
// type-check MSL source on a machine without Apple's compiler (clang++-19 -fsyntax-only).
//
// It declares; it does not implement: nothing here is ever executed.  It models what catches the
// common mistakes in emitted kernels:
//   - address spaces as clang address spaces (device 1, constant 2 read-only, threadgroup 3,
//     thread = the default), so a pointer cannot silently change address space and a write
//     through a constant pointer is an error;
//   - kernel attributes ([[buffer(n)]], [[thread_position_in_grid]], ...) as known attributes, so
//     a misspelt one is an unknown attribute (made an error by -Werror=unknown-attributes);
//   - half, bfloat and vector types as clang extended vectors: swizzles and arithmetic work, but
//     a vector never converts implicitly to another element type (float4(h) must be written);
//   - the metal:: math, simd_*, barrier, atomic and simdgroup_matrix functions with their
//     argument types, so a wrong call does not compile.
// iron/codegen/toolchains/metal.py force-includes this header; msl_source.py adds the checks
// C++ cannot express (see that module).  Limits (stricter than Metal): unsuffixed floating literals are
// double in C++ (write 1.0f, or half(1.0f): the h suffix does not exist in C++); vector
// comparisons yield integer masks, not bool vectors; only memory_order_relaxed exists; a
// threadgroup variable of class type cannot be declared (clang constructs no class object in an
// address space; scalars, vectors, arrays of them and atomics are fine).
#ifndef IRON_METAL_SHIM_H
#define IRON_METAL_SHIM_H

// ---- address spaces and the kernel keyword -------------------------------------------------
#define device __attribute__((address_space(1)))
#define constant __attribute__((address_space(2))) const
#define threadgroup __attribute__((address_space(3)))
#define thread
// metal.py renames a threadgroup variable declared in a function body to iron_tg_loc (C++ has no
// automatic variables in an address space; Metal's are per threadgroup, like statics) and the
// [[threadgroup(n)]] attribute to iron_tg_buf(n); both renames keep every column in place.
#define iron_tg_loc static __attribute__((address_space(3)))
#define iron_tg_buf(n) clang::annotate("metal.threadgroup", n)
#define kernel __attribute__((annotate("metal.kernel")))

// ---- attributes of kernel parameters -----------------------------------------------------
#define buffer(n) clang::annotate("metal.buffer", n)
#define texture(n) clang::annotate("metal.texture", n)
#define sampler(n) clang::annotate("metal.sampler", n)
#define function_constant(name) clang::annotate("metal.function_constant", name)
#define thread_position_in_grid clang::annotate("metal.thread_position_in_grid")
#define thread_position_in_threadgroup clang::annotate("metal.thread_position_in_threadgroup")
#define thread_index_in_threadgroup clang::annotate("metal.thread_index_in_threadgroup")
#define threadgroup_position_in_grid clang::annotate("metal.threadgroup_position_in_grid")
#define threads_per_grid clang::annotate("metal.threads_per_grid")
#define threads_per_threadgroup clang::annotate("metal.threads_per_threadgroup")
#define threadgroups_per_grid clang::annotate("metal.threadgroups_per_grid")
#define dispatch_threads_per_threadgroup clang::annotate("metal.dispatch_threads_per_threadgroup")
#define thread_index_in_simdgroup clang::annotate("metal.thread_index_in_simdgroup")
#define simdgroup_index_in_threadgroup clang::annotate("metal.simdgroup_index_in_threadgroup")
#define threads_per_simdgroup clang::annotate("metal.threads_per_simdgroup")
#define simdgroups_per_threadgroup clang::annotate("metal.simdgroups_per_threadgroup")
#define thread_execution_width clang::annotate("metal.thread_execution_width")
#define thread_index_in_quadgroup clang::annotate("metal.thread_index_in_quadgroup")
#define quadgroup_index_in_threadgroup clang::annotate("metal.quadgroup_index_in_threadgroup")
#define grid_origin clang::annotate("metal.grid_origin")
#define grid_size clang::annotate("metal.grid_size")
#define max_total_threads_per_threadgroup(n) clang::annotate("metal.max_total_threads_per_threadgroup", n)
#define host_name(name) clang::annotate("metal.host_name", name)

// ---- scalar and vector types ----------------------------------------------------------------
typedef _Float16 half;
typedef __bf16 bfloat;
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;

#define IRON_VECTOR_TYPES(T)                                   \
  typedef T T##2 __attribute__((ext_vector_type(2)));          \
  typedef T T##3 __attribute__((ext_vector_type(3)));          \
  typedef T T##4 __attribute__((ext_vector_type(4)));
IRON_VECTOR_TYPES(float)
IRON_VECTOR_TYPES(half)
IRON_VECTOR_TYPES(bfloat)
IRON_VECTOR_TYPES(int)
IRON_VECTOR_TYPES(uint)
IRON_VECTOR_TYPES(short)
IRON_VECTOR_TYPES(ushort)
IRON_VECTOR_TYPES(char)
IRON_VECTOR_TYPES(uchar)
IRON_VECTOR_TYPES(long)
IRON_VECTOR_TYPES(ulong)
IRON_VECTOR_TYPES(bool)
#undef IRON_VECTOR_TYPES

namespace metal {
namespace iron_detail {

template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { using type = T; };
template <bool B, class T = void> using enable_if_t = typename enable_if<B, T>::type;
template <class T> struct identity { using type = T; };
template <class T> using identity_t = typename identity<T>::type;
template <class T> struct remove_cv { using type = T; };
template <class T> struct remove_cv<const T> { using type = T; };
template <class T> struct remove_cv<volatile T> { using type = T; };
template <class T> struct remove_cv<const volatile T> { using type = T; };

// The element type and length of a vector; a scalar is its own element, length 1.
template <class T> struct shape { using elem = T; static constexpr int size = 1; static constexpr bool vector = false; };
template <class T, int N> struct shape<T __attribute__((ext_vector_type(N)))> {
  using elem = T; static constexpr int size = N; static constexpr bool vector = true;
};
template <class T> using elem_t = typename shape<T>::elem;

template <class T> constexpr bool is_float_scalar =
    __is_same(T, float) || __is_same(T, half) || __is_same(T, double);  // double: C++ literals
template <class T> constexpr bool is_int_scalar = __is_integral(T) && !__is_same(T, bool);
template <class T> constexpr bool is_float = is_float_scalar<elem_t<T>> && !(shape<T>::vector && __is_same(elem_t<T>, double));
template <class T> constexpr bool is_int = is_int_scalar<elem_t<T>>;
template <class T> constexpr bool is_arith = is_float<T> || is_int<T> || __is_same(elem_t<T>, bfloat);

template <class V, class A> constexpr bool same_elements =
    !shape<A>::vector || __is_same(elem_t<A>, elem_t<V>);

template <class V, class A> void put(V& out, int& at, A a) {
  if constexpr (shape<A>::vector) {
    for (int i = 0; i < shape<A>::size; ++i) out[at++] = a[i];
  } else {
    out[at++] = static_cast<elem_t<V>>(a);
  }
}

// float4(x): a splat; float4(h4): an explicit element conversion.
template <class V, class A> V construct_from_one(A a) {
  if constexpr (!shape<A>::vector) {
    return V(static_cast<elem_t<V>>(a));
  } else {
    static_assert(shape<A>::size == shape<V>::size,
                  "a vector converts only to a vector of the same length: pick components with a swizzle");
    return __builtin_convertvector(a, V);
  }
}

// float4(a.xy, 0.0f, 1.0f): exactly four components; vectors of the same element type.
template <class V, class... A> V construct(A... args) {
  static_assert(sizeof...(A) > 0, "a Metal vector constructor needs arguments");
  if constexpr (sizeof...(A) == 1) {
    return construct_from_one<V>(args...);
  } else {
    static_assert((shape<A>::size + ...) == shape<V>::size,
                  "a Metal vector constructor needs exactly as many components as the vector has");
    static_assert((same_elements<V, A> && ...),
                  "vector components of another element type must be converted explicitly first");
    V out{};
    int at = 0;
    (put(out, at, args), ...);
    return out;
  }
}

}  // namespace iron_detail

template <class T, int N> using vec = T __attribute__((ext_vector_type(N)));
using ::half; using ::bfloat; using ::uint; using ::ushort; using ::uchar; using ::ulong;

// ---- math (metal::, metal::fast::, metal::precise::) ----------------------------------------
namespace iron_math {
using iron_detail::enable_if_t;
using iron_detail::is_float;
using iron_detail::is_int;
using iron_detail::is_arith;
using iron_detail::elem_t;

#define IRON_FLOAT_UNARY(fn) template <class T, class = enable_if_t<is_float<T>>> T fn(T x);
IRON_FLOAT_UNARY(exp) IRON_FLOAT_UNARY(exp2) IRON_FLOAT_UNARY(exp10) IRON_FLOAT_UNARY(log)
IRON_FLOAT_UNARY(log2) IRON_FLOAT_UNARY(log10) IRON_FLOAT_UNARY(sqrt) IRON_FLOAT_UNARY(rsqrt)
IRON_FLOAT_UNARY(sin) IRON_FLOAT_UNARY(cos) IRON_FLOAT_UNARY(tan) IRON_FLOAT_UNARY(asin)
IRON_FLOAT_UNARY(acos) IRON_FLOAT_UNARY(atan) IRON_FLOAT_UNARY(sinh) IRON_FLOAT_UNARY(cosh)
IRON_FLOAT_UNARY(tanh) IRON_FLOAT_UNARY(asinh) IRON_FLOAT_UNARY(acosh) IRON_FLOAT_UNARY(atanh)
IRON_FLOAT_UNARY(floor) IRON_FLOAT_UNARY(ceil) IRON_FLOAT_UNARY(round) IRON_FLOAT_UNARY(rint)
IRON_FLOAT_UNARY(trunc) IRON_FLOAT_UNARY(fract) IRON_FLOAT_UNARY(fabs) IRON_FLOAT_UNARY(sign)
IRON_FLOAT_UNARY(saturate) IRON_FLOAT_UNARY(sinpi) IRON_FLOAT_UNARY(cospi) IRON_FLOAT_UNARY(tanpi)
#undef IRON_FLOAT_UNARY
#define IRON_FLOAT_BINARY(fn) template <class T, class = enable_if_t<is_float<T>>> T fn(T x, T y);
IRON_FLOAT_BINARY(pow) IRON_FLOAT_BINARY(powr) IRON_FLOAT_BINARY(atan2) IRON_FLOAT_BINARY(fmin)
IRON_FLOAT_BINARY(fmax) IRON_FLOAT_BINARY(fmod) IRON_FLOAT_BINARY(copysign) IRON_FLOAT_BINARY(step)
IRON_FLOAT_BINARY(fdim)
#undef IRON_FLOAT_BINARY
template <class T, class = enable_if_t<is_float<T>>> T fma(T a, T b, T c);
template <class T, class = enable_if_t<is_float<T>>> T mix(T x, T y, T a);
template <class T, class = enable_if_t<is_float<T>>> T ldexp(T x, int e);
template <class T, class = enable_if_t<is_float<T>>> T smoothstep(T e0, T e1, T x);
template <class T, class = enable_if_t<is_float<T>>> decltype(T() < T()) isnan(T x);
template <class T, class = enable_if_t<is_float<T>>> decltype(T() < T()) isinf(T x);
template <class T, class = enable_if_t<is_float<T>>> decltype(T() < T()) isfinite(T x);
template <class T, class = enable_if_t<is_float<T>>> decltype(T() < T()) signbit(T x);
template <class T, class = enable_if_t<is_float<T> && iron_detail::shape<T>::vector>> elem_t<T> dot(T x, T y);
template <class T, class = enable_if_t<is_float<T> && iron_detail::shape<T>::vector>> elem_t<T> length(T x);
template <class T, class = enable_if_t<is_float<T> && iron_detail::shape<T>::vector>> elem_t<T> distance(T x, T y);
template <class T, class = enable_if_t<is_float<T> && iron_detail::shape<T>::vector>> T normalize(T x);

template <class T, class = enable_if_t<is_arith<T>>> T min(T x, T y);
template <class T, class = enable_if_t<is_arith<T>>> T max(T x, T y);
template <class T, class = enable_if_t<is_arith<T>>> T clamp(T x, T lo, T hi);
template <class T, class = enable_if_t<is_arith<T>>> T abs(T x);
template <class T, class = enable_if_t<is_int<T>>> T absdiff(T x, T y);
template <class T, class = enable_if_t<is_int<T>>> T popcount(T x);
template <class T, class = enable_if_t<is_int<T>>> T clz(T x);
template <class T, class = enable_if_t<is_int<T>>> T ctz(T x);
template <class T, class = enable_if_t<is_int<T>>> T mulhi(T x, T y);
template <class T, class = enable_if_t<is_int<T>>> T rotate(T x, T n);

// select(a, b, c): c ? b : a, per component; the condition is bool (scalar) or a mask vector
// of the same length (comparisons yield integer masks here).
template <class T, class C, class = enable_if_t<is_arith<T> && iron_detail::shape<C>::size == iron_detail::shape<T>::size &&
                                                (__is_same(elem_t<C>, bool) || iron_detail::is_int_scalar<elem_t<C>>)>>
T select(T a, T b, C c);
template <class T> bool all(T mask);
template <class T> bool any(T mask);
}  // namespace iron_math

using namespace iron_math;
namespace fast { using namespace iron_math; }
namespace precise { using namespace iron_math; }

template <class To, class From> To as_type(From x) {
  static_assert(sizeof(To) == sizeof(From), "as_type reinterprets bits: both types need the same size");
  return __builtin_bit_cast(To, x);
}

// ---- barriers -------------------------------------------------------------------------------
enum class mem_flags : unsigned { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4,
                                  mem_threadgroup_imageblock = 8, mem_object_data = 16 };
constexpr mem_flags operator|(mem_flags a, mem_flags b) {
  return static_cast<mem_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
void threadgroup_barrier(mem_flags flags);
void simdgroup_barrier(mem_flags flags);

// ---- SIMD-group functions -------------------------------------------------------------------
namespace iron_simd {
using iron_detail::enable_if_t;
using iron_detail::is_arith;
using iron_detail::is_int;
#define IRON_SIMD_REDUCE(fn) template <class T, class = enable_if_t<is_arith<T>>> T fn(T x);
IRON_SIMD_REDUCE(simd_sum) IRON_SIMD_REDUCE(simd_product) IRON_SIMD_REDUCE(simd_max)
IRON_SIMD_REDUCE(simd_min) IRON_SIMD_REDUCE(simd_prefix_inclusive_sum)
IRON_SIMD_REDUCE(simd_prefix_exclusive_sum) IRON_SIMD_REDUCE(simd_prefix_inclusive_product)
IRON_SIMD_REDUCE(simd_prefix_exclusive_product) IRON_SIMD_REDUCE(quad_sum) IRON_SIMD_REDUCE(quad_max)
IRON_SIMD_REDUCE(quad_min)
#undef IRON_SIMD_REDUCE
template <class T, class = enable_if_t<is_int<T>>> T simd_and(T x);
template <class T, class = enable_if_t<is_int<T>>> T simd_or(T x);
template <class T, class = enable_if_t<is_int<T>>> T simd_xor(T x);
#define IRON_SIMD_MOVE(fn) template <class T, class = enable_if_t<is_arith<T> || __is_same(T, bool)>> T fn(T x, ushort n);
IRON_SIMD_MOVE(simd_shuffle) IRON_SIMD_MOVE(simd_shuffle_xor) IRON_SIMD_MOVE(simd_shuffle_up)
IRON_SIMD_MOVE(simd_shuffle_down) IRON_SIMD_MOVE(simd_shuffle_rotate_up)
IRON_SIMD_MOVE(simd_shuffle_rotate_down) IRON_SIMD_MOVE(simd_broadcast) IRON_SIMD_MOVE(quad_shuffle)
IRON_SIMD_MOVE(quad_shuffle_xor) IRON_SIMD_MOVE(quad_broadcast)
#undef IRON_SIMD_MOVE
template <class T, class = enable_if_t<is_arith<T>>> T simd_broadcast_first(T x);
}  // namespace iron_simd
using namespace iron_simd;
struct simd_vote { explicit simd_vote(ulong v = 0); bool all() const; bool any() const; operator ulong() const; };
bool simd_all(bool x);
bool simd_any(bool x);
simd_vote simd_ballot(bool x);
bool simd_is_first();

// ---- atomics --------------------------------------------------------------------------------
// Atomics are opaque scalar types (enums), not classes: clang cannot construct a class object in
// an address space, and Metal declares atomics in threadgroup memory.  An enum converts from no
// number, so atomics are used through the functions below only.
enum memory_order { memory_order_relaxed };

namespace iron_detail {
enum class atomic_int_t : int {};
enum class atomic_uint_t : uint {};
enum class atomic_float_t : uint {};
enum class atomic_bool_t : bool {};
enum class atomic_ulong_t : ulong {};
template <class T> struct atomic_of;
template <> struct atomic_of<int> { using type = atomic_int_t; };
template <> struct atomic_of<uint> { using type = atomic_uint_t; };
template <> struct atomic_of<float> { using type = atomic_float_t; };
template <> struct atomic_of<bool> { using type = atomic_bool_t; };
template <> struct atomic_of<ulong> { using type = atomic_ulong_t; };
}  // namespace iron_detail
template <class T> using atomic = typename iron_detail::atomic_of<T>::type;

#define IRON_ATOMIC_COMMON(AS, A, T)                                                                    \
  void atomic_store_explicit(volatile AS A* obj, T desired, memory_order order);                      \
  T atomic_load_explicit(const volatile AS A* obj, memory_order order);                               \
  T atomic_exchange_explicit(volatile AS A* obj, T desired, memory_order order);                      \
  bool atomic_compare_exchange_weak_explicit(volatile AS A* obj, thread T* expected, T desired,       \
                                             memory_order success, memory_order failure);
#define IRON_ATOMIC_ARITH(AS, A, T)                                                                     \
  T atomic_fetch_add_explicit(volatile AS A* obj, T operand, memory_order order);                     \
  T atomic_fetch_sub_explicit(volatile AS A* obj, T operand, memory_order order);
#define IRON_ATOMIC_BITS(AS, A, T)                                                                      \
  T atomic_fetch_and_explicit(volatile AS A* obj, T operand, memory_order order);                     \
  T atomic_fetch_or_explicit(volatile AS A* obj, T operand, memory_order order);                      \
  T atomic_fetch_xor_explicit(volatile AS A* obj, T operand, memory_order order);                     \
  T atomic_fetch_min_explicit(volatile AS A* obj, T operand, memory_order order);                     \
  T atomic_fetch_max_explicit(volatile AS A* obj, T operand, memory_order order);
#define IRON_ATOMICS_IN(AS)                                                                             \
  IRON_ATOMIC_COMMON(AS, atomic<int>, int) IRON_ATOMIC_ARITH(AS, atomic<int>, int)                      \
  IRON_ATOMIC_BITS(AS, atomic<int>, int)                                                                \
  IRON_ATOMIC_COMMON(AS, atomic<uint>, uint) IRON_ATOMIC_ARITH(AS, atomic<uint>, uint)                  \
  IRON_ATOMIC_BITS(AS, atomic<uint>, uint)                                                              \
  IRON_ATOMIC_COMMON(AS, atomic<float>, float) IRON_ATOMIC_ARITH(AS, atomic<float>, float)              \
  IRON_ATOMIC_COMMON(AS, atomic<bool>, bool)
IRON_ATOMICS_IN(device)
IRON_ATOMICS_IN(threadgroup)
// 64-bit atomics: device memory, min/max only (Apple GPU family 8 and later).
ulong atomic_fetch_min_explicit(volatile device atomic<ulong>* obj, ulong operand, memory_order order);
ulong atomic_fetch_max_explicit(volatile device atomic<ulong>* obj, ulong operand, memory_order order);
#undef IRON_ATOMICS_IN
#undef IRON_ATOMIC_COMMON
#undef IRON_ATOMIC_ARITH
#undef IRON_ATOMIC_BITS

// ---- simdgroup matrices (8x8) -----------------------------------------------------------------
template <class T, int Rows, int Cols> struct simdgroup_matrix {
  static_assert(Rows == 8 && Cols == 8, "simdgroup_matrix is 8x8");
  static_assert(__is_same(T, float) || __is_same(T, half) || __is_same(T, bfloat),
                "simdgroup_matrix holds float, half or bfloat");
  simdgroup_matrix() = default;
  explicit simdgroup_matrix(T diagonal);
  vec<T, 2> thread_elements() const;
};

#define IRON_SIMDGROUP_IO(AS)                                                                          \
  template <class T, int R, int C>                                                                     \
  void simdgroup_load(thread simdgroup_matrix<T, R, C>& d, const AS T* src, ulong elements_per_row = C, \
                      ulong2 matrix_origin = 0, bool transpose_matrix = false);                        \
  template <class T, int R, int C>                                                                     \
  void simdgroup_store(thread const simdgroup_matrix<T, R, C>& a, AS T* dst, ulong elements_per_row = C, \
                       ulong2 matrix_origin = 0, bool transpose_matrix = false);
IRON_SIMDGROUP_IO(device)
IRON_SIMDGROUP_IO(threadgroup)
#undef IRON_SIMDGROUP_IO

template <class Td, class Ta, class Tb, class Tc, int M, int N, int K>
void simdgroup_multiply_accumulate(thread simdgroup_matrix<Td, M, N>& d, thread const simdgroup_matrix<Ta, M, K>& a,
                                   thread const simdgroup_matrix<Tb, K, N>& b, thread const simdgroup_matrix<Tc, M, N>& c);
template <class Td, class Ta, class Tb, int M, int N, int K>
void simdgroup_multiply(thread simdgroup_matrix<Td, M, N>& d, thread const simdgroup_matrix<Ta, M, K>& a,
                        thread const simdgroup_matrix<Tb, K, N>& b);
template <class T, int R, int C> simdgroup_matrix<T, R, C> make_filled_simdgroup_matrix(T value);

typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

}  // namespace metal

typedef metal::atomic<int> atomic_int;
typedef metal::atomic<uint> atomic_uint;
typedef metal::atomic<float> atomic_float;
typedef metal::atomic<bool> atomic_bool;
namespace metal { using ::atomic_int; using ::atomic_uint; using ::atomic_float; using ::atomic_bool; }

// ---- vector constructors: float4(...) et al. (a name used without '(' stays the type) ----------
#define float2(...) ::metal::iron_detail::construct<::float2>(__VA_ARGS__)
#define float3(...) ::metal::iron_detail::construct<::float3>(__VA_ARGS__)
#define float4(...) ::metal::iron_detail::construct<::float4>(__VA_ARGS__)
#define half2(...) ::metal::iron_detail::construct<::half2>(__VA_ARGS__)
#define half3(...) ::metal::iron_detail::construct<::half3>(__VA_ARGS__)
#define half4(...) ::metal::iron_detail::construct<::half4>(__VA_ARGS__)
#define bfloat2(...) ::metal::iron_detail::construct<::bfloat2>(__VA_ARGS__)
#define bfloat3(...) ::metal::iron_detail::construct<::bfloat3>(__VA_ARGS__)
#define bfloat4(...) ::metal::iron_detail::construct<::bfloat4>(__VA_ARGS__)
#define int2(...) ::metal::iron_detail::construct<::int2>(__VA_ARGS__)
#define int3(...) ::metal::iron_detail::construct<::int3>(__VA_ARGS__)
#define int4(...) ::metal::iron_detail::construct<::int4>(__VA_ARGS__)
#define uint2(...) ::metal::iron_detail::construct<::uint2>(__VA_ARGS__)
#define uint3(...) ::metal::iron_detail::construct<::uint3>(__VA_ARGS__)
#define uint4(...) ::metal::iron_detail::construct<::uint4>(__VA_ARGS__)
#define short2(...) ::metal::iron_detail::construct<::short2>(__VA_ARGS__)
#define short3(...) ::metal::iron_detail::construct<::short3>(__VA_ARGS__)
#define short4(...) ::metal::iron_detail::construct<::short4>(__VA_ARGS__)
#define ushort2(...) ::metal::iron_detail::construct<::ushort2>(__VA_ARGS__)
#define ushort3(...) ::metal::iron_detail::construct<::ushort3>(__VA_ARGS__)
#define ushort4(...) ::metal::iron_detail::construct<::ushort4>(__VA_ARGS__)
#define char2(...) ::metal::iron_detail::construct<::char2>(__VA_ARGS__)
#define char3(...) ::metal::iron_detail::construct<::char3>(__VA_ARGS__)
#define char4(...) ::metal::iron_detail::construct<::char4>(__VA_ARGS__)
#define uchar2(...) ::metal::iron_detail::construct<::uchar2>(__VA_ARGS__)
#define uchar3(...) ::metal::iron_detail::construct<::uchar3>(__VA_ARGS__)
#define uchar4(...) ::metal::iron_detail::construct<::uchar4>(__VA_ARGS__)
#define long2(...) ::metal::iron_detail::construct<::long2>(__VA_ARGS__)
#define long3(...) ::metal::iron_detail::construct<::long3>(__VA_ARGS__)
#define long4(...) ::metal::iron_detail::construct<::long4>(__VA_ARGS__)
#define ulong2(...) ::metal::iron_detail::construct<::ulong2>(__VA_ARGS__)
#define ulong3(...) ::metal::iron_detail::construct<::ulong3>(__VA_ARGS__)
#define ulong4(...) ::metal::iron_detail::construct<::ulong4>(__VA_ARGS__)
#define bool2(...) ::metal::iron_detail::construct<::bool2>(__VA_ARGS__)
#define bool3(...) ::metal::iron_detail::construct<::bool3>(__VA_ARGS__)
#define bool4(...) ::metal::iron_detail::construct<::bool4>(__VA_ARGS__)

// Metal has no double precision.
#define double iron_metal_has_no_double_use_float

#endif  // IRON_METAL_SHIM_H

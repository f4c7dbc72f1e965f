"""Math helpers for languages whose library lacks a C function or gives it a different meaning (GLSL, MSL).

GLSL has no ``erf``, ``log1p``, ``expm1`` or ``fmod`` (its ``mod`` floors),
leaves ``pow`` undefined for a negative base and ``min``/``max`` undefined on
NaN; MSL lacks ``erf``, ``log1p`` and ``expm1``.  Each helper here is written
for f32 (the only float type arithmetic reaches after legalisation, besides
f64 on GLSL, which keeps the native functions it has) and follows C:

* ``iron_log1p``: ``2 atanh(x / (2 + x))`` as a series where ``1 + x`` would
  cancel (``-0.5 < x < 1``), ``log(1 + x)`` elsewhere;
* ``iron_expm1``: a Taylor polynomial for ``|x| < 0.5``, ``exp(x) - 1`` beyond;
* ``iron_erf``: a Taylor polynomial for ``|x| < 0.5``; beyond, ``1 - erfc``
  from a Chebyshev fit of ``erfc`` with relative error below 1.2e-7
  (Numerical Recipes' ``erfcc`` coefficients);
* ``iron_fmod`` (GLSL): C's ``fmod``, exact for every input, on the integer
  significands (long division, 8 quotient bits a step), never a float quotient:
  ``x - trunc(x / y) * y`` loses the remainder once ``|x / y|`` passes 2**24 in
  f32, and in f64 once it passes 2**29 (``q * y`` needs 24 + 29 bits);
* ``iron_pow``: C's special cases (negative base with integer exponent,
  zero base, ``pow(x, 0) = 1``) around the native ``pow`` of ``|x|``;
* ``iron_fmin``/``iron_fmax``: IEEE minNum/maxNum with -0 < +0 (docs/ir.md), on an integer
  key of the bits (``iron_order_key``), never a float comparison a driver may flush or fold;
* ``iron_atan2``: Vulkan lets ``atan(y, x)`` be 4096 ulp off (lavapipe is ~17);
  this reduces to ``atan`` of ``min/max`` in [0, 1], folds ``[tan(pi/8), 1]``
  onto ``[-0.17, 0]`` around ``pi/4``, and evaluates ``t + t z P(z)``
  (``z = t*t``, ``P`` a cubic fitted here by weighted least squares on Chebyshev
  nodes: 2.2e-8 relative), then the quadrant; 2.9 ulp at most over 2M random
  f32 pairs spanning 2**-29 .. 2**29 with correctly rounded f32 operations (4 with
  Vulkan's 2.5-ulp division: 3.45 seen on lavapipe), signed zeros and infinities exact;
* ``iron_sqrt``/``iron_div`` (GLSL with f64): Vulkan lets ``sqrt`` be as loose as
  ``1 / inversesqrt`` and ``/`` 2.5 ulp (NVIDIA's driver: ``sqrt(1.5)`` one ulp off), where the IR
  rounds correctly; a first guess from double, one Newton step on the exact residual, then the f32
  whose midpoints bracket the exact result (``iron_nearest_f32``), so they are correctly rounded as long
  as the guess is within a few f32 ulps; subnormal f32 values go to and from double through their bits
  (``iron_f32_value``, ``iron_f32_bits``), so a device that flushes the subnormals it converts (no 32-bit
  DenormPreserve) still gets them exact;
* ``iron_sin``/``iron_cos`` (GLSL): Vulkan lets ``sin``/``cos`` be 2**-11 off in
  absolute terms and NVIDIA's driver is ~20 ulp off near zero; Cody-Waite
  reduction by pi/2 (in double where the device has it) and fitted polynomials, 2 ulp
  for ``|x| <= 1.5e6`` (6433 without f64, and there not next to multiples of pi/2).

``{f}`` in the templates is the float-literal suffix ("" in GLSL, "f" in MSL)
and ``{bits}`` the float-to-int bit cast.
"""

from __future__ import annotations

_ORDER_KEY = """\
// An int that orders every non-NaN float as its value does, -0 below +0 and subnormals exact (no float compare).
int iron_order_key(float x) {{
  int bits = {bits}(x);
  return bits < 0 ? bits ^ 0x7fffffff : bits;
}}"""

_FMIN = """\
// min ignoring NaN, with -0 below +0 (IEEE minNum; docs/ir.md), decided on the bits (iron_order_key).  Float
// comparisons are not enough on NVIDIA's Vulkan driver (580): without 32-bit DenormPreserve it compares
// subnormals as zeros yet returns them unflushed (min(0, 1e-45) gave 1e-45), and one select over
// a < b || (a == b && signbit(a)) was miscompiled when an f64 helper shared the shader (fuzzer seed 2128;
// tests/runtime/vulkan/test_vulkan_minmax.py).
float iron_fmin(float a, float b) {{
  if (isnan(a)) {{
    return b;
  }}
  if (isnan(b)) {{
    return a;
  }}
  return iron_order_key(a) <= iron_order_key(b) ? a : b;
}}"""

_FMAX = """\
// max ignoring NaN, with +0 above -0 (IEEE maxNum; docs/ir.md), on the bits as iron_fmin.
float iron_fmax(float a, float b) {{
  if (isnan(a)) {{
    return b;
  }}
  if (isnan(b)) {{
    return a;
  }}
  return iron_order_key(a) >= iron_order_key(b) ? a : b;
}}"""

_FMOD = """\
// C's fmod, exact for every input: |x| = mx * 2^ex and |y| = my * 2^ey on integer significands (below 2^24);
// the remainder of mx * 2^(ex - ey) by my by long division, 8 bits a step so that r << 8 fits in 32 bits;
// it carries y's exponent and x's sign.  No float arithmetic, so no rounding and nothing for a driver to fold.
float iron_fmod(float x, float y) {{
  uint ax = floatBitsToUint(x) & 0x7fffffffu;
  uint ay = floatBitsToUint(y) & 0x7fffffffu;
  if (ax >= 0x7f800000u || ay > 0x7f800000u || ay == 0u) {{
    return {nan};  // x infinite or NaN, y NaN or zero
  }}
  if (ax < ay) {{
    return x;  // |x| < |y| (y infinite included): x itself, a zero keeping its sign
  }}
  int ex = int(ax >> 23);
  int ey = int(ay >> 23);
  uint mx = ex == 0 ? ax : (ax & 0x007fffffu) | 0x00800000u;
  uint my = ey == 0 ? ay : (ay & 0x007fffffu) | 0x00800000u;
  ex = max(ex, 1);  // a subnormal's exponent is that of the smallest normal, without the hidden bit
  ey = max(ey, 1);
  uint r = mx % my;
  for (int shift = ex - ey; shift > 0; shift -= 8) {{
    r = (r << min(shift, 8)) % my;
  }}
  uint sign = floatBitsToUint(x) & 0x80000000u;
  if (r == 0u) {{
    return uintBitsToFloat(sign);
  }}
  int up = min(23 - findMSB(r), ey - 1);  // normalise; stay subnormal at the smallest exponent
  r <<= up;
  ey -= up;
  uint bits = r < 0x00800000u ? r : (uint(ey) << 23) | (r & 0x007fffffu);
  return uintBitsToFloat(sign | bits);
}}"""

_POW = """\
// C's pow: defined for a negative base with an integer exponent, and for a zero base.
float iron_pow(float x, float y) {{
  if (y == 0.0{f} || x == 1.0{f}) {{
    return 1.0{f};
  }}
  if (isnan(x) || isnan(y)) {{
    return x + y;
  }}
  float ax = abs(x);
  if (ax == 1.0{f} && isinf(y)) {{
    return 1.0{f};
  }}
  float r = ax == 0.0{f} ? (y < 0.0{f} ? {inf} : 0.0{f}) : pow(ax, y);
  if ({bits}(x) < 0) {{
    if (trunc(y) != y) {{
      return (ax == 0.0{f} || isinf(x)) ? r : {nan};  // pow(-0 or -inf, 0.5) is +0 or +inf in C
    }}
    if (abs(y) < 16777216.0{f} && abs(y - 2.0{f} * trunc(y * 0.5{f})) == 1.0{f}) {{
      r = -r;
    }}
  }}
  return r;
}}"""

_LOG1P = """\
// log(1 + x) without the cancellation of 1 + x near 0.
float iron_log1p(float x) {{
  if (x > -0.5{f} && x < 1.0{f}) {{
    float s = x / (2.0{f} + x);
    float s2 = s * s;
    float series = 1.0{f} / 19.0{f};
    series = series * s2 + 1.0{f} / 17.0{f};
    series = series * s2 + 1.0{f} / 15.0{f};
    series = series * s2 + 1.0{f} / 13.0{f};
    series = series * s2 + 1.0{f} / 11.0{f};
    series = series * s2 + 1.0{f} / 9.0{f};
    series = series * s2 + 1.0{f} / 7.0{f};
    series = series * s2 + 1.0{f} / 5.0{f};
    series = series * s2 + 1.0{f} / 3.0{f};
    series = series * s2 + 1.0{f};
    return 2.0{f} * s * series;
  }}
  return log(1.0{f} + x);
}}"""

_EXPM1 = """\
// exp(x) - 1 without the cancellation near 0.
float iron_expm1(float x) {{
  if (abs(x) < 0.5{f}) {{
    float series = 1.0{f} / 3628800.0{f};
    series = series * x + 1.0{f} / 362880.0{f};
    series = series * x + 1.0{f} / 40320.0{f};
    series = series * x + 1.0{f} / 5040.0{f};
    series = series * x + 1.0{f} / 720.0{f};
    series = series * x + 1.0{f} / 120.0{f};
    series = series * x + 1.0{f} / 24.0{f};
    series = series * x + 1.0{f} / 6.0{f};
    series = series * x + 0.5{f};
    series = series * x + 1.0{f};
    return x * series;
  }}
  return exp(x) - 1.0{f};
}}"""

_ERF = """\
// The error function: a Taylor polynomial near 0, 1 - erfc(|x|) from a Chebyshev fit beyond.
float iron_erf(float x) {{
  float z = abs(x);
  if (z < 0.5{f}) {{
    float z2 = x * x;
    float series = 1.0{f} / 9360.0{f};
    series = series * z2 - 1.0{f} / 1320.0{f};
    series = series * z2 + 1.0{f} / 216.0{f};
    series = series * z2 - 1.0{f} / 42.0{f};
    series = series * z2 + 1.0{f} / 10.0{f};
    series = series * z2 - 1.0{f} / 3.0{f};
    series = series * z2 + 1.0{f};
    return 1.1283791670955126{f} * x * series;
  }}
  float t = 1.0{f} / (1.0{f} + 0.5{f} * z);
  float poly = 0.17087277{f};
  poly = poly * t - 0.82215223{f};
  poly = poly * t + 1.48851587{f};
  poly = poly * t - 1.13520398{f};
  poly = poly * t + 0.27886807{f};
  poly = poly * t - 0.18628806{f};
  poly = poly * t + 0.09678418{f};
  poly = poly * t + 0.37409196{f};
  poly = poly * t + 1.00002368{f};
  poly = poly * t - 1.26551223{f};
  float erfc = t * exp(poly - z * z);
  float r = 1.0{f} - erfc;
  return x < 0.0{f} ? -r : r;
}}"""

# GLSL with f64 (shaderFloat64): Vulkan lets fma() round twice (its precision is that of a
# multiply then an add), so a correctly rounded f32 fma goes through f64.
_FMA_F64 = """\
// fma rounded once: the f64 product is exact; the f64 sum is rounded to odd (TwoSum), then to f32.
float iron_fma(float a, float b, float c) {{
  double product = double(a) * double(b);
  double sum = product + double(c);
  double back = sum - product;
  double error = (product - (sum - back)) + (double(c) - back);
  if (error != 0.0lf && !isinf(sum) && !isnan(sum) && (doubleBitsToUint64(sum) & 1ul) == 0ul) {{
    uint64_t bits = doubleBitsToUint64(sum);
    sum = uint64BitsToDouble((sum > 0.0lf) == (error > 0.0lf) ? bits + 1ul : bits - 1ul);
  }}
  return float(sum);
}}"""

# GLSL with f64: correctly rounded f32 sqrt and division.  double +, -, * are correctly rounded in
# Vulkan, double sqrt / inversesqrt and division need not be (and a driver may narrow them to f32), so
# they only make a guess: one Newton step on a residual that is exact in double (r*r and q*y are 48-bit
# products; the difference is a few ulps of x), then iron_nearest_f32 moves the rounded result by at most
# one ulp by comparing x with the neighbouring midpoints, 25-bit numbers whose products with m or y are
# exact in double.  Special values are answered from the bits, never by the driver's arithmetic.
_NEAREST_F32 = """\
// The f32 value of bits q (no sign) as double, with the infinity 0x7f800000u standing for 2^128 (one ulp past
// FLT_MAX), built from the bits, never by a conversion: a device without DenormPreserve may flush a subnormal
// f32 operand of the conversion to double (NVIDIA's did).  A subnormal is q * 2^-149 (exact).
double iron_f32_value(uint q) {{
  return q < 0x00800000u ? double(q) * uint64BitsToDouble(0x36a0000000000000ul)  // rebias the exponent by 896:
                         : uint64BitsToDouble((uint64_t(q) << 29) + 0x3800000000000000ul);  // 255 gives 2^128
}}

// The bits of an f32 within one ulp of v, a non-negative double (0x7f800000u past FLT_MAX).  Below 2^-126 from
// v * 2^149 rounded down, never through a conversion to f32 that may flush a subnormal result to zero.
uint iron_f32_bits(double v) {{
  return v < uint64BitsToDouble(0x3810000000000000ul) ? uint(v * uint64BitsToDouble(0x4940000000000000ul))
                                                     : floatBitsToUint(float(v));
}}

// The bits of the f32 nearest to x / y (root: to sqrt(x)), ties to even, for a positive f32 guess q (bits;
// 0x7f800000u for an overflow) at most one ulp away; x and y are positive f32 values in double.  The midpoint
// m between neighbours has 25 bits, so m * y (or m * m) is exact in double and one comparison with x decides.
uint iron_nearest_f32(uint q, double x, double y, bool root) {{
  precise double here = iron_f32_value(q);
  if (q > 0u) {{
    precise double low = (iron_f32_value(q - 1u) + here) * 0.5lf;
    precise double below = low * (root ? low : y);
    if (x < below || (x == below && (q & 1u) == 1u)) {{
      return q - 1u;
    }}
  }}
  if (q < 0x7f800000u) {{
    precise double high = (here + iron_f32_value(q + 1u)) * 0.5lf;
    precise double above = high * (root ? high : y);
    if (x > above || (x == above && (q & 1u) == 1u)) {{
      return q + 1u;
    }}
  }}
  return q;
}}"""

_SQRT_F64 = """\
// sqrt rounded correctly (Vulkan's sqrt() may be ulps off): a guess through the double inversesqrt, one Newton
// step on the exact residual x - r*r, then the nearest f32 (iron_nearest_f32).  IEEE for zeros, inf, NaN.
float iron_sqrt(float x) {{
  uint u = floatBitsToUint(x);
  if (u == 0u || u == 0x80000000u || u == 0x7f800000u) {{
    return x;  // sqrt(+-0) = +-0, sqrt(inf) = inf
  }}
  if (u > 0x7f800000u) {{
    return uintBitsToFloat(0x7fc00000u);  // negative or NaN
  }}
  precise double d = iron_f32_value(u);  // from the bits: a subnormal x is never flushed (sqrt(x) is normal)
  precise double t = inversesqrt(d);
  precise double r = double(float(d * t));
  r = r + (d - r * r) * (0.5lf * t);
  return uintBitsToFloat(iron_nearest_f32(floatBitsToUint(float(r)), d, 0.0lf, true));
}}"""

_DIV_F64 = """\
// a / b rounded correctly (Vulkan's division may be 2.5 ulps off): a guess through the double reciprocal, one
// Newton step on the exact residual x - q*y, then the nearest f32 (iron_nearest_f32).  Zeros, infinities and
// NaN from the bits, as IEEE.
float iron_div(float a, float b) {{
  uint ua = floatBitsToUint(a) & 0x7fffffffu;
  uint ub = floatBitsToUint(b) & 0x7fffffffu;
  uint sign = (floatBitsToUint(a) ^ floatBitsToUint(b)) & 0x80000000u;
  if (ua > 0x7f800000u || ub > 0x7f800000u || (ua == ub && (ua == 0u || ua == 0x7f800000u))) {{
    return uintBitsToFloat(0x7fc00000u);  // NaN, 0 / 0, inf / inf
  }}
  if (ua == 0x7f800000u || ub == 0u) {{
    return uintBitsToFloat(sign | 0x7f800000u);
  }}
  if (ua == 0u || ub == 0x7f800000u) {{
    return uintBitsToFloat(sign);
  }}
  precise double x = iron_f32_value(ua);  // subnormals from the bits, and the quotient's bits below too:
  precise double y = iron_f32_value(ub);  // no f32 value that may be flushed is ever converted
  precise double inverse = 1.0lf / y;
  precise double q = iron_f32_value(iron_f32_bits(min(x * inverse, double(uintBitsToFloat(0x7f7fffffu)))));
  q = max(q + (x - q * y) * inverse, 0.0lf);  // never -0: a far guess at a tiny quotient may overshoot
  return uintBitsToFloat(sign | iron_nearest_f32(iron_f32_bits(q), x, y, false));
}}"""

_ATAN2 = """\
// atan2 to within 4 ulp (the driver's atan(y, x) may be 4096 ulp off under Vulkan's rules); C's special cases.
float iron_atan_reduced(float t) {{
  float z = t * t;
  float p = 0.08044466147161604{f};
  p = p * z - 0.13874448994704625{f};
  p = p * z + 0.1997736063066317{f};
  p = p * z - 0.3333293780819239{f};
  return t + t * (z * p);
}}

float iron_atan2(float y, float x) {{
  if (isnan(x) || isnan(y)) {{
    return x + y;
  }}
  float ax = abs(x);
  float ay = abs(y);
  float hi = max(ax, ay);
  float lo = min(ax, ay);
  float a = hi == 0.0{f} ? 0.0{f} : (hi == lo ? 1.0{f} : lo / hi);
  float r = a > 0.41421356{f} ? 0.78539816{f} + iron_atan_reduced((a - 1.0{f}) / (a + 1.0{f}))
                              : iron_atan_reduced(a);
  if (ay > ax) {{
    r = 1.57079637{f} - r;
  }}
  if (x < 0.0{f} || (x == 0.0{f} && {bits}(x) < 0)) {{
    r = 3.1415927{f} - r;
  }}
  return (y < 0.0{f} || (y == 0.0{f} && {bits}(y) < 0)) ? -r : r;
}}"""

_SINCOS = """\
// sin and cos within 2 ulp for |x| <= {limit} (the driver's may be 2^-11 off under Vulkan's rules: NVIDIA's is
// ~20 ulp near 0); the driver's beyond.  x = j*pi/2 + r, then polynomials on [-pi/4, pi/4] fitted here
// (3.6e-9 and 6.9e-10 relative), every step precise so that no driver fuses it differently.  GLSL only.
{reduce}

precise float iron_sin_reduced(float r) {{
  precise float z = r * r;
  precise float p = 2.7180062716070097e-06{f};
  p = p * z - 0.00019839298329316080{f};
  p = p * z + 0.0083333291113376617{f};
  p = p * z - 0.16666667163372040{f};
  return r + r * (z * p);
}}

precise float iron_cos_reduced(float r) {{
  precise float z = r * r;
  precise float p = -2.7203702757105930e-07{f};
  p = p * z + 2.4799432139843702e-05{f};
  p = p * z - 0.0013888883404433727{f};
  p = p * z + 0.041666667908430099{f};
  return (1.0{f} - 0.5{f} * z) + (z * z) * p;
}}

float iron_sin(float x) {{
  if (!(abs(x) <= {limit}{f}) || x == 0.0{f}) {{
    return x == 0.0{f} ? x : sin(x);  // sin(-0) = -0; NaN and infinities give NaN
  }}
  int q;
  precise float r = iron_reduce_pio2(x, q);
  precise float v = (q & 1) == 0 ? iron_sin_reduced(r) : iron_cos_reduced(r);
  return (q & 2) == 0 ? v : -v;
}}

float iron_cos(float x) {{
  if (!(abs(x) <= {limit}{f})) {{
    return cos(x);
  }}
  int q;
  precise float r = iron_reduce_pio2(x, q);
  precise float v = (q & 1) == 0 ? iron_cos_reduced(r) : iron_sin_reduced(r);
  return (q == 1 || q == 2) ? -v : v;
}}"""

#: pi/2 - j*r in double: pi/2 as a 33-bit part (exact times |j| < 2**20) and a 53-bit part; the rest is
#: 3.5e-27, so r keeps its relative accuracy even next to a multiple of pi/2.
_REDUCE_F64 = """\
precise float iron_reduce_pio2(float x, out int quadrant) {{
  float j = roundEven(x * 0.63661975{f});
  quadrant = int(j) & 3;
  precise double jd = double(j);
  precise double r = (double(x) - jd * 1.5707963267341256lf) - jd * 6.077100506506192e-11lf;
  return float(r);
}}"""

#: Without f64: three f32 parts of pi/2 (Cody-Waite; j*A and j*B exact for |j| < 4096).  Within ~1e-4
#: of a multiple of pi/2 the result, then tiny, loses relative accuracy (hundreds of ulp, ~1e-15 absolute).
_REDUCE_F32 = """\
precise float iron_reduce_pio2(float x, out int quadrant) {{
  precise float j = roundEven(x * 0.63661975{f});
  quadrant = int(j) & 3;
  precise float r = x - j * 1.5703125{f};
  r = r - j * 0.00048375129699707031{f};
  return r - j * 7.5497901264043315e-08{f};
}}"""


def sincos_text(suffix: str, f64: bool) -> str:
    """``iron_sin`` and ``iron_cos`` (GLSL), reducing in double where the device has it."""
    reduce = (_REDUCE_F64 if f64 else _REDUCE_F32).format(f=suffix)
    return _SINCOS.format(f=suffix, reduce=reduce, limit="1.5e6" if f64 else "6433.0")


TEMPLATES: dict[str, str] = {"iron_order_key": _ORDER_KEY,
                             "iron_fmin": _FMIN, "iron_fmax": _FMAX, "iron_fmod": _FMOD, "iron_pow": _POW,
                             "iron_log1p": _LOG1P, "iron_expm1": _EXPM1, "iron_erf": _ERF,
                             "iron_fma_f64": _FMA_F64, "iron_atan2": _ATAN2, "iron_nearest_f32": _NEAREST_F32,
                             "iron_sqrt_f64": _SQRT_F64, "iron_div_f64": _DIV_F64}


#: Helpers a helper calls, to be defined before it.
REQUIRES: dict[str, tuple[str, ...]] = {"iron_fmin": ("iron_order_key",), "iron_fmax": ("iron_order_key",)}


def helper_text(name: str, suffix: str, bits: str, inf: str, nan: str) -> str:
    """The source of helper ``name`` for a language with float suffix ``suffix`` and bit cast ``bits``."""
    return TEMPLATES[name].format(f=suffix, bits=bits, inf=inf, nan=nan)


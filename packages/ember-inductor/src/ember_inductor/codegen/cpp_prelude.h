// ember_inductor C++ kernel prelude: helpers with ATen's semantics, Philox matching tl.rand.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <omp.h>

// glibc's libmvec vector variants: lets `#pragma omp simd` loops vectorize transcendental calls.
extern "C" {
#define EMBER_SIMD __attribute__((simd("notinbranch")))
EMBER_SIMD float sinf(float); EMBER_SIMD double sin(double);
EMBER_SIMD float cosf(float); EMBER_SIMD double cos(double);
EMBER_SIMD float tanf(float); EMBER_SIMD double tan(double);
EMBER_SIMD float expf(float); EMBER_SIMD double exp(double);
EMBER_SIMD float exp2f(float); EMBER_SIMD double exp2(double);
EMBER_SIMD float expm1f(float); EMBER_SIMD double expm1(double);
EMBER_SIMD float logf(float); EMBER_SIMD double log(double);
EMBER_SIMD float log2f(float); EMBER_SIMD double log2(double);
EMBER_SIMD float log1pf(float); EMBER_SIMD double log1p(double);
EMBER_SIMD float tanhf(float); EMBER_SIMD double tanh(double);
EMBER_SIMD float sinhf(float); EMBER_SIMD double sinh(double);
EMBER_SIMD float coshf(float); EMBER_SIMD double cosh(double);
EMBER_SIMD float asinf(float); EMBER_SIMD double asin(double);
EMBER_SIMD float acosf(float); EMBER_SIMD double acos(double);
EMBER_SIMD float atanf(float); EMBER_SIMD double atan(double);
EMBER_SIMD float asinhf(float); EMBER_SIMD double asinh(double);
EMBER_SIMD float acoshf(float); EMBER_SIMD double acosh(double);
EMBER_SIMD float atanhf(float); EMBER_SIMD double atanh(double);
EMBER_SIMD float erff(float); EMBER_SIMD double erf(double);
EMBER_SIMD float erfcf(float); EMBER_SIMD double erfc(double);
EMBER_SIMD float atan2f(float, float); EMBER_SIMD double atan2(double, double);
EMBER_SIMD float hypotf(float, float); EMBER_SIMD double hypot(double, double);
EMBER_SIMD float powf(float, float); EMBER_SIMD double pow(double, double);
}

// bfloat16: stored as uint16_t, computed in float, rounded to nearest even.
static inline float ember_bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16; float f; std::memcpy(&f, &u, 4); return f;
}
static inline uint16_t ember_float_to_bf16(float f) {
  uint32_t u; std::memcpy(&u, &f, 4);
  if (f != f) return 0x7fc0;
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float ember_round_bf16(float f) { return ember_bf16_to_float(ember_float_to_bf16(f)); }
static inline float ember_round_f16(float f) { return (float)(_Float16)f; }

// A floating value converted to an integer type as eager's CPU kernels convert it on x86: a C++
// cast of NaN, an infinity or a value out of range is undefined (gcc folds a constant one to the
// saturated value), the hardware's conversion gives the "integer indefinite", INT_MIN. int8 and
// int16 go through int32, uint8 through int64 (c10's convert), then keep their low bits.
static inline int64_t ember_f2i64(double d) {
  return (d >= -9223372036854775808.0 && d < 9223372036854775808.0) ? (int64_t)d : INT64_MIN;
}
static inline int32_t ember_f2i32(double d) {
  return (d >= -2147483648.0 && d < 2147483648.0) ? (int32_t)d : INT32_MIN;
}

// expf inlined (Cephes' polynomial, range reduction by ln2 in two parts): vectorizes without a
// call, within 1 ulp of the correctly rounded result; subnormal results scale in two steps.
// Explicit fmaf (unaffected by -ffp-contract=off): fewer rounding steps, half the latency.
static inline float ember_bits_to_float(int32_t i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float ember_expf(float x) {
  const float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  const float n = rintf(xc * 1.44269504088896341f);
  float r = __builtin_fmaf(n, -0.693359375f, xc);
  r = __builtin_fmaf(n, 2.12194440e-4f, r);
  float p = 1.9875691500E-4f;
  p = __builtin_fmaf(p, r, 1.3981999507E-3f);
  p = __builtin_fmaf(p, r, 8.3334519073E-3f);
  p = __builtin_fmaf(p, r, 4.1665795894E-2f);
  p = __builtin_fmaf(p, r, 1.6666665459E-1f);
  p = __builtin_fmaf(p, r, 5.0000001201E-1f);
  p = __builtin_fmaf(p, r * r, r) + 1.0f;
  const int32_t ni = (int32_t)n;
  const int32_t n1 = ni / 2, n2 = ni - n1;
  float res = p * ember_bits_to_float((n1 + 127) << 23) * ember_bits_to_float((n2 + 127) << 23);
  res = x > 88.72283935546875f ? INFINITY : res;
  return x != x ? x : res;
}

template <typename T> static inline T ember_maximum(T a, T b) {
  return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
}
template <typename T> static inline T ember_minimum(T a, T b) {
  return (a != a) ? a : ((b != b) ? b : (a < b ? a : b));
}
// (a > 0) - (a < 0), like ATen's sign kernel: sign(NaN) is 0 there (and in the Triton rule)
template <typename T> static inline T ember_sign(T a) {
  return (T)((a > 0) - (a < 0));
}
// integer division and modulo never trap (ATen raises on /0; a kernel cannot)
template <typename T> static inline T ember_div_trunc(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); }
template <typename T> static inline T ember_fmod_int(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }
template <typename T> static inline T ember_floordiv_int(T a, T b) {
  if (b == 0) return (T)0;
  T q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? (T)(q - 1) : q;
}
template <typename T> static inline T ember_remainder_int(T a, T b) {
  if (b == 0) return (T)0;
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}
template <typename T> static inline T ember_floordiv_float(T a, T b) {
  if (b == 0) return a / b;
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  T fl;
  if (div != 0) { fl = std::floor(div); if (div - fl > (T)0.5) fl += 1; }
  else fl = std::copysign((T)0, a / b);
  return fl;
}
template <typename T> static inline T ember_remainder_float(T a, T b) {
  T m = std::fmod(a, b);
  return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
template <typename T> static inline T ember_ipow(T a, T b) {
  if (b < 0) return (a == 1) ? (T)1 : ((a == -1) ? ((b & 1) ? (T)-1 : (T)1) : (T)0);
  T r = 1;
  while (b) { if (b & 1) r *= a; b >>= 1; a *= a; }
  return r;
}
template <typename T> static inline T ember_erfinv(T y) {
  double x, z, num, dem, yd = (double)y;
  if (yd < -1 || yd > 1) return (T)NAN;
  if (yd == 1) return (T)INFINITY;
  if (yd == -1) return (T)-INFINITY;
  if (std::fabs(yd) <= 0.7) {
    z = yd * yd;
    num = ((-0.140543331 * z + 0.914624893) * z - 1.645349621) * z + 0.886226899;
    dem = (((0.012229801 * z - 0.329097515) * z + 1.442710462) * z - 2.118377725) * z + 1.0;
    x = yd * num / dem;
  } else {
    z = std::sqrt(-std::log((1.0 - std::fabs(yd)) / 2.0));
    num = ((1.641345311 * z + 3.429567803) * z - 1.624906493) * z - 1.970840454;
    dem = (1.637067800 * z + 3.543889200) * z + 1.0;
    x = std::copysign(num / dem, yd);
  }
  for (int i = 0; i < 2; i++)
    x = x - (std::erf(x) - yd) / ((2.0 / std::sqrt(M_PI)) * std::exp(-x * x));
  return (T)x;
}

// Philox4x32-10 on counter (lo32, hi32, 0, 0), key (lo32(seed), hi32(seed)): Triton's randint4x.
static inline void ember_philox(int64_t seed, int64_t counter, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)((uint64_t)counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)((uint64_t)seed >> 32);
  for (int i = 0; i < 10; i++) {
    uint64_t pb = (uint64_t)0xCD9E8D57u * c2, pa = (uint64_t)0xD2511F53u * c0;
    uint32_t n0 = (uint32_t)(pb >> 32) ^ c1 ^ k0, n2 = (uint32_t)(pa >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)pb; c3 = (uint32_t)pa; c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}
static inline float ember_uint_to_unit(uint32_t x) {
  int32_t i = (int32_t)x;
  if (i < 0) i = ~i;  // -i - 1 without overflow
  return (float)i * 4.6566127342e-10f;
}
static inline float ember_rand_uniform(int64_t seed, int64_t counter) {
  uint32_t o[4]; ember_philox(seed, counter, o); return ember_uint_to_unit(o[0]);
}
static inline float ember_rand_normal(int64_t seed, int64_t counter) {
  uint32_t o[4]; ember_philox(seed, counter, o);
  float u1 = ember_uint_to_unit(o[0]), u2 = ember_uint_to_unit(o[1]);
  u1 = u1 < 1.0e-7f ? 1.0e-7f : u1;
  float th = ember_uint_to_unit(o[1]) * 6.283185307179586f;
  (void)u2;
  return sqrtf(logf(u1) * -2.0f) * cosf(th);
}

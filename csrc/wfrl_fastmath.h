/* Branch-free exp and tanh for the compiled loops: written so that a loop of them vectorises
 * (no library call, no branch), and exact enough for a policy network (errors below).
 * Reference: libm's expf and tanhf, against which tests/test_head.py and tests/test_rollout.py
 * hold the routines that use them (via the torch and numpy twins). */
#ifndef WFRL_FASTMATH_H
#define WFRL_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Their float selects vectorise only where GCC may assume that a comparison does not trap:
 * setup.py builds the extension with -fno-trapping-math (no result changes in the default
 * floating-point environment). */

/* Inlined even into a loop GCC would otherwise leave a call in (which stops vectorisation). */
#if defined(__GNUC__)
#define WFRL_ALWAYS_INLINE __attribute__((always_inline))
#else
#define WFRL_ALWAYS_INLINE
#endif

/* exp(x) for x <= 0 without branches, so that a loop of it vectorises: x is clamped to
 * [-87, 0], split as x = k ln2 + r with k = round(x / ln2) and |r| <= ln2/2, exp(r) by its
 * degree-6 Taylor polynomial and 2^k put into the exponent bits (relative error < 2.5e-7 in
 * all). k is rounded by adding 1.5·2^23 (where a float's spacing is 1), so its bits hold k as
 * well: no float-to-int conversion, which GCC will not vectorise next to the clamp when it
 * targets AVX2 or AVX-512. */
WFRL_ALWAYS_INLINE static inline float wfrl_exp_nonpos(float x)
{
    /* below -87 the result is 0 exactly (not a subnormal, which is slow in later arithmetic);
     * the clamp is written so that a NaN also lands on -87 */
    const float keep = x >= -87.0f ? 1.0f : 0.0f;
    x = x > 0.0f ? 0.0f : x;
    x = x >= -87.0f ? x : -87.0f;
    const float shifted = x * 1.44269504088896341f + 12582912.0f;   /* 1.5·2^23 + k */
    const float k = shifted - 12582912.0f;
    int32_t k_bits;
    memcpy(&k_bits, &shifted, sizeof k_bits);
    const float r = (x - k * 0.693145751953125f) - k * 1.42860682030941723212e-6f;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = (k_bits - 0x4B400000 + 127) << 23;   /* 2^k */
    float two_k;
    memcpy(&two_k, &bits, sizeof two_k);
    return keep * (p * two_k);
}

/* tanh without branches or library calls, so that a loop of it vectorises: for |x| < 0.05 its
 * Taylor polynomial to x^9 (truncation < 1e-16), above (1 - e)/(1 + e) with e = exp(-2|x|) from
 * wfrl_exp_nonpos, the sign put back at the end: absolute error < 2e-7 (libm's tanhf: 6e-8),
 * relative error < 2e-7 below 0.05. NaN stays NaN, ±0 stays ±0. */
WFRL_ALWAYS_INLINE static inline float wfrl_tanh(float x)
{
    const float ax = fabsf(x);
    const float x2 = x * x;
    float t = 62.0f / 2835.0f;
    t = t * x2 - 17.0f / 315.0f;
    t = t * x2 + 2.0f / 15.0f;
    t = t * x2 - 1.0f / 3.0f;
    const float small = ax + ax * (x2 * t);
    const float e = wfrl_exp_nonpos(-2.0f * ax);
    const float large = (1.0f - e) / (1.0f + e);
    const float y = ax < 0.05f ? small : large;
    return x < 0.0f ? -y : (x > 0.0f ? y : x);   /* x itself for ±0 and NaN */
}

#endif

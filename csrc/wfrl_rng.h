/* Per-env random numbers: xoshiro256** seeded through splitmix64. Never rand(): every env owns its
 * state, so envs are independent and reproducible from their seed alone. */
#ifndef WFRL_RNG_H
#define WFRL_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} wfrl_rng;

static inline uint64_t wfrl_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline void wfrl_rng_seed(wfrl_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; ++i) r->s[i] = wfrl_splitmix64(&x);
}

static inline uint64_t wfrl_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t wfrl_rng_next(wfrl_rng *r)
{
    uint64_t *s = r->s;
    const uint64_t result = wfrl_rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = wfrl_rotl(s[3], 45);
    return result;
}

/* Uniform double in [0, 1). */
static inline double wfrl_rng_uniform(wfrl_rng *r)
{
    return (double)(wfrl_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n), n >= 1 (Lemire's multiply-shift; bias < 2^-32 for small n). */
static inline uint32_t wfrl_rng_below(wfrl_rng *r, uint32_t n)
{
    return (uint32_t)(((wfrl_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

#endif

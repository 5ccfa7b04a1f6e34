/* xoshiro256** with splitmix64 seeding. */
#include "rng.h"

#include <math.h>

#define GOLDEN_GAMMA 0x9e3779b97f4a7c15ULL

/* splitmix64's output function: a bijective mix of a 64-bit word */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t splitmix64(uint64_t *x)
{
    return mix64(*x += GOLDEN_GAMMA);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void dtk_rng_seed(struct dtk_rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&x);
}

/* The generator's step on a state held by the caller (inlined into the loops below). */
static inline uint64_t next_u64(uint64_t *s)
{
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t dtk_rng_u64(struct dtk_rng *rng)
{
    return next_u64(rng->s);
}

/* 24 random bits: every value exactly representable as a float */
static inline float to_uniform(uint64_t x)
{
    return (float)(x >> 40) * (1.0f / 16777216.0f);
}

float dtk_rng_uniform(struct dtk_rng *rng)
{
    return to_uniform(next_u64(rng->s));
}

void dtk_rng_uniforms(struct dtk_rng *rng, float *u, long n)
{
    uint64_t s[4] = {rng->s[0], rng->s[1], rng->s[2], rng->s[3]};
    for (long i = 0; i < n; i++)
        u[i] = to_uniform(next_u64(s));
    for (int k = 0; k < 4; k++)
        rng->s[k] = s[k];
}

float dtk_rng_uniform_range(struct dtk_rng *rng, float lo, float hi)
{
    return lo + (hi - lo) * dtk_rng_uniform(rng);
}

float dtk_rng_normal(struct dtk_rng *rng)
{
    /* 53-bit uniforms in (0, 1] for the logarithm. */
    double u1 = ((double)(dtk_rng_u64(rng) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(dtk_rng_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint64_t dtk_rng_below(struct dtk_rng *rng, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)dtk_rng_u64(rng) * n) >> 64);
}

uint64_t dtk_rng_key(uint64_t a, uint64_t b, uint64_t c)
{
    return mix64((mix64(mix64(a + GOLDEN_GAMMA) ^ b) + GOLDEN_GAMMA) ^ c);
}

void dtk_rng_counter_uniforms(float *u, long n, uint64_t key, uint64_t first)
{
    /* position i of the stream seeded with key: splitmix64's i + 1-th output */
    uint64_t z = key + (first + 1) * GOLDEN_GAMMA;
    for (long i = 0; i < n; i++, z += GOLDEN_GAMMA)
        u[i] = to_uniform(mix64(z));
}

/* A small seeded random number generator for the CPU kernels: xoshiro256** seeded through
 * splitmix64 (both by Blackman and Vigna, public-domain algorithms, written here from their
 * description). The state is passed explicitly so that runs are reproducible and ranks can own
 * independent streams; no global state. */
#ifndef DTK_RNG_H
#define DTK_RNG_H

#include <stdint.h>

struct dtk_rng {
    uint64_t s[4];
};

/* Seeds the four state words from splitmix64(seed); any seed, 0 included, is valid. */
void dtk_rng_seed(struct dtk_rng *rng, uint64_t seed);
uint64_t dtk_rng_u64(struct dtk_rng *rng);
/* Uniform in [0, 1) with 24 random bits (every value exactly representable as a float). */
float dtk_rng_uniform(struct dtk_rng *rng);
/* n uniforms into u: the same values, in order, as n calls of dtk_rng_uniform (one tight loop
 * with the generator's state in registers). */
void dtk_rng_uniforms(struct dtk_rng *rng, float *u, long n);
/* Uniform in [lo, hi). */
float dtk_rng_uniform_range(struct dtk_rng *rng, float lo, float hi);
/* Standard normal (Box-Muller; uses two uniforms per call, no cached second value). */
float dtk_rng_normal(struct dtk_rng *rng);
/* Uniform integer in [0, n) (n > 0), by multiply-shift (Lemire's method without rejection; the
 * bias is below n / 2^64, irrelevant here). */
uint64_t dtk_rng_below(struct dtk_rng *rng, uint64_t n);

/* Counter-based draws: splitmix64 read as a function of its position, so that value i of a
 * stream is computed on its own, by whichever rank needs it, in any order. A stream's key
 * from three numbers (a seed, a step, a layer); u[k] = the uniform at position first + k. */
uint64_t dtk_rng_key(uint64_t a, uint64_t b, uint64_t c);
void dtk_rng_counter_uniforms(float *u, long n, uint64_t key, uint64_t first);

#endif

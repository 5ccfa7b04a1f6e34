/* Inverted dropout: the scaling happens in training so that evaluation is the identity. */
#include "layers.h"

#include <string.h>

#include "parallel.h"

/* mask[i] = u < rate ? 0 : keep for the uniform u it holds, out[i] = inp[i] mask[i]; blocks
 * of 8 over restrict parameters vectorize at -O2 (see activation.c). out may be inp (the
 * network never does that, but the rate-0 path allowed it): the loads come first. */
static void dropout_apply(float *out, float *restrict mask, const float *inp, long i, long n,
                          float rate, float keep)
{
    for (; i + 8 <= n; i += 8) {
        float x[8], m[8];
        for (int k = 0; k < 8; k++) {
            x[k] = inp[i + k];
            m[k] = mask[i + k] < rate ? 0.0f : keep;
        }
        for (int k = 0; k < 8; k++) {
            mask[i + k] = m[k];
            out[i + k] = x[k] * m[k];
        }
    }
    for (; i < n; i++) {
        mask[i] = mask[i] < rate ? 0.0f : keep;
        out[i] = inp[i] * mask[i];
    }
}

/* Arrays and factors of a dropout loop run in ranges on the pool. */
struct drop_job {
    float *out, *mask;
    const float *a, *b;
    float rate, keep;
};

static void apply_range(void *ctx, long lo, long hi)
{
    const struct drop_job *j = ctx;
    dropout_apply(j->out, j->mask, j->a, lo, hi, j->rate, j->keep);
}

void dtk_dropout_forward(float *out, float *mask, const float *inp, long n, float rate,
                         uint64_t key, uint64_t first)
{
    if (rate <= 0.0f) {
        for (long i = 0; i < n; i++)
            mask[i] = 1.0f;
        memmove(out, inp, (size_t)n * sizeof(float));
        return;
    }
    /* the uniforms go into the mask first, then a branch-free pass turns them into factors */
    dtk_rng_counter_uniforms(mask, n, key, first);
    dtk_dropout_forward_drawn(out, mask, inp, n, rate);
}

void dtk_dropout_forward_drawn(float *out, float *mask, const float *inp, long n, float rate)
{
    struct drop_job j = {out, mask, inp, NULL, rate, 1.0f / (1.0f - rate)};
    dtk_parallel_range(n, DTK_PAR_MIN, apply_range, &j);
}

static void dropout_bwd(float *restrict dx, const float *restrict g, const float *restrict m,
                        long i, long n)
{
    for (; i + 8 <= n; i += 8) /* blocks of 8: vectorized at -O2 (see activation.c) */
        for (int k = 0; k < 8; k++)
            dx[i + k] += g[i + k] * m[i + k];
    for (; i < n; i++)
        dx[i] += g[i] * m[i];
}

static void dropout_bwd_set(float *restrict dx, const float *restrict g,
                            const float *restrict m, long i, long n)
{
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            dx[i + k] = g[i + k] * m[i + k];
    for (; i < n; i++)
        dx[i] = g[i] * m[i];
}

static void bwd_range(void *ctx, long lo, long hi)
{
    const struct drop_job *j = ctx;
    dropout_bwd(j->out, j->a, j->b, lo, hi);
}

static void bwd_set_range(void *ctx, long lo, long hi)
{
    const struct drop_job *j = ctx;
    dropout_bwd_set(j->out, j->a, j->b, lo, hi);
}

void dtk_dropout_backward_set(float *restrict dx, const float *restrict g,
                              const float *restrict m, long n)
{
    struct drop_job j = {dx, NULL, g, m, 0.0f, 0.0f};
    dtk_parallel_range(n, DTK_PAR_MIN, bwd_set_range, &j);
}

void dtk_dropout_backward(float *restrict dx, const float *restrict g, const float *restrict m,
                          long n)
{
    struct drop_job j = {dx, NULL, g, m, 0.0f, 0.0f};
    dtk_parallel_range(n, DTK_PAR_MIN, bwd_range, &j);
}

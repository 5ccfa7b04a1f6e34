/* Elementwise activations. tanh and sigmoid differentiate through their output, relu and
 * gelu through their input, whichever the backward formula needs.
 * The relu loops run in blocks of 8 over restrict parameters (the definitions add restrict,
 * which does not change the declared type): GCC at -O2 (its "very cheap"
 * vectorizer) turns a fixed-length inner loop into branch-free SIMD, where the plain loop stays
 * scalar with a branch that mispredicts on half of the random-signed activations (measured
 * 6x slower on the seed-002 CNN's dense layer). */
#include "layers.h"

#include <math.h>

#include "parallel.h"

static void relu_fwd(float *restrict o, const float *restrict x, long i, long n)
{
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            float v = x[i + k];
            o[i + k] = v > 0.0f ? v : 0.0f;
        }
    for (; i < n; i++)
        o[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* Arrays of an elementwise loop run in ranges on the pool. */
struct ew_job {
    float *out;
    const float *a, *b;
};

static void relu_fwd_range(void *ctx, long lo, long hi)
{
    const struct ew_job *j = ctx;
    relu_fwd(j->out, j->a, lo, hi);
}

void dtk_relu_forward(float *restrict o, const float *restrict x, long n)
{
    struct ew_job j = {o, x, NULL};
    dtk_parallel_range(n, DTK_PAR_MIN, relu_fwd_range, &j);
}

/* The derivative at 0 is taken as 0 (as PyTorch and TensorFlow do). */
static void relu_bwd(float *restrict dx, const float *restrict g, const float *restrict x, long i,
                     long n)
{
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            float v = x[i + k], gk = g[i + k];
            dx[i + k] += v > 0.0f ? gk : 0.0f;
        }
    for (; i < n; i++)
        dx[i] += x[i] > 0.0f ? g[i] : 0.0f;
}

static void relu_bwd_set(float *restrict dx, const float *restrict g, const float *restrict x,
                         long i, long n)
{
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            float v = x[i + k], gk = g[i + k];
            dx[i + k] = v > 0.0f ? gk : 0.0f;
        }
    for (; i < n; i++)
        dx[i] = x[i] > 0.0f ? g[i] : 0.0f;
}

static void relu_bwd_range(void *ctx, long lo, long hi)
{
    const struct ew_job *j = ctx;
    relu_bwd(j->out, j->a, j->b, lo, hi);
}

static void relu_bwd_set_range(void *ctx, long lo, long hi)
{
    const struct ew_job *j = ctx;
    relu_bwd_set(j->out, j->a, j->b, lo, hi);
}

void dtk_relu_backward(float *restrict dx, const float *restrict g, const float *restrict x,
                       long n)
{
    struct ew_job j = {dx, g, x};
    dtk_parallel_range(n, DTK_PAR_MIN, relu_bwd_range, &j);
}

void dtk_relu_backward_set(float *restrict dx, const float *restrict g, const float *restrict x,
                           long n)
{
    struct ew_job j = {dx, g, x};
    dtk_parallel_range(n, DTK_PAR_MIN, relu_bwd_set_range, &j);
}

void dtk_tanh_forward(float *out, const float *inp, long n)
{
    DTK_PARALLEL_FOR(n >= DTK_PAR_MIN / 8)
    for (long i = 0; i < n; i++)
        out[i] = tanhf(inp[i]);
}

void dtk_tanh_backward(float *dinp, const float *dout, const float *out, long n)
{
    for (long i = 0; i < n; i++)
        dinp[i] += dout[i] * (1.0f - out[i] * out[i]);
}

void dtk_sigmoid_forward(float *out, const float *inp, long n)
{
    DTK_PARALLEL_FOR(n >= DTK_PAR_MIN / 8)
    for (long i = 0; i < n; i++)
        out[i] = 1.0f / (1.0f + expf(-inp[i]));
}

void dtk_sigmoid_backward(float *dinp, const float *dout, const float *out, long n)
{
    for (long i = 0; i < n; i++)
        dinp[i] += dout[i] * out[i] * (1.0f - out[i]);
}

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

void dtk_gelu_forward(float *out, const float *inp, long n)
{
    DTK_PARALLEL_FOR(n >= DTK_PAR_MIN / 8)
    for (long i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_A * x * x * x)));
    }
}

/* d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2), t = tanh(k (x + a x^3)). */
void dtk_gelu_backward(float *dinp, const float *dout, const float *inp, long n)
{
    DTK_PARALLEL_FOR(n >= DTK_PAR_MIN / 8)
    for (long i = 0; i < n; i++) {
        float x = inp[i];
        float t = tanhf(GELU_K * (x + GELU_A * x * x * x));
        float dx = 0.5f * (1.0f + t) +
                   0.5f * x * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
        dinp[i] += dout[i] * dx;
    }
}

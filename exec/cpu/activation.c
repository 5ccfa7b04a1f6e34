/* Elementwise activations. tanh and sigmoid differentiate through their output, relu and
 * gelu through their input, whichever the backward formula needs. */
#include "layers.h"

#include <math.h>

void dtk_relu_forward(float *out, const float *inp, long n)
{
    for (long i = 0; i < n; i++)
        out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

/* The derivative at 0 is taken as 0 (as PyTorch and TensorFlow do). */
void dtk_relu_backward(float *dinp, const float *dout, const float *inp, long n)
{
    for (long i = 0; i < n; i++)
        if (inp[i] > 0.0f)
            dinp[i] += dout[i];
}

void dtk_tanh_forward(float *out, const float *inp, long n)
{
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
    for (long i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_A * x * x * x)));
    }
}

/* d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2), t = tanh(k (x + a x^3)). */
void dtk_gelu_backward(float *dinp, const float *dout, const float *inp, long n)
{
    for (long i = 0; i < n; i++) {
        float x = inp[i];
        float t = tanhf(GELU_K * (x + GELU_A * x * x * x));
        float dx = 0.5f * (1.0f + t) +
                   0.5f * x * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
        dinp[i] += dout[i] * dx;
    }
}

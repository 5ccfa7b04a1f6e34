/* Fully connected layer on GEMMs: out = inp W^T + b. */
#include "layers.h"

#include "parallel.h"

/* inp (N, in), weight (outd, in), bias (outd), out (N, outd). */
void dtk_dense_forward(float *out, const float *inp, const float *weight, const float *bias,
                       int N, int in, int outd)
{
    dtk_sgemm(false, true, N, outd, in, 1.0f, inp, in, weight, in, 0.0f, out, outd);
    if (bias) {
        for (int n = 0; n < N; n++) {
            float *o = out + (size_t)n * outd;
            for (int j = 0; j < outd; j++)
                o[j] += bias[j];
        }
    }
}

/* dinp (N, in) += dout W; dweight (outd, in) += dout^T inp; dbias (outd) += sum_n dout. */
void dtk_dense_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, int N, int in, int outd)
{
    if (dinp)
        dtk_sgemm(false, false, N, in, outd, 1.0f, dout, outd, weight, in, 1.0f, dinp, in);
    if (dweight)
        dtk_sgemm(true, false, outd, in, N, 1.0f, dout, outd, inp, in, 1.0f, dweight, in);
    if (dbias) {
        for (int n = 0; n < N; n++) {
            const float *g = dout + (size_t)n * outd;
            for (int j = 0; j < outd; j++)
                dbias[j] += g[j];
        }
    }
}

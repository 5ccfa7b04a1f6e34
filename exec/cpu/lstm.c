/* LSTM with Keras' layout (gates i, f, c, o; one bias) and zero initial state.
 * The input projection of all steps is one GEMM; the recurrence does one (B, 4H, H) GEMM a
 * step. Backward is backpropagation through time over the cached activations. */
#include "layers.h"

#include <math.h>
#include <string.h>

#include "parallel.h"

/* cache: gates (B, T, 4H) after their activation, c (B, T, H), h (B, T, H). */
long dtk_lstm_cache_floats(int B, int T, int H)
{
    return 6L * B * T * H;
}

/* work: dpre (B, T, 4H), dh (B, H), dc (B, H). */
long dtk_lstm_workspace_floats(int B, int T, int H)
{
    return 4L * B * T * H + 2L * B * H;
}

static float sigm(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

void dtk_lstm_forward(float *out, float *cache, const float *inp, const float *wx,
                      const float *wh, const float *b, int B, int T, int D, int H, bool seq)
{
    const long G = 4L * H;
    float *gates = cache, *cs = cache + (long)B * T * G, *hs = cs + (long)B * T * H;
    dtk_dense_forward(gates, inp, wx, b, B * T, D, (int)G);
    for (int t = 0; t < T; t++) {
        if (t > 0)
            dtk_sgemm(false, true, B, (int)G, H, 1.0f,
                      hs + (long)(t - 1) * H, T * H, wh, H, 1.0f, gates + t * G, (int)(T * G));
        for (int n = 0; n < B; n++) {
            float *gt = gates + ((long)n * T + t) * G;
            float *c = cs + ((long)n * T + t) * H, *h = hs + ((long)n * T + t) * H;
            const float *cprev = t > 0 ? c - H : NULL;
            for (int j = 0; j < H; j++) {
                float i = sigm(gt[j]), f = sigm(gt[H + j]);
                float g = tanhf(gt[2 * H + j]), o = sigm(gt[3 * H + j]);
                gt[j] = i;
                gt[H + j] = f;
                gt[2 * H + j] = g;
                gt[3 * H + j] = o;
                c[j] = (cprev ? f * cprev[j] : 0.0f) + i * g;
                h[j] = o * tanhf(c[j]);
            }
        }
    }
    for (int n = 0; n < B; n++) {
        if (seq)
            memcpy(out + (long)n * T * H, hs + (long)n * T * H, (size_t)T * H * sizeof(float));
        else
            memcpy(out + (long)n * H, hs + ((long)n * T + T - 1) * H, (size_t)H * sizeof(float));
    }
}

void dtk_lstm_backward(float *dinp, float *dwx, float *dwh, float *db, float *work,
                       const float *dout, const float *inp, const float *wx, const float *wh,
                       const float *cache, int B, int T, int D, int H, bool seq)
{
    const long G = 4L * H;
    const float *gates = cache, *cs = cache + (long)B * T * G, *hs = cs + (long)B * T * H;
    float *dpre = work, *dh = work + (long)B * T * G, *dc = dh + (long)B * H;
    memset(dh, 0, (size_t)(2L * B * H) * sizeof(float));
    for (int t = T - 1; t >= 0; t--) {
        for (int n = 0; n < B; n++) {
            float *dhn = dh + (long)n * H, *dcn = dc + (long)n * H;
            if (seq)
                dtk_accumulate(dhn, dout + ((long)n * T + t) * H, H);
            else if (t == T - 1)
                dtk_accumulate(dhn, dout + (long)n * H, H);
            const float *gt = gates + ((long)n * T + t) * G;
            const float *c = cs + ((long)n * T + t) * H;
            const float *cprev = t > 0 ? c - H : NULL;
            float *dp = dpre + ((long)n * T + t) * G;
            for (int j = 0; j < H; j++) {
                float i = gt[j], f = gt[H + j], g = gt[2 * H + j], o = gt[3 * H + j];
                float tc = tanhf(c[j]);
                float dO = dhn[j] * tc;
                float dct = dcn[j] + dhn[j] * o * (1.0f - tc * tc);
                float cp = cprev ? cprev[j] : 0.0f;
                dp[j] = dct * g * i * (1.0f - i);
                dp[H + j] = dct * cp * f * (1.0f - f);
                dp[2 * H + j] = dct * i * (1.0f - g * g);
                dp[3 * H + j] = dO * o * (1.0f - o);
                dcn[j] = dct * f;
            }
        }
        if (t > 0) {
            /* dh_{t-1} = dpre_t W_h; dW_h += dpre_t^T h_{t-1} */
            dtk_sgemm(false, false, B, H, (int)G, 1.0f,
                      dpre + t * G, (int)(T * G), wh, H, 0.0f, dh, H);
            if (dwh)
                dtk_sgemm(true, false, (int)G, H, B, 1.0f,
                          dpre + t * G, (int)(T * G), hs + (long)(t - 1) * H, T * H, 1.0f,
                          dwh, H);
        }
    }
    dtk_dense_backward(dinp, dwx, db, dpre, inp, wx, B * T, D, (int)G);
}

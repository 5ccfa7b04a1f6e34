/* Multi-head self-attention without mask (BERT-style encoder). Projections are dense layers
 * over all B*T tokens; each (sample, head) then does two small GEMMs on strided views. */
#include "layers.h"

#include <math.h>
#include <string.h>

#include "parallel.h"

/* cache: q, k, v, y (B, T, D) each, att (B, heads, T, T). */
long dtk_attention_cache_floats(int B, int T, int D, int heads)
{
    return 4L * B * T * D + (long)B * heads * T * T;
}

/* work: dy, dq, dk, dv (B, T, D) each, datt (T, T). */
long dtk_attention_workspace_floats(int B, int T, int D, int heads)
{
    return 4L * B * T * D + (long)T * T;
}

void dtk_attention_forward(float *out, float *cache, const float *inp, const float *w,
                           int B, int T, int D, int heads)
{
    const long BTD = (long)B * T * D, DD = (long)D * D;
    const int dh = D / heads, N = B * T;
    const float scale = 1.0f / sqrtf((float)dh);
    const float *bias = w + 4 * DD;
    float *q = cache, *k = q + BTD, *v = k + BTD, *y = v + BTD, *att = y + BTD;
    dtk_dense_forward(q, inp, w, bias, N, D, D);
    dtk_dense_forward(k, inp, w + DD, bias + D, N, D, D);
    dtk_dense_forward(v, inp, w + 2 * DD, bias + 2 * D, N, D, D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            long off = (long)b * T * D + (long)h * dh;
            float *a = att + ((long)b * heads + h) * T * T;
            dtk_sgemm(false, true, T, T, dh, scale, q + off, D,
                      k + off, D, 0.0f, a, T);
            dtk_softmax_forward(a, a, T, T);
            dtk_sgemm(false, false, T, dh, T, 1.0f, a, T,
                      v + off, D, 0.0f, y + off, D);
        }
    dtk_dense_forward(out, y, w + 3 * DD, bias + 3 * D, N, D, D);
}

void dtk_attention_backward(float *dinp, float *dw, float *work, const float *dout,
                            const float *inp, const float *w, const float *cache, int B, int T,
                            int D, int heads)
{
    const long BTD = (long)B * T * D, DD = (long)D * D;
    const int dh = D / heads, N = B * T;
    const float scale = 1.0f / sqrtf((float)dh);
    const float *q = cache, *k = q + BTD, *v = k + BTD, *y = v + BTD, *att = y + BTD;
    float *dy = work, *dq = dy + BTD, *dk = dq + BTD, *dv = dk + BTD, *datt = dv + BTD;
    float *dbias = dw + 4 * DD;
    memset(work, 0, (size_t)(4 * BTD) * sizeof(float));
    dtk_dense_backward(dy, dw + 3 * DD, dbias + 3 * D, dout, y, w + 3 * DD, N, D, D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            long off = (long)b * T * D + (long)h * dh;
            const float *a = att + ((long)b * heads + h) * T * T;
            /* datt = dy_h v_h^T; dv_h += att^T dy_h */
            dtk_sgemm(false, true, T, T, dh, 1.0f, dy + off, D,
                      v + off, D, 0.0f, datt, T);
            dtk_sgemm(true, false, T, dh, T, 1.0f, a, T, dy + off,
                      D, 1.0f, dv + off, D);
            /* through the row softmax, in place: ds = att (datt - rowsum(datt att)) */
            for (int i = 0; i < T; i++) {
                float *r = datt + (long)i * T;
                const float *p = a + (long)i * T;
                float dot = 0.0f;
                for (int j = 0; j < T; j++)
                    dot += r[j] * p[j];
                for (int j = 0; j < T; j++)
                    r[j] = p[j] * (r[j] - dot);
            }
            /* scores = scale q k^T: dq_h += scale ds k_h; dk_h += scale ds^T q_h */
            dtk_sgemm(false, false, T, dh, T, scale, datt, T,
                      k + off, D, 1.0f, dq + off, D);
            dtk_sgemm(true, false, T, dh, T, scale, datt, T,
                      q + off, D, 1.0f, dk + off, D);
        }
    dtk_dense_backward(dinp, dw, dbias, dq, inp, w, N, D, D);
    dtk_dense_backward(dinp, dw + DD, dbias + D, dk, inp, w + DD, N, D, D);
    dtk_dense_backward(dinp, dw + 2 * DD, dbias + 2 * D, dv, inp, w + 2 * DD, N, D, D);
}

/* The attention core of a GPT block (llm.c's attention_forward/backward): q|k|v from a dense
 * layer in, per head softmax(q k^T / sqrt(dh)) v out, optionally causal. Head h owns columns
 * [h dh, (h + 1) dh) of each of q, k, v and of the output, so the heads are independent
 * blocks: one (sample, head) pair is one task, and a tensor-parallel rank can run a
 * contiguous range of heads with the same code. */
#include "layers.h"

#include <math.h>
#include <string.h>

#include "parallel.h"

struct core_args {
    float *out, *att, *dqkv, *work;
    const float *qkv, *dout, *catt;
    int T, D, heads;
    bool causal;
};

long dtk_attn_core_workspace_floats(int T, int threads)
{
    return (long)(threads > 1 ? threads : 1) * T * T;
}

/* Row softmax of the scaled scores, in place; with causal, row i keeps columns <= i and the
 * others get probability 0 (the mask, without infinities). */
static void masked_softmax(float *s, int T, bool causal)
{
    for (int i = 0; i < T; i++) {
        float *r = s + (long)i * T;
        int n = causal ? i + 1 : T;
        float mx = r[0];
        for (int j = 1; j < n; j++)
            mx = r[j] > mx ? r[j] : mx;
        float sum = 0.0f;
        for (int j = 0; j < n; j++) {
            r[j] = expf(r[j] - mx);
            sum += r[j];
        }
        float inv = 1.0f / sum;
        for (int j = 0; j < n; j++)
            r[j] *= inv;
        for (int j = n; j < T; j++)
            r[j] = 0.0f;
    }
}

/* Task i = b * heads + h: its scores into att, its context into out. */
static void forward_task(void *ctx, long i, int t)
{
    (void)t;
    const struct core_args *a = ctx;
    const int T = a->T, D = a->D, dh = D / a->heads;
    const long b = i / a->heads, h = i % a->heads;
    const float *q = a->qkv + b * T * 3 * D + h * dh, *k = q + D, *v = q + 2 * D;
    float *p = a->att + i * T * T;
    dtk_sgemm(false, true, T, T, dh, 1.0f / sqrtf((float)dh), q, 3 * D, k, 3 * D, 0.0f, p, T);
    masked_softmax(p, T, a->causal);
    dtk_sgemm(false, false, T, dh, T, 1.0f, p, T, v, 3 * D, 0.0f, a->out + b * T * D + h * dh,
              D);
}

void dtk_attn_core_forward(float *out, float *att, const float *qkv, int B, int T, int D,
                           int heads, bool causal)
{
    struct core_args a = {.out = out, .att = att, .qkv = qkv, .T = T, .D = D, .heads = heads,
                          .causal = causal};
    dtk_parallel((long)B * heads, dtk_num_threads(), forward_task, &a);
}

/* Task i: dv += P^T dy; dP = dy v^T; dS = P (dP - rowsum(dP P)) (zero where masked, as P
 * is); dq += scale dS k; dk += scale dS^T q. dP lives in thread t's scratch. */
static void backward_task(void *ctx, long i, int t)
{
    const struct core_args *a = ctx;
    const int T = a->T, D = a->D, dh = D / a->heads;
    const long b = i / a->heads, h = i % a->heads;
    const float scale = 1.0f / sqrtf((float)dh);
    const long off = b * T * 3 * D + h * dh;
    const float *q = a->qkv + off, *k = q + D, *v = q + 2 * D;
    float *dq = a->dqkv + off, *dk = dq + D, *dv = dq + 2 * D;
    const float *dy = a->dout + b * T * D + h * dh, *p = a->catt + i * T * T;
    float *ds = a->work + (long)t * T * T;
    dtk_sgemm(true, false, T, dh, T, 1.0f, p, T, dy, D, 1.0f, dv, 3 * D);
    dtk_sgemm(false, true, T, T, dh, 1.0f, dy, D, v, 3 * D, 0.0f, ds, T);
    for (int r = 0; r < T; r++) {
        float *g = ds + (long)r * T;
        const float *pr = p + (long)r * T;
        float dot = 0.0f;
        for (int j = 0; j < T; j++)
            dot += g[j] * pr[j];
        for (int j = 0; j < T; j++)
            g[j] = pr[j] * (g[j] - dot);
    }
    dtk_sgemm(false, false, T, dh, T, scale, ds, T, k, 3 * D, 1.0f, dq, 3 * D);
    dtk_sgemm(true, false, T, dh, T, scale, ds, T, q, 3 * D, 1.0f, dk, 3 * D);
}

void dtk_attn_core_backward(float *dqkv, float *work, int threads, const float *dout,
                            const float *qkv, const float *att, int B, int T, int D, int heads)
{
    struct core_args a = {.dqkv = dqkv, .work = work, .qkv = qkv, .dout = dout, .catt = att,
                          .T = T, .D = D, .heads = heads};
    int n = dtk_num_threads() < threads ? dtk_num_threads() : threads;
    dtk_parallel((long)B * heads, n, backward_task, &a);
}

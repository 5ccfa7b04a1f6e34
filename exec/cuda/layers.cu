/* The layer kernels of the CUDA backend, mirroring exec/cpu call by call: the GEMMs take the
 * same arguments as the CPU's cblas_sgemm calls (through dtcuda_sgemm_rm), and the index
 * arithmetic is that of kernel_math.h, tested on the host by tests/test_cuda_math.c. */
#include "internal.h"

#include <math.h>

/* A grid-stride loop over [0, n). */
#define FOR_EACH(i, n) \
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (long)blockDim.x * gridDim.x)

#define LAUNCH(kernel, n, ...) \
    kernel<<<dtcuda_blocks(n), DTCUDA_THREADS, 0, cx->stream>>>(__VA_ARGS__)

/* ---- dense ---- */

/* out (N, outd) += bias on every row. */
__global__ void k_add_bias_rows(float *out, const float *bias, long n, int outd)
{
    FOR_EACH(i, n)
        out[i] += bias[i % outd];
}

/* dbias (outd) += column sums of dout (N, outd), rows in order, as the CPU adds them. */
__global__ void k_acc_colsums(float *dbias, const float *dout, int N, int outd)
{
    FOR_EACH(j, outd) {
        float s = dbias[j];
        for (long n = 0; n < N; n++)
            s += dout[n * outd + j];
        dbias[j] = s;
    }
}

int dtcuda_dense_forward(struct dtcuda *cx, float *out, const float *inp, const float *weight,
                         const float *bias, int N, int in, int outd, struct dt_error *err)
{
    if (N <= 0 || outd <= 0)
        return DT_OK;
    int st = dtcuda_sgemm_rm(cx, false, true, N, outd, in, 1.0f, inp, in, weight, in, 0.0f, out,
                             outd, err);
    if (st || !bias)
        return st;
    LAUNCH(k_add_bias_rows, (long)N * outd, out, bias, (long)N * outd, outd);
    return dtcuda_launched(err, "dense bias");
}

int dtcuda_dense_backward(struct dtcuda *cx, float *dinp, float *dweight, float *dbias,
                          const float *dout, const float *inp, const float *weight, int N,
                          int in, int outd, struct dt_error *err)
{
    if (N <= 0 || outd <= 0)
        return DT_OK;
    int st = DT_OK;
    if (dinp) /* dinp (N, in) += dout (N, outd) W (outd, in) */
        st = dtcuda_sgemm_rm(cx, false, false, N, in, outd, 1.0f, dout, outd, weight, in, 1.0f,
                             dinp, in, err);
    if (!st && dweight) /* dW (outd, in) += dout^T (outd, N) inp (N, in) */
        st = dtcuda_sgemm_rm(cx, true, false, outd, in, N, 1.0f, dout, outd, inp, in, 1.0f,
                             dweight, in, err);
    if (!st && dbias) {
        LAUNCH(k_acc_colsums, outd, dbias, dout, N, outd);
        st = dtcuda_launched(err, "dense bias gradient");
    }
    return st;
}

/* ---- relu ---- */

__global__ void k_relu_forward(float *out, const float *inp, long n)
{
    FOR_EACH(i, n)
        out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

__global__ void k_relu_backward(float *dinp, const float *dout, const float *inp, long n)
{
    FOR_EACH(i, n)
        if (inp[i] > 0.0f)
            dinp[i] += dout[i];
}

int dtcuda_relu_forward(struct dtcuda *cx, float *out, const float *inp, long n,
                        struct dt_error *err)
{
    if (n <= 0)
        return DT_OK;
    LAUNCH(k_relu_forward, n, out, inp, n);
    return dtcuda_launched(err, "relu forward");
}

int dtcuda_relu_backward(struct dtcuda *cx, float *dinp, const float *dout, const float *inp,
                         long n, struct dt_error *err)
{
    if (n <= 0)
        return DT_OK;
    LAUNCH(k_relu_backward, n, dinp, dout, inp, n);
    return dtcuda_launched(err, "relu backward");
}

/* ---- softmax + cross-entropy: one warp per row ---- */

#define ROWS_PER_BLOCK 4

__device__ float warp_max(float x)
{
    for (int o = 16; o > 0; o /= 2)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

__device__ float warp_sum(float x)
{
    for (int o = 16; o > 0; o /= 2)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__global__ void k_softmax_xent(float *probs, float *losses, const float *logits,
                               const int *labels, int B, int V)
{
    const long row = (long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= B)
        return; /* the whole warp leaves together: the shuffles below stay full-warp */
    const float *z = logits + row * V;
    float *p = probs + row * V;
    float mx = -INFINITY;
    for (int j = lane; j < V; j += 32)
        mx = fmaxf(mx, z[j]);
    mx = warp_max(mx);
    float s = 0.0f;
    for (int j = lane; j < V; j += 32)
        s += expf(z[j] - mx);
    s = warp_sum(s);
    const float inv = 1.0f / s;
    for (int j = lane; j < V; j += 32)
        p[j] = expf(z[j] - mx) * inv;
    if (lane == 0) {
        int y = labels[row];
        losses[row] = y >= 0 && y < V ? mx + logf(s) - z[y] : NAN;
    }
}

__global__ void k_softmax_xent_backward(float *dlogits, const float *probs, const int *labels,
                                        int V, long n, float inv)
{
    FOR_EACH(i, n) {
        float hot = (i % V) == labels[i / V] ? 1.0f : 0.0f;
        dlogits[i] += (probs[i] - hot) * inv;
    }
}

int dtcuda_softmax_xent_forward(struct dtcuda *cx, float *probs, float *losses,
                                const float *logits, const int *labels, int B, int V,
                                struct dt_error *err)
{
    if (B <= 0 || V <= 0)
        return DT_OK;
    unsigned blocks = (unsigned)((B + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    k_softmax_xent<<<blocks, 32 * ROWS_PER_BLOCK, 0, cx->stream>>>(probs, losses, logits,
                                                                     labels, B, V);
    return dtcuda_launched(err, "softmax cross-entropy forward");
}

int dtcuda_softmax_xent_backward(struct dtcuda *cx, float *dlogits, const float *probs,
                                 const int *labels, int B, int V, float scale,
                                 struct dt_error *err)
{
    if (B <= 0 || V <= 0)
        return DT_OK;
    long n = (long)B * V;
    LAUNCH(k_softmax_xent_backward, n, dlogits, probs, labels, V, n, scale);
    return dtcuda_launched(err, "softmax cross-entropy backward");
}

/* ---- conv2d: im2col of a chunk of samples, one GEMM per group, fold back to NCHW ---- */

__global__ void k_im2col(float *col, const float *inp, struct dtk_conv_dims d, int b0, int nb,
                         long n)
{
    FOR_EACH(i, n)
        col[i] = dtcuda_im2col_at(inp, &d, b0, nb, i);
}

/* out (nb, F, P) of the chunk from the GEMM result (F, nb P), plus bias. With nb = 1 the two
 * layouts coincide and the GEMM wrote into out: each element is then read and rewritten by
 * the same thread, in place. */
__global__ void k_fold_out(float *out, const float *tmp, const float *bias,
                           struct dtk_conv_dims d, int nb, long n)
{
    const long P = (long)d.OH * d.OW;
    FOR_EACH(i, n) {
        float v = tmp[dtcuda_fold_index(&d, nb, i)];
        out[i] = bias ? v + bias[i / P % d.F] : v;
    }
}

/* The reverse movement for backward: dtmp (F, nb P) from dout (nb, F, P) of the chunk. */
__global__ void k_unfold_dout(float *dtmp, const float *dout, struct dtk_conv_dims d, int nb,
                              long n)
{
    FOR_EACH(i, n)
        dtmp[dtcuda_fold_index(&d, nb, i)] = dout[i];
}

__global__ void k_col2im(float *dinp, const float *dcol, struct dtk_conv_dims d, int nb, long n)
{
    FOR_EACH(i, n)
        dinp[i] += dtcuda_col2im_at(dcol, &d, nb, i);
}

/* dbias[f] += sum over samples and positions of dout (B, F, P): one block per channel. */
__global__ void k_conv_dbias(float *dbias, const float *dout, int B, int F, long P)
{
    __shared__ float part[DTCUDA_THREADS];
    const int f = blockIdx.x;
    float s = 0.0f;
    for (long i = threadIdx.x; i < (long)B * P; i += blockDim.x)
        s += dout[(i / P * F + f) * P + i % P];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int h = DTCUDA_THREADS / 2; h > 0; h /= 2) {
        if ((int)threadIdx.x < h)
            part[threadIdx.x] += part[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        dbias[f] += part[0];
}

long dtcuda_conv2d_workspace_floats(const struct dtk_conv_dims *d)
{
    return dtcuda_conv_workspace(d);
}

int dtcuda_conv2d_forward(struct dtcuda *cx, float *out, float *work, const float *inp,
                          const float *weight, const float *bias, const struct dtk_conv_dims *d,
                          struct dt_error *err)
{
    const int G = d->groups > 0 ? d->groups : 1;
    const long P = (long)d->OH * d->OW, K = (long)d->C * d->kh * d->kw;
    const int Fg = d->F / G, Kg = (int)(K / G);
    const int nbmax = dtcuda_conv_chunk(d);
    float *col = work, *tmp = work + K * nbmax * P;
    if (P <= 0)
        return DT_OK;
    for (int b0 = 0; b0 < d->B; b0 += nbmax) {
        const int nb = d->B - b0 < nbmax ? d->B - b0 : nbmax;
        const long N = nb * P;
        float *o = out + (long)b0 * d->F * P;
        float *dst = nb == 1 ? o : tmp;
        LAUNCH(k_im2col, K * N, col, inp, *d, b0, nb, K * N);
        int st = dtcuda_launched(err, "conv2d im2col");
        /* dst_g (Fg, N) = W_g (Fg, Kg) col_g (Kg, N) */
        for (int g = 0; g < G && !st; g++)
            st = dtcuda_sgemm_rm(cx, false, false, Fg, (int)N, Kg, 1.0f,
                                 weight + (long)g * Fg * Kg, Kg, col + (long)g * Kg * N, (int)N,
                                 0.0f, dst + (long)g * Fg * N, (int)N, err);
        if (st)
            return st;
        LAUNCH(k_fold_out, N * d->F, o, dst, bias, *d, nb, N * d->F);
        if ((st = dtcuda_launched(err, "conv2d output")))
            return st;
    }
    return DT_OK;
}

int dtcuda_conv2d_backward(struct dtcuda *cx, float *dinp, float *dweight, float *dbias,
                           float *work, const float *dout, const float *inp, const float *weight,
                           const struct dtk_conv_dims *d, struct dt_error *err)
{
    const int G = d->groups > 0 ? d->groups : 1;
    const long P = (long)d->OH * d->OW, K = (long)d->C * d->kh * d->kw;
    const long img = (long)d->C * d->H * d->W;
    const int Fg = d->F / G, Kg = (int)(K / G);
    const int nbmax = dtcuda_conv_chunk(d);
    float *col = work, *dcol = work + K * nbmax * P, *dtmp = dcol + K * nbmax * P;
    int st = DT_OK;
    if (P <= 0)
        return DT_OK;
    if (dbias) {
        k_conv_dbias<<<d->F, DTCUDA_THREADS, 0, cx->stream>>>(dbias, dout, d->B, d->F, P);
        if ((st = dtcuda_launched(err, "conv2d bias gradient")))
            return st;
    }
    for (int b0 = 0; b0 < d->B; b0 += nbmax) {
        const int nb = d->B - b0 < nbmax ? d->B - b0 : nbmax;
        const long N = nb * P;
        const float *g_out = dout + (long)b0 * d->F * P;
        const float *dsrc = g_out;
        if (nb > 1) {
            LAUNCH(k_unfold_dout, N * d->F, dtmp, g_out, *d, nb, N * d->F);
            if ((st = dtcuda_launched(err, "conv2d gradient layout")))
                return st;
            dsrc = dtmp;
        }
        if (dweight) {
            LAUNCH(k_im2col, K * N, col, inp, *d, b0, nb, K * N);
            st = dtcuda_launched(err, "conv2d im2col");
            /* dW_g (Fg, Kg) += dtmp_g (Fg, N) col_g^T (N, Kg) */
            for (int g = 0; g < G && !st; g++)
                st = dtcuda_sgemm_rm(cx, false, true, Fg, Kg, (int)N, 1.0f,
                                     dsrc + (long)g * Fg * N, (int)N, col + (long)g * Kg * N,
                                     (int)N, 1.0f, dweight + (long)g * Fg * Kg, Kg, err);
            if (st)
                return st;
        }
        if (dinp) {
            /* dcol_g (Kg, N) = W_g^T (Kg, Fg) dtmp_g (Fg, N), then folded back by col2im */
            for (int g = 0; g < G && !st; g++)
                st = dtcuda_sgemm_rm(cx, true, false, Kg, (int)N, Fg, 1.0f,
                                     weight + (long)g * Fg * Kg, Kg, dsrc + (long)g * Fg * N,
                                     (int)N, 0.0f, dcol + (long)g * Kg * N, (int)N, err);
            if (st)
                return st;
            LAUNCH(k_col2im, nb * img, dinp + (long)b0 * img, dcol, *d, nb, nb * img);
            if ((st = dtcuda_launched(err, "conv2d col2im")))
                return st;
        }
    }
    return DT_OK;
}

/* ---- maxpool ---- */

__global__ void k_maxpool_forward(float *out, int *argmax, const float *inp,
                                  struct dtk_conv_dims d, long n)
{
    FOR_EACH(i, n)
        out[i] = dtcuda_maxpool_at(&argmax[i], inp, &d, i);
}

__global__ void k_maxpool_backward(float *dinp, const float *dout, const int *argmax,
                                   struct dtk_conv_dims d, long n)
{
    FOR_EACH(i, n)
        dinp[i] = dtcuda_maxpool_grad_at(dinp[i], dout, argmax, &d, i);
}

int dtcuda_maxpool_forward(struct dtcuda *cx, float *out, int *argmax, const float *inp,
                           const struct dtk_conv_dims *d, struct dt_error *err)
{
    long n = (long)d->B * d->C * d->OH * d->OW;
    if (n <= 0)
        return DT_OK;
    LAUNCH(k_maxpool_forward, n, out, argmax, inp, *d, n);
    return dtcuda_launched(err, "maxpool forward");
}

int dtcuda_maxpool_backward(struct dtcuda *cx, float *dinp, const float *dout, const int *argmax,
                            const struct dtk_conv_dims *d, struct dt_error *err)
{
    long n = (long)d->B * d->C * d->H * d->W;
    if (n <= 0)
        return DT_OK;
    LAUNCH(k_maxpool_backward, n, dinp, dout, argmax, *d, n);
    return dtcuda_launched(err, "maxpool backward");
}

/* ---- Adam ---- */

__global__ void k_adam(float *params, const float *grads, float *m, float *v, long n,
                       struct dtcuda_adam_scalars s)
{
    FOR_EACH(i, n)
        dtcuda_adam_at(&params[i], &m[i], &v[i], grads[i], &s);
}

int dtcuda_adam_step(struct dtcuda *cx, float *params, const float *grads, float *m, float *v,
                     long n, long t, const struct dtk_adam *cfg, struct dt_error *err)
{
    if (t < 1)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "Adam step %ld: steps count from 1", t);
    if (n <= 0)
        return DT_OK;
    LAUNCH(k_adam, n, params, grads, m, v, n, dtcuda_adam_prepare(cfg, t));
    return dtcuda_launched(err, "Adam step");
}

/* ---- SGD ---- */

__global__ void k_sgd(float *params, const float *grads, float *buf, long n, long t,
                      struct dtk_sgd c)
{
    FOR_EACH(i, n)
        dtcuda_sgd_at(&params[i], buf ? &buf[i] : NULL, grads[i], t, &c);
}

int dtcuda_sgd_step(struct dtcuda *cx, float *params, const float *grads, float *buf, long n,
                    long t, const struct dtk_sgd *cfg, struct dt_error *err)
{
    if (t < 1)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "SGD step %ld: steps count from 1", t);
    if (cfg->momentum != 0.0f && !buf)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "SGD with momentum needs its buffer");
    if (n <= 0)
        return DT_OK;
    LAUNCH(k_sgd, n, params, grads, buf, n, t, *cfg);
    return dtcuda_launched(err, "SGD step");
}

/* ---- dst += src ---- */

__global__ void k_accumulate(float *dst, const float *src, long n)
{
    FOR_EACH(i, n)
        dst[i] += src[i];
}

int dtcuda_accumulate(struct dtcuda *cx, float *dst, const float *src, long n,
                      struct dt_error *err)
{
    if (n <= 0)
        return DT_OK;
    LAUNCH(k_accumulate, n, dst, src, n);
    return dtcuda_launched(err, "accumulate");
}

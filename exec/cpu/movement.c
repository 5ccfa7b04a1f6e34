/* Layers that only move or sum data: residual add, concat, upsample, embedding, seqpool. */
#include "layers.h"

#include <string.h>

#include "parallel.h"

/* Blocks of 8 over restrict pointers: vectorized by GCC at -O2 (see activation.c). */
static void add_range(float *restrict o, const float *restrict x, const float *restrict y, long i,
                      long n)
{
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            o[i + k] = x[i + k] + y[i + k];
    for (; i < n; i++)
        o[i] = x[i] + y[i];
}

static void acc_range(float *restrict o, const float *restrict x, long i, long n)
{
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            o[i + k] += x[i + k];
    for (; i < n; i++)
        o[i] += x[i];
}

void dtk_add_forward(float *restrict o, const float *restrict x, const float *restrict y, long n)
{
    DTK_PARALLEL_FOR(n >= DTK_PAR_MIN)
    for (long c = 0; c < n; c += DTK_PAR_CHUNK)
        add_range(o, x, y, c, c + DTK_PAR_CHUNK < n ? c + DTK_PAR_CHUNK : n);
}

void dtk_accumulate(float *restrict o, const float *restrict x, long n)
{
    DTK_PARALLEL_FOR(n >= DTK_PAR_MIN)
    for (long c = 0; c < n; c += DTK_PAR_CHUNK)
        acc_range(o, x, c, c + DTK_PAR_CHUNK < n ? c + DTK_PAR_CHUNK : n);
}

void dtk_concat_forward(float *out, const float *inp, int B, int Cin, int S, int Cout, int c_off)
{
    for (int b = 0; b < B; b++)
        memcpy(out + ((long)b * Cout + c_off) * S, inp + (long)b * Cin * S,
               (size_t)Cin * S * sizeof(float));
}

void dtk_concat_backward(float *dinp, const float *dout, int B, int Cin, int S, int Cout,
                         int c_off)
{
    for (int b = 0; b < B; b++)
        dtk_accumulate(dinp + (long)b * Cin * S, dout + ((long)b * Cout + c_off) * S,
                       (long)Cin * S);
}

/* inp (B, C, H, W) -> out (B, C, H*s, W*s) */
void dtk_upsample_forward(float *out, const float *inp, int B, int C, int H, int W, int s)
{
    const int OW = W * s;
    DTK_PARALLEL_FOR((long)B * C * H * W * s * s >= DTK_PAR_MIN)
    for (long bc = 0; bc < (long)B * C; bc++) {
        const float *x = inp + bc * H * W;
        float *o = out + bc * H * s * OW;
        for (int oh = 0; oh < H * s; oh++) {
            const float *xr = x + (long)(oh / s) * W;
            float *orow = o + (long)oh * OW;
            for (int ow = 0; ow < OW; ow++)
                orow[ow] = xr[ow / s];
        }
    }
}

void dtk_upsample_backward(float *dinp, const float *dout, int B, int C, int H, int W, int s)
{
    const int OW = W * s;
    DTK_PARALLEL_FOR((long)B * C * H * W * s * s >= DTK_PAR_MIN)
    for (long bc = 0; bc < (long)B * C; bc++) {
        float *dx = dinp + bc * H * W;
        const float *g = dout + bc * H * s * OW;
        for (int oh = 0; oh < H * s; oh++) {
            float *dr = dx + (long)(oh / s) * W;
            const float *grow = g + (long)oh * OW;
            for (int ow = 0; ow < OW; ow++)
                dr[ow / s] += grow[ow];
        }
    }
}

/* ids (N), table (vocab, D), out (N, D) */
void dtk_embedding_forward(float *out, const int *ids, const float *table, int N, int vocab,
                           int D)
{
    dtk_embedding_forward_rows(out, ids, table, N, 0, vocab, D);
}

void dtk_embedding_backward(float *dtable, const float *dout, const int *ids, int N, int vocab,
                            int D)
{
    dtk_embedding_backward_rows(dtable, dout, ids, N, 0, vocab, D);
}

void dtk_embedding_forward_rows(float *out, const int *ids, const float *table, int N,
                                long first, long rows, int D)
{
    for (int n = 0; n < N; n++) {
        float *o = out + (long)n * D;
        long id = ids[n] - first;
        if (id < 0 || id >= rows)
            memset(o, 0, (size_t)D * sizeof(float));
        else
            memcpy(o, table + id * D, (size_t)D * sizeof(float));
    }
}

void dtk_embedding_backward_rows(float *dtable, const float *dout, const int *ids, int N,
                                 long first, long rows, int D)
{
    for (int n = 0; n < N; n++) {
        long id = ids[n] - first;
        if (id >= 0 && id < rows)
            dtk_accumulate(dtable + id * D, dout + (long)n * D, D);
    }
}

void dtk_rows_add_forward(float *out, const float *rows, int B, int T, int D)
{
    for (int b = 0; b < B; b++)
        dtk_accumulate(out + (long)b * T * D, rows, (long)T * D);
}

void dtk_rows_add_backward(float *drows, const float *dout, int B, int T, int D)
{
    for (int b = 0; b < B; b++)
        dtk_accumulate(drows, dout + (long)b * T * D, (long)T * D);
}

/* inp (B, T, D) -> out (B, D): token 0 of each sequence. */
void dtk_seqpool_forward(float *out, const float *inp, int B, int T, int D)
{
    for (int b = 0; b < B; b++)
        memcpy(out + (long)b * D, inp + (long)b * T * D, (size_t)D * sizeof(float));
}

void dtk_seqpool_backward(float *dinp, const float *dout, int B, int T, int D)
{
    for (int b = 0; b < B; b++)
        dtk_accumulate(dinp + (long)b * T * D, dout + (long)b * D, D);
}

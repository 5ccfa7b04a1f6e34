/* Softmax, cross-entropy fused with it, binary cross-entropy fused with a sigmoid, and
 * accuracy counting. The general form works on (B, C, S): the softmax runs over the C values
 * of each (b, s), S apart in memory, which is the channel axis of an NCHW per-pixel classifier
 * (S = H*W) and the last axis of a (B, V) matrix (C = V, S = 1). Loss sums are in double. */
#include "layers.h"

#include <float.h>
#include <math.h>

#include "parallel.h"

static void softmax_group(float *p, const float *z, int C, long S)
{
    float mx = z[0];
    for (int j = 1; j < C; j++)
        if (z[j * S] > mx)
            mx = z[j * S];
    float s = 0.0f;
    for (int j = 0; j < C; j++) {
        p[j * S] = expf(z[j * S] - mx);
        s += p[j * S];
    }
    float inv = 1.0f / s;
    for (int j = 0; j < C; j++)
        p[j * S] *= inv;
}

void dtk_softmax_ch_forward(float *probs, const float *logits, int B, int C, long S)
{
    DTK_PARALLEL_FOR((long)B * C * S >= DTK_PAR_MIN / 8)
    for (int b = 0; b < B; b++)
        for (long s = 0; s < S; s++)
            softmax_group(probs + (long)b * C * S + s, logits + (long)b * C * S + s, C, S);
}

void dtk_softmax_ch_backward(float *dinp, const float *dout, const float *probs, int B, int C,
                             long S)
{
    DTK_PARALLEL_FOR((long)B * C * S >= DTK_PAR_MIN / 8)
    for (int b = 0; b < B; b++)
        for (long s = 0; s < S; s++) {
            long o = (long)b * C * S + s;
            const float *p = probs + o, *g = dout + o;
            float *dx = dinp + o;
            float dot = 0.0f;
            for (int j = 0; j < C; j++)
                dot += g[j * S] * p[j * S];
            for (int j = 0; j < C; j++)
                dx[j * S] += p[j * S] * (g[j * S] - dot);
        }
}

double dtk_softmax_xent_ch_forward(float *probs, const float *logits, const int *labels, int B,
                                   int C, long S)
{
    double total = 0.0;
    for (int b = 0; b < B; b++)
        for (long s = 0; s < S; s++) {
            long o = (long)b * C * S + s;
            const float *z = logits + o;
            softmax_group(probs + o, z, C, S);
            double mx = z[0];
            for (int j = 1; j < C; j++)
                if (z[j * S] > mx)
                    mx = z[j * S];
            double sum = 0.0;
            for (int j = 0; j < C; j++)
                sum += exp((double)z[j * S] - mx);
            total += mx + log(sum) - (double)z[labels[(long)b * S + s] * S];
        }
    return B > 0 ? total / ((double)B * S) : 0.0;
}

void dtk_softmax_xent_ch_backward(float *dlogits, const float *probs, const int *labels, int B,
                                  int C, long S, float scale)
{
    for (int b = 0; b < B; b++)
        for (long s = 0; s < S; s++) {
            long o = (long)b * C * S + s;
            int y = labels[(long)b * S + s];
            for (int j = 0; j < C; j++)
                dlogits[o + j * S] += (probs[o + j * S] - (j == y ? 1.0f : 0.0f)) * scale;
        }
}

void dtk_vocab_xent_max(float *mx, const float *logits, int G, int C, int valid)
{
    for (int g = 0; g < G; g++) {
        const float *z = logits + (long)g * C;
        float m = -FLT_MAX;
        for (int j = 0; j < valid; j++)
            m = z[j] > m ? z[j] : m;
        mx[g] = m;
    }
}

void dtk_vocab_xent_sums(float *target, float *sumexp, const float *logits, const float *mx,
                         const int *labels, int G, int C, int valid, long first)
{
    for (int g = 0; g < G; g++) {
        const float *z = logits + (long)g * C;
        float s = 0.0f;
        for (int j = 0; j < valid; j++)
            s += expf(z[j] - mx[g]);
        sumexp[g] = s;
        long y = labels[g] - first;
        target[g] = y >= 0 && y < valid ? z[y] : 0.0f;
    }
}

double dtk_vocab_xent_finish(float *probs, float *dlogits, const float *logits,
                             const float *mx, const float *target, const float *sumexp,
                             const int *labels, int G, int C, int valid, long first,
                             float scale)
{
    double total = 0.0;
    for (int g = 0; g < G; g++) {
        long o = (long)g * C, y = labels[g] - first;
        float inv = 1.0f / sumexp[g];
        for (int j = 0; j < C; j++) {
            probs[o + j] = j < valid ? expf(logits[o + j] - mx[g]) * inv : 0.0f;
            if (dlogits)
                dlogits[o + j] += (probs[o + j] - (j == y ? 1.0f : 0.0f)) * scale;
        }
        total += (double)mx[g] + log((double)sumexp[g]) - (double)target[g];
    }
    return G > 0 ? total / G : 0.0;
}

long dtk_count_correct_ch(const float *scores, const int *labels, int B, int C, long S)
{
    long correct = 0;
    for (int b = 0; b < B; b++)
        for (long s = 0; s < S; s++) {
            const float *v = scores + (long)b * C * S + s;
            int arg = 0;
            for (int j = 1; j < C; j++)
                if (v[j * S] > v[arg * S])
                    arg = j;
            correct += arg == labels[(long)b * S + s];
        }
    return correct;
}

/* ---- the (B, V) forms ---- */

void dtk_softmax_forward(float *probs, const float *logits, int B, int V)
{
    dtk_softmax_ch_forward(probs, logits, B, V, 1);
}

void dtk_softmax_backward(float *dinp, const float *dout, const float *probs, int B, int V)
{
    dtk_softmax_ch_backward(dinp, dout, probs, B, V, 1);
}

double dtk_softmax_xent_forward(float *probs, const float *logits, const int *labels, int B,
                                int V)
{
    return dtk_softmax_xent_ch_forward(probs, logits, labels, B, V, 1);
}

void dtk_softmax_xent_backward(float *dlogits, const float *probs, const int *labels, int B,
                               int V)
{
    dtk_softmax_xent_ch_backward(dlogits, probs, labels, B, V, 1, 1.0f / (float)B);
}

int dtk_count_correct(const float *scores, const int *labels, int B, int V)
{
    return (int)dtk_count_correct_ch(scores, labels, B, V, 1);
}

/* ---- sigmoid + binary cross-entropy ---- */

/* loss(z, y) = max(z, 0) - z y + log(1 + exp(-|z|)), the overflow-free form of
 * -(y log p + (1 - y) log(1 - p)), p = sigmoid(z). */
double dtk_sigmoid_bce_forward(float *probs, const float *logits, const int *labels, long n)
{
    double total = 0.0;
    for (long i = 0; i < n; i++) {
        double z = logits[i];
        probs[i] = 1.0f / (1.0f + expf(-logits[i]));
        total += (z > 0 ? z : 0) - z * labels[i] + log1p(exp(-fabs(z)));
    }
    return n > 0 ? total / (double)n : 0.0;
}

void dtk_sigmoid_bce_backward(float *dlogits, const float *probs, const int *labels, long n,
                              float scale)
{
    for (long i = 0; i < n; i++)
        dlogits[i] += (probs[i] - (float)labels[i]) * scale;
}

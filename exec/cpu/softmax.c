/* Softmax, cross-entropy fused with it, and accuracy counting. */
#include "layers.h"

#include <math.h>

static void softmax_row(float *p, const float *z, int V)
{
    float mx = z[0];
    for (int j = 1; j < V; j++)
        if (z[j] > mx)
            mx = z[j];
    float s = 0.0f;
    for (int j = 0; j < V; j++) {
        p[j] = expf(z[j] - mx);
        s += p[j];
    }
    float inv = 1.0f / s;
    for (int j = 0; j < V; j++)
        p[j] *= inv;
}

/* logits (B, V) -> probs (B, V) */
void dtk_softmax_forward(float *probs, const float *logits, int B, int V)
{
    for (int b = 0; b < B; b++)
        softmax_row(probs + (long)b * V, logits + (long)b * V, V);
}

void dtk_softmax_backward(float *dinp, const float *dout, const float *probs, int B, int V)
{
    for (int b = 0; b < B; b++) {
        const float *p = probs + (long)b * V, *g = dout + (long)b * V;
        float *dx = dinp + (long)b * V;
        float dot = 0.0f;
        for (int j = 0; j < V; j++)
            dot += g[j] * p[j];
        for (int j = 0; j < V; j++)
            dx[j] += p[j] * (g[j] - dot);
    }
}

double dtk_softmax_xent_forward(float *probs, const float *logits, const int *labels, int B,
                                int V)
{
    double total = 0.0;
    for (int b = 0; b < B; b++) {
        const float *z = logits + (long)b * V;
        softmax_row(probs + (long)b * V, z, V);
        double mx = z[0];
        for (int j = 1; j < V; j++)
            if (z[j] > mx)
                mx = z[j];
        double s = 0.0;
        for (int j = 0; j < V; j++)
            s += exp((double)z[j] - mx);
        total += mx + log(s) - (double)z[labels[b]];
    }
    return B > 0 ? total / B : 0.0;
}

void dtk_softmax_xent_backward(float *dlogits, const float *probs, const int *labels, int B,
                               int V)
{
    const float inv = 1.0f / (float)B;
    for (int b = 0; b < B; b++) {
        const float *p = probs + (long)b * V;
        float *dz = dlogits + (long)b * V;
        for (int j = 0; j < V; j++)
            dz[j] += (p[j] - (j == labels[b] ? 1.0f : 0.0f)) * inv;
    }
}

int dtk_count_correct(const float *scores, const int *labels, int B, int V)
{
    int correct = 0;
    for (int b = 0; b < B; b++) {
        const float *s = scores + (long)b * V;
        int arg = 0;
        for (int j = 1; j < V; j++)
            if (s[j] > s[arg])
                arg = j;
        correct += arg == labels[b];
    }
    return correct;
}

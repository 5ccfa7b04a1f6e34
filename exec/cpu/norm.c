/* Batch normalisation (per channel over batch and space) and layer normalisation (per row).
 * Sums are accumulated in double: a channel of a large batch holds 10^5 values or more. */
#include "layers.h"

#include <math.h>

#include "parallel.h"

/* inp, out (B, C, S); gamma, beta, mean, rstd, running_* (C). */
void dtk_batchnorm_forward_train(float *out, float *mean, float *rstd, float *running_mean,
                                 float *running_var, const float *inp, const float *gamma,
                                 const float *beta, int B, int C, int S, float eps,
                                 float momentum)
{
    const long M = (long)B * S;
    DTK_PARALLEL_FOR(M * C >= DTK_PAR_MIN)
    for (int c = 0; c < C; c++) {
        double s = 0.0;
        for (int b = 0; b < B; b++) {
            const float *x = inp + ((long)b * C + c) * S;
            for (int i = 0; i < S; i++)
                s += x[i];
        }
        double mu = s / (double)M;
        double ss = 0.0;
        for (int b = 0; b < B; b++) {
            const float *x = inp + ((long)b * C + c) * S;
            for (int i = 0; i < S; i++)
                ss += ((double)x[i] - mu) * ((double)x[i] - mu);
        }
        double var = ss / (double)M;
        float r = (float)(1.0 / sqrt(var + eps));
        mean[c] = (float)mu;
        rstd[c] = r;
        if (running_mean && running_var) {
            double unbiased = M > 1 ? ss / (double)(M - 1) : var;
            running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * (float)mu;
            running_var[c] = (1.0f - momentum) * running_var[c] + momentum * (float)unbiased;
        }
        float g = gamma[c] * r, sh = beta[c] - gamma[c] * r * (float)mu;
        for (int b = 0; b < B; b++) {
            const float *x = inp + ((long)b * C + c) * S;
            float *o = out + ((long)b * C + c) * S;
            for (int i = 0; i < S; i++)
                o[i] = g * x[i] + sh;
        }
    }
}

void dtk_batchnorm_forward_eval(float *out, const float *inp, const float *gamma,
                                const float *beta, const float *running_mean,
                                const float *running_var, int B, int C, int S, float eps)
{
    DTK_PARALLEL_FOR((long)B * C * S >= DTK_PAR_MIN)
    for (int c = 0; c < C; c++) {
        float r = 1.0f / sqrtf(running_var[c] + eps);
        float g = gamma[c] * r, sh = beta[c] - g * running_mean[c];
        for (int b = 0; b < B; b++) {
            const float *x = inp + ((long)b * C + c) * S;
            float *o = out + ((long)b * C + c) * S;
            for (int i = 0; i < S; i++)
                o[i] = g * x[i] + sh;
        }
    }
}

/* With xhat = (x - mean) rstd and M = B*S:
 * dgamma += sum dout xhat, dbeta += sum dout,
 * dinp += gamma rstd / M (M dout - sum dout - xhat sum dout xhat). */
void dtk_batchnorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout,
                            const float *inp, const float *gamma, const float *mean,
                            const float *rstd, int B, int C, int S)
{
    const long M = (long)B * S;
    DTK_PARALLEL_FOR(M * C >= DTK_PAR_MIN)
    for (int c = 0; c < C; c++) {
        const float mu = mean[c], r = rstd[c];
        double sdy = 0.0, sdyx = 0.0;
        for (int b = 0; b < B; b++) {
            const float *x = inp + ((long)b * C + c) * S, *g = dout + ((long)b * C + c) * S;
            for (int i = 0; i < S; i++) {
                sdy += g[i];
                sdyx += (double)g[i] * ((x[i] - mu) * r);
            }
        }
        if (dgamma)
            dgamma[c] += (float)sdyx;
        if (dbeta)
            dbeta[c] += (float)sdy;
        if (!dinp)
            continue;
        const float k = gamma[c] * r / (float)M;
        const float mdy = (float)sdy, mdyx = (float)sdyx;
        for (int b = 0; b < B; b++) {
            const float *x = inp + ((long)b * C + c) * S, *g = dout + ((long)b * C + c) * S;
            float *dx = dinp + ((long)b * C + c) * S;
            for (int i = 0; i < S; i++)
                dx[i] += k * ((float)M * g[i] - mdy - (x[i] - mu) * r * mdyx);
        }
    }
}

/* inp, out (N, D); gamma, beta (D); mean, rstd (N). Biased variance, as both frameworks. */
void dtk_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *gamma, const float *beta, int N, int D, float eps)
{
    DTK_PARALLEL_FOR((long)N * D >= DTK_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (long)n * D;
        float *o = out + (long)n * D;
        double s = 0.0, ss = 0.0;
        for (int i = 0; i < D; i++)
            s += x[i];
        double mu = s / D;
        for (int i = 0; i < D; i++)
            ss += ((double)x[i] - mu) * ((double)x[i] - mu);
        float r = (float)(1.0 / sqrt(ss / D + eps));
        mean[n] = (float)mu;
        rstd[n] = r;
        for (int i = 0; i < D; i++)
            o[i] = ((x[i] - (float)mu) * r) * gamma[i] + beta[i];
    }
}

/* dxhat = dout gamma; dinp += rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)). */
void dtk_layernorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout,
                            const float *inp, const float *gamma, const float *mean,
                            const float *rstd, int N, int D)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (long)n * D, *g = dout + (long)n * D;
        const float mu = mean[n], r = rstd[n];
        float sdx = 0.0f, sdxx = 0.0f;
        for (int i = 0; i < D; i++) {
            float xhat = (x[i] - mu) * r;
            float dxhat = g[i] * gamma[i];
            sdx += dxhat;
            sdxx += dxhat * xhat;
            if (dgamma)
                dgamma[i] += g[i] * xhat;
            if (dbeta)
                dbeta[i] += g[i];
        }
        if (!dinp)
            continue;
        sdx /= (float)D;
        sdxx /= (float)D;
        float *dx = dinp + (long)n * D;
        for (int i = 0; i < D; i++) {
            float xhat = (x[i] - mu) * r;
            dx[i] += r * (g[i] * gamma[i] - sdx - xhat * sdxx);
        }
    }
}

/* Adam (Keras and PyTorch flavors) and SGD with momentum, one flat loop each. */
#include "optim.h"

#include <math.h>

#include "parallel.h"

struct dtk_adam dtk_adam_defaults(enum dtk_adam_flavor flavor)
{
    struct dtk_adam a = {flavor, 0.001f, 0.9f, 0.999f, 1e-7f};
    if (flavor == DTK_ADAM_PYTORCH)
        a.eps = 1e-8f;
    return a;
}

void dtk_adam_step(float *params, const float *grads, float *m, float *v, long n, long t,
                   const struct dtk_adam *cfg)
{
    const float b1 = cfg->beta1, b2 = cfg->beta2, eps = cfg->eps;
    const double bc1 = 1.0 - pow(cfg->beta1, (double)t);
    const double bc2 = 1.0 - pow(cfg->beta2, (double)t);
    if (cfg->flavor == DTK_ADAM_KERAS) {
        const float alpha = (float)(cfg->lr * sqrt(bc2) / bc1);
        DTK_PARALLEL_FOR(n >= DTK_PAR_MIN)
        for (long i = 0; i < n; i++) {
            float g = grads[i];
            m[i] += (g - m[i]) * (1.0f - b1);
            v[i] += (g * g - v[i]) * (1.0f - b2);
            params[i] -= alpha * m[i] / (sqrtf(v[i]) + eps);
        }
    } else {
        const float step = (float)(cfg->lr / bc1);
        const float rs2 = (float)(1.0 / sqrt(bc2));
        DTK_PARALLEL_FOR(n >= DTK_PAR_MIN)
        for (long i = 0; i < n; i++) {
            float g = grads[i];
            m[i] = b1 * m[i] + (1.0f - b1) * g;
            v[i] = b2 * v[i] + (1.0f - b2) * g * g;
            params[i] -= step * m[i] / (sqrtf(v[i]) * rs2 + eps);
        }
    }
}

void dtk_sgd_step(float *params, const float *grads, float *buf, long n, long t,
                  const struct dtk_sgd *cfg)
{
    const float lr = cfg->lr, mom = cfg->momentum, damp = cfg->dampening, wd = cfg->weight_decay;
    DTK_PARALLEL_FOR(n >= DTK_PAR_MIN)
    for (long i = 0; i < n; i++) {
        float g = grads[i] + wd * params[i];
        if (mom != 0.0f) {
            buf[i] = t <= 1 ? g : mom * buf[i] + (1.0f - damp) * g;
            g = cfg->nesterov ? g + mom * buf[i] : buf[i];
        }
        params[i] -= lr * g;
    }
}

/* Adam (Keras and PyTorch flavors) and SGD with momentum, one flat loop each. */
#include "optim.h"

#include <math.h>
#ifdef __SSE2__
#include <immintrin.h>
#endif

#include "parallel.h"

struct dtk_adam dtk_adam_defaults(enum dtk_adam_flavor flavor)
{
    struct dtk_adam a = {flavor, 0.001f, 0.9f, 0.999f, 1e-7f};
    if (flavor == DTK_ADAM_PYTORCH)
        a.eps = 1e-8f;
    return a;
}

/* One Adam update of elements [i, n). Keras' form (keras = true): m += (g - m)(1 - b1),
 * v += (g^2 - v)(1 - b2), p -= step m / (sqrt(v) + eps); PyTorch's: m = b1 m + (1 - b1) g,
 * v = b2 v + (1 - b2) g^2, p -= step m / (sqrt(v) rs2 + eps). The vector loop does exactly
 * the scalar loop's float operations in the same order (sqrtps and divps round as sqrtf and /
 * do; no FMA), so results do not depend on which of them ran an element. A plain loop would
 * stay scalar: sqrtf() may set errno, which keeps GCC from vectorizing it. */
static void adam_range(float *restrict p, const float *restrict g, float *restrict m,
                       float *restrict v, long i, long n, bool keras, float b1, float b2,
                       float step, float rs2, float eps)
{
    const float c1 = 1.0f - b1, c2 = 1.0f - b2;
#ifdef __SSE2__
    const __m128 vb1 = _mm_set1_ps(b1), vc1 = _mm_set1_ps(c1), vb2 = _mm_set1_ps(b2),
                 vc2 = _mm_set1_ps(c2), vstep = _mm_set1_ps(step), vrs2 = _mm_set1_ps(rs2),
                 veps = _mm_set1_ps(eps);
    for (; i + 4 <= n; i += 4) {
        __m128 gi = _mm_loadu_ps(g + i), mi = _mm_loadu_ps(m + i), vi = _mm_loadu_ps(v + i);
        __m128 den;
        if (keras) {
            mi = _mm_add_ps(mi, _mm_mul_ps(_mm_sub_ps(gi, mi), vc1));
            vi = _mm_add_ps(vi, _mm_mul_ps(_mm_sub_ps(_mm_mul_ps(gi, gi), vi), vc2));
            den = _mm_add_ps(_mm_sqrt_ps(vi), veps);
        } else {
            mi = _mm_add_ps(_mm_mul_ps(vb1, mi), _mm_mul_ps(vc1, gi));
            vi = _mm_add_ps(_mm_mul_ps(vb2, vi), _mm_mul_ps(_mm_mul_ps(vc2, gi), gi));
            den = _mm_add_ps(_mm_mul_ps(_mm_sqrt_ps(vi), vrs2), veps);
        }
        _mm_storeu_ps(m + i, mi);
        _mm_storeu_ps(v + i, vi);
        __m128 upd = _mm_div_ps(_mm_mul_ps(vstep, mi), den);
        _mm_storeu_ps(p + i, _mm_sub_ps(_mm_loadu_ps(p + i), upd));
    }
#endif
    for (; i < n; i++) {
        float gi = g[i];
        if (keras) {
            m[i] += (gi - m[i]) * c1;
            v[i] += (gi * gi - v[i]) * c2;
            p[i] -= step * m[i] / (sqrtf(v[i]) + eps);
        } else {
            m[i] = b1 * m[i] + c1 * gi;
            v[i] = b2 * v[i] + c2 * gi * gi;
            p[i] -= step * m[i] / (sqrtf(v[i]) * rs2 + eps);
        }
    }
}

/* One Adam step's arrays and factors, for ranges run on the pool. */
struct adam_job {
    float *p;
    const float *g;
    float *m, *v;
    bool keras;
    float b1, b2, step, rs2, eps;
};

static void adam_task(void *ctx, long lo, long hi)
{
    const struct adam_job *j = ctx;
    adam_range(j->p, j->g, j->m, j->v, lo, hi, j->keras, j->b1, j->b2, j->step, j->rs2, j->eps);
}

void dtk_adam_step(float *params, const float *grads, float *m, float *v, long n, long t,
                   const struct dtk_adam *cfg)
{
    const double bc1 = 1.0 - pow(cfg->beta1, (double)t);
    const double bc2 = 1.0 - pow(cfg->beta2, (double)t);
    /* Keras: alpha_t = lr sqrt(bc2) / bc1; PyTorch: lr / bc1 and 1 / sqrt(bc2) */
    const bool keras = cfg->flavor == DTK_ADAM_KERAS;
    const float step = keras ? (float)(cfg->lr * sqrt(bc2) / bc1) : (float)(cfg->lr / bc1);
    const float rs2 = keras ? 1.0f : (float)(1.0 / sqrt(bc2));
    struct adam_job j = {params, grads, m, v, keras, cfg->beta1, cfg->beta2, step, rs2,
                         cfg->eps};
    dtk_parallel_range(n, DTK_PAR_MIN, adam_task, &j);
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

/* Keras and PyTorch default initialisations. */
#include "init.h"

#include <math.h>
#include <string.h>

void dtk_init_uniform(float *p, long n, float limit, struct dtk_rng *rng)
{
    for (long i = 0; i < n; i++)
        p[i] = dtk_rng_uniform_range(rng, -limit, limit);
}

static void fill(float *p, long n, float value)
{
    for (long i = 0; i < n; i++)
        p[i] = value;
}

static float glorot(double fan_in, double fan_out)
{
    return (float)sqrt(6.0 / (fan_in + fan_out));
}

/* Orthogonal columns (Keras' Orthogonal for a (H, 4H) kernel, stored transposed as our
 * (4H, H) W_h): Gram-Schmidt of a normal matrix, which is its QR with diag(R) > 0. */
static void orthogonal_columns(float *w, int rows, int cols, struct dtk_rng *rng)
{
    for (long i = 0; i < (long)rows * cols; i++)
        w[i] = dtk_rng_normal(rng);
    for (int j = 0; j < cols; j++) {
        for (int k = 0; k < j; k++) {
            double dot = 0.0;
            for (int i = 0; i < rows; i++)
                dot += (double)w[(long)i * cols + j] * w[(long)i * cols + k];
            for (int i = 0; i < rows; i++)
                w[(long)i * cols + j] -= (float)dot * w[(long)i * cols + k];
        }
        double nrm = 0.0;
        for (int i = 0; i < rows; i++)
            nrm += (double)w[(long)i * cols + j] * w[(long)i * cols + j];
        float inv = nrm > 0.0 ? (float)(1.0 / sqrt(nrm)) : 0.0f;
        for (int i = 0; i < rows; i++)
            w[(long)i * cols + j] *= inv;
    }
}

static long last_dim(const struct dt_shape *s)
{
    return s->d[s->rank - 1];
}

void dtk_init_layer(float *params, const struct dt_layer *L, enum dtk_init init,
                    struct dtk_rng *rng)
{
    float *p = params + L->param_offset;
    const bool keras = init == DTK_INIT_GLOROT;
    if (L->params <= 0)
        return;
    switch (L->kind) {
    case DT_L_DENSE: {
        long in = last_dim(&L->in_shape), out = L->units;
        float lim = keras ? glorot((double)in, (double)out) : (float)(1.0 / sqrt((double)in));
        dtk_init_uniform(p, in * out, lim, rng);
        if (L->bias) {
            if (keras)
                fill(p + in * out, out, 0.0f);
            else
                dtk_init_uniform(p + in * out, out, lim, rng);
        }
        break;
    }
    case DT_L_CONV2D:
    case DT_L_CONV2D_TRANSPOSE: {
        int g = L->groups > 0 ? L->groups : 1;
        long c = L->in_shape.d[0], f = L->units, rf = (long)L->kh * L->kw;
        long nw = L->kind == DT_L_CONV2D ? f * (c / g) * rf : c * f * rf;
        float lim;
        if (keras)
            lim = L->kind == DT_L_CONV2D ? glorot((double)(rf * c / g), (double)(rf * f))
                                         : glorot((double)(rf * f), (double)(rf * c));
        else
            lim = (float)(1.0 / sqrt((double)(L->kind == DT_L_CONV2D ? rf * c / g : rf * f / g)));
        dtk_init_uniform(p, nw, lim, rng);
        if (L->bias) {
            if (keras)
                fill(p + nw, f, 0.0f);
            else
                dtk_init_uniform(p + nw, f, lim, rng);
        }
        break;
    }
    case DT_L_BATCHNORM:
    case DT_L_LAYERNORM: {
        long c = L->params / 2;
        fill(p, c, 1.0f);
        fill(p + c, c, 0.0f);
        break;
    }
    case DT_L_EMBEDDING:
        if (keras)
            dtk_init_uniform(p, L->params, 0.05f, rng);
        else
            for (long i = 0; i < L->params; i++)
                p[i] = dtk_rng_normal(rng);
        break;
    case DT_L_LSTM: {
        long h = L->units, d = last_dim(&L->in_shape);
        float *wx = p, *wh = p + 4 * h * d, *b = wh + 4 * h * h;
        if (keras) {
            dtk_init_uniform(wx, 4 * h * d, glorot((double)d, (double)(4 * h)), rng);
            orthogonal_columns(wh, (int)(4 * h), (int)h, rng);
            fill(b, 4 * h, 0.0f);
            fill(b + h, h, 1.0f); /* forget gate */
        } else {
            dtk_init_uniform(p, L->params, (float)(1.0 / sqrt((double)h)), rng);
        }
        break;
    }
    case DT_L_ATTENTION: {
        long d = last_dim(&L->in_shape), heads = L->heads > 0 ? L->heads : 1, dh = d / heads;
        if (keras) {
            dtk_init_uniform(p, 3 * d * d, glorot((double)(heads * d), (double)(dh * d)), rng);
            dtk_init_uniform(p + 3 * d * d, d * d, glorot((double)d, (double)(heads * d)), rng);
        } else {
            dtk_init_uniform(p, 3 * d * d, glorot((double)d, (double)(3 * d)), rng);
            dtk_init_uniform(p + 3 * d * d, d * d, (float)(1.0 / sqrt((double)d)), rng);
        }
        fill(p + 4 * d * d, 4 * d, 0.0f);
        break;
    }
    default:
        /* A kind with parameters this file does not know: small uniform values. */
        dtk_init_uniform(p, L->params, 0.05f, rng);
        break;
    }
}

void dtk_init_model(float *params, const struct dt_model *model, enum dtk_init init,
                    uint64_t seed)
{
    struct dtk_rng rng;
    dtk_rng_seed(&rng, seed);
    memset(params, 0, (size_t)model->total_params * sizeof(float));
    for (int i = 0; i < model->n_layers; i++)
        dtk_init_layer(params, &model->layers[i], init, &rng);
}

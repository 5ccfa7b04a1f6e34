/* The GPU terms of the compute cost model: GEMM shape quantisation, Winograd convolutions
 * and activation fusion (include/dt/costmodel.h; README "The GPU compute model"). */
#include "dt/costmodel.h"

#include <math.h>

double dt_gemm_quantisation(double m, double n, int tile, int sms, bool waves)
{
    if (tile <= 0 || sms <= 0 || !(m > 0) || !(n > 0))
        return 1;
    double tm = m <= tile / 2 ? tile / 2 : tile, tn = n <= tile / 2 ? tile / 2 : tile;
    double tiles_m = ceil(m / tm), tiles_n = ceil(n / tn);
    double slots = tiles_m * tiles_n; /* tiles run, each of tm x tn */
    if (waves)
        slots = ceil(slots / sms) * sms;
    return m * n / (slots * tm * tn);
}

/* Spatial size (H W) of a (C,H,W) shape; 1 for others. */
static double pixels(const struct dt_shape *s)
{
    return s->rank == 3 ? (double)s->d[1] * s->d[2] : 1;
}

/* Rows a dense layer's GEMM has per sample: the tokens of a (T,D) input, else 1. */
static double dense_rows(const struct dt_shape *in)
{
    return in->rank == 2 ? (double)in->d[0] : 1;
}

void dt_op_gemm_quantisation(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                             const struct dt_model *m, const struct dt_op *op, double *q_main,
                             double *q_weight)
{
    *q_main = *q_weight = 1;
    if (op->kind != DT_OP_COMPUTE || cp->gemm_tile <= 0 || dev->sms <= 0)
        return;
    const struct dt_layer *l = &m->layers[op->layer];
    bool fwd = op->phase == DT_PH_FORWARD;
    double rows, cols, k_cols; /* main GEMM: rows x cols; weight GEMM: units x k_cols */
    if ((l->kind == DT_L_CONV2D || l->kind == DT_L_CONV2D_TRANSPOSE) && l->groups <= 1) {
        const struct dt_shape *x = fwd ? &l->out_shape : &l->in_shape;
        rows = op->samples * pixels(x);
        cols = (double)x->d[0];
        k_cols = (double)l->in_shape.d[0] * l->kh * l->kw;
    } else if (l->kind == DT_L_DENSE) {
        double in_features = (double)l->in_shape.d[l->in_shape.rank - 1];
        rows = op->samples * dense_rows(&l->in_shape);
        cols = fwd ? (double)l->units : in_features;
        k_cols = in_features;
    } else {
        return;
    }
    *q_main = dt_gemm_quantisation(rows, cols, cp->gemm_tile, dev->sms, true);
    if (!fwd)
        *q_weight = dt_gemm_quantisation((double)l->units, k_cols, cp->gemm_tile, dev->sms,
                                         false);
}

double dt_op_winograd_share(const struct dt_cost_params *cp, const struct dt_model *m,
                            const struct dt_op *op)
{
    if (!cp->winograd || op->kind != DT_OP_COMPUTE || op->precision != DT_FP32)
        return 1;
    const struct dt_layer *l = &m->layers[op->layer];
    bool winograd = l->kind == DT_L_CONV2D && l->groups <= 1 && l->kh == 3 && l->kw == 3 &&
                    l->sh == 1 && l->sw == 1;
    /* F(2x2, 3x3): a 4x4 input tile's 16 elementwise products give 2x2 outputs, which
     * direct convolution computes with 2 x 2 x 9 = 36 */
    return winograd ? 16.0 / 36.0 : 1;
}

/* Whether precision p runs on dev's tensor cores: tf32 or a 16-/8-bit storage with its own
 * peak (the V100 has no tf32: its tf32 falls back to the fp32 units, NCHW-native kernels). */
static bool tensor_core(const struct dt_device_spec *dev, enum dt_precision p)
{
    bool tc_precision = p == DT_TF32 || dt_dtype_size(dt_precision_storage(p)) <= 2;
    return tc_precision && p < DT_PREC_COUNT && dev->peak_flops[p] > 0;
}

double dt_op_layout_bytes(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                          const struct dt_model *m, const struct dt_op *op, int *kernels)
{
    *kernels = 0;
    if (!cp->conv_nchw || op->kind != DT_OP_COMPUTE || !tensor_core(dev, op->precision))
        return 0;
    const struct dt_layer *l = &m->layers[op->layer];
    if (l->kind != DT_L_CONV2D && l->kind != DT_L_CONV2D_TRANSPOSE)
        return 0;
    double io = (double)(dt_shape_size(&l->in_shape) + dt_shape_size(&l->out_shape));
    int calls = op->phase == DT_PH_FORWARD ? 1 : l->bwd_data_flops > 0 ? 2 : 1;
    *kernels = 2 * calls;
    double share = op->shards > 1 ? 1.0 / op->shards : 1.0;
    return 2.0 * calls * io * dt_op_elem_bytes(op) * op->samples * share;
}

static bool is_activation(enum dt_layer_kind k)
{
    return k == DT_L_RELU || k == DT_L_TANH || k == DT_L_SIGMOID || k == DT_L_GELU;
}

static bool fuses_activation(enum dt_layer_kind k)
{
    return k == DT_L_CONV2D || k == DT_L_CONV2D_TRANSPOSE || k == DT_L_DENSE ||
           k == DT_L_BATCHNORM || k == DT_L_LAYERNORM || k == DT_L_ADD;
}

bool dt_op_fused(const struct dt_cost_params *cp, const struct dt_model *m,
                 const struct dt_op *op)
{
    if (!cp->fuse_activations || op->kind != DT_OP_COMPUTE)
        return false;
    const struct dt_layer *l = &m->layers[op->layer];
    return is_activation(l->kind) && l->n_in == 1 && l->in[0] >= 0 &&
           fuses_activation(m->layers[l->in[0]].kind);
}

/* Compute costs of plan ops. */
#include "dt/costmodel.h"

#include <math.h>
#include <stdlib.h>

const char *dt_op_class_name(enum dt_op_class c)
{
    static const char *const n[] = {"conv", "dense", "pool", "elementwise", "norm", "update"};
    return c < DT_CLASS_COUNT ? n[c] : "?";
}

enum dt_op_class dt_layer_class(enum dt_layer_kind kind)
{
    switch (kind) {
    case DT_L_CONV2D:
    case DT_L_CONV2D_TRANSPOSE:
        return DT_CLASS_CONV;
    case DT_L_DENSE:
    case DT_L_LSTM:
    case DT_L_ATTENTION:
    case DT_L_ATTENTION_CORE:
        return DT_CLASS_DENSE;
    case DT_L_MAXPOOL:
    case DT_L_AVGPOOL:
    case DT_L_GLOBALPOOL:
    case DT_L_UPSAMPLE:
        return DT_CLASS_POOL;
    case DT_L_BATCHNORM:
    case DT_L_LAYERNORM:
        return DT_CLASS_NORM;
    default:
        return DT_CLASS_ELEMENTWISE;
    }
}

void dt_cost_defaults(struct dt_cost_params *cp, enum dt_device_kind kind)
{
    *cp = (struct dt_cost_params){0};
    /* Assumed until calibrated: GEMM-based layers reach about 0.7 of peak on a GPU (large
     * cuBLAS / cuDNN GEMMs; narrow and short ones lose more through gemm_tile's
     * quantisation) and a third on a CPU core set; memory-bound classes are limited by
     * bandwidth, not FLOPs. */
    bool gpu = kind == DT_DEV_GPU;
    double gemm = gpu ? 0.7 : 0.35;
    cp->eff[DT_CLASS_CONV] = gemm;
    cp->eff[DT_CLASS_DENSE] = gemm;
    /* On a GPU these kernels stream at memory bandwidth; at 0.1 of the fp32 peak a batch
     * norm's 7 FLOP per element would bind instead (bf16 halves its bytes, not its FLOPs). */
    double streaming = gpu ? 0.5 : 0.1;
    cp->eff[DT_CLASS_POOL] = streaming;
    cp->eff[DT_CLASS_ELEMENTWISE] = streaming;
    cp->eff[DT_CLASS_NORM] = streaming;
    /* Adam does 12 FLOP per 28 bytes, far below any machine's FLOP/byte balance: at half of
     * peak its FLOPs never bind and the step is the memory pass it is (measured here: 39-48
     * GB/s on one core); at 0.1 of a CPU's peak they would, and mem_bw could not be fitted. */
    cp->eff[DT_CLASS_UPDATE] = 0.5;
    /* GPU: the gap between dependent kernels launched back to back, a few microseconds.
     * CPU: a BLAS call's fixed cost (dtexec --ops-csv, one core: 1-2.5 us). */
    double launch = gpu ? 5e-6 : 1e-6;
    for (int c = 0; c < DT_CLASS_COUNT; c++)
        cp->overhead_s[c] = launch;
    /* GPU: a framework's step has host work the device waits for (the optimizer's launches,
     * the loss-scale check, the data loader's hand-off): assumed 1 ms until fitted. CPU:
     * dtexec's step outside its ops, 0.7 us measured on mlp-fmnist (--ops-csv gaps). */
    cp->iter_overhead_s = gpu ? 1e-3 : 1e-6;
    cp->eager_bytes = 65536;
    cp->implicit_gemm = gpu;
    cp->fuse_activations = gpu;
    /* GPU frameworks run attention as separate GEMM, softmax and dropout kernels that pass
     * the scores through device memory; dtexec's CPU attention keeps a row of them in cache. */
    cp->score_traffic = gpu;
    /* CUTLASS's and cuBLAS's usual tensor-core CTA tile is 128 x 128 (NVIDIA, "Matrix
     * Multiplication Background User's Guide": tile and wave quantization). */
    cp->gemm_tile = gpu ? 128 : 0;
    /* cuDNN's Winograd for fp32 3x3 stride-1 convolutions (dt_op_winograd_share) */
    cp->winograd = gpu;
}

double dt_cost_peak(const struct dt_device_spec *dev, enum dt_op_class c, enum dt_precision p)
{
    bool gemm = c == DT_CLASS_CONV || c == DT_CLASS_DENSE;
    if (gemm && p < DT_PREC_COUNT && dev->peak_flops[p] > 0)
        return dev->peak_flops[p];
    return dev->peak_flops[DT_FP32];
}

double dt_op_elem_bytes(const struct dt_op *op)
{
    return (double)dt_dtype_size(dt_precision_storage(op->precision));
}

void dt_op_work(const struct dt_model *m, const struct dt_op *op, double *flops, double *bytes)
{
    if (op->kind == DT_OP_UPDATE) {
        /* Adam: about 12 FLOP per parameter; reads params, grads, m, v and writes params, m,
         * v: 7 x 4 B in fp32. Mixed precision reads a 2-byte gradient and also writes the
         * 2-byte weight copy: 24 + 2 + 2, the same 28 B; with fp32 gradients 24 + 4 + 2. */
        *flops = 12.0 * op->region.count;
        *bytes = (op->grads_f32 ? 30.0 : 28.0) * op->region.count;
        return;
    }
    double e = dt_op_elem_bytes(op);
    const struct dt_layer *l = &m->layers[op->layer];
    if (l->kind == DT_L_FLATTEN) { /* a view of its input (dtexec, frameworks): no pass */
        *flops = *bytes = 0;
        return;
    }
    double in = l->n_in > 0 && l->in[0] >= 0 ? dt_shape_size(&m->layers[l->in[0]].out_shape)
                                              : dt_shape_size(&m->input);
    double out = dt_shape_size(&l->out_shape);
    double w = (double)dt_layer_weight_floats(m, l);
    double io = (in + out) * e * op->samples + w * e;
    /* a tensor-parallel shard does its share of the layer's arithmetic and traffic */
    double share = op->shards > 1 ? 1.0 / op->shards : 1.0;
    if (op->phase == DT_PH_FORWARD) {
        *flops = l->fwd_flops * op->samples * share;
        *bytes = io * share;
    } else { /* twice the forward's, its weight gradients written at their own dtype */
        double eg = (double)dt_dtype_size(dt_op_buf_dtype(op, DT_BUF_GRADS));
        *flops = (l->bwd_data_flops + l->bwd_weight_flops) * op->samples * share;
        *bytes = (2.0 * io + (eg - e) * w) * share;
    }
}

double dt_op_lowered_bytes(const struct dt_model *m, const struct dt_op *op)
{
    if (op->kind != DT_OP_COMPUTE)
        return 0;
    const struct dt_layer *l = &m->layers[op->layer];
    double per_sample;
    if (l->kind == DT_L_CONV2D) /* im2col (C_in kh kw) x (H W)_out, output filters x (H W)_out */
        per_sample = ((double)l->in_shape.d[0] * l->kh * l->kw + (double)l->units) *
                     (double)l->out_shape.d[1] * l->out_shape.d[2];
    else if (l->kind == DT_L_CONV2D_TRANSPOSE) /* the same GEMM, run backwards */
        per_sample = ((double)l->units * l->kh * l->kw + (double)l->in_shape.d[0]) *
                     (double)l->in_shape.d[1] * l->in_shape.d[2];
    else
        return 0;
    double passes = op->phase == DT_PH_FORWARD ? 1 : l->bwd_data_flops > 0 ? 2 : 1;
    return passes * dt_op_elem_bytes(op) * per_sample * op->samples;
}

/* Scores one head of an attention layer keeps per sample: T x T, the lower triangle with
 * the diagonal when causal. */
static double head_scores(const struct dt_layer *l)
{
    double t = (double)l->in_shape.d[0];
    return l->kind == DT_L_ATTENTION_CORE && l->causal ? t * (t + 1) / 2 : t * t;
}

double dt_op_score_bytes(const struct dt_cost_params *cp, const struct dt_model *m,
                         const struct dt_op *op)
{
    if (!cp->score_traffic || op->kind != DT_OP_COMPUTE)
        return 0;
    const struct dt_layer *l = &m->layers[op->layer];
    if (l->kind != DT_L_ATTENTION && l->kind != DT_L_ATTENTION_CORE)
        return 0;
    double e = dt_op_elem_bytes(op);
    double per_score = op->phase == DT_PH_FORWARD ? 4 * e + 1 : 7 * e + 1;
    double share = op->shards > 1 ? 1.0 / op->shards : 1.0;
    return per_score * l->heads * head_scores(l) * op->samples * share;
}

void dt_op_special_evals(const struct dt_model *m, const struct dt_op *op, double *n_exp,
                         double *n_tanh)
{
    *n_exp = *n_tanh = 0;
    if ((op->kind != DT_OP_COMPUTE && op->kind != DT_OP_LOSS) || op->layer < 0)
        return;
    const struct dt_layer *l = &m->layers[op->layer];
    double out = (double)dt_shape_size(&l->out_shape) * op->samples;
    bool fwd = op->phase == DT_PH_FORWARD;
    if (op->kind == DT_OP_LOSS) {
        *n_exp = out;
        return;
    }
    double share = op->shards > 1 ? 1.0 / op->shards : 1.0;
    switch (l->kind) {
    case DT_L_SOFTMAX:
    case DT_L_SIGMOID: *n_exp = fwd ? out : 0; break;
    case DT_L_TANH: *n_tanh = fwd ? out : 0; break;
    case DT_L_GELU: *n_tanh = out; break;
    case DT_L_ATTENTION:
    case DT_L_ATTENTION_CORE:
        *n_exp = fwd ? l->heads * head_scores(l) * op->samples : 0;
        break;
    case DT_L_LSTM: { /* units x steps: the output's size is the last step's (or all steps') */
        double cells = (double)l->units * l->in_shape.d[0] * op->samples;
        *n_exp = fwd ? 3 * cells : 0;
        *n_tanh = fwd ? 2 * cells : cells;
        break;
    }
    default: break;
    }
    *n_exp *= share;
    *n_tanh *= share;
}

/* Seconds of an op's exp and tanh evaluations at cp's calibrated times (0 uncalibrated). */
static double special_time(const struct dt_cost_params *cp, const struct dt_model *m,
                           const struct dt_op *op)
{
    if (!(cp->exp_s > 0) && !(cp->tanh_s > 0))
        return 0;
    double n_exp, n_tanh;
    dt_op_special_evals(m, op, &n_exp, &n_tanh);
    return n_exp * cp->exp_s + n_tanh * cp->tanh_s;
}

double dt_op_packed_bytes(const struct dt_model *m, const struct dt_op *op)
{
    if (op->kind != DT_OP_COMPUTE || m->layers[op->layer].kind != DT_L_DENSE)
        return 0;
    const struct dt_layer *l = &m->layers[op->layer];
    double passes = op->phase == DT_PH_FORWARD ? 1 : l->bwd_data_flops > 0 ? 2 : 1;
    return passes * dt_op_elem_bytes(op) * (double)dt_layer_weight_floats(m, l) /
           (op->shards > 1 ? op->shards : 1);
}

double dt_cost_mem_bw(const struct dt_cost_params *cp, const struct dt_device_spec *dev)
{
    if (cp->mem_Bps > 0)
        return cp->mem_Bps;
    return cp->eff_mem > 0 ? cp->eff_mem * dev->mem_bw_Bps : dev->mem_bw_Bps;
}

double dt_cost_stream_bw(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                         double bytes)
{
    if (dev->cache_bytes > 0 && bytes <= dev->cache_bytes && cp->cache_Bps > 0)
        return cp->cache_Bps;
    return dt_cost_mem_bw(cp, dev);
}

double dt_cost_lower_bw(const struct dt_cost_params *cp, const struct dt_device_spec *dev)
{
    return cp->lower_Bps > 0 ? cp->lower_Bps : dt_cost_mem_bw(cp, dev);
}

/* Seconds of an op's FLOPs at `rate` FLOP/s, each GEMM at its shape's quantisation. */
static double flop_time(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                        const struct dt_model *m, const struct dt_op *op, double flops,
                        double rate)
{
    if (op->kind != DT_OP_COMPUTE)
        return flops / rate;
    double share = dt_op_winograd_share(cp, m, op); /* of the multiplies, each GEMM alike */
    if (!(cp->gemm_tile > 0 && dev->sms > 0))
        return share * flops / rate;
    double q_main, q_weight;
    dt_op_gemm_quantisation(cp, dev, m, op, &q_main, &q_weight);
    const struct dt_layer *l = &m->layers[op->layer];
    if (op->phase == DT_PH_FORWARD)
        return share * flops / (rate * q_main);
    return share * op->samples * (l->bwd_data_flops / (rate * q_main) +
                                  l->bwd_weight_flops / (rate * q_weight));
}

/* Efficiency of class c at precision p: at 2 bytes or fewer (tensor-core kernels) conv and
 * dense layers take eff_conv_half and eff_dense_half when set, at tf32 eff_conv_tf32 and
 * eff_dense_tf32, and without those (a calibration from a device without tf32, such as the
 * V100) the 16-bit ones: tf32 runs on the tensor cores, not on the fp32 units eff[] was
 * fitted on (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020: "TF32 Tensor Core
 * operations"; cuDNN and cuBLAS pick tensor-op kernels for tf32 as for fp16). */
static double gemm_eff(const struct dt_cost_params *cp, enum dt_op_class c,
                       enum dt_precision p)
{
    if (p == DT_TF32) {
        if (c == DT_CLASS_CONV && cp->eff_conv_tf32 > 0)
            return cp->eff_conv_tf32;
        if (c == DT_CLASS_DENSE && cp->eff_dense_tf32 > 0)
            return cp->eff_dense_tf32;
    }
    if (p == DT_TF32 || dt_dtype_size(dt_precision_storage(p)) <= 2) {
        if (c == DT_CLASS_CONV && cp->eff_conv_half > 0)
            return cp->eff_conv_half;
        if (c == DT_CLASS_DENSE && cp->eff_dense_half > 0)
            return cp->eff_dense_half;
    }
    return cp->eff[c];
}

/* Seconds of a conv op's NCHW <-> NHWC transposes (dt_op_layout_bytes): memory passes,
 * each its own kernel, besides the convolution's. */
static double layout_time(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                          const struct dt_model *m, const struct dt_op *op)
{
    int kernels;
    double bytes = dt_op_layout_bytes(cp, dev, m, op, &kernels);
    if (!(bytes > 0))
        return 0;
    return bytes / fmax(dt_cost_stream_bw(cp, dev, bytes), 1) +
           kernels * cp->overhead_s[DT_CLASS_ELEMENTWISE];
}

double dt_cost_compute(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                       const struct dt_model *m, const struct dt_op *op)
{
    if (dt_op_fused(cp, m, op))
        return 0;
    enum dt_op_class c =
        op->kind == DT_OP_UPDATE ? DT_CLASS_UPDATE : dt_layer_class(m->layers[op->layer].kind);
    double flops, bytes;
    dt_op_work(m, op, &flops, &bytes);
    double mem_bw = op->kind == DT_OP_UPDATE && cp->opt_Bps > 0 ? cp->opt_Bps
                                                                 : dt_cost_stream_bw(cp, dev, bytes);
    double rate = dt_cost_peak(dev, c, op->precision) * gemm_eff(cp, c, op->precision);
    double t_flops = flop_time(cp, dev, m, op, flops, rate) + special_time(cp, m, op);
    double t_mem = mem_bw > 0 ? bytes / mem_bw : 0;
    double lower_bw = cp->implicit_gemm ? 0 : dt_cost_lower_bw(cp, dev);
    double t_lower = lower_bw > 0 ? dt_op_lowered_bytes(m, op) / lower_bw : 0;
    double t_pack = cp->pack_Bps > 0 ? dt_op_packed_bytes(m, op) / cp->pack_Bps : 0;
    double score_bytes = dt_op_score_bytes(cp, m, op);
    double t_scores = score_bytes > 0 ? score_bytes / dt_cost_stream_bw(cp, dev, score_bytes) : 0;
    return fmax(t_flops, t_mem) + t_lower + t_pack + t_scores + layout_time(cp, dev, m, op) +
           cp->overhead_s[c];
}

void dt_cost_colocated(const struct dt_cost_params *cp, const struct dt_device_spec *dev, int k,
                       struct dt_cost_params *out)
{
    *out = *cp;
    double mem = dt_cost_mem_bw(cp, dev);
    if (!(cp->node_mem_Bps > 0) || !(mem > 0) || k < 1)
        return;
    /* a fit may try absurd values: keep durations finite (1e-9: a second per byte-ish) */
    double share = fmax(1e-9, fmin(1.0, cp->node_mem_Bps / (k * mem)));
    out->mem_Bps = mem * share;
    out->lower_Bps = dt_cost_lower_bw(cp, dev) * share;
    out->reduce_Bps = cp->reduce_Bps > 0 ? cp->reduce_Bps * share : 0;
    out->pack_Bps = cp->pack_Bps > 0 ? cp->pack_Bps * share : 0;
    out->opt_Bps = cp->opt_Bps > 0 ? cp->opt_Bps * share : 0;
}

struct dt_cost_params *dt_cost_rank_params(const struct dt_cost_params *cp,
                                           const struct dt_cost_params *group_cp,
                                           const struct dt_topology *topo, int n_ranks)
{
    int *on_node = calloc((size_t)topo->n_nodes + 1, sizeof *on_node);
    struct dt_cost_params *cpr = malloc(((size_t)n_ranks + 1) * sizeof *cpr);
    if (!on_node || !cpr) {
        free(on_node);
        free(cpr);
        return NULL;
    }
    for (int r = 0; r < n_ranks; r++)
        on_node[dt_topology_node_of(topo, r)]++;
    for (int r = 0; r < n_ranks; r++) {
        int node = dt_topology_node_of(topo, r);
        const struct dt_node_group *g = dt_topology_group_of_node(topo, node);
        dt_cost_colocated(group_cp ? &group_cp[g - topo->groups] : cp, &g->device,
                          on_node[node], &cpr[r]);
    }
    free(on_node);
    return cpr;
}

double dt_cost_grad_reset(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                          long n, double elem_bytes)
{
    /* the optimizer's zero_grad: one pass over parameter-sized state, like its update */
    double bytes = elem_bytes * (double)n;
    double bw = cp->opt_Bps > 0 ? cp->opt_Bps : dt_cost_stream_bw(cp, dev, bytes);
    return bw > 0 ? bytes / bw : 0;
}

double dt_cost_reduce(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                      long n, double elem_bytes)
{
    /* a[i] += b[i]: two reads and a write per element */
    double bytes = 3.0 * elem_bytes * (double)n;
    double bw = cp->reduce_Bps > 0 ? cp->reduce_Bps : dt_cost_stream_bw(cp, dev, bytes);
    return bw > 0 ? bytes / bw : 0;
}

/* A memory-bound pass over bytes (mixed precision's cast COPY and UNSCALE). */
static double stream_time(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                          double bytes)
{
    return bytes / fmax(dt_cost_stream_bw(cp, dev, bytes), 1);
}

static double elem_bytes(const struct dt_op *op, enum dt_buf b)
{
    return (double)dt_dtype_size(dt_op_buf_dtype(op, b));
}

double dt_cost_op(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                  const struct dt_model *m, const struct dt_op *op)
{
    switch (op->kind) {
    case DT_OP_COMPUTE:
    case DT_OP_UPDATE: return dt_cost_compute(cp, dev, m, op);
    case DT_OP_ZERO: /* the gradient reset, or a pipeline's activation-gradient buffer */
        if (op->region.buf == DT_BUF_GRADS)
            return dt_cost_grad_reset(cp, dev, op->region.count, elem_bytes(op, op->region.buf));
        return stream_time(cp, dev, op->region.count * elem_bytes(op, op->region.buf));
    case DT_OP_COPY:
        if (op->sum)
            return dt_cost_reduce(cp, dev, op->region.count, elem_bytes(op, op->region.buf));
        return stream_time(cp, dev, op->region.count * (elem_bytes(op, op->region.buf) +
                                                        elem_bytes(op, op->dst.buf)));
    case DT_OP_UNSCALE: /* reads and writes the gradients, compares each */
        return stream_time(cp, dev, 2.0 * op->region.count * elem_bytes(op, op->region.buf));
    case DT_OP_LOAD: /* a gather of the batch's rows: reads them and writes the copy */
        return 2.0 * op->bytes / fmax(dt_cost_mem_bw(cp, dev), 1);
    case DT_OP_LOSS: return special_time(cp, m, op); /* its FLOPs: the last layer's forward */
    default: return 0; /* communication: the network */
    }
}

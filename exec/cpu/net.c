/* dtk_net: a dt_model's layer graph run on the CPU kernels, with one allocation per buffer
 * kind. Layer i reads its inputs' outputs (act) and accumulates into their gradients (dact);
 * everything per sample is stored row-major by sample, so a row range is a pointer offset. */
#include "net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt/tensor.h"
#include "half.h"
#include "layers.h"
#include "parallel.h"

/* Per-layer view into the net's buffers. */
struct dtk_lay {
    long out_sz;            /* floats per sample of the output */
    bool runs, holds;       /* this rank computes the layer / holds its output */
    long poff;              /* its parameters in the rank's (packed) buffer */
    long goff;              /* its gradients in the rank's gradient buffer (poff unless the
                               view holds them apart: ZeRO-2's staging) */
    float *act, *dact;      /* (max_batch, out_sz); dact NULL when no gradient is needed */
    bool alias;             /* flatten: act/dact are the input's */
    bool pooled;            /* dact holds one slot's rows, in the gradient pool (row b0 of the
                               batch at b0 mod slot_rows) */
    bool act_ws, keep_ws;   /* act / aux (and iaux) hold ws_rows rows (row b0 at b0 mod
                               ws_rows): in the recomputation workspace, or act its own for an
                               output only sent (dt_layer_view's act_until_sent) */
    bool need;              /* the output gradient is needed (this or an earlier layer trains) */
    int owner;              /* the layer whose dact this is (itself unless a flatten view) */
    int zero_at;            /* owner only: the backward that zeroes dact first (its last
                             * consumer, which runs first); n-1 or more: begin_backward */
    float *aux;             /* per-row saved state: aux_row floats per sample */
    uint16_t *act16, *dact16, *aux16; /* mixed precision: the 2-byte storage of act, dact and
                               aux; those point into the stage only while an op runs */
    long nparams;           /* parameters its kernels read (layer_nparams) */
    long aux_row;
    int *iaux;              /* per-row int state (maxpool argmax) */
    long iaux_row;
    float *run_mean, *run_var; /* batchnorm running statistics (in state) */
    struct dtk_conv_dims cd;   /* conv, conv transpose, pools (B = max_batch) */
    int rows, cols;         /* sequence layers: T and D of the input; else 1 and the size
                               (a row-parallel shard: its D / count input columns) */
    int units;              /* dense: output units it computes (a column shard: U / count);
                               attention core: its width D (a head shard: D / count) */
    int heads;              /* attention core: the heads it runs (a shard: heads / count) */
    int shard_kind, shard_index, shard_count; /* tensor parallelism (dt/tensor.h) */
    long span;              /* floats per sample it computes: out_sz, or a chunk of its whole
                               buffer's (sequence parallelism's DT_SHARD_SEQ_GATHER) */
    long vocab_rows;        /* an embedding's token rows or a vocabulary shard's columns */
    long vocab_first, vocab_valid; /* the first of them in the vocabulary, and the real ones */
};

struct dtk_net {
    const struct dt_model *model;
    int max_batch;
    long n_params, n_grads;
    float *params, *grads, *opt, *state;
    float *arena;
    int *iarena;
    float *work;
    int *tokens;            /* (max_batch, T) token ids of a token model */
    float *probs;           /* (max_batch, out) when the last layer is not a softmax */
    /* the loss on the last output: LOSS_SOFTMAX and LOSS_SIGMOID fuse the last layer, LOSS_LOGITS
     * takes the last output as softmax logits. Softmax groups: lc classes S = ls apart,
     * lgroups groups per sample (ls = H*W for a per-pixel classifier, lgroups = T per token). */
    enum { LOSS_SOFTMAX, LOSS_SIGMOID, LOSS_LOGITS } loss_kind;
    int lc, lgroups;
    long ls;
    int classes;            /* labels are in [0, classes): lc, or V of a vocabulary shard */
    bool vocab;             /* the last layer is a vocabulary shard: the loss in three parts */
    long labels_per_sample;
    struct dtk_lay *lay;
    const struct dt_layer_view *view; /* the plan's view of the rank (NULL: whole model) */
    const struct dt_param_range *owned; /* ZeRO-3: the ranges it owns (dtk_net_view) */
    int n_owned;
    long in_sz;
    const float *x;         /* the batch's input, row 0 (rows b0.. are at x + b0 * in_sz) */
    bool train;
    float bn_momentum;
    uint64_t drop_seed;     /* dropout: dtk_net_set_dropout, dtk_net_set_step, */
    long drop_row0, drop_step, row_shift; /* dtk_net_set_batch_rows */
    double bytes, work_bytes;
    long n_opt, n_arena, n_iarena, n_state; /* elements of opt, arena, iarena, state */
    /* mixed precision: parameters, gradients and the arena are 2-byte (dtype); each layer op
     * converts what it touches into the float32 stage (kernel scratch, like work) and back */
    enum dt_dtype dtype;
    bool grads_f32;         /* the gradients are float32 (grads) even so */
    uint16_t *params16, *grads16, *arena16, *probs16;
    float *stats;           /* the vocabulary-parallel loss's statistics, float32 (f32_keep) */
    float *stage, *wstage, *gstage;
    int n_staged;
    struct staged { uint16_t *h; float *f; long n; } staged[2 * DT_MAX_INPUTS + 8];
    const struct dt_recompute_layout *rcmp; /* --recompute: the workspace's layout, or NULL */
    int slot_rows;          /* rows of a pooled gradient */
    int ws_rows;            /* rows of the recomputation workspace */
    bool recomputing;       /* dtk_net_recompute_layer is running a forward again */
};

static bool mixed(const struct dtk_net *net)
{
    return net->dtype != DT_TYPE_F32;
}

/* Whether the gradients are 2-byte storage (grads16), staged like the parameters. */
static bool half_grads(const struct dtk_net *net)
{
    return mixed(net) && !net->grads_f32;
}

static long shape_size(const struct dt_shape *s)
{
    long n = 1;
    for (int k = 0; k < s->rank; k++)
        n *= s->d[k];
    return n;
}

static long last_dim(const struct dt_shape *s)
{
    return s->d[s->rank - 1];
}

static const struct dt_shape *input_shape(const struct dt_model *m, int j)
{
    return j < 0 ? &m->input : &m->layers[j].out_shape;
}

static int layer_fail(struct dt_error *err, const struct dt_model *m, const struct dt_layer *L,
                      const char *what)
{
    return dt_fail(err, DT_EINPUT, m->path, L->line, L->col, "layer '%s' (%s): %s", L->name,
                   dt_layer_kind_name(L->kind), what);
}

/* Checks what the kernels need of a layer and fills its window dimensions. */
static int check_layer(const struct dt_model *m, int i, struct dtk_lay *ly, int max_batch,
                       struct dt_error *err)
{
    const struct dt_layer *L = &m->layers[i];
    const struct dt_shape *in = &L->in_shape, *out = &L->out_shape;
    if (L->n_in < 1 || L->n_in > DT_MAX_INPUTS)
        return layer_fail(err, m, L, "needs 1 to 4 inputs");
    for (int k = 0; k < L->n_in; k++)
        if (L->in[k] < -1 || L->in[k] >= i)
            return layer_fail(err, m, L, "reads a layer that does not come before it");
    ly->rows = in->rank == 2 ? (int)in->d[0] : 1;
    ly->cols = (int)last_dim(in);
    switch (L->kind) {
    case DT_L_CONV2D:
    case DT_L_CONV2D_TRANSPOSE:
    case DT_L_MAXPOOL:
    case DT_L_AVGPOOL: {
        if (in->rank != 3 || out->rank != 3)
            return layer_fail(err, m, L, "needs (C,H,W) input and output");
        struct dtk_conv_dims d = {
            .B = max_batch, .C = (int)in->d[0], .H = (int)in->d[1], .W = (int)in->d[2],
            .F = (int)out->d[0], .kh = L->kh, .kw = L->kw, .sh = L->sh, .sw = L->sw,
            .pad_t = L->pad_t, .pad_l = L->pad_l, .pad_b = L->pad_b, .pad_r = L->pad_r,
            .groups = L->kind == DT_L_CONV2D ? (L->groups > 0 ? L->groups : 1) : 1};
        bool ok = L->kind == DT_L_CONV2D_TRANSPOSE ? dtk_convt_dims_finish(&d)
                                                   : dtk_conv_dims_finish(&d);
        if (!ok || d.OH != out->d[1] || d.OW != out->d[2] ||
            (L->kind != DT_L_CONV2D && L->kind != DT_L_CONV2D_TRANSPOSE && d.F != d.C))
            return layer_fail(err, m, L, "window, stride and padding do not give its shape");
        if (L->kind == DT_L_CONV2D_TRANSPOSE && L->groups > 1)
            return layer_fail(err, m, L, "grouped transposed convolution is not implemented");
        if (L->kind == DT_L_CONV2D && (d.C % d.groups || d.F % d.groups))
            return layer_fail(err, m, L, "groups must divide channels and filters");
        ly->cd = d;
        break;
    }
    case DT_L_GLOBALPOOL:
    case DT_L_UPSAMPLE:
        if (in->rank != 3)
            return layer_fail(err, m, L, "needs a (C,H,W) input");
        if (L->kind == DT_L_UPSAMPLE && L->scale < 1)
            return layer_fail(err, m, L, "scale must be positive");
        break;
    case DT_L_DENSE:
        if (in->rank == 3 || last_dim(out) != L->units)
            return layer_fail(err, m, L, "needs a (N) or (T,D) input");
        if (L->tied && (L->tied_layer < 0 || L->tied_layer >= i || L->bias ||
                        m->layers[L->tied_layer].kind != DT_L_EMBEDDING ||
                        m->layers[L->tied_layer].units != ly->cols ||
                        m->layers[L->tied_layer].vocab != L->units))
            return layer_fail(err, m, L, "must be tied to an earlier embedding of its shape");
        break;
    case DT_L_ATTENTION_CORE:
        if (in->rank != 2 || in->d[1] != 3 * L->units || L->heads < 1 || L->units % L->heads)
            return layer_fail(err, m, L, "needs a (T, 3D) input and heads dividing D");
        break;
    case DT_L_LSTM:
    case DT_L_ATTENTION:
    case DT_L_SEQPOOL:
        if (in->rank != 2)
            return layer_fail(err, m, L, "needs a (T,D) input");
        if (L->kind == DT_L_ATTENTION && (L->heads < 1 || in->d[1] % L->heads))
            return layer_fail(err, m, L, "heads must divide the width");
        break;
    case DT_L_EMBEDDING:
        if (L->in[0] != -1 || !m->input_is_tokens || out->rank != 2)
            return layer_fail(err, m, L, "must read the model's token input");
        ly->rows = (int)out->d[0];
        ly->cols = (int)out->d[1];
        if (L->positions && L->positions < ly->rows)
            return layer_fail(err, m, L, "position table shorter than the sequence");
        break;
    case DT_L_ADD:
    case DT_L_CONCAT:
        for (int k = 0; k < L->n_in; k++) {
            const struct dt_shape *s = input_shape(m, L->in[k]);
            if (s->rank != in->rank)
                return layer_fail(err, m, L, "inputs of different ranks");
            if (L->kind == DT_L_ADD && shape_size(s) != shape_size(out))
                return layer_fail(err, m, L, "inputs of different sizes");
        }
        break;
    case DT_L_FLATTEN:
    case DT_L_DROPOUT:
    case DT_L_RELU:
    case DT_L_TANH:
    case DT_L_SIGMOID:
    case DT_L_GELU:
    case DT_L_SOFTMAX:
    case DT_L_BATCHNORM:
    case DT_L_LAYERNORM:
        if (shape_size(in) != shape_size(out))
            return layer_fail(err, m, L, "output size differs from input size");
        break;
    default:
        return layer_fail(err, m, L, "kind not supported by the CPU executor");
    }
    return DT_OK;
}

/* Floats per sample a layer keeps for backward (beyond its output), ints likewise, and the
 * scratch it needs for a batch of max_batch. */
static void layer_extra(const struct dtk_net *net, int i, const struct dtk_lay *ly, long *aux,
                        long *iaux, long *work)
{
    const struct dt_model *m = net->model;
    const struct dt_layer *L = &m->layers[i];
    int B = ly->cd.B;
    *work = 0;
    /* what it keeps per row: the core's size function, which dtsim's memory sums too (the
     * last layer's probabilities, when it gives logits, are carved after its own) */
    if (net->view)
        dt_shard_keep(m, net->view, i, aux, iaux);
    else
        dt_layer_keep(m, i, aux, iaux);
    switch (L->kind) {
    case DT_L_CONV2D: *work = dtk_conv2d_workspace_floats(&ly->cd); break;
    case DT_L_CONV2D_TRANSPOSE: *work = dtk_convt_workspace_floats(&ly->cd); break;
    case DT_L_LSTM: *work = dtk_lstm_workspace_floats(B, ly->rows, (int)L->units); break;
    case DT_L_ATTENTION:
        *work = dtk_attention_workspace_floats(B, ly->rows, ly->cols, L->heads);
        break;
    case DT_L_ATTENTION_CORE:
        *work = dtk_attn_core_workspace_floats(ly->rows, ly->cd.threads);
        break;
    default: break;
    }
}

static void *alloc_floats(size_t n, double *bytes)
{
    *bytes += (double)n * sizeof(float);
    return calloc(n ? n : 1, sizeof(float));
}

static void *alloc_halves(size_t n, double *bytes)
{
    *bytes += (double)n * sizeof(uint16_t);
    return calloc(n ? n : 1, sizeof(uint16_t));
}

/* Whether layer i keeps float32 under mixed precision (dt_shard_keep_dtype: the
 * vocabulary-parallel loss's statistics), outside the 2-byte arena. */
static bool f32_keep(const struct dtk_net *net, int i)
{
    return mixed(net) && dt_shard_keep_dtype(net->model, net->view, i, net->dtype) == DT_TYPE_F32;
}

/* Rows of the stage one op of layer i needs: the outputs and gradients of it and its inputs
 * (their owners'), what it keeps, and its parameters and their gradients. */
static long stage_need(const struct dtk_net *net, int i)
{
    const struct dt_layer *L = &net->model->layers[i];
    const struct dtk_lay *ly = &net->lay[i];
    long rows = 2 * net->lay[ly->owner].out_sz + ly->aux_row;
    for (int k = 0; k < L->n_in; k++)
        if (L->in[k] >= 0)
            rows += 2 * net->lay[net->lay[L->in[k]].owner].out_sz;
    return rows * net->max_batch + 2 * ly->nparams;
}

/* Parameters the kernels of layer i read at its offset, what a mixed-precision op stages: a
 * tensor-parallel rank's shard; a tied head's token rows of its table (or of the table's
 * vocabulary shard), without the table's other rows (positions), which a pipeline stage's
 * copy of the table does not hold. */
static long layer_nparams(const struct dtk_net *net, int i)
{
    const struct dt_model *m = net->model;
    const struct dt_layer *L = &m->layers[i];
    if (!L->tied)
        return net->view ? dt_shard_params(m, net->view, i) : L->params;
    const struct dt_layer *T = &m->layers[L->tied_layer];
    long tokens = dt_layer_weight_floats(m, L), others = T->params - tokens;
    return net->view ? dt_shard_params(m, net->view, L->tied_layer) - others : tokens;
}

/* Points *f (float32) or *h (2-byte under mixed precision) at element pos of the arena. */
static void arena_at(struct dtk_net *net, long pos, float **f, uint16_t **h)
{
    if (mixed(net))
        *h = net->arena16 + pos;
    else
        *f = net->arena + pos;
}

/* Carves n elements of the arena at *pos. */
static void carve(struct dtk_net *net, long *pos, long n, float **f, uint16_t **h)
{
    arena_at(net, *pos, f, h);
    *pos += n;
}

int dtk_net_create(const struct dt_model *model, int max_batch, enum dtk_init init,
                   uint64_t seed, struct dtk_net **out, struct dt_error *err)
{
    struct dtk_net_view v = {.rows = max_batch, .layers = NULL, .opt_moments = 2};
    return dtk_net_create_view(model, &v, init, seed, out, err);
}

/* Which layers run and are held, where their parameters go, which gradients arrive from
 * other ranks. Without a view: all, at the model's offsets. */
static void apply_view(struct dtk_net *net, const struct dtk_net_view *v)
{
    const struct dt_model *m = net->model;
    net->n_params = v->layers ? v->n_params : m->total_params;
    net->n_grads = v->layers && v->n_grads ? v->n_grads : net->n_params;
    net->view = v->layers;
    net->owned = v->layers ? v->owned : NULL;
    net->n_owned = v->layers ? v->n_owned : 0;
    for (int i = 0; i < m->n_layers; i++) {
        struct dtk_lay *ly = &net->lay[i];
        ly->runs = !v->layers || v->layers[i].runs;
        ly->holds = !v->layers || v->layers[i].holds;
        ly->poff = v->layers ? v->layers[i].param_offset : m->layers[i].param_offset;
        ly->goff = v->layers && v->layers[i].grads_apart ? v->layers[i].grad_offset : ly->poff;
        ly->shard_kind = v->layers ? v->layers[i].shard_kind : DT_SHARD_NONE;
        ly->shard_index = ly->shard_kind ? v->layers[i].shard_index : 0;
        ly->shard_count = ly->shard_kind ? v->layers[i].shard_count : 1;
    }
}

/* The sizes of a tensor-parallel shard: its output columns (an attention core's heads: its
 * q|k|v input columns too), or its weight's input rows. */
static void apply_shard(const struct dt_layer *L, struct dtk_lay *ly)
{
    ly->units = (int)L->units;
    ly->heads = L->heads;
    long V = L->kind == DT_L_EMBEDDING ? L->vocab : last_dim(&L->out_shape);
    ly->vocab_rows = ly->vocab_valid = V;
    ly->vocab_first = 0;
    if (ly->shard_kind == DT_SHARD_VOCAB || ly->shard_kind == DT_SHARD_VOCAB_TABLE) {
        ly->vocab_rows = dt_shard_vocab_rows(V, ly->shard_count);
        ly->vocab_first = ly->shard_index * ly->vocab_rows;
        ly->vocab_valid = dt_shard_vocab_valid(V, ly->shard_count, ly->shard_index);
        if (ly->shard_kind == DT_SHARD_VOCAB) { /* the head's and the softmax's columns */
            ly->out_sz = ly->out_sz / V * ly->vocab_rows;
            ly->units = (int)ly->vocab_rows;
            if (L->kind == DT_L_SOFTMAX)
                ly->cols = (int)ly->vocab_rows;
        }
    } else if (dt_shard_splits_output(ly->shard_kind)) {
        ly->out_sz /= ly->shard_count;
        ly->units /= ly->shard_count;
        if (L->kind == DT_L_ATTENTION_CORE) {
            ly->cols /= ly->shard_count;
            ly->heads /= ly->shard_count;
        }
    } else if (ly->shard_kind == DT_SHARD_ROWS) {
        ly->cols /= ly->shard_count;
    } else if (dt_shard_chunked(ly->shard_kind)) { /* its tokens: rows x tokens / count */
        ly->rows /= ly->shard_count;
        if (ly->shard_kind == DT_SHARD_SEQ)
            ly->out_sz /= ly->shard_count;
    }
    ly->span = ly->shard_kind == DT_SHARD_SEQ_GATHER ? ly->out_sz / ly->shard_count : ly->out_sz;
}

/* Whether layer i is tied to a table that runs on another rank: the view then gives it a copy
 * of the table at its own offset (a pipeline's last stage; the plan keeps the two equal). */
static bool tied_copy(const struct dtk_net *net, int i)
{
    const struct dt_layer *L = &net->model->layers[i];
    return L->tied && net->view && net->lay[i].runs && L->tied_layer >= 0 &&
           !net->lay[L->tied_layer].runs;
}

/* A tied layer reads (and adds its gradient to) the table of the embedding it is tied to, on
 * this rank, or its copy of it. */
static int tie_weights(struct dtk_net *net, struct dt_error *err)
{
    const struct dt_model *m = net->model;
    for (int i = 0; i < m->n_layers; i++) {
        const struct dt_layer *L = &m->layers[i];
        if (!L->tied || !net->lay[i].runs || tied_copy(net, i))
            continue;
        if (L->tied_layer < 0 || L->tied_layer >= i || !net->lay[L->tied_layer].runs)
            return layer_fail(err, m, L, "its tied table is not on this rank");
        net->lay[i].poff = net->lay[L->tied_layer].poff;
        net->lay[i].goff = net->lay[L->tied_layer].goff;
    }
    return DT_OK;
}

/* Whether layer i's output is held only until sent, in ws_rows rows. */
static bool until_sent(const struct dtk_net_view *v, int i)
{
    return v->layers && v->layers[i].act_until_sent;
}

/* Whether layer j's output gradient arrives from another rank (then no reader zeroes it). */
static bool received(const struct dtk_net_view *v, int j)
{
    return v->layers && v->layers[j].dact_received;
}

/* ZeRO-3: the ranges the rank owns of its view's packed layout, from the model's parameters. */
static int init_owned(struct dtk_net *net, float *all)
{
    long n = dt_shard_packed_floats(net->model, net->view);
    float *packed = malloc((size_t)(n ? n : 1) * sizeof *packed);
    if (!packed)
        return -1;
    dt_shard_copy_packed(net->model, net->view, packed, all, false);
    for (int i = 0; i < net->n_owned; i++)
        memcpy(net->params + net->owned[i].offset, packed + net->owned[i].packed_offset,
               (size_t)net->owned[i].count * sizeof *packed);
    free(packed);
    return 0;
}

/* A tied copy of layer i: its vocabulary shard's token rows of table (all of them without a
 * shard), the padding rows zero, as the table's own shard on the first stage holds them. */
static void copy_tied_rows(struct dtk_net *net, int i, const float *table)
{
    const struct dtk_lay *ly = &net->lay[i];
    long width = net->model->layers[net->model->layers[i].tied_layer].units;
    float *to = net->params + ly->poff;
    memcpy(to, table + ly->vocab_first * width, (size_t)(ly->vocab_valid * width) * sizeof *to);
    memset(to + ly->vocab_valid * width, 0,
           (size_t)((ly->vocab_rows - ly->vocab_valid) * width) * sizeof *to);
}

/* Copies the run layers' parameters from the model's flat layout into the packed buffer. */
static int init_float_params(struct dtk_net *net, enum dtk_init init, uint64_t seed)
{
    const struct dt_model *m = net->model;
    if (!net->n_owned && net->n_params == m->total_params && net->lay[0].poff == m->layers[0].param_offset) {
        bool whole = true;
        for (int i = 0; i < m->n_layers; i++)
            whole &= net->lay[i].runs;
        if (whole) {
            dtk_init_model(net->params, m, init, seed);
            return 0;
        }
    }
    /* every rank draws the whole model, so a stage's weights equal the one-rank run's */
    float *all = malloc((size_t)(m->total_params ? m->total_params : 1) * sizeof *all);
    if (!all)
        return -1;
    dtk_init_model(all, m, init, seed);
    int rc = net->n_owned ? init_owned(net, all) : 0;
    for (int i = 0; i < m->n_layers && !net->n_owned; i++) {
        if (net->lay[i].runs)
            dt_shard_copy(m, net->view, i, net->params, all, false);
        if (tied_copy(net, i)) /* the table's token rows come first */
            copy_tied_rows(net, i, all + m->layers[m->layers[i].tied_layer].param_offset);
    }
    free(all);
    return rc;
}

/* Under mixed precision the parameters are the float32 initialisation rounded to the dtype
 * (the master weights start from them, as Megatron-LM's mixed-precision optimizer does). */
static int init_params(struct dtk_net *net, enum dtk_init init, uint64_t seed)
{
    if (!mixed(net))
        return init_float_params(net, init, seed);
    net->params = malloc((size_t)(net->n_params + 1) * sizeof *net->params);
    int rc = net->params ? init_float_params(net, init, seed) : -1;
    if (!rc)
        dtk_f32_to_half(net->dtype, net->params, net->params16, net->n_params);
    free(net->params);
    net->params = NULL;
    return rc;
}

int dtk_net_create_view(const struct dt_model *model, const struct dtk_net_view *v,
                        enum dtk_init init, uint64_t seed, struct dtk_net **out,
                        struct dt_error *err)
{
    *out = NULL;
    const int max_batch = v->rows;
    if (max_batch < 1)
        return dt_fail(err, DT_EINPUT, "", 0, 0, "max batch must be at least 1 (got %d)",
                       max_batch);
    if (model->n_layers < 1)
        return dt_fail(err, DT_EINPUT, model->path, 0, 0, "model '%s' has no layers",
                       model->name);
    struct dtk_net *net = calloc(1, sizeof *net);
    if (!net)
        return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory for the network");
    const int n = model->n_layers;
    net->model = model;
    net->max_batch = max_batch;
    net->dtype = v->dtype;
    net->grads_f32 = v->grads_f32;
    net->in_sz = shape_size(&model->input);
    net->bn_momentum = init == DTK_INIT_GLOROT ? 0.01f : 0.1f;
    net->lay = calloc((size_t)n, sizeof *net->lay);
    if (!net->lay) {
        free(net);
        return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory for the network");
    }
    apply_view(net, v);
    int rc = tie_weights(net, err);
    if (rc) {
        free(net->lay);
        free(net);
        return rc;
    }

    /* Shapes, kinds and which gradients are needed; then the arena sizes. */
    long acts = 0, iacts = 0, work = 0, state = 0;
    net->ws_rows = v->ws_rows > 0 ? v->ws_rows : max_batch;
    for (int i = 0; i < n && rc == DT_OK; i++) {
        const struct dt_layer *L = &model->layers[i];
        struct dtk_lay *ly = &net->lay[i];
        ly->cd.B = max_batch;
        if ((rc = check_layer(model, i, ly, max_batch, err)))
            break;
        ly->cd.B = max_batch;
        /* a convolution's scratch serves the kernels' threads (one block of samples each) */
        ly->cd.threads = L->kind == DT_L_CONV2D || L->kind == DT_L_ATTENTION_CORE
                             ? dtk_num_threads()
                             : 1;
        ly->out_sz = shape_size(&L->out_shape);
        apply_shard(L, ly);
        ly->need = dt_layer_trains(L);
        for (int k = 0; k < L->n_in; k++)
            if (L->in[k] >= 0 && net->lay[L->in[k]].need)
                ly->need = true;
        ly->alias = L->kind == DT_L_FLATTEN && L->in[0] >= 0;
        ly->owner = ly->alias ? net->lay[L->in[0]].owner : i;
        ly->pooled = ly->alias ? net->lay[ly->owner].pooled : v->dact && v->dact->at[i] >= 0;
        ly->zero_at = -1;
        if (!ly->alias && ly->runs) /* views write nothing: their readers write the owner's */
            for (int k = 0; k < L->n_in; k++)
                if (L->in[k] >= 0 && !received(v, net->lay[L->in[k]].owner)) {
                    struct dtk_lay *o = &net->lay[net->lay[L->in[k]].owner];
                    o->zero_at = o->zero_at > i ? o->zero_at : i;
                }
        long aux = 0, iaux = 0, w = 0;
        if (ly->runs)
            layer_extra(net, i, ly, &aux, &iaux, &w);
        ly->aux_row = aux;
        ly->iaux_row = iaux;
        if (w > work)
            work = w;
        bool act_ws = v->recompute && v->recompute->act_ws[i];
        bool keep_ws = v->recompute && v->recompute->keep_ws[i];
        long own = ly->need && !ly->pooled; /* a gradient of its own */
        bool ring = !ly->alias && ly->holds && until_sent(v, i);
        long per = (ly->alias || !ly->holds ? 0 : ly->out_sz * (1 + own - act_ws - ring)) +
                   (keep_ws || f32_keep(net, i) ? 0 : aux);
        if ((double)per * max_batch + (double)acts > 4e11)
            rc = dt_fail(err, DT_ENOMEM, "", 0, 0, "activations of model '%s' for %d samples "
                         "exceed any memory", model->name, max_batch);
        acts += per * max_batch + (ring ? ly->out_sz * net->ws_rows : 0);
        iacts += (keep_ws ? 0 : iaux) * max_batch;
        if (L->kind == DT_L_BATCHNORM)
            state += 2 * (L->in_shape.rank == 3 ? L->in_shape.d[0] : last_dim(&L->in_shape));
    }
    long all_state = state;
    state = 0;
    for (int i = 0; i < n; i++)
        state += net->lay[i].runs ? model->layers[i].state_floats : 0;
    if (rc == DT_OK && all_state != model->total_state_floats)
        rc = dt_fail(err, DT_EINPUT, model->path, 0, 0, "model '%s' declares %ld state floats "
                     "but its batchnorm layers need %ld", model->name,
                     model->total_state_floats, all_state);
    if (rc) {
        free(net->lay);
        free(net);
        return rc;
    }
    if (model->input_is_tokens && net->lay[0].runs)
        iacts += net->in_sz * max_batch;
    net->rcmp = v->recompute;
    long ws = net->rcmp ? net->rcmp->ws_floats * net->ws_rows : 0;
    long iws = net->rcmp ? net->rcmp->ws_ints * net->ws_rows : 0;
    net->slot_rows = v->dact ? v->slot_rows : max_batch;
    long pool = v->dact ? v->dact->pool * net->slot_rows : 0;
    acts += ws + pool;
    iacts += iws;
    const struct dt_layer *last = &model->layers[n - 1];
    const struct dt_shape *os = &last->out_shape;
    net->loss_kind = last->kind == DT_L_SOFTMAX ? LOSS_SOFTMAX
                     : last->kind == DT_L_SIGMOID ? LOSS_SIGMOID : LOSS_LOGITS;
    net->lc = (int)(os->rank == 3 ? os->d[0] : last_dim(os));
    net->ls = os->rank == 3 ? os->d[1] * os->d[2] : 1;
    net->lgroups = os->rank == 2 ? (int)os->d[0] : 1;
    net->labels_per_sample = net->loss_kind == LOSS_SIGMOID ? net->lay[n - 1].out_sz
                                                            : net->lgroups * net->ls;
    net->classes = net->lc;
    net->vocab = net->lay[n - 1].shard_kind == DT_SHARD_VOCAB;
    if (net->vocab)
        net->lc = net->lay[n - 1].cols;
    if (f32_keep(net, n - 1) && v->recompute && v->recompute->keep_ws[n - 1]) {
        dtk_net_destroy(net);
        return dt_fail(err, DT_EINPUT, "", 0, 0, "the vocabulary-parallel loss's statistics in "
                       "the 2-byte recomputation workspace: not implemented");
    }
    /* (the last layer's probabilities are in its keep rows: dt_layer_keep) */

    /* One allocation each; the kernels' scratch apart (not a buffer of the plan). */
    size_t np = (size_t)net->n_params;
    long stage = 0;
    for (int i = 0; i < n; i++) {
        net->lay[i].nparams = net->lay[i].runs ? layer_nparams(net, i) : 0;
        long need = mixed(net) && net->lay[i].runs ? stage_need(net, i) : 0;
        stage = need > stage ? need : stage;
    }
    if (mixed(net)) {
        net->params16 = alloc_halves(np, &net->bytes);
        net->arena16 = alloc_halves((size_t)acts, &net->bytes);
    } else {
        net->params = alloc_floats(np, &net->bytes);
        net->arena = alloc_floats((size_t)acts, &net->bytes);
    }
    if (half_grads(net))
        net->grads16 = alloc_halves((size_t)net->n_grads, &net->bytes);
    else
        net->grads = alloc_floats((size_t)net->n_grads, &net->bytes);
    net->n_opt = v->opt_moments * (long)np;
    net->n_arena = acts;
    net->n_iarena = iacts;
    net->n_state = state;
    net->opt = alloc_floats((size_t)v->opt_moments * np, &net->bytes);
    net->state = alloc_floats((size_t)state, &net->bytes);
    net->work = alloc_floats((size_t)work, &net->work_bytes);
    net->stage = alloc_floats((size_t)stage, &net->work_bytes);
    net->stats = alloc_floats(f32_keep(net, n - 1) ? (size_t)(net->lay[n - 1].aux_row * max_batch)
                                                   : 0, &net->bytes);
    net->bytes += (double)iacts * sizeof(int);
    net->iarena = calloc((size_t)(iacts ? iacts : 1), sizeof(int));
    bool have = (mixed(net) ? net->params16 && net->arena16 : net->params && net->arena) &&
                (half_grads(net) ? net->grads16 != NULL : net->grads != NULL);
    if (!have || !net->opt || !net->state || !net->work || !net->stage || !net->iarena ||
        !net->stats) {
        dtk_net_destroy(net);
        return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory: model '%s' with batch %d needs "
                       "%.3g GB", model->name, max_batch, net->bytes / 1e9);
    }

    /* Carve the arenas: the recomputation workspace first, the gradient pool, then each
     * layer's own. */
    float *sp = net->state;
    long fp = ws + pool;
    int *ip = net->iarena + iws;
    const struct dt_recompute_layout *rw = net->rcmp;
    for (int i = 0; i < n; i++) {
        const struct dt_layer *L = &model->layers[i];
        struct dtk_lay *ly = &net->lay[i];
        if (ly->alias) {
            ly->act_ws = net->lay[L->in[0]].act_ws;
            ly->act = net->lay[L->in[0]].act;
            ly->dact = ly->need ? net->lay[L->in[0]].dact : NULL;
            ly->act16 = net->lay[L->in[0]].act16;
            ly->dact16 = ly->need ? net->lay[L->in[0]].dact16 : NULL;
        } else if (ly->holds) {
            ly->act_ws = (rw && rw->act_ws[i]) || until_sent(v, i);
            if (rw && rw->act_ws[i]) /* the workspace's, at the plan's offset */
                arena_at(net, rw->act_at[i] * net->ws_rows, &ly->act, &ly->act16);
            else
                carve(net, &fp, ly->out_sz * (ly->act_ws ? net->ws_rows : max_batch), &ly->act,
                      &ly->act16);
            if (ly->pooled) /* the pool's, at the plan's offset */
                arena_at(net, ws + v->dact->at[i] * net->slot_rows, &ly->dact, &ly->dact16);
            else if (ly->need)
                carve(net, &fp, ly->out_sz * max_batch, &ly->dact, &ly->dact16);
        }
        ly->keep_ws = rw && rw->keep_ws[i];
        if (ly->keep_ws) {
            arena_at(net, rw->keep_at[i] * net->ws_rows, &ly->aux, &ly->aux16);
            ly->iaux = net->iarena + rw->ikeep_at[i] * net->ws_rows;
        } else if (f32_keep(net, i)) {
            ly->aux = net->stats;
            ly->iaux = ip;
            ip += ly->iaux_row * max_batch;
        } else {
            carve(net, &fp, ly->aux_row * max_batch, &ly->aux, &ly->aux16);
            ly->iaux = ip;
            ip += ly->iaux_row * max_batch;
        }
        if (L->kind == DT_L_BATCHNORM && ly->runs) {
            long c = ly->aux_row / 2;
            ly->run_mean = sp;
            ly->run_var = sp + c;
            for (long k = 0; k < c; k++)
                ly->run_var[k] = 1.0f;
            sp += 2 * c;
        }
    }
    if (model->input_is_tokens && net->lay[0].runs)
        net->tokens = ip;
    /* the probabilities of a logits output: the last floats of each of the last layer's keep
     * rows would interleave with its own state, so they take the tail of its keep block */
    struct dtk_lay *ll = &net->lay[n - 1];
    if (net->loss_kind == LOSS_LOGITS && ll->runs) {
        ll->aux_row -= ll->out_sz;
        if (mixed(net))
            net->probs16 = ll->aux16 + ll->aux_row * max_batch;
        else
            net->probs = ll->aux + ll->aux_row * max_batch;
    }
    if (init_params(net, init, seed)) {
        dtk_net_destroy(net);
        return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory for the initial parameters");
    }
    net->drop_seed = seed;
    *out = net;
    return DT_OK;
}

void dtk_net_destroy(struct dtk_net *net)
{
    if (!net)
        return;
    free(net->params);
    free(net->grads);
    free(net->opt);
    free(net->state);
    free(net->arena);
    free(net->work);
    free(net->stage);
    free(net->stats);
    free(net->params16);
    free(net->grads16);
    free(net->arena16);
    free(net->iarena);
    free(net->lay);
    free(net);
}

const struct dt_model *dtk_net_model(const struct dtk_net *net) { return net->model; }
int dtk_net_max_batch(const struct dtk_net *net) { return net->max_batch; }
long dtk_net_n_params(const struct dtk_net *net) { return net->n_params; }
long dtk_net_n_grads(const struct dtk_net *net) { return net->n_grads; }
float *dtk_net_params(struct dtk_net *net) { return net->params; }
float *dtk_net_grads(struct dtk_net *net) { return net->grads; }
float *dtk_net_opt_m(struct dtk_net *net) { return net->opt; }
float *dtk_net_opt_v(struct dtk_net *net) { return net->opt + net->n_params; }
float *dtk_net_state(struct dtk_net *net) { return net->state; }
enum dt_dtype dtk_net_dtype(const struct dtk_net *net) { return net->dtype; }
uint16_t *dtk_net_params16(struct dtk_net *net) { return net->params16; }
uint16_t *dtk_net_grads16(struct dtk_net *net) { return net->grads16; }
void dtk_net_set_dropout(struct dtk_net *net, uint64_t seed, long first_row)
{
    net->drop_seed = seed;
    net->drop_row0 = first_row;
}

void dtk_net_set_step(struct dtk_net *net, long step) { net->drop_step = step; }

void dtk_net_set_batch_rows(struct dtk_net *net, int b0, int row0) { net->row_shift = row0 - b0; }
double dtk_net_bytes(const struct dtk_net *net) { return net->bytes; }
double dtk_net_work_bytes(const struct dtk_net *net) { return net->work_bytes; }
void dtk_net_set_train(struct dtk_net *net, bool train) { net->train = train; }
void dtk_net_set_bn_momentum(struct dtk_net *net, float momentum) { net->bn_momentum = momentum; }

long dtk_net_out_floats(const struct dtk_net *net, int i)
{
    return i < 0 ? net->in_sz : net->lay[i].out_sz;
}

float *dtk_net_act(struct dtk_net *net, int i)
{
    return net->lay[i].act;
}

float *dtk_net_dact(struct dtk_net *net, int i)
{
    return net->lay[i].dact;
}

/* The row of a layer's gradient storage that holds row b0 of the batch: a pooled gradient
 * holds one slot's rows. */
static long dact_row(const struct dtk_net *net, const struct dtk_lay *ly, int b0)
{
    return ly->pooled ? b0 % net->slot_rows : b0;
}

long dtk_net_dact_offset(const struct dtk_net *net, int i, long elem)
{
    const struct dtk_lay *ly = &net->lay[i];
    return ly->pooled ? elem % (ly->out_sz * net->slot_rows) : elem;
}

/* The rows of a layer's output and of its kept state that hold row b0 of the batch: the
 * recomputation workspace holds ws_rows rows. */
static long act_row(const struct dtk_net *net, const struct dtk_lay *ly, int b0)
{
    return ly->act_ws ? b0 % net->ws_rows : b0;
}

static long keep_row(const struct dtk_net *net, const struct dtk_lay *ly, int b0)
{
    return ly->keep_ws ? b0 % net->ws_rows : b0;
}

long dtk_net_act_offset(const struct dtk_net *net, int i, long elem)
{
    const struct dtk_lay *ly = &net->lay[i];
    return ly->act_ws ? elem % (ly->out_sz * net->ws_rows) : elem;
}

uint16_t *dtk_net_act16(struct dtk_net *net, int i) { return net->lay[i].act16; }
uint16_t *dtk_net_dact16(struct dtk_net *net, int i) { return net->lay[i].dact16; }

/* ---- mixed precision: one op's float32 stage ---- */

/* What an op writes, so what its stage rounds back into 2-byte storage (the rest it only
 * reads: converting it back would give the same bits, at the cost of a pass over it). */
enum stage_op {
    STAGE_FORWARD, /* its output and what it keeps (its inputs are read) */
    STAGE_BACKWARD, /* the output gradients and the parameters' gradients */
    STAGE_LOSS,    /* everything staged (the loss writes probabilities, an output gradient,
                      and a softmax output) */
    STAGE_EVAL_LOSS /* the loss without gradients: probabilities and a softmax output */
};

static bool stages_grads(enum stage_op op)
{
    return op == STAGE_BACKWARD || op == STAGE_LOSS;
}

static bool is_loss(enum stage_op op)
{
    return op == STAGE_LOSS || op == STAGE_EVAL_LOSS;
}

/* Converts rows [b0, b0 + nb) of 2-byte storage h (row elements each) into the stage at
 * *cur, which keeps max_batch rows so that row b0 sits where the kernels look for it; rows
 * the op writes are rounded back by unstage. */
static float *stage_rows(struct dtk_net *net, float **cur, uint16_t *h, long row, int b0,
                         int nb, bool written)
{
    float *f = *cur;
    *cur += row * net->max_batch;
    long first = (long)b0 * row, n = (long)nb * row;
    dtk_half_to_f32(net->dtype, h + first, f + first, n);
    if (written)
        net->staged[net->n_staged++] = (struct staged){h + first, f + first, n};
    return f;
}

/* Stages the output (and gradient) of owner o for every layer that views it; act_written:
 * the op writes that output. */
static void stage_output(struct dtk_net *net, float **cur, int o, int b0, int nb,
                         enum stage_op op, bool act_written)
{
    struct dtk_lay *lo = &net->lay[o];
    if (lo->act || !lo->act16)
        return; /* staged already, or not held here */
    bool grads = stages_grads(op);
    float *a = stage_rows(net, cur, lo->act16, lo->out_sz, (int)act_row(net, lo, b0), nb,
                          act_written);
    float *d = grads && lo->dact16
                   ? stage_rows(net, cur, lo->dact16, lo->out_sz, (int)dact_row(net, lo, b0), nb,
                                true)
                   : NULL;
    for (int k = o; k < net->model->n_layers; k++)
        if (net->lay[k].owner == o) {
            net->lay[k].act = a;
            net->lay[k].dact = net->lay[k].dact16 ? d : NULL;
        }
}

/* Under mixed precision, converts what an op of layer i touches (rows [b0, b0 + nb)) into
 * float32: the outputs of it and its inputs (with their gradients but in a forward), what it
 * keeps, its parameters (and gradients). The kernels then run in float32 as they do without
 * it. Its own output comes first, so that an input viewing the same owner (a flatten) counts
 * as written too. */
static void stage_layer(struct dtk_net *net, int i, int b0, int nb, enum stage_op op)
{
    if (!mixed(net))
        return;
    const struct dt_layer *L = &net->model->layers[i];
    struct dtk_lay *ly = &net->lay[i];
    float *cur = net->stage;
    bool grads = stages_grads(op), keeps = op != STAGE_BACKWARD;
    net->n_staged = 0;
    stage_output(net, &cur, ly->owner, b0, nb, op, keeps);
    for (int k = 0; k < L->n_in; k++)
        if (L->in[k] >= 0)
            stage_output(net, &cur, net->lay[L->in[k]].owner, b0, nb, op, is_loss(op));
    if (ly->aux_row && ly->aux16) /* (f32_keep: float32 already) */
        ly->aux = stage_rows(net, &cur, ly->aux16, ly->aux_row, (int)keep_row(net, ly, b0), nb,
                             keeps);
    if (i == net->model->n_layers - 1 && net->probs16)
        net->probs = stage_rows(net, &cur, net->probs16, ly->out_sz, b0, nb, is_loss(op));
    net->wstage = cur;
    dtk_half_to_f32(net->dtype, net->params16 + ly->poff, cur, ly->nparams);
    cur += ly->nparams;
    net->gstage = !grads ? NULL : half_grads(net) ? cur : net->grads + ly->goff;
    if (grads && half_grads(net))
        dtk_half_to_f32(net->dtype, net->grads16 + ly->goff, cur, ly->nparams);
}

/* Rounds what the op wrote back into 2-byte storage (rounding an unchanged value gives its
 * bits back) and forgets the stage. */
static void unstage(struct dtk_net *net, int i)
{
    if (!mixed(net))
        return;
    for (int k = 0; k < net->n_staged; k++)
        dtk_f32_to_half(net->dtype, net->staged[k].f, net->staged[k].h, net->staged[k].n);
    struct dtk_lay *ly = &net->lay[i];
    if (net->gstage && half_grads(net))
        dtk_f32_to_half(net->dtype, net->gstage, net->grads16 + ly->goff, ly->nparams);
    for (int k = 0; k < net->model->n_layers; k++) {
        net->lay[k].act = net->lay[k].dact = NULL;
        if (net->lay[k].aux16)
            net->lay[k].aux = NULL;
    }
    net->probs = net->wstage = net->gstage = NULL;
    net->n_staged = 0;
}

static const float *layer_w(const struct dtk_net *net, const struct dtk_lay *ly)
{
    return mixed(net) ? net->wstage : net->params + ly->poff;
}

static float *layer_dw(struct dtk_net *net, const struct dtk_lay *ly)
{
    return mixed(net) ? net->gstage : net->grads + ly->goff;
}

/* ---- forward ---- */

static const float *in_rows(const struct dtk_net *net, int j, int b0)
{
    if (j < 0)
        return net->x + (long)b0 * net->in_sz;
    return net->lay[j].act + act_row(net, &net->lay[j], b0) * net->lay[j].out_sz;
}

static float *din_rows(struct dtk_net *net, int j, int b0)
{
    if (j < 0 || !net->lay[j].dact)
        return NULL;
    return net->lay[j].dact + dact_row(net, &net->lay[j], b0) * net->lay[j].out_sz;
}

/* Where layer i's share of rows [b0, b0 + nb) of layer j's buffers starts: a layer on a chunk
 * of the tokens (sequence parallelism) reads and writes its chunk of a whole buffer; 0
 * otherwise. */
static long chunk_of(const struct dtk_net *net, int i, int j, int nb)
{
    const struct dtk_lay *li = &net->lay[i];
    if (j < 0 || !dt_shard_chunked(li->shard_kind) || net->lay[j].shard_kind == DT_SHARD_SEQ)
        return 0;
    return li->shard_index * ((long)nb * net->lay[j].out_sz / li->shard_count);
}

/* in_rows and din_rows of layer i's input j: its share of them. */
static const float *x_rows(const struct dtk_net *net, int i, int j, int b0, int nb)
{
    return in_rows(net, j, b0) + chunk_of(net, i, j, nb);
}

static float *dx_rows(struct dtk_net *net, int i, int j, int b0, int nb)
{
    float *d = din_rows(net, j, b0);
    return d ? d + chunk_of(net, i, j, nb) : NULL;
}

int dtk_net_begin_forward(struct dtk_net *net, const float *x, int b0, int nb, bool train,
                          struct dt_error *err)
{
    const struct dt_model *m = net->model;
    if (b0 < 0 || nb < 1 || b0 + nb > net->max_batch)
        return dt_fail(err, DT_EINPUT, "", 0, 0, "rows [%d, %d) outside the network's batch of %d",
                       b0, b0 + nb, net->max_batch);
    net->x = x;
    net->train = train;
    if (m->input_is_tokens && x) {
        long vocab = m->vocab;
        for (int i = 0; i < m->n_layers; i++)
            if (m->layers[i].kind == DT_L_EMBEDDING && m->layers[i].in[0] == -1 &&
                (vocab <= 0 || m->layers[i].vocab < vocab))
                vocab = m->layers[i].vocab;
        int *ids = net->tokens + (long)b0 * net->in_sz;
        const float *xr = x + (long)b0 * net->in_sz;
        for (long r = 0; r < (long)nb * net->in_sz; r++) {
            float v = xr[r];
            if (!(v >= 0.0f && v < (float)vocab && v == floorf(v)))
                return dt_fail(err, DT_EINPUT, "", 0, 0,
                               "token %ld of the batch is %g, not an id in [0, %ld)", r, v, vocab);
            ids[r] = (int)v;
        }
    }
    return DT_OK;
}

/* Softmax runs over the channels of (C,H,W), the last axis otherwise. */
static void softmax_geometry(const struct dt_layer *L, int *C, long *S)
{
    const struct dt_shape *s = &L->out_shape;
    *C = (int)(s->rank == 3 ? s->d[0] : last_dim(s));
    *S = s->rank == 3 ? s->d[1] * s->d[2] : 1;
}

static struct dtk_conv_dims rows_dims(const struct dtk_lay *ly, int nb)
{
    struct dtk_conv_dims d = ly->cd;
    d.B = nb;
    return d;
}

/* Dropout of layer i on rows [b0, b0 + nb): the stream of (seed, step, layer) at the
 * positions of the elements this rank computes, counted over the global batch's rows of the
 * whole layer's output (dtk_net_set_dropout): a column shard takes its columns of each token
 * row, a chunk of the tokens (sequence parallelism) its stretch of the micro-batch. */
static void dropout_forward(const struct dtk_net *net, int i, const struct dtk_lay *ly, float *y,
                            float *mask, const float *x, int b0, int nb, long n)
{
    const struct dt_layer *L = &net->model->layers[i];
    float rate = net->train ? (float)L->rate : 0.0f;
    uint64_t key = dtk_rng_key(net->drop_seed, (uint64_t)net->drop_step, (uint64_t)i);
    long sample = dt_shape_size(&L->out_shape);
    uint64_t first = (uint64_t)(net->drop_row0 + net->row_shift + b0) * (uint64_t)sample;
    if (ly->shard_kind == DT_SHARD_COLUMNS && rate > 0) {
        long width = ly->cols, w = width / ly->shard_count;
        for (long r = 0; r < n / w; r++)
            dtk_rng_counter_uniforms(mask + r * w, w, key,
                                     first + (uint64_t)(r * width + ly->shard_index * w));
        dtk_dropout_forward_drawn(y, mask, x, n, rate);
        return;
    }
    if (dt_shard_chunked(ly->shard_kind))
        first += (uint64_t)(ly->shard_index * n);
    dtk_dropout_forward(y, mask, x, n, rate, key, first);
}

void dtk_net_recompute_layer(struct dtk_net *net, int i, int b0, int nb)
{
    net->recomputing = true;
    dtk_net_forward_layer(net, i, b0, nb);
    net->recomputing = false;
}

static void forward_kernels(struct dtk_net *net, int i, int b0, int nb)
{
    const struct dt_model *m = net->model;
    const struct dt_layer *L = &m->layers[i];
    struct dtk_lay *ly = &net->lay[i];
    const float *x = x_rows(net, i, L->in[0], b0, nb);
    const float *w = layer_w(net, ly);
    const long osz = ly->out_sz;
    float *y = ly->act + act_row(net, ly, b0) * osz + chunk_of(net, i, i, nb);
    float *aux = ly->aux + keep_row(net, ly, b0) * ly->aux_row;
    int *iaux = ly->iaux + keep_row(net, ly, b0) * ly->iaux_row;
    const long n = (long)nb * ly->span;
    struct dtk_conv_dims d = rows_dims(ly, nb);

    switch (L->kind) {
    case DT_L_CONV2D: {
        long nw = (long)d.F * (d.C / d.groups) * d.kh * d.kw;
        dtk_conv2d_forward(y, net->work, x, w, L->bias ? w + nw : NULL, &d);
        break;
    }
    case DT_L_CONV2D_TRANSPOSE: {
        long nw = (long)d.C * d.F * d.kh * d.kw;
        dtk_convt_forward(y, net->work, x, w, L->bias ? w + nw : NULL, &d);
        break;
    }
    case DT_L_MAXPOOL: dtk_maxpool_forward(y, iaux, x, &d); break;
    case DT_L_AVGPOOL: dtk_avgpool_forward(y, x, &d); break;
    case DT_L_GLOBALPOOL:
        dtk_globalpool_forward(y, x, nb, (int)L->in_shape.d[0],
                               (int)(L->in_shape.d[1] * L->in_shape.d[2]));
        break;
    case DT_L_DENSE: /* a row-parallel shard's partial sums: the bias is added once, by 0 */
        dtk_dense_forward(y, x, w, L->bias && !(ly->shard_kind == DT_SHARD_ROWS &&
                                                ly->shard_index > 0)
                                       ? w + (long)ly->units * ly->cols : NULL,
                          nb * ly->rows, ly->cols, ly->units);
        break;
    case DT_L_FLATTEN:
        if (!ly->alias)
            memcpy(y, x, (size_t)n * sizeof(float));
        break;
    case DT_L_DROPOUT: dropout_forward(net, i, ly, y, aux, x, b0, nb, n); break;
    case DT_L_RELU: dtk_relu_forward(y, x, n); break;
    case DT_L_TANH: dtk_tanh_forward(y, x, n); break;
    case DT_L_SIGMOID: dtk_sigmoid_forward(y, x, n); break;
    case DT_L_GELU: dtk_gelu_forward(y, x, n); break;
    case DT_L_SOFTMAX: {
        int C;
        long S;
        if (ly->shard_kind == DT_SHARD_VOCAB)
            break; /* the loss's parts write the probabilities (dtk_net_vocab_stats) */
        softmax_geometry(L, &C, &S);
        dtk_softmax_ch_forward(y, x, (int)(n / (C * S)), C, S);
        break;
    }
    case DT_L_BATCHNORM: {
        const struct dt_shape *s = &L->in_shape;
        int C = (int)(s->rank == 3 ? s->d[0] : last_dim(s));
        int S = s->rank == 3 ? (int)(s->d[1] * s->d[2]) : 1;
        int B = s->rank == 2 ? nb * (int)s->d[0] : nb;
        if (net->train) /* a recomputation leaves the running statistics alone */
            dtk_batchnorm_forward_train(y, aux, aux + C, net->recomputing ? NULL : ly->run_mean,
                                        net->recomputing ? NULL : ly->run_var, x, w, w + C,
                                        B, C, S, (float)L->eps, net->bn_momentum);
        else
            dtk_batchnorm_forward_eval(y, x, w, w + C, ly->run_mean, ly->run_var, B, C, S,
                                       (float)L->eps);
        break;
    }
    case DT_L_LAYERNORM: {
        int N = nb * ly->rows;
        dtk_layernorm_forward(y, aux, aux + N, x, w, w + ly->cols, N, ly->cols, (float)L->eps);
        break;
    }
    case DT_L_ADD:
        dtk_add_forward(y, x, x_rows(net, i, L->in[1], b0, nb), n);
        for (int k = 2; k < L->n_in; k++)
            dtk_accumulate(y, x_rows(net, i, L->in[k], b0, nb), n);
        break;
    case DT_L_CONCAT: {
        const struct dt_shape *os = &L->out_shape;
        int r3 = os->rank == 3;
        int S = r3 ? (int)(os->d[1] * os->d[2]) : 1;
        int B = os->rank == 2 ? nb * (int)os->d[0] : nb;
        int Cout = (int)(r3 ? os->d[0] : last_dim(os)), off = 0;
        for (int k = 0; k < L->n_in; k++) {
            const struct dt_shape *is = input_shape(m, L->in[k]);
            int Cin = (int)(r3 ? is->d[0] : last_dim(is));
            dtk_concat_forward(y, in_rows(net, L->in[k], b0), B, Cin, S, Cout, off);
            off += Cin;
        }
        break;
    }
    case DT_L_UPSAMPLE: {
        const struct dt_shape *s = &L->in_shape;
        dtk_upsample_forward(y, x, nb, (int)s->d[0], (int)s->d[1], (int)s->d[2], L->scale);
        break;
    }
    case DT_L_EMBEDDING: {
        int T = ly->rows, D = ly->cols;
        const int *ids = net->tokens + (long)b0 * net->in_sz;
        /* a vocabulary shard looks up the tokens it holds; shard 0 adds the other tables once
         * (the allreduce after it sums the shards) */
        dtk_embedding_forward_rows(y, ids, w, nb * T, ly->vocab_first, ly->vocab_valid, D);
        const float *pos = w + ly->vocab_rows * D;
        if (L->positions && ly->shard_index == 0)
            dtk_rows_add_forward(y, pos, nb, T, D);
        if (L->token_types && ly->shard_index == 0) /* no segment ids: every token type 0 */
            dtk_rows_add_forward(y, pos + L->positions * D, nb * T, 1, D);
        break;
    }
    case DT_L_LSTM: {
        int T = ly->rows, D = ly->cols, H = (int)L->units;
        const float *wh = w + 4L * H * D;
        dtk_lstm_forward(y, aux, x, w, wh, wh + 4L * H * H, nb, T, D, H, L->return_sequences);
        break;
    }
    case DT_L_ATTENTION:
        dtk_attention_forward(y, aux, x, w, nb, ly->rows, ly->cols, L->heads);
        break;
    case DT_L_ATTENTION_CORE:
        dtk_attn_core_forward(y, aux, x, nb, ly->rows, ly->units, ly->heads, L->causal);
        break;
    case DT_L_SEQPOOL: dtk_seqpool_forward(y, x, nb, ly->rows, ly->cols); break;
    default: break;
    }
}

int dtk_net_forward(struct dtk_net *net, const float *x, int B, bool train, struct dt_error *err)
{
    int rc = dtk_net_begin_forward(net, x, 0, B, train, err);
    if (rc)
        return rc;
    for (int i = 0; i < net->model->n_layers; i++)
        dtk_net_forward_layer(net, i, 0, B);
    return DT_OK;
}

/* ---- backward ---- */

static void zero_range(void *ctx, long lo, long hi)
{
    memset((float *)ctx + lo, 0, (size_t)(hi - lo) * sizeof(float));
}

/* Zeroes n floats, in ranges over the kernels' threads when n is large. */
static void zero_floats(float *p, long n)
{
    dtk_parallel_range(n, DTK_PAR_MIN, zero_range, p);
}

void dtk_net_zero_grads(struct dtk_net *net)
{
    if (half_grads(net))
        memset(net->grads16, 0, (size_t)net->n_grads * sizeof *net->grads16);
    else
        zero_floats(net->grads, net->n_grads);
}

static void zero_rows(const struct dtk_net *net, struct dtk_lay *ly, int b0, int nb)
{
    zero_floats(ly->dact + dact_row(net, ly, b0) * ly->out_sz, (long)nb * ly->out_sz);
}

/* Whether layer i's backward writes its input's gradient rows instead of adding to them: it
 * is their first writer (their zeroing falls to it), it has that one input, and its kernel
 * has a _set form. Zeroing a large gradient then adding to it costs two more passes over
 * memory than writing it. */
static bool backward_sets_input(const struct dtk_net *net, int i)
{
    const struct dt_layer *L = &net->model->layers[i];
    if (i >= net->model->n_layers - 1 || net->lay[i].alias || !net->lay[i].need ||
        L->n_in != 1 || L->in[0] < 0)
        return false;
    if (L->kind != DT_L_RELU && L->kind != DT_L_DROPOUT && L->kind != DT_L_MAXPOOL)
        return false;
    const struct dtk_lay *o = &net->lay[net->lay[L->in[0]].owner];
    return o->dact && o->zero_at == i;
}

int dtk_net_first_writes(const struct dtk_net *net, int i, int owners[DT_MAX_INPUTS])
{
    const struct dt_layer *L = &net->model->layers[i];
    int n = 0;
    if (i >= net->model->n_layers - 1 || net->lay[i].alias)
        return 0; /* begin_backward zeroes those */
    for (int k = 0; k < L->n_in; k++) {
        if (L->in[k] < 0)
            continue;
        int o = net->lay[L->in[k]].owner;
        bool seen = false;
        for (int q = 0; q < n; q++)
            seen |= owners[q] == o;
        if (!seen && net->lay[o].zero_at == i && net->lay[o].dact)
            owners[n++] = o;
    }
    return n;
}

bool dtk_net_loss_zeroes(const struct dtk_net *net, int i)
{
    const struct dtk_lay *li = &net->lay[i];
    const int last = net->model->n_layers - 1;
    return li->dact && !li->alias && (li->zero_at >= last || i == last);
}

/* Zeroes the input gradients that layer i is the first to write, unless it writes them
 * whole. */
static void backward_zero_inputs(struct dtk_net *net, int i, int b0, int nb)
{
    if (backward_sets_input(net, i))
        return;
    int o[DT_MAX_INPUTS], n = dtk_net_first_writes(net, i, o);
    for (int k = 0; k < n; k++)
        zero_rows(net, &net->lay[o[k]], b0, nb);
}

static void backward_kernels(struct dtk_net *net, int i, int b0, int nb);

/* Plane j of the vocabulary-parallel loss's statistics (dt_shard_loss_stats) from row b0. */
static float *vocab_plane(const struct dtk_net *net, int j, int b0)
{
    const struct dtk_lay *ly = &net->lay[net->model->n_layers - 1];
    return ly->aux + ((long)j * net->max_batch + b0) * net->lgroups;
}

void dtk_net_vocab_stats(struct dtk_net *net, bool sums, const int *labels, int b0, int nb)
{
    const int last = net->model->n_layers - 1;
    const struct dtk_lay *ly = &net->lay[last];
    /* the 2-byte logits in float32; the statistics are float32 already (f32_keep) */
    stage_layer(net, last, b0, nb, STAGE_FORWARD);
    const float *logits = in_rows(net, net->model->layers[last].in[0], b0);
    int G = nb * net->lgroups, valid = (int)ly->vocab_valid;
    if (!sums)
        dtk_vocab_xent_max(vocab_plane(net, 0, b0), logits, G, net->lc, valid);
    else
        dtk_vocab_xent_sums(vocab_plane(net, 1, b0), vocab_plane(net, 2, b0), logits,
                            vocab_plane(net, 0, b0), labels, G, net->lc, valid,
                            ly->vocab_first);
    unstage(net, last);
}

void *dtk_net_keep(struct dtk_net *net, int i)
{
    return net->lay[i].aux16 ? (void *)net->lay[i].aux16 : (void *)net->lay[i].aux;
}

int dtk_net_check_loss(const struct dtk_net *net, const int *labels, int b0, int nb,
                       double denom, struct dt_error *err)
{
    const long nl = (long)nb * net->labels_per_sample;
    const int top = net->loss_kind == LOSS_SIGMOID ? 2 : net->classes;
    if (b0 < 0 || nb < 1 || b0 + nb > net->max_batch || !(denom > 0))
        return dt_fail(err, DT_EINPUT, "", 0, 0, "rows [%d, %d) or denominator %g invalid", b0,
                       b0 + nb, denom);
    for (long r = 0; r < nl; r++)
        if (labels[r] < 0 || labels[r] >= top)
            return dt_fail(err, DT_EINPUT, "", 0, 0,
                           "label %ld of the batch is %d, not a class in [0, %d)", r, labels[r],
                           top);
    return DT_OK;
}

/* The loss of rows [b0, b0 + nb) and, with grads, the gradient it seeds (begin_backward). */
static int loss_rows(struct dtk_net *net, const int *labels, int b0, int nb, double denom,
                     double *loss, bool grads, struct dt_error *err)
{
    const struct dt_model *m = net->model;
    const int last = m->n_layers - 1;
    const struct dt_layer *L = &m->layers[last];
    struct dtk_lay *ly = &net->lay[last];
    const long nl = (long)nb * net->labels_per_sample;
    int rc = dtk_net_check_loss(net, labels, b0, nb, denom, err);
    if (rc)
        return rc;
    stage_layer(net, last, b0, nb, grads ? STAGE_LOSS : STAGE_EVAL_LOSS);
    /* Gradients that the loss or the last layer writes first; the others are zeroed by the
     * backward of their last consumer, just before it accumulates into them (cache-warm). */
    for (int i = 0; i < m->n_layers && grads; i++)
        if (dtk_net_loss_zeroes(net, i))
            zero_rows(net, &net->lay[i], b0, nb);
    const long off = (long)b0 * ly->out_sz;
    /* each sample's loss is the mean over its labelled positions; samples sum to denom */
    const float scale = (float)(1.0 / (denom * (double)net->labels_per_sample));
    float *probs, *dlogits;
    const float *logits;
    if (net->loss_kind == LOSS_LOGITS) {
        probs = net->probs + off;
        logits = ly->act + off;
        dlogits = ly->dact && grads ? ly->dact + dact_row(net, ly, b0) * ly->out_sz : NULL;
    } else {
        probs = ly->act + off;
        logits = in_rows(net, L->in[0], b0);
        dlogits = grads ? din_rows(net, L->in[0], b0) : NULL;
    }
    double l;
    if (net->vocab) {
        int G = nb * net->lgroups;
        l = dtk_vocab_xent_finish(probs, dlogits, logits, vocab_plane(net, 0, b0),
                                  vocab_plane(net, 1, b0), vocab_plane(net, 2, b0), labels, G,
                                  net->lc, (int)ly->vocab_valid, ly->vocab_first, scale);
    } else if (net->loss_kind == LOSS_SIGMOID) {
        l = dtk_sigmoid_bce_forward(probs, logits, labels, nl);
        if (dlogits)
            dtk_sigmoid_bce_backward(dlogits, probs, labels, nl, scale);
    } else {
        int groups = nb * net->lgroups;
        l = dtk_softmax_xent_ch_forward(probs, logits, labels, groups, net->lc, net->ls);
        if (dlogits)
            dtk_softmax_xent_ch_backward(dlogits, probs, labels, groups, net->lc, net->ls, scale);
    }
    unstage(net, last);
    if (loss)
        *loss = l;
    return DT_OK;
}

int dtk_net_begin_backward(struct dtk_net *net, const int *labels, int b0, int nb, double denom,
                           double *loss, struct dt_error *err)
{
    return loss_rows(net, labels, b0, nb, denom, loss, true, err);
}

int dtk_net_eval_loss(struct dtk_net *net, const int *labels, int b0, int nb, double *loss,
                      struct dt_error *err)
{
    return loss_rows(net, labels, b0, nb, nb, loss, false, err);
}

void dtk_net_forward_layer(struct dtk_net *net, int i, int b0, int nb)
{
    stage_layer(net, i, b0, nb, STAGE_FORWARD);
    forward_kernels(net, i, b0, nb);
    unstage(net, i);
}

void dtk_net_backward_layer(struct dtk_net *net, int i, int b0, int nb)
{
    stage_layer(net, i, b0, nb, STAGE_BACKWARD);
    backward_kernels(net, i, b0, nb);
    unstage(net, i);
}

static void backward_kernels(struct dtk_net *net, int i, int b0, int nb)
{
    backward_zero_inputs(net, i, b0, nb);
    const struct dt_model *m = net->model;
    const struct dt_layer *L = &m->layers[i];
    struct dtk_lay *ly = &net->lay[i];
    if (!ly->need || ly->alias)
        return;
    if (i == m->n_layers - 1 && net->loss_kind != LOSS_LOGITS)
        return; /* fused with the loss in dtk_net_begin_backward */
    const long osz = ly->out_sz, n = (long)nb * ly->span, own = chunk_of(net, i, i, nb);
    const float *x = x_rows(net, i, L->in[0], b0, nb);
    float *dx = dx_rows(net, i, L->in[0], b0, nb);
    const float *w = layer_w(net, ly);
    float *dw = layer_dw(net, ly);
    const float *y = ly->act + act_row(net, ly, b0) * osz + own;
    const float *dy = ly->dact + dact_row(net, ly, b0) * osz + own;
    const float *aux = ly->aux + keep_row(net, ly, b0) * ly->aux_row;
    const int *iaux = ly->iaux + keep_row(net, ly, b0) * ly->iaux_row;
    struct dtk_conv_dims d = rows_dims(ly, nb);
    const bool set = backward_sets_input(net, i); /* dx is written, not added to */

    switch (L->kind) {
    case DT_L_CONV2D: {
        long nw = (long)d.F * (d.C / d.groups) * d.kh * d.kw;
        dtk_conv2d_backward(dx, dw, L->bias ? dw + nw : NULL, net->work, dy, x, w, &d);
        break;
    }
    case DT_L_CONV2D_TRANSPOSE: {
        long nw = (long)d.C * d.F * d.kh * d.kw;
        dtk_convt_backward(dx, dw, L->bias ? dw + nw : NULL, net->work, dy, x, w, &d);
        break;
    }
    case DT_L_MAXPOOL:
        if (dx)
            (set ? dtk_maxpool_backward_set : dtk_maxpool_backward)(dx, dy, iaux, &d);
        break;
    case DT_L_AVGPOOL:
        if (dx)
            dtk_avgpool_backward(dx, dy, &d);
        break;
    case DT_L_GLOBALPOOL:
        if (dx)
            dtk_globalpool_backward(dx, dy, nb, (int)L->in_shape.d[0],
                                    (int)(L->in_shape.d[1] * L->in_shape.d[2]));
        break;
    case DT_L_DENSE:
        dtk_dense_backward(dx, dw, L->bias ? dw + (long)ly->units * ly->cols : NULL, dy, x, w,
                           nb * ly->rows, ly->cols, ly->units);
        break;
    case DT_L_DROPOUT:
        if (dx)
            (set ? dtk_dropout_backward_set : dtk_dropout_backward)(dx, dy, aux, n);
        break;
    case DT_L_RELU:
        if (dx)
            (set ? dtk_relu_backward_set : dtk_relu_backward)(dx, dy, x, n);
        break;
    case DT_L_TANH:
        if (dx)
            dtk_tanh_backward(dx, dy, y, n);
        break;
    case DT_L_SIGMOID:
        if (dx)
            dtk_sigmoid_backward(dx, dy, y, n);
        break;
    case DT_L_GELU:
        if (dx)
            dtk_gelu_backward(dx, dy, x, n);
        break;
    case DT_L_SOFTMAX:
        if (dx) {
            int C;
            long S;
            softmax_geometry(L, &C, &S);
            dtk_softmax_ch_backward(dx, dy, y, (int)(n / (C * S)), C, S);
        }
        break;
    case DT_L_BATCHNORM: {
        const struct dt_shape *s = &L->in_shape;
        int C = (int)(s->rank == 3 ? s->d[0] : last_dim(s));
        int S = s->rank == 3 ? (int)(s->d[1] * s->d[2]) : 1;
        int B = s->rank == 2 ? nb * (int)s->d[0] : nb;
        dtk_batchnorm_backward(dx, dw, dw + C, dy, x, w, aux, aux + C, B, C, S);
        break;
    }
    case DT_L_LAYERNORM: {
        int N = nb * ly->rows;
        dtk_layernorm_backward(dx, dw, dw + ly->cols, dy, x, w, aux, aux + N, N, ly->cols);
        break;
    }
    case DT_L_ADD:
        for (int k = 0; k < L->n_in; k++) {
            float *dk = dx_rows(net, i, L->in[k], b0, nb);
            if (dk)
                dtk_accumulate(dk, dy, n);
        }
        break;
    case DT_L_CONCAT: {
        const struct dt_shape *os = &L->out_shape;
        int r3 = os->rank == 3;
        int S = r3 ? (int)(os->d[1] * os->d[2]) : 1;
        int B = os->rank == 2 ? nb * (int)os->d[0] : nb;
        int Cout = (int)(r3 ? os->d[0] : last_dim(os)), off = 0;
        for (int k = 0; k < L->n_in; k++) {
            const struct dt_shape *is = input_shape(m, L->in[k]);
            int Cin = (int)(r3 ? is->d[0] : last_dim(is));
            float *dk = din_rows(net, L->in[k], b0);
            if (dk)
                dtk_concat_backward(dk, dy, B, Cin, S, Cout, off);
            off += Cin;
        }
        break;
    }
    case DT_L_UPSAMPLE:
        if (dx) {
            const struct dt_shape *s = &L->in_shape;
            dtk_upsample_backward(dx, dy, nb, (int)s->d[0], (int)s->d[1], (int)s->d[2],
                                  L->scale);
        }
        break;
    case DT_L_EMBEDDING: {
        int T = ly->rows, D = ly->cols;
        const int *ids = net->tokens + (long)b0 * net->in_sz;
        dtk_embedding_backward_rows(dw, dy, ids, nb * T, ly->vocab_first, ly->vocab_valid, D);
        float *dpos = dw + ly->vocab_rows * D; /* every shard: dy is whole and the same */
        if (L->positions)
            dtk_rows_add_backward(dpos, dy, nb, T, D);
        if (L->token_types)
            dtk_rows_add_backward(dpos + L->positions * D, dy, nb * T, 1, D);
        break;
    }
    case DT_L_LSTM: {
        int T = ly->rows, D = ly->cols, H = (int)L->units;
        const float *wh = w + 4L * H * D;
        float *dwh = dw + 4L * H * D;
        dtk_lstm_backward(dx, dw, dwh, dwh + 4L * H * H, net->work, dy, x, w, wh, aux, nb, T, D,
                          H, L->return_sequences);
        break;
    }
    case DT_L_ATTENTION:
        dtk_attention_backward(dx, dw, net->work, dy, x, w, aux, nb, ly->rows, ly->cols,
                               L->heads);
        break;
    case DT_L_ATTENTION_CORE:
        if (dx)
            dtk_attn_core_backward(dx, net->work, ly->cd.threads, dy, x, aux, nb, ly->rows,
                                   ly->units, ly->heads);
        break;
    case DT_L_SEQPOOL:
        if (dx)
            dtk_seqpool_backward(dx, dy, nb, ly->rows, ly->cols);
        break;
    default: break;
    }
}

double dtk_net_loss_backward(struct dtk_net *net, const int *labels, int B)
{
    double loss;
    dtk_net_zero_grads(net);
    if (dtk_net_begin_backward(net, labels, 0, B, (double)B, &loss, NULL))
        return NAN;
    for (int i = net->model->n_layers - 1; i >= 0; i--)
        dtk_net_backward_layer(net, i, 0, B);
    return loss;
}

long dtk_net_correct(const struct dtk_net *net, const int *labels, int B)
{
    return dtk_net_correct_rows(net, labels, 0, B);
}

long dtk_net_correct_rows(const struct dtk_net *net, const int *labels, int b0, int B)
{
    const struct dtk_lay *ly = &net->lay[net->model->n_layers - 1];
    const float *y = ly->act + (long)b0 * ly->out_sz;
    if (mixed(net)) { /* the stage is free between ops */
        y = net->stage;
        dtk_half_to_f32(net->dtype, ly->act16 + (long)b0 * ly->out_sz, net->stage,
                        (long)B * ly->out_sz);
    }
    labels += (long)b0 * net->labels_per_sample;
    if (net->vocab) { /* the target's logit is the group's largest (ties count as correct) */
        long correct = 0;
        const float *mx = vocab_plane(net, 0, b0), *target = vocab_plane(net, 1, b0);
        for (long g = 0; g < (long)B * net->lgroups; g++)
            correct += target[g] >= mx[g];
        return correct;
    }
    if (net->loss_kind == LOSS_SIGMOID) {
        long correct = 0, n = (long)B * net->labels_per_sample;
        for (long i = 0; i < n; i++)
            correct += (y[i] > 0.5f) == (labels[i] == 1);
        return correct;
    }
    return dtk_count_correct_ch(y, labels, B * net->lgroups, net->lc, net->ls);
}

double dtk_net_accuracy(const struct dtk_net *net, const int *labels, int B)
{
    return B > 0 ? (double)dtk_net_correct(net, labels, B) /
                       ((double)B * net->labels_per_sample)
                 : 0.0;
}

long dtk_net_labels_per_sample(const struct dtk_net *net)
{
    return net->labels_per_sample;
}

void dtk_net_adam_step(struct dtk_net *net, const struct dtk_adam *cfg, long t)
{
    dtk_adam_step(net->params, net->grads, net->opt, net->opt + net->n_params, net->n_params, t,
                  cfg);
}

void dtk_net_sgd_step(struct dtk_net *net, const struct dtk_sgd *cfg, long t)
{
    dtk_sgd_step(net->params, net->grads, net->opt, net->n_params, t, cfg);
}

/* ---- the layout, for a backend that mirrors the buffers (exec/cuda_net.c) ---- */

void dtk_net_blocks(const struct dtk_net *net, struct dtk_net_block b[DTK_NET_BLOCKS])
{
    const size_t f = mixed(net) ? sizeof(uint16_t) : sizeof(float);
    b[0] = (struct dtk_net_block){mixed(net) ? (void *)net->params16 : (void *)net->params,
                                  (size_t)net->n_params * f};
    b[1] = (struct dtk_net_block){half_grads(net) ? (void *)net->grads16 : (void *)net->grads,
                                  (size_t)net->n_grads *
                                      (half_grads(net) ? sizeof(uint16_t) : sizeof(float))};
    b[2] = (struct dtk_net_block){mixed(net) ? (void *)net->arena16 : (void *)net->arena,
                                  (size_t)net->n_arena * f};
    b[3] = (struct dtk_net_block){net->iarena, (size_t)net->n_iarena * sizeof(int)};
    b[4] = (struct dtk_net_block){net->state, (size_t)net->n_state * sizeof(float)};
    b[5] = (struct dtk_net_block){net->opt, (size_t)net->n_opt * sizeof(float)};
}

void dtk_net_layer_info(struct dtk_net *net, int i, struct dtk_net_layer *out)
{
    const struct dtk_lay *ly = &net->lay[i];
    *out = (struct dtk_net_layer){
        .runs = ly->runs, .holds = ly->holds, .alias = ly->alias, .need = ly->need,
        .out_sz = ly->out_sz, .aux_row = ly->aux_row, .iaux_row = ly->iaux_row,
        .act = ly->act, .dact = ly->dact, .aux = ly->aux, .iaux = ly->iaux,
        .w = mixed(net) ? NULL : net->params + ly->poff,
        .dw = mixed(net) ? NULL : net->grads + ly->goff,
        .cd = ly->cd, .rows = ly->rows, .cols = ly->cols, .units = ly->units,
        .shard_kind = ly->shard_kind, .shard_index = ly->shard_index};
}

void dtk_net_loss_info(const struct dtk_net *net, struct dtk_net_loss *out)
{
    *out = (struct dtk_net_loss){
        .kind = net->loss_kind == LOSS_SOFTMAX ? DTK_LOSS_SOFTMAX
                : net->loss_kind == LOSS_SIGMOID ? DTK_LOSS_SIGMOID : DTK_LOSS_LOGITS,
        .classes = net->lc, .groups = net->lgroups, .spread = net->ls, .probs = net->probs};
}

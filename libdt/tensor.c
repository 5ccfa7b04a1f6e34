/* Tensor parallelism (Shoeybi et al. 2019): the cut of a model into column- and row-parallel
 * dense pairs, the shards' sizes and packing (dt/tensor.h), and the emitters the data-parallel
 * compile calls to place a tensor group's ranks and its f/g allreduces. */
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "dt/tensor.h"

static bool elementwise(enum dt_layer_kind k)
{
    return k == DT_L_RELU || k == DT_L_GELU || k == DT_L_TANH || k == DT_L_SIGMOID ||
           k == DT_L_DROPOUT;
}

static long in_width(const struct dt_layer *L)
{
    return L->in_shape.d[L->in_shape.rank - 1];
}

bool dt_shard_splits_output(int kind)
{
    return kind == DT_SHARD_COLUMNS || kind == DT_SHARD_QKV || kind == DT_SHARD_VOCAB;
}

long dt_shard_vocab_rows(long vocab, int count)
{
    return (vocab + count - 1) / count;
}

long dt_shard_vocab_valid(long vocab, int count, int index)
{
    long rows = dt_shard_vocab_rows(vocab, count), left = vocab - index * rows;
    return left < 0 ? 0 : left > rows ? rows : left;
}

/* The vocabulary a VOCAB or VOCAB_TABLE shard of layer l splits. */
static long vocab_of(const struct dt_layer *L)
{
    return L->kind == DT_L_EMBEDDING ? L->vocab : L->out_shape.d[L->out_shape.rank - 1];
}

long dt_shard_params(const struct dt_model *m, const struct dt_layer_view *v, int l)
{
    const struct dt_layer *L = &m->layers[l];
    int T = v[l].shard_count;
    long Vs = T > 0 ? dt_shard_vocab_rows(vocab_of(L), T) : 0;
    switch (v[l].shard_kind) {
    case DT_SHARD_COLUMNS:
    case DT_SHARD_QKV: return L->params / T;
    case DT_SHARD_ROWS: return L->units * (in_width(L) / T) + (L->bias ? L->units : 0);
    case DT_SHARD_VOCAB: /* an untied head's rows of W and b (a tied one reads the table's) */
        return L->params ? Vs * in_width(L) + (L->bias ? Vs : 0) : 0;
    case DT_SHARD_VOCAB_TABLE: return L->params - (L->vocab - Vs) * L->units;
    default: return L->params;
    }
}

long dt_shard_tied_floats(const struct dt_model *m, const struct dt_layer_view *v, int l)
{
    const struct dt_layer *L = &m->layers[l];
    if (v[l].shard_kind != DT_SHARD_VOCAB)
        return dt_layer_weight_floats(m, L);
    return dt_shard_vocab_rows(vocab_of(L), v[l].shard_count) * in_width(L);
}

long dt_shard_act_floats(const struct dt_model *m, const struct dt_layer_view *v, int l)
{
    long a = dt_layer_act_floats(m, l);
    if (v[l].shard_kind == DT_SHARD_VOCAB) {
        long V = vocab_of(&m->layers[l]);
        return a / V * dt_shard_vocab_rows(V, v[l].shard_count);
    }
    bool split = dt_shard_splits_output(v[l].shard_kind) || v[l].shard_kind == DT_SHARD_SEQ;
    return split ? a / v[l].shard_count : a;
}

long dt_shard_loss_stats(const struct dt_model *m, const struct dt_layer_view *v)
{
    int last = m->n_layers - 1;
    const struct dt_layer *L = &m->layers[last];
    if (v[last].shard_kind != DT_SHARD_VOCAB)
        return 0;
    return 3 * (dt_shape_size(&L->out_shape) / vocab_of(L));
}

enum dt_dtype dt_shard_keep_dtype(const struct dt_model *m, const struct dt_layer_view *v, int l,
                                  enum dt_dtype storage)
{
    bool stats = v && l == m->n_layers - 1 && dt_shard_loss_stats(m, v) > 0;
    return stats ? DT_TYPE_F32 : storage;
}

void dt_shard_keep(const struct dt_model *m, const struct dt_layer_view *v, int l,
                   long *keep_floats, long *keep_ints)
{
    dt_layer_keep(m, l, keep_floats, keep_ints);
    if (v[l].shard_kind == DT_SHARD_VOCAB) { /* a softmax loss keeps nothing else */
        if (l == m->n_layers - 1)
            *keep_floats += dt_shard_loss_stats(m, v);
    } else if (dt_shard_splits_output(v[l].shard_kind) || dt_shard_chunked(v[l].shard_kind)) {
        *keep_floats /= v[l].shard_count;
        *keep_ints /= v[l].shard_count;
    }
}

static void copy(float *packed, float *full, long n, bool to_full)
{
    if (to_full)
        memcpy(full, packed, (size_t)n * sizeof *full);
    else
        memcpy(packed, full, (size_t)n * sizeof *full);
}

/* A vocabulary shard: its real rows of the token table (an untied head: of W, then of b), the
 * padding rows zero; an embedding's other tables whole after them. */
static void vocab_copy(const struct dt_layer *L, const struct dt_layer_view *s, float *p,
                       float *f, bool to_full)
{
    long V = vocab_of(L), Vs = dt_shard_vocab_rows(V, s->shard_count);
    long real = dt_shard_vocab_valid(V, s->shard_count, s->shard_index);
    long first = s->shard_index * Vs;
    long D = L->kind == DT_L_EMBEDDING ? L->units : in_width(L);
    if (L->params == 0) /* a tied head: the embedding's shard holds its weights */
        return;
    copy(p, f + first * D, real * D, to_full);
    if (!to_full)
        memset(p + real * D, 0, (size_t)((Vs - real) * D) * sizeof *p);
    if (L->kind == DT_L_EMBEDDING) {
        copy(p + Vs * D, f + V * D, L->params - V * D, to_full);
    } else if (L->bias) {
        copy(p + Vs * D, f + V * D + first, real, to_full);
        if (!to_full)
            memset(p + Vs * D + real, 0, (size_t)(Vs - real) * sizeof *p);
    }
}

/* Layer L's shard s between its place p in a packed buffer and f in the model's layout. */
static void layer_copy(const struct dt_layer *L, const struct dt_layer_view *s, float *p,
                       float *f, bool to_full)
{
    long U = L->units, D = in_width(L), k = s->shard_index;
    if (s->shard_kind == DT_SHARD_COLUMNS && L->params > 0) { /* rows k u.. of W, of b */
        long u = U / s->shard_count;
        copy(p, f + k * u * D, u * D, to_full);
        if (L->bias)
            copy(p + u * D, f + U * D + k * u, u, to_full);
    } else if (s->shard_kind == DT_SHARD_QKV) { /* rows k u.. of each third of W, of b */
        long third = U / 3, u = third / s->shard_count;
        for (int part = 0; part < 3; part++) {
            copy(p + part * u * D, f + (part * third + k * u) * D, u * D, to_full);
            if (L->bias)
                copy(p + 3 * u * D + part * u, f + U * D + part * third + k * u, u, to_full);
        }
    } else if (s->shard_kind == DT_SHARD_ROWS) { /* columns k d.. of every row of W; all b */
        long d = D / s->shard_count;
        for (long j = 0; j < U; j++)
            copy(p + j * d, f + j * D + k * d, d, to_full);
        if (L->bias)
            copy(p + U * d, f + U * D, U, to_full);
    } else if (s->shard_kind == DT_SHARD_VOCAB_TABLE || s->shard_kind == DT_SHARD_VOCAB) {
        vocab_copy(L, s, p, f, to_full);
    } else {
        copy(p, f, L->params, to_full);
    }
}

void dt_shard_copy(const struct dt_model *m, const struct dt_layer_view *v, int l,
                   float *packed, float *full, bool to_full)
{
    const struct dt_layer *L = &m->layers[l];
    layer_copy(L, &v[l], packed + v[l].param_offset, full + L->param_offset, to_full);
}

long dt_shard_packed_floats(const struct dt_model *m, const struct dt_layer_view *v)
{
    long n = 0;
    for (int l = 0; l < m->n_layers; l++)
        n += dt_shard_params(m, v, l);
    return n;
}

void dt_shard_copy_packed(const struct dt_model *m, const struct dt_layer_view *v,
                          float *packed, float *full, bool to_full)
{
    long off = 0; /* tensor_view's layout, whatever v's param_offsets say now */
    for (int l = 0; l < m->n_layers; l++) {
        const struct dt_layer *L = &m->layers[l];
        layer_copy(L, &v[l], packed + off, full + L->param_offset, to_full);
        off += dt_shard_params(m, v, l);
    }
}

/* ---- the cut ---- */

/* Whether layer j's output (through flatten views) is read by one layer only. */
static bool sole_reader(const struct dt_model *m, const int *readers, int j)
{
    for (;;) {
        if (readers[j] != 1)
            return false;
        if (!dt_layer_is_view(&m->layers[j]))
            return true;
        j = m->layers[j].in[0];
    }
}

/* compile.h */
int dtc_first_reader(const struct dt_model *m, int j)
{
    for (int c = j + 1; c < m->n_layers; c++)
        for (int k = 0; k < m->layers[c].n_in; k++)
            if (m->layers[c].in[k] == j)
                return c;
    return -1;
}

/* Whether layer l may run on a column shard between the two dense layers of a pair:
 * elementwise, or an attention core whose heads T divides (then the first dense is q|k|v). */
static bool shardable_between(const struct dt_layer *L, int T)
{
    return elementwise(L->kind) || (L->kind == DT_L_ATTENTION_CORE && L->heads % T == 0);
}

/* If a column-parallel / row-parallel pair over T ranks starts at dense layer a, marks it in
 * kind[] and returns its row-parallel layer; -1 otherwise. An attention core in between makes
 * it an attention block split by heads (Shoeybi et al. 2019, section 3). */
static int mark_pair(const struct dt_model *m, const int *readers, int T, int a,
                     enum dt_shard_kind *kind)
{
    const struct dt_layer *A = &m->layers[a];
    int in = A->in[0];
    if (A->kind != DT_L_DENSE || A->units % T || readers[a] != 1 || A->n_in != 1)
        return -1;
    /* the f allreduce sums the input's gradient: no other reader may have added to it */
    if (in >= 0 && dt_layer_needs_dact(m, in) && !sole_reader(m, readers, in))
        return -1;
    int c = a, cores = 0;
    for (;;) {
        int next = dtc_first_reader(m, c);
        if (next < 0 || m->layers[next].n_in != 1)
            return -1;
        if (m->layers[next].kind == DT_L_DENSE) {
            if (cores > 1)
                return -1;
            for (int l = a; l < next; l++)
                kind[l] = DT_SHARD_COLUMNS;
            if (cores)
                kind[a] = DT_SHARD_QKV;
            kind[next] = DT_SHARD_ROWS;
            return next;
        }
        if (!shardable_between(&m->layers[next], T) || readers[next] != 1)
            return -1;
        cores += m->layers[next].kind == DT_L_ATTENTION_CORE;
        c = next;
    }
}

/* The vocabulary-parallel head (dt/tensor.h): a softmax loss last, on a dense head tied to
 * the embedding of the token input, outside any pair. Marks the three; false if none. */
static bool mark_vocab(const struct dt_model *m, const int *readers, enum dt_shard_kind *kind)
{
    int s = m->n_layers - 1, h = m->layers[s].in[0];
    if (m->layers[s].kind != DT_L_SOFTMAX || h < 0 || m->layers[s].out_shape.rank > 2)
        return false;
    const struct dt_layer *H = &m->layers[h];
    if (H->kind != DT_L_DENSE || !H->tied || H->n_in != 1 || readers[h] != 1 ||
        kind[h] != DT_SHARD_NONE || kind[H->tied_layer] != DT_SHARD_NONE ||
        m->layers[H->tied_layer].in[0] != -1)
        return false;
    /* the head's f allreduce sums its input's gradient: no other reader may add to it */
    if (H->in[0] >= 0 && dt_layer_needs_dact(m, H->in[0]) && !sole_reader(m, readers, H->in[0]))
        return false;
    kind[H->tied_layer] = DT_SHARD_VOCAB_TABLE;
    kind[h] = kind[s] = DT_SHARD_VOCAB;
    return true;
}

/* Shard kinds of every layer for T ranks (with the vocabulary-parallel head where the model
 * has one; seq: with sequence parallelism); returns the number of pairs and heads (-1: out of
 * memory), and in *seq_layers (when not NULL) the number of sequence-parallel ones. */
static int cut(const struct dt_model *m, int T, bool seq, enum dt_shard_kind *kind,
               int *seq_layers)
{
    int *readers = calloc((size_t)m->n_layers, sizeof *readers), pairs = 0;
    if (!readers)
        return -1;
    for (int l = 0; l < m->n_layers; l++) {
        kind[l] = DT_SHARD_NONE;
        for (int k = 0; k < m->layers[l].n_in; k++)
            if (m->layers[l].in[k] >= 0)
                readers[m->layers[l].in[k]]++;
    }
    for (int l = 0; l < m->n_layers; l++) {
        int b = mark_pair(m, readers, T, l, kind);
        if (b >= 0) {
            pairs++;
            l = b;
        }
    }
    if (T > 1)
        pairs += mark_vocab(m, readers, kind);
    int marked = seq && T > 1 ? dtc_seqpar_mark(m, readers, T, kind) : 0;
    free(readers);
    if (seq_layers)
        *seq_layers = marked;
    return marked < 0 ? -1 : pairs;
}

int dtc_tensor_cut(const struct dt_model *m, int T, bool seq, enum dt_shard_kind *kind)
{
    return cut(m, T, seq, kind, NULL);
}

bool dtc_tensor_fits(const struct dt_plan_options *o, const struct dt_model *m, int n_ranks,
                     char *why, size_t whylen)
{
    int T = o->tp;
    if (T <= 1)
        return true;
    if (o->strategy == DT_STRAT_SEQUENTIAL || o->strategy == DT_STRAT_ALLREDUCE_HIERARCHICAL) {
        snprintf(why, whylen, "--tp composes with the data-parallel strategies other than "
                 "sequential and hierarchical, not with %s (tensor parallelism alone: "
                 "--strategy ring with --tp equal to the ranks)", dt_strategy_name(o->strategy));
        return false;
    }
    if (n_ranks % T) {
        snprintf(why, whylen, "--tp %d does not divide the %d ranks", T, n_ranks);
        return false;
    }
    if (o->zero && !dt_strategy_info(o->strategy)->pipeline && n_ranks / T < 2) {
        /* zero.c shards each tensor rank's packed parameters over its data-parallel peers */
        snprintf(why, whylen, "--zero %d shards over data-parallel replicas: --tp %d on %d "
                 "ranks leaves one", o->zero, T, n_ranks);
        return false;
    }
    enum dt_shard_kind *kind = malloc((size_t)m->n_layers * sizeof *kind);
    int seq = 0, pairs = kind ? cut(m, T, o->sequence_parallel, kind, &seq) : -1;
    free(kind);
    if (pairs == 0)
        snprintf(why, whylen, "--tp %d: model %s has no dense pair (dense, elementwise "
                 "activations, dense) whose first layer's units %d divides", T, m->name, T);
    else if (pairs > 0 && o->sequence_parallel && seq == 0)
        snprintf(why, whylen, "--sequence-parallel: model %s has no layernorm, residual add, "
                 "dropout or activation between a row-parallel output and a column-parallel "
                 "input whose tokens %d divides", m->name, T);
    return pairs != 0 && (!o->sequence_parallel || seq != 0);
}

/* ---- placement and emitters ---- */

void dtc_tensor_free(struct dtc_tensor *t)
{
    free(t->dp_group);
    free(t->tp_group);
    memset(t, 0, sizeof *t);
}

/* The view of tensor rank k: every layer, shards of the pairs, parameters packed. */
static int tensor_view(struct dt_plan *plan, const enum dt_shard_kind *kind, int T, int k,
                       long *n_params)
{
    const struct dt_model *m = plan->model;
    int v = k == 0 ? 0 : dt_plan_add_view(plan);
    if (v < 0)
        return -1;
    struct dt_layer_view *lv = plan->views[v];
    long off = 0;
    for (int l = 0; l < m->n_layers; l++) {
        bool split = kind[l] != DT_SHARD_NONE;
        lv[l] = (struct dt_layer_view){.runs = true, .holds = true, .param_offset = off,
                                       .shard_kind = kind[l], .shard_index = split ? k : 0,
                                       .shard_count = split ? T : 1};
        off += dt_shard_params(m, lv, l);
    }
    *n_params = off;
    return v;
}

/* Groups of ranks d T .. d T + T - 1 (tensor) and of ranks k, k + T, ... (data). */
static int tensor_groups(struct dt_plan *plan, struct dtc_tensor *t)
{
    int T = t->T, D = plan->n_ranks / T;
    int *g = malloc((size_t)(T > D ? T : D) * sizeof *g), rc = g ? 0 : -1;
    for (int d = 0; d < D && !rc; d++) {
        for (int k = 0; k < T; k++)
            g[k] = d * T + k;
        int id = dt_plan_add_group(plan, T, g);
        for (int k = 0; k < T; k++)
            t->tp_group[d * T + k] = id;
        rc = id < 0 ? -1 : 0;
    }
    for (int k = 0; k < T && !rc && D > 1; k++) {
        for (int d = 0; d < D; d++)
            g[d] = d * T + k;
        int id = dt_plan_add_group(plan, D, g);
        for (int d = 0; d < D; d++)
            t->dp_group[d * T + k] = id;
        rc = id < 0 ? -1 : 0;
    }
    free(g);
    return rc;
}

int dtc_tensor_init(struct dt_plan *plan, int T, enum dt_coll_alg alg, struct dtc_tensor *t)
{
    const struct dt_model *m = plan->model;
    const int p = plan->n_ranks;
    memset(t, 0, sizeof *t);
    t->T = T;
    t->alg = alg;
    t->dp_group = malloc((size_t)p * sizeof *t->dp_group);
    t->tp_group = malloc((size_t)p * sizeof *t->tp_group);
    enum dt_shard_kind *kind = malloc((size_t)m->n_layers * sizeof *kind);
    int *views = malloc((size_t)T * sizeof *views);
    long *n_params = malloc((size_t)T * sizeof *n_params);
    int rc = t->dp_group && t->tp_group && kind && views && n_params ? 0 : -1;
    if (!rc && dtc_tensor_cut(m, T, plan->opt.sequence_parallel, kind) < 0)
        rc = -1;
    for (int k = 0; k < T && !rc; k++)
        rc = (views[k] = tensor_view(plan, kind, T, k, &n_params[k])) < 0 ? -1 : 0;
    for (int r = 0; r < p; r++)
        t->dp_group[r] = -1;
    if (!rc)
        rc = tensor_groups(plan, t);
    for (int r = 0; r < p && !rc; r++) { /* Megatron's order: tensor ranks innermost */
        struct dt_rank_plan *rp = &plan->ranks[r];
        rp->view = views[r % T];
        rp->n_params = rp->n_updated = n_params[r % T];
        rp->dp_index = r / T;
        rp->dp_count = p / T;
    }
    free(kind);
    free(views);
    free(n_params);
    if (rc)
        dtc_tensor_free(t);
    return rc ? DT_ENOMEM : DT_OK;
}

/* A collective of the tensor group over layer at's ACT or DACT rows of a micro-batch. */
static int tensor_coll(struct dt_plan *plan, int r, const struct dtc_tensor *t,
                       enum dt_coll_kind coll, enum dt_buf buf, int at, int slot, int rows,
                       bool eval)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    long w = dt_shard_act_floats(plan->model, plan->views[rp->view], at);
    struct dt_op op = dtc_coll(coll, t->alg, t->tp_group[r], 0, buf,
                               (long)slot * rp->slot_rows * w, (long)rows * w);
    op.region.layer = at;
    return dtc_push_to(plan, r, op, eval);
}

/* After the backward of a chunked layer l: the allgathers of its partial-sum inputs' gradients
 * that it completes (the dual of their forward reduce-scatter). */
static int seq_gathers(struct dt_plan *plan, int r, const struct dtc_tensor *t, int l, int slot,
                       int rows, bool eval)
{
    int in[DT_MAX_INPUTS], rc = DT_OK;
    int n = dtc_seqpar_gathers(plan->model, plan->views[plan->ranks[r].view], l, in);
    for (int k = 0; k < n && !rc; k++)
        rc = tensor_coll(plan, r, t, DT_COLL_ALLGATHER, DT_BUF_DACT, in[k], slot, rows, eval);
    return rc;
}

int dtc_tensor_after(struct dt_plan *plan, int r, const struct dtc_tensor *t, enum dt_phase ph,
                     int l, int slot, int rows, bool eval)
{
    if (!t || t->T <= 1)
        return DT_OK;
    const struct dt_model *m = plan->model;
    const struct dt_rank_plan *rp = &plan->ranks[r];
    const struct dt_layer_view *v = plan->views[rp->view];
    enum dt_buf buf;
    enum dt_coll_kind coll = DT_COLL_ALLREDUCE;
    int at;
    if (ph == DT_PH_FORWARD &&
        (v[l].shard_kind == DT_SHARD_ROWS || v[l].shard_kind == DT_SHARD_VOCAB_TABLE)) {
        buf = DT_BUF_ACT; /* g: the partial sums of the row-parallel layer (or lookup) */
        at = l;
        if (dt_shard_scatters(m, v, l))
            coll = DT_COLL_REDUCE_SCATTER;
    } else if (ph == DT_PH_FORWARD && v[l].shard_kind == DT_SHARD_SEQ_GATHER) {
        buf = DT_BUF_ACT; /* f under sequence parallelism: the chunks gathered */
        at = l;
        coll = DT_COLL_ALLGATHER;
    } else if (ph == DT_PH_BACKWARD && dt_shard_splits_output(v[l].shard_kind) &&
               m->layers[l].kind == DT_L_DENSE && m->layers[l].in[0] >= 0 &&
               dt_layer_needs_dact(m, m->layers[l].in[0])) {
        buf = DT_BUF_DACT; /* f: the partial input gradients of the column-parallel layer */
        at = dt_layer_storage(m, m->layers[l].in[0]);
        if (v[at].shard_kind == DT_SHARD_SEQ_GATHER)
            coll = DT_COLL_REDUCE_SCATTER;
    } else if (ph == DT_PH_BACKWARD && dt_shard_chunked(v[l].shard_kind)) {
        return seq_gathers(plan, r, t, l, slot, rows, eval);
    } else {
        return DT_OK;
    }
    return tensor_coll(plan, r, t, coll, buf, at, slot, rows, eval);
}

int dtc_tensor_grads(struct dt_plan *plan, int r, const struct dtc_tensor *t, int l)
{
    if (!t || t->T <= 1)
        return DT_OK;
    const struct dt_layer_view *v = plan->views[plan->ranks[r].view];
    long n = dt_shard_params(plan->model, v, l);
    if (!dt_shard_chunked(v[l].shard_kind) || n == 0)
        return DT_OK;
    long at = v[l].grads_apart ? v[l].grad_offset : v[l].param_offset;
    struct dt_op op = dtc_coll(DT_COLL_ALLREDUCE, t->alg, t->tp_group[r], 0, DT_BUF_GRADS, at, n);
    op.region.layer = l; /* whose gradients (dtexec's --drop-op seq-grads finds them so) */
    return dtc_push(plan, r, op);
}

/* One part of the vocabulary-parallel loss, then the allreduces of its statistics planes
 * [from, to) (dt_shard_loss_stats). */
static int loss_part(struct dt_plan *plan, int r, const struct dtc_tensor *t, struct dt_op loss,
                     enum dt_loss_part part, int from, int to, enum dt_reduction red, bool eval)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    const struct dt_model *m = plan->model;
    long per_row = dt_shard_loss_stats(m, plan->views[rp->view]) / 3;
    long rows = (long)rp->slots * rp->slot_rows;
    loss.loss_part = part;
    int rc = dtc_push_to(plan, r, loss, eval);
    for (int j = from; j < to && !rc; j++) {
        struct dt_op op = dtc_coll(DT_COLL_ALLREDUCE, t->alg, t->tp_group[r], 0, DT_BUF_KEEP,
                                   (j * rows + (long)loss.slot * rp->slot_rows) * per_row,
                                   (long)loss.samples * per_row);
        op.region.layer = m->n_layers - 1;
        op.reduction = red;
        rc = dtc_push_to(plan, r, op, eval);
    }
    return rc;
}

int dtc_tensor_loss(struct dt_plan *plan, int r, const struct dtc_tensor *t, struct dt_op loss,
                    bool eval)
{
    const struct dt_layer_view *v = plan->views[plan->ranks[r].view];
    if (!t || t->T <= 1 || !dt_shard_loss_stats(plan->model, v))
        return dtc_push_to(plan, r, loss, eval);
    /* Megatron-LM's order: the maximum logit, then the target's and the sum of exponentials */
    int rc = loss_part(plan, r, t, loss, DT_LOSS_MAX, 0, 1, DT_RED_MAX, eval);
    if (!rc)
        rc = loss_part(plan, r, t, loss, DT_LOSS_SUMS, 1, 3, DT_RED_SUM, eval);
    return rc ? rc : loss_part(plan, r, t, loss, DT_LOSS_FINISH, 0, 0, DT_RED_SUM, eval);
}

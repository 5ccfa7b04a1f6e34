/* Memory from one source: the sizes of what a rank allocates (the buffer table's entries) and
 * their sum. exec/cpu/net.c carves its buffers with the same functions, so dtexec allocates
 * what dtsim counts. */
#include <string.h>

#include "dt/collective.h"
#include "dt/plan.h"

bool dt_layer_needs_dact(const struct dt_model *m, int i)
{
    /* the layer trains, or an earlier layer that feeds it does. Layers only read earlier ones,
     * so nothing before the first trainable layer needs it, and after it a layer needs it when
     * one of its inputs from there on does (any of them: add(relu(input), dense) does). The
     * search stops at the first input that needs it, on the way back to a trainable layer. */
    int first = m->n_layers;
    for (int l = 0; l < m->n_layers && first == m->n_layers; l++)
        if (m->layers[l].params > 0)
            first = l;
    if (i < first)
        return false;
    const struct dt_layer *L = &m->layers[i];
    if (dt_layer_trains(L) || i == first)
        return true;
    /* inputs that train first: a residual add then answers at once instead of walking the
     * residual stream back to the embedding (quadratic in a 175B model's layers) */
    for (int k = 0; k < L->n_in; k++)
        if (L->in[k] >= first && (L->in[k] == first || dt_layer_trains(&m->layers[L->in[k]])))
            return true;
    for (int k = 0; k < L->n_in; k++)
        if (L->in[k] >= first && dt_layer_needs_dact(m, L->in[k]))
            return true;
    return false;
}

bool dt_layer_backward_reads_output(const struct dt_layer *L)
{
    return L->kind == DT_L_TANH || L->kind == DT_L_SIGMOID || L->kind == DT_L_SOFTMAX;
}

bool dt_layer_is_view(const struct dt_layer *L)
{
    return L->kind == DT_L_FLATTEN && L->in[0] >= 0;
}

int dt_layer_storage(const struct dt_model *m, int j)
{
    while (j >= 0 && dt_layer_is_view(&m->layers[j]))
        j = m->layers[j].in[0];
    return j;
}

long dt_layer_act_floats(const struct dt_model *m, int i)
{
    const struct dt_layer *L = &m->layers[i];
    return dt_layer_is_view(L) ? 0 : dt_shape_size(&L->out_shape);
}

void dt_layer_keep(const struct dt_model *m, int i, long *keep_floats, long *keep_ints)
{
    const struct dt_layer *L = &m->layers[i];
    const struct dt_shape *in = &L->in_shape;
    long out = dt_shape_size(&L->out_shape), last = in->d[in->rank - 1];
    long rows = in->rank == 2 ? in->d[0] : 1;
    *keep_floats = *keep_ints = 0;
    switch (L->kind) {
    case DT_L_MAXPOOL: *keep_ints = out; break;                 /* argmax */
    case DT_L_DROPOUT: *keep_floats = out; break;               /* mask */
    case DT_L_BATCHNORM: *keep_floats = 2 * (in->rank == 3 ? in->d[0] : last); break;
    case DT_L_LAYERNORM: *keep_floats = 2 * rows; break;        /* mean, 1/std per row */
    case DT_L_LSTM: *keep_floats = 6 * rows * L->units; break;  /* gates, cell, hidden */
    case DT_L_ATTENTION: *keep_floats = 4 * rows * last + (long)L->heads * rows * rows; break;
    case DT_L_ATTENTION_CORE: *keep_floats = (long)L->heads * rows * rows; break; /* P */
    default: break;
    }
    /* the last layer's probabilities when it gives logits (not fused with its loss) */
    if (i == m->n_layers - 1 && L->kind != DT_L_SOFTMAX && L->kind != DT_L_SIGMOID)
        *keep_floats += out;
}

/* The widest chunk of n cut in p (dt_chunk) other than chunk x: the first n % p chunks are
 * one longer. */
static long widest_chunk_but(long n, int p, int x)
{
    long base = n / p, extra = n % p;
    return extra > 1 || (extra == 1 && x != 0) ? base + 1 : base;
}

/* A ring member receives one chunk per round: in the reduce-scatter every chunk but
 * me - 1's, in the allgather every chunk but its own. Closed form: expanding the schedule
 * for every member made compiling a 16k-rank ring quadratic. */
static long ring_widest(enum dt_coll_kind kind, long n, int p, int me)
{
    long rs = widest_chunk_but(n, p, (me + p - 1) % p), ag = widest_chunk_but(n, p, me);
    switch (kind) {
    case DT_COLL_REDUCE_SCATTER: return rs;
    case DT_COLL_ALLGATHER: return ag;
    default: return rs > ag ? rs : ag;
    }
}

/* The rail-ring's three rings (collective.c): in the node, along the member's rail on its
 * chunk, in the node again. */
static long rail_ring_widest(long n, int p, int g, int me)
{
    g = g > 0 ? g : p;
    long off, len, w = ring_widest(DT_COLL_ALLREDUCE, n, g, me % g);
    dt_chunk(n, g, me % g, &off, &len);
    long rail = p / g > 1 ? ring_widest(DT_COLL_ALLREDUCE, len, p / g, me / g) : 0;
    return g > 1 && w > rail ? w : rail;
}

/* Direct (collective.c): one round per phase in which a member receives its own chunk from
 * every other member (reduce-scatter) or every other member's chunk (allgather); an
 * allreduce runs both. Closed form: expanding the schedule of a 1,024-member ZeRO-3 gather
 * for each member made sizing it quadratic. */
static long direct_widest(enum dt_coll_kind kind, long n, int p, int me)
{
    long off, own;
    dt_chunk(n, p, me, &off, &own);
    long rs = (long)(p - 1) * own, ag = n - own;
    switch (kind) {
    case DT_COLL_REDUCE_SCATTER: return rs;
    case DT_COLL_ALLGATHER: return ag;
    default: return rs > ag ? rs : ag;
    }
}

long dt_coll_scratch_floats(const struct dt_op *op, int group_size, int me)
{
    if (op->kind == DT_OP_SEND)
        return 0;
    if (op->kind == DT_OP_RECV)
        return op->sum ? op->region.count : 0;
    if (op->kind != DT_OP_COLL)
        return 0;
    if (op->alg == DT_ALG_LIBRARY) {
        long off, len;
        dt_chunk(op->region.count, group_size, me, &off, &len);
        return op->coll == DT_COLL_REDUCE_SCATTER ? len : 0;
    }
    if (op->alg == DT_ALG_RAIL_RING && op->coll == DT_COLL_ALLREDUCE && group_size > 1)
        return rail_ring_widest(op->region.count, group_size, op->root, me);
    if (op->alg == DT_ALG_RING && group_size > 1 &&
        (op->coll == DT_COLL_ALLREDUCE || op->coll == DT_COLL_REDUCE_SCATTER ||
         op->coll == DT_COLL_ALLGATHER))
        return ring_widest(op->coll, op->region.count, group_size, me);
    if (op->alg == DT_ALG_TREE && op->coll == DT_COLL_ALLREDUCE)
        return dt_tree_widest_recv(group_size, me, op->region.count);
    if (op->alg == DT_ALG_DIRECT && group_size > 1 &&
        (op->coll == DT_COLL_ALLREDUCE || op->coll == DT_COLL_REDUCE_SCATTER ||
         op->coll == DT_COLL_ALLGATHER))
        return direct_widest(op->coll, op->region.count, group_size, me);
    struct dt_schedule s;
    dt_schedule_init(&s);
    long widest = 0;
    if (dt_coll_schedule(op->coll, op->alg, group_size, me, op->root, op->region.count, &s,
                         NULL) == DT_OK)
        for (int r = 0; r < s.n_rounds; r++) {
            long f = 0;
            int lo, hi;
            dt_schedule_round(&s, r, &lo, &hi);
            for (int i = lo; i < hi; i++)
                if (!s.xfers[i].send)
                    f += s.xfers[i].count;
            widest = f > widest ? f : widest;
        }
    dt_schedule_free(&s);
    return widest;
}

double dt_plan_buffer_elems(const struct dt_plan *plan, int rank, enum dt_buf kind)
{
    const struct dt_rank_plan *rp = &plan->ranks[rank];
    double n = 0;
    for (int b = 0; b < rp->n_bufs; b++)
        if (rp->bufs[b].kind == kind)
            n += rp->bufs[b].elems;
    return n;
}

double dt_plan_buffer_layer(const struct dt_plan *plan, int rank, enum dt_buf kind, int layer)
{
    const struct dt_rank_plan *rp = &plan->ranks[rank];
    for (int b = 0; b < rp->n_bufs; b++)
        if (rp->bufs[b].kind == kind && rp->bufs[b].layer == layer)
            return rp->bufs[b].elems;
    return 0;
}

void dt_plan_rank_memory(const struct dt_plan *plan, int rank, struct dt_memory *m)
{
    memset(m, 0, sizeof *m);
    const struct dt_rank_plan *rp = &plan->ranks[rank];
    for (int b = 0; b < rp->n_bufs; b++) {
        const struct dt_buffer *B = &rp->bufs[b];
        double bytes = B->elems * (double)dt_dtype_size(B->dtype);
        switch (B->kind) {
        case DT_BUF_PARAMS: m->weights += bytes; break;
        case DT_BUF_GRADS: m->grads += bytes; break;
        case DT_BUF_OPT:
        case DT_BUF_MASTER: m->optimizer += bytes; break; /* as frameworks count them */
        case DT_BUF_STATE:
        case DT_BUF_SCALER: m->state += bytes; break;
        case DT_BUF_ACT:
        case DT_BUF_DACT:
        case DT_BUF_KEEP: m->activations += bytes; break;
        case DT_BUF_INPUT: m->input += bytes; break;
        case DT_BUF_COMM: m->comm += bytes; break;
        case DT_BUF_COUNT: break;
        }
        m->total += bytes;
    }
}

static double larger(double a, double b) { return a > b ? a : b; }

void dt_plan_peak_memory(const struct dt_plan *plan, struct dt_memory *peak)
{
    memset(peak, 0, sizeof *peak);
    for (int r = 0; r < plan->n_ranks; r++) {
        struct dt_memory m;
        dt_plan_rank_memory(plan, r, &m);
        peak->weights = larger(peak->weights, m.weights);
        peak->grads = larger(peak->grads, m.grads);
        peak->optimizer = larger(peak->optimizer, m.optimizer);
        peak->activations = larger(peak->activations, m.activations);
        peak->comm = larger(peak->comm, m.comm);
        peak->input = larger(peak->input, m.input);
        peak->state = larger(peak->state, m.state);
        peak->total = larger(peak->total, m.total);
    }
}

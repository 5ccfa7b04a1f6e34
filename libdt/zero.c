/* ZeRO (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion
 * Parameter Models"), stages 1-3, as a plan of the data-parallel family: the N ranks of ring,
 * mpi-allreduce or ps-sharded (whose collectives' algorithm they keep: ring, the library's,
 * direct) each own 1/N of the model's parameters.
 *
 * The parameters are cut into units (runs of whole layers, in model order): one unit without
 * --bucket at stage 1, one per trainable layer without it at stages 2 and 3, units of at least
 * --bucket bytes with it. Rank k owns chunk k of every unit (dt_chunk), packed in unit order:
 * its shard, ~psi/N parameters. The reduce-scatters and allgathers work unit by unit.
 *   stage 1: full parameters and gradients; after backward each unit's gradients are
 *            reduce-scattered (non-blocking during backward with --bucket), the rank updates
 *            its chunk (optimizer state: its shard only), each unit's parameters allgathered.
 *   stage 2: gradients = [staging: the largest unit | the gradient shard]; backward writes a
 *            unit's gradients into the staging (the layer view's grad_offset), which is
 *            reduce-scattered after the unit and the rank's chunk added to its shard.
 *   stage 3: parameters and gradients = [staging | shard]; before a unit's forward and again
 *            before its backward the rank copies its chunk into the staging and allgathers the
 *            unit there (the layer view points at the staging); gradients as at stage 2.
 * Memory per rank (fp32, K optimizer bytes per parameter): stage 1 (4 + 4) psi + K psi / N,
 * stage 2 4 psi + (4 + K) psi / N + 4 staging, stage 3 (4 + 4 + K) psi / N + 8 staging.
 * Mixed precision (bf16, fp16): 2-byte parameters and gradients, the fp32 master weights of
 * the shard beside its optimizer state (Adam: K = 12), so the paper's 4 psi + 12 psi / N,
 * 2 psi + 14 psi / N (+ 2 staging), 16 psi / N (+ 4 staging); the step unscales the gradients
 * the rank updates, agrees on the overflow flag (MAX over all ranks), updates its master
 * shard and casts it into its parameter chunk before the allgather, as DeepSpeed's
 * mixed-precision ZeRO optimizer does.
 * Traffic: stages 1-2 a reduce-scatter and an allgather of psi (plain data parallelism's
 * allreduce), stage 3 one more allgather (1.5x).
 * A tied table (GPT's token embedding, read again by the output layer) gets its gradient
 * from the head's backward long before its own unit closes, and at stage 3 the head reads its
 * parameters: at stages 2-3 the table's unit has a staging of its own ("hold", after the
 * shared one) that stays from the head's backward (stage 3: from the table's forward) to the
 * unit's reduce-scatter, as DeepSpeed keeps such a parameter's gradient until its last use.
 * With --tp T (stages 1 and 2) the ranks form p / T replicas of T tensor ranks (tensor.c) and
 * each tensor rank's parameters (its shards, packed: the same layout on every tensor rank) are
 * the psi that ZeRO shards over its N = p / T data-parallel peers, as Megatron-LM's
 * distributed optimizer does; the f/g allreduces run as without ZeRO. */
#include <math.h>
#include <stdlib.h>

#include "compile.h"
#include "dt/collective.h"

struct unit {
    long lo, size;   /* the unit's parameters [lo, lo + size) in the model's layout */
    int first, last; /* its first and last layer with parameters */
};

struct zero {
    struct dt_plan *plan;
    struct dtc_tensor tp; /* --tp: the tensor groups and each rank's data-parallel group */
    int stage, world, n_units, N;
    struct unit *units;
    int *opens, *closes; /* per layer: the unit whose first (last) layer it is, or -1 */
    long staging;        /* stages 2, 3: the largest unit (the staging buffer's floats) */
    int held;            /* stages 2, 3: the unit of a tied table, or -1 */
    long hold;           /* its own staging after the shared one (its size), else 0 */
    enum dt_coll_alg alg;
    int shard_of;        /* the data-parallel index whose chunk places are in shard_place */
    long *shard_place;   /* per unit: where index shard_of's chunk starts in its packed shard
                          * (a rank's programs ask for every unit: summing the earlier units'
                          * chunks at each ask made compiling quadratic in units) */
};

bool dtc_zero_fits(const struct dt_plan_options *o, char *why, size_t whylen)
{
    if (o->zero < 0 || o->zero > 3) {
        snprintf(why, whylen, "ZeRO has stages 1, 2 and 3 (got %d)", o->zero);
        return false;
    }
    enum dt_strategy s = o->strategy;
    if (dt_strategy_info(s)->pipeline && o->zero == 1)
        return true; /* pipeline.c shards each stage's optimizer state over its replicas */
    if (s != DT_STRAT_ALLREDUCE_RING && s != DT_STRAT_ALLREDUCE_LIBRARY &&
        s != DT_STRAT_PS_SHARDED) {
        snprintf(why, whylen, "--zero shards over the data-parallel ranks of ring, "
                 "mpi-allreduce or ps-sharded (reduce-scatter and allgather); %s has %s",
                 dt_strategy_name(s), dt_strategy_info(s)->pipeline
                 ? "pipeline stages (ZeRO stages 2 and 3 with pipelines are not implemented: "
                   "stage 1 is, as in DeepSpeed)"
                 : s == DT_STRAT_SEQUENTIAL ? "one rank" : "no reduce-scatter");
        return false;
    }
    return true;
}

/* Stages 2-3: the unit holding the table a later layer is tied to (one per model). */
static void hold_tied_unit(struct zero *z)
{
    const struct dt_model *m = z->plan->model;
    z->held = -1;
    z->hold = 0;
    for (int l = 0; l < m->n_layers && z->stage >= 2; l++) {
        if (!m->layers[l].tied)
            continue;
        int t = m->layers[l].tied_layer;
        for (int u = 0; u < z->n_units; u++)
            if (z->units[u].first <= t && t <= z->units[u].last)
                z->held = u;
    }
    if (z->held >= 0)
        z->hold = z->units[z->held].size;
}

/* Where unit u is staged: the held unit in its own hold, the others in the shared staging. */
static long staged_at(const struct zero *z, int u)
{
    return u == z->held ? z->staging : 0;
}

/* Where the rank's shard starts in its gradient (stages 2-3) and parameter (3) buffers. */
static long shard_at(const struct zero *z)
{
    return z->staging + z->hold;
}

/* The units, in model order, and which layers open and close them. */
static int make_units(struct zero *z)
{
    const struct dt_model *m = z->plan->model;
    double bucket = z->plan->opt.bucket_bytes > 0 ? z->plan->opt.bucket_bytes
                    : z->stage == 1 ? INFINITY : 0;
    z->units = malloc((size_t)(m->n_layers + 1) * sizeof *z->units);
    z->opens = malloc((size_t)(m->n_layers + 1) * sizeof *z->opens);
    z->closes = malloc((size_t)(m->n_layers + 1) * sizeof *z->closes);
    z->shard_place = malloc((size_t)(m->n_layers + 1) * sizeof *z->shard_place);
    z->shard_of = -1;
    if (!z->units || !z->opens || !z->closes || !z->shard_place)
        return DT_ENOMEM;
    const struct dt_layer_view *v = z->plan->views[0]; /* every tensor rank's layout */
    long hi = z->plan->ranks[0].n_params;
    int stop = dtc_first_trainable(m), last = -1, n = 0;
    for (int l = m->n_layers - 1; l >= stop; l--) {
        if (dt_shard_params(m, v, l) == 0)
            continue;
        last = last < 0 ? l : last;
        long lo = v[l].param_offset;
        if ((double)(hi - lo) * 4.0 >= bucket || l == stop) {
            z->units[n++] = (struct unit){lo, hi - lo, l, last};
            hi = lo;
            last = -1;
        }
    }
    for (int i = 0; i < n / 2; i++) { /* backward found them last first */
        struct unit t = z->units[i];
        z->units[i] = z->units[n - 1 - i];
        z->units[n - 1 - i] = t;
    }
    z->n_units = n;
    for (int l = 0; l < m->n_layers; l++)
        z->opens[l] = z->closes[l] = -1;
    z->staging = 0;
    hold_tied_unit(z);
    for (int u = 0; u < n; u++) {
        z->opens[z->units[u].first] = u;
        z->closes[z->units[u].last] = u;
        if (u != z->held && z->units[u].size > z->staging)
            z->staging = z->units[u].size;
    }
    if (z->stage == 1)
        z->staging = 0;
    return DT_OK;
}

/* Rank r's chunk of unit u (of its N data-parallel peers'): its place in the unit and in r's
 * packed shard. */
static void chunk(struct zero *z, int u, int r, long *in_unit, long *len, long *in_shard)
{
    int d = z->plan->ranks[r].dp_index;
    if (z->shard_of != d) {
        long at = 0, o, l;
        for (int v = 0; v < z->n_units; v++) {
            z->shard_place[v] = at;
            dt_chunk(z->units[v].size, z->N, d, &o, &l);
            at += l;
        }
        z->shard_of = d;
    }
    *in_shard = z->shard_place[u];
    dt_chunk(z->units[u].size, z->N, d, in_unit, len);
}

/* The data-parallel group of rank r: the world's, or its tensor rank's peers'. */
static int peers(const struct zero *z, int r)
{
    return z->tp.T > 1 ? z->tp.dp_group[r] : z->world;
}

static long shard_floats(struct zero *z, int r)
{
    long o, l, s = 0;
    if (z->n_units)
        chunk(z, z->n_units - 1, r, &o, &l, &s);
    return z->n_units ? s + l : 0;
}

static struct dt_op copy(enum dt_buf buf, long from, long to, long count, bool sum)
{
    return (struct dt_op){.kind = DT_OP_COPY, .layer = -1, .sum = sum,
                          .region = {buf, from, count, -1}, .dst = {buf, to, count, -1}};
}

/* Stage 3: unit u's parameters gathered into its staging (step or eval program). */
static int gather(struct zero *z, int r, int u, bool eval)
{
    long o, len, s, at = staged_at(z, u);
    chunk(z, u, r, &o, &len, &s);
    struct dt_op ops[2] = {
        copy(DT_BUF_PARAMS, shard_at(z) + s, at + o, len, false),
        dtc_coll(DT_COLL_ALLGATHER, z->alg, peers(z, r), 0, DT_BUF_PARAMS, at,
                 z->units[u].size)};
    int rc = DT_OK;
    for (int i = len ? 0 : 1; i < 2 && !rc; i++)
        rc = dtc_push_to(z->plan, r, ops[i], eval);
    return rc;
}

/* After unit u's backward of micro-batch k: its gradients reduce-scattered; stages 2-3 add
 * the rank's chunk of the staging to its shard. */
static int reduce(struct zero *z, int r, int u, int k, int *n_handles)
{
    const struct unit *U = &z->units[u];
    if (z->stage == 1) {
        if (k != z->plan->opt.accumulate - 1) /* earlier micro-batches accumulate locally */
            return DT_OK;
        struct dt_op op = dtc_coll(DT_COLL_REDUCE_SCATTER, z->alg, peers(z, r), 0,
                                   DT_BUF_GRADS, U->lo, U->size);
        if (z->plan->opt.bucket_bytes > 0) {
            op.nonblocking = true;
            op.handle = (*n_handles)++;
        }
        return dtc_push(z->plan, r, op);
    }
    long o, len, s, at = staged_at(z, u);
    chunk(z, u, r, &o, &len, &s);
    int rc = dtc_push(z->plan, r, dtc_coll(DT_COLL_REDUCE_SCATTER, z->alg, peers(z, r), 0,
                                           DT_BUF_GRADS, at, U->size));
    if (!rc && len)
        rc = dtc_push(z->plan, r, copy(DT_BUF_GRADS, at + o, shard_at(z) + s, len, true));
    return rc;
}

/* Forward and backward of micro-batch k (rows [row0, row0 + rows) of the rank's batch). */
static int micro_batch(struct zero *z, int r, int k, int row0, int rows, int *n_handles)
{
    struct dt_plan *plan = z->plan;
    const struct dt_model *m = plan->model;
    const struct dtc_tensor *tp = z->tp.T > 1 ? &z->tp : NULL;
    int rc = dtc_push(plan, r, dtc_load(plan, r, k, 0, row0, rows));
    for (int l = 0; l < m->n_layers && !rc; l++) {
        if (z->stage == 3 && z->opens[l] >= 0)
            rc = gather(z, r, z->opens[l], false);
        if (!rc)
            rc = dtc_push(plan, r, dtc_compute(DT_PH_FORWARD, l, k, 0, row0, rows));
        if (!rc)
            rc = dtc_tensor_after(plan, r, tp, DT_PH_FORWARD, l, 0, rows, false);
    }
    if (!rc)
        rc = dtc_tensor_loss(plan, r, tp, dtc_loss(plan, k, 0, rows, plan->global_batch), false);
    if (!rc && z->hold) /* the held unit gathers gradients from the tied head's backward on */
        rc = dtc_push(plan, r, dtc_zero(DT_BUF_GRADS, z->staging, z->hold));
    for (int l = m->n_layers - 1; l >= dtc_first_trainable(m) && !rc; l--) {
        int u = z->closes[l];
        if (u >= 0 && z->stage == 3 && u != z->held) /* the held one is still there */
            rc = gather(z, r, u, false);
        if (!rc && u >= 0 && z->stage >= 2 && u != z->held)
            rc = dtc_push(plan, r, dtc_zero(DT_BUF_GRADS, 0, z->units[u].size));
        if (!rc)
            rc = dtc_push(plan, r, dtc_compute(DT_PH_BACKWARD, l, k, 0, row0, rows));
        if (!rc)
            rc = dtc_tensor_after(plan, r, tp, DT_PH_BACKWARD, l, 0, rows, false);
        if (!rc && (z->stage >= 2 || k == plan->opt.accumulate - 1)) /* stage 1 accumulates */
            rc = dtc_tensor_grads(plan, r, tp, l);
        if (!rc && z->opens[l] >= 0)
            rc = reduce(z, r, z->opens[l], k, n_handles);
    }
    return rc;
}

/* Mixed precision (nothing in fp32): the gradients the rank updates unscaled and checked
 * before any update. Stages 2-3 hold them packed (the gradient shard); stage 1 unscales the
 * whole gradient buffer from its first unit on: a chunk it does not own overflows only if
 * the owner's sum does, so the flag after the MAX over all ranks is the same. */
static int unscale(struct zero *z, int r)
{
    if (z->stage >= 2)
        return dtc_overflow_check(z->plan, r, shard_at(z), shard_floats(z, r));
    if (z->n_units == 1) {
        long o, len, s;
        chunk(z, 0, r, &o, &len, &s);
        return dtc_overflow_check(z->plan, r, z->units[0].lo + o, len);
    }
    long lo = z->n_units ? z->units[0].lo : 0;
    return dtc_overflow_check(z->plan, r, lo, z->plan->ranks[r].n_params - lo);
}

/* UPDATE of params [offset, + len) from optimizer state (and master weights) at s; mixed
 * precision casts the master weights into the parameters. */
static int update_chunk(struct zero *z, int r, long offset, long len, long s, long grads_at)
{
    struct dt_op op = dtc_update(offset, len, s);
    if (grads_at >= 0)
        op.grads = (struct dt_region){DT_BUF_GRADS, grads_at, len, -1};
    return len ? dtc_update_cast(z->plan, r, op) : DT_OK;
}

/* The step's end: every rank updates its shard; stages 1-2 allgather the parameters. */
static int update(struct zero *z, int r, int n_handles)
{
    int rc = DT_OK;
    for (int h = 0; h < n_handles && !rc; h++)
        rc = dtc_push(z->plan, r, (struct dt_op){.kind = DT_OP_WAIT, .layer = -1, .handle = h});
    if (!rc)
        rc = unscale(z, r);
    if (!rc && z->stage == 3)
        rc = update_chunk(z, r, shard_at(z), shard_floats(z, r), 0, -1);
    for (int u = 0; u < z->n_units && z->stage < 3 && !rc; u++) {
        long o, len, s;
        chunk(z, u, r, &o, &len, &s);
        rc = update_chunk(z, r, z->units[u].lo + o, len, s, z->stage == 2 ? shard_at(z) + s : -1);
        if (!rc)
            rc = dtc_push(z->plan, r, dtc_coll(DT_COLL_ALLGATHER, z->alg, peers(z, r), 0,
                                               DT_BUF_PARAMS, z->units[u].lo, z->units[u].size));
    }
    return rc ? rc : dtc_rescale(z->plan, r);
}

/* Load, forward (stage 3: gathering each unit first), loss. */
static int eval_program(struct zero *z, int r)
{
    struct dt_plan *plan = z->plan;
    const struct dtc_tensor *tp = z->tp.T > 1 ? &z->tp : NULL;
    int rows = plan->ranks[r].slots * plan->ranks[r].slot_rows, rc;
    plan->ranks[r].eval_rows = rows;
    rc = dtc_push_eval(plan, r, dtc_load(plan, r, 0, 0, 0, rows));
    for (int l = 0; l < plan->model->n_layers && !rc; l++) {
        if (z->stage == 3 && z->opens[l] >= 0)
            rc = gather(z, r, z->opens[l], true);
        if (!rc)
            rc = dtc_push_eval(plan, r, dtc_compute(DT_PH_FORWARD, l, 0, 0, 0, rows));
        if (!rc)
            rc = dtc_tensor_after(plan, r, tp, DT_PH_FORWARD, l, 0, rows, true);
    }
    return rc ? rc : dtc_tensor_loss(plan, r, tp, dtc_loss(plan, 0, 0, rows, rows), true);
}

/* Stages 2-3: where each layer's gradients (and at stage 3 its parameters) live: the staging,
 * at the layer's place in its unit. One view for all ranks. */
static void place_layers(struct zero *z)
{
    const struct dt_model *m = z->plan->model;
    for (int i = 0; i < z->plan->n_views; i++) { /* one per tensor rank, the same offsets */
        struct dt_layer_view *v = z->plan->views[i];
        for (int u = 0; u < z->n_units; u++)
            for (int l = z->units[u].first; l <= z->units[u].last; l++) {
                v[l].grads_apart = z->stage == 2;
                v[l].grad_offset = staged_at(z, u) + v[l].param_offset - z->units[u].lo;
            }
        for (int l = 0; l < m->n_layers && z->stage == 3; l++) /* layers without parameters */
            v[l].param_offset = v[l].grad_offset;              /* point at the staging too */
    }
}

/* Stage 3: the ranges rank r owns (chunk of each unit, at the staging's end + its place). */
static int own(struct zero *z, int r)
{
    struct dt_rank_plan *rp = &z->plan->ranks[r];
    rp->owned = calloc((size_t)(z->n_units ? z->n_units : 1), sizeof *rp->owned);
    if (!rp->owned)
        return DT_ENOMEM;
    for (int u = 0; u < z->n_units; u++) {
        long o, len, s;
        chunk(z, u, r, &o, &len, &s);
        if (len)
            rp->owned[rp->n_owned++] = (struct dt_param_range){z->units[u].lo + o,
                                                               shard_at(z) + s, len};
    }
    return DT_OK;
}

/* Rank r's programs and buffer table. */
static int compile_rank(struct zero *z, int r)
{
    struct dt_plan *plan = z->plan;
    struct dt_rank_plan *rp = &plan->ranks[r];
    const int K = plan->opt.accumulate;
    long shard = shard_floats(z, r);
    rp->replicas = peers(z, r);
    rp->n_updated = shard;
    if (z->stage >= 2)
        rp->n_grads = shard_at(z) + shard;
    if (z->stage == 3)
        rp->n_params = shard_at(z) + shard;
    if (dt_plan_dropped(plan, r)) /* a probe's: no ops, no buffers */
        return DT_OK;
    int n_handles = 0;
    int rc = z->stage == 3 ? own(z, r) : DT_OK;
    if (!rc)
        rc = dtc_push(plan, r, z->stage == 1 ? dtc_zero(DT_BUF_GRADS, 0, rp->n_params)
                                             : dtc_zero(DT_BUF_GRADS, shard_at(z), shard));
    for (int k = 0; k < K && !rc; k++) {
        long off, len;
        dt_chunk(rp->batch, K, k, &off, &len);
        rc = micro_batch(z, r, k, (int)off, (int)len, &n_handles);
    }
    if (!rc)
        rc = update(z, r, n_handles);
    if (!rc)
        rc = eval_program(z, r);
    if (!rc)
        rc = dtc_finish_rank(plan, r);
    plan->next_handle = n_handles > plan->next_handle ? n_handles : plan->next_handle;
    return rc;
}

int dtc_compile_zero(struct dt_plan *plan, struct dt_error *err)
{
    const int p = plan->n_ranks, K = plan->opt.accumulate;
    const int T = plan->opt.tp > 1 ? plan->opt.tp : 1;
    struct zero z = {.plan = plan, .stage = plan->opt.zero, .alg = dtc_grad_alg(&plan->opt),
                     .N = p / T};
    plan->global_batch = plan->opt.scaling == DT_SCALING_WEAK ? plan->opt.batch * z.N * K
                                                              : plan->opt.batch;
    plan->lr_scale = plan->opt.scaling == DT_SCALING_WEAK ? z.N : 1;
    plan->micro_batches = K;
    plan->dp = z.N;
    int *all = malloc((size_t)p * sizeof *all);
    int rc = all ? DT_OK : DT_ENOMEM;
    if (!rc && T > 1) /* views, groups and each rank's data-parallel index */
        rc = dtc_tensor_init(plan, T, z.alg, &z.tp);
    if (!rc)
        rc = make_units(&z);
    for (int r = 0; r < p && !rc; r++) {
        long off, len;
        dt_chunk(plan->global_batch, z.N, plan->ranks[r].dp_index, &off, &len);
        plan->ranks[r].batch = (int)len;
        plan->ranks[r].slot_rows = (int)((len + K - 1) / K);
        plan->ranks[r].updates = true;
        all[r] = r;
    }
    if (!rc && T == 1 && (z.world = dt_plan_add_group(plan, p, all)) < 0)
        rc = DT_ENOMEM;
    if (!rc && z.stage >= 2)
        place_layers(&z);
    for (int r = 0; r < p && !rc; r++)
        rc = compile_rank(&z, r);
    free(all);
    dtc_tensor_free(&z.tp);
    free(z.units);
    free(z.opens);
    free(z.closes);
    free(z.shard_place);
    return rc == DT_ENOMEM ? dt_fail(err, rc, NULL, 0, 0, "out of memory") : rc;
}

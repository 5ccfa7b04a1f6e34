/* The plan container, names and listing. The strategies that fill it are in strategy.c and
 * pipeline.c, its memory in memory.c, its checker in plan_check.c. */
#include "dt/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t dt_dtype_size(enum dt_dtype t)
{
    static const size_t s[] = {4, 2, 2, 4};
    return t < DT_TYPE_COUNT ? s[t] : 4;
}

const char *dt_dtype_name(enum dt_dtype t)
{
    static const char *const n[] = {"f32", "bf16", "f16", "i32"};
    return t < DT_TYPE_COUNT ? n[t] : "?";
}

const char *dt_buf_name(enum dt_buf b)
{
    static const char *const n[] = {"params", "grads", "opt",   "state",  "act",   "dact",
                                    "keep",   "input", "comm",  "master", "scaler"};
    _Static_assert(sizeof n / sizeof n[0] == DT_BUF_COUNT, "a name for every buffer kind");
    return b < DT_BUF_COUNT ? n[b] : "?";
}

const char *dt_op_kind_name(enum dt_op_kind k)
{
    static const char *const n[] = {"compute", "send", "recv", "coll", "wait",
                                    "load",    "zero", "loss", "update", "copy",
                                    "unscale", "rescale"};
    _Static_assert(sizeof n / sizeof n[0] == DT_OP_RESCALE + 1, "a name for every op kind");
    return (unsigned)k < sizeof n / sizeof n[0] ? n[k] : "?";
}

const char *dt_coll_kind_name(enum dt_coll_kind k)
{
    static const char *const n[] = {"allreduce", "reduce", "bcast", "reduce-scatter",
                                    "allgather"};
    return k < DT_COLL_KIND_COUNT ? n[k] : "?";
}

const char *dt_coll_alg_name(enum dt_coll_alg a)
{
    static const char *const n[] = {"linear", "binomial", "ring", "recursive-doubling",
                                    "rabenseifner", "direct", "library", "tree", "rail-ring"};
    _Static_assert(sizeof n / sizeof n[0] == DT_ALG_COUNT, "a name for every algorithm");
    return a < DT_ALG_COUNT ? n[a] : "?";
}

const char *dt_phase_name(enum dt_phase p)
{
    return p == DT_PH_FORWARD ? "forward" : "backward";
}

int dt_program_reserve(struct dt_program *p, int cap)
{
    if (cap <= p->cap_ops)
        return DT_OK;
    struct dt_op *ops = realloc(p->ops, (size_t)cap * sizeof *ops);
    if (!ops)
        return DT_ENOMEM;
    p->ops = ops;
    p->cap_ops = cap;
    return DT_OK;
}

int dt_program_push(struct dt_program *p, const struct dt_op *op)
{
    if (p->n_ops == p->cap_ops &&
        dt_program_reserve(p, p->cap_ops ? 2 * p->cap_ops : 64))
        return DT_ENOMEM;
    p->ops[p->n_ops++] = *op;
    return DT_OK;
}

bool dt_plan_dropped(const struct dt_plan *plan, int rank)
{
    const struct dt_rank_plan *r = &plan->ranks[rank];
    return plan->probe && ((r->dp_index > 0 && r->dp_index < r->dp_count - 1) ||
                           (plan->probe_replica && r->dp_index > 0) ||
                           (plan->probe_tensor > 1 && rank % plan->probe_tensor));
}

/* The plan's precision on an op already in a program (a stamped copy pushed copied it twice). */
static void stamp(const struct dt_plan *plan, struct dt_op *op)
{
    op->precision = plan->opt.precision;
    op->grads_f32 = dt_plan_grad_dtype(&plan->opt) != dt_precision_storage(op->precision);
}

struct dt_op dt_plan_stamp(const struct dt_plan *plan, const struct dt_op *op)
{
    struct dt_op stamped = *op;
    stamp(plan, &stamped);
    return stamped;
}

int dt_plan_push(struct dt_plan *plan, int rank, const struct dt_op *op)
{
    if (dt_plan_dropped(plan, rank))
        return DT_OK;
    struct dt_rank_plan *r = &plan->ranks[rank];
    if (dt_plan_unshare_rank(plan, rank)) /* copy on write */
        return DT_ENOMEM;
    struct dt_program p = {r->n_ops, r->cap_ops, r->ops};
    int rc = dt_program_push(&p, op);
    if (!rc)
        stamp(plan, &p.ops[p.n_ops - 1]);
    r->n_ops = p.n_ops;
    r->cap_ops = p.cap_ops;
    r->ops = p.ops;
    return rc;
}

int dt_plan_reserve(struct dt_plan *plan, int rank, int cap)
{
    struct dt_rank_plan *r = &plan->ranks[rank];
    if (dt_plan_dropped(plan, rank) || r->shared_ops) /* as dt_plan_push: no ops, or a push */
        return DT_OK;                                    /* copies the interned ones first */
    struct dt_program p = {r->n_ops, r->cap_ops, r->ops};
    int rc = dt_program_reserve(&p, cap);
    r->cap_ops = p.cap_ops;
    r->ops = p.ops;
    return rc;
}

int dt_plan_push_eval(struct dt_plan *plan, int rank, const struct dt_op *op)
{
    if (dt_plan_dropped(plan, rank))
        return DT_OK;
    struct dt_rank_plan *r = &plan->ranks[rank];
    if (dt_plan_unshare_rank(plan, rank)) /* copy on write */
        return DT_ENOMEM;
    int rc = dt_program_push(&r->eval, op);
    if (!rc)
        stamp(plan, &r->eval.ops[r->eval.n_ops - 1]);
    return rc;
}

int dt_plan_add_group(struct dt_plan *plan, int n, const int *ranks)
{
    struct dt_group *g = realloc(plan->groups, (size_t)(plan->n_groups + 1) * sizeof *g);
    if (!g)
        return -1;
    plan->groups = g;
    int *copy = malloc((size_t)(n > 0 ? n : 1) * sizeof *copy);
    if (!copy)
        return -1;
    memcpy(copy, ranks, (size_t)n * sizeof *copy);
    g[plan->n_groups] = (struct dt_group){n, copy};
    return plan->n_groups++;
}

/* A group's ranks are nearly always an arithmetic progression (the world, a node, a rail, a
 * data-parallel replica's stage): the index is guessed from the first two and checked by one
 * compare; a scan otherwise (a scan every time made 16k-rank plans quadratic to build). */
int dt_group_index(const struct dt_group *g, int rank)
{
    if (g->n > 0) {
        long d = (long)rank - g->ranks[0];
        long stride = g->n > 1 ? (long)g->ranks[1] - g->ranks[0] : 1;
        if (stride > 0 && d >= 0 && d % stride == 0 && d / stride < g->n &&
            g->ranks[d / stride] == rank)
            return (int)(d / stride);
    }
    for (int i = 0; i < g->n; i++)
        if (g->ranks[i] == rank)
            return i;
    return -1;
}

int dt_plan_add_buffer(struct dt_plan *plan, int rank, enum dt_buf kind, enum dt_dtype dtype,
                       int layer, double elems)
{
    if (dt_plan_dropped(plan, rank))
        return DT_OK;
    struct dt_rank_plan *r = &plan->ranks[rank];
    if (dt_plan_unshare_rank(plan, rank)) /* copy on write */
        return DT_ENOMEM;
    if (r->n_bufs == r->cap_bufs) {
        int cap = r->cap_bufs ? 2 * r->cap_bufs : 16;
        struct dt_buffer *b = realloc(r->bufs, (size_t)cap * sizeof *b);
        if (!b)
            return DT_ENOMEM;
        r->bufs = b;
        r->cap_bufs = cap;
    }
    r->bufs[r->n_bufs++] = (struct dt_buffer){kind, dtype, layer, elems};
    return DT_OK;
}

int dt_plan_add_view(struct dt_plan *plan)
{
    int n = plan->model ? plan->model->n_layers : 0;
    struct dt_layer_view **v = realloc(plan->views, (size_t)(plan->n_views + 1) * sizeof *v);
    if (!v)
        return -1;
    plan->views = v;
    v[plan->n_views] = calloc((size_t)(n > 0 ? n : 1), sizeof **v);
    return v[plan->n_views] ? plan->n_views++ : -1;
}

int dt_plan_alloc(const struct dt_model *model, const struct dt_topology *topo,
                  const struct dt_plan_options *opt, int n_ranks, struct dt_plan **out)
{
    *out = NULL;
    struct dt_plan *plan = calloc(1, sizeof *plan);
    if (!plan)
        return DT_ENOMEM;
    plan->strategy = opt->strategy;
    plan->opt = *opt;
    plan->model = model;
    plan->topo = topo;
    plan->n_ranks = n_ranks;
    plan->stages = plan->chunks = plan->micro_batches = 1;
    plan->dp = n_ranks;
    plan->lr_scale = 1;
    plan->ranks = calloc((size_t)(n_ranks > 0 ? n_ranks : 1), sizeof *plan->ranks);
    if (!plan->ranks || dt_plan_add_view(plan) < 0) {
        dt_plan_destroy(plan);
        return DT_ENOMEM;
    }
    for (int l = 0; model && l < model->n_layers; l++)
        plan->views[0][l] = (struct dt_layer_view){.runs = true, .holds = true,
                                                   .param_offset =
                                                       model->layers[l].param_offset};
    for (int r = 0; r < n_ranks; r++) {
        struct dt_rank_plan *rp = &plan->ranks[r];
        rp->dp_index = r;
        rp->dp_count = n_ranks;
        rp->first = rp->last = true;
        rp->n_params = rp->n_updated = model ? model->total_params : 0;
        rp->slots = 1;
        rp->replicas = -1;
    }
    *out = plan;
    return DT_OK;
}

void dt_plan_destroy(struct dt_plan *plan)
{
    if (!plan)
        return;
    for (int r = 0; plan->ranks && r < plan->n_ranks; r++) {
        struct dt_rank_plan *rp = &plan->ranks[r];
        if (!rp->shared_ops)
            free(rp->ops);
        if (!rp->shared_eval)
            free(rp->eval.ops);
        if (!rp->shared_bufs)
            free(rp->bufs);
        free(rp->owned);
    }
    dt_plan_pool_free(plan);
    free(plan->ranks);
    for (int g = 0; g < plan->n_groups; g++)
        free(plan->groups[g].ranks);
    free(plan->groups);
    for (int v = 0; v < plan->n_views; v++)
        free(plan->views[v]);
    free(plan->views);
    free(plan->chunk_first);
    for (int v = 0; v < plan->n_recompute; v++) {
        if (plan->recompute[v])
            dt_recompute_free(plan->recompute[v]);
        free(plan->recompute[v]);
    }
    free(plan->recompute);
    dt_plan_dact_free(plan);
    free(plan);
}

const char *dt_op_name(const struct dt_plan *plan, const struct dt_op *op, char *buf, size_t len)
{
    switch (op->kind) {
    case DT_OP_LOAD: return "load";
    case DT_OP_WAIT: return "wait";
    case DT_OP_SEND: return "send";
    case DT_OP_RECV: return "recv";
    case DT_OP_ZERO: return "zero";
    case DT_OP_LOSS: return "loss";
    case DT_OP_UPDATE: return "update";
    case DT_OP_COPY: return "copy";
    case DT_OP_UNSCALE: return "unscale";
    case DT_OP_RESCALE: return "rescale";
    case DT_OP_COLL:
        snprintf(buf, len, "%s/%s", dt_coll_kind_name(op->coll), dt_coll_alg_name(op->alg));
        return buf;
    case DT_OP_COMPUTE:
        snprintf(buf, len, "%s %s", op->recompute ? "recompute" : dt_phase_name(op->phase),
                 plan->model->layers[op->layer].name);
        return buf;
    }
    return "?";
}

const char *dt_op_trace_name(const struct dt_plan *plan, const struct dt_op *op, char *buf,
                             size_t len)
{
    char name[128];
    const char *n = dt_op_name(plan, op, name, sizeof name);
    if (plan->micro_batches > 1 && (op->kind == DT_OP_COMPUTE || op->kind == DT_OP_LOSS))
        snprintf(buf, len, "%s mb %d", n, op->micro);
    else
        snprintf(buf, len, "%s", n);
    return buf;
}

/* dt_loss_part: how --dump-plan shows a part of a vocabulary-parallel loss */
static const char *const loss_part_names[] = {"", " max", " sums", " finish"};

static void print_region(FILE *out, const struct dt_region *r)
{
    if (r->buf == DT_BUF_ACT || r->buf == DT_BUF_DACT)
        fprintf(out, "%s(%d)[%ld+%ld]", dt_buf_name(r->buf), r->layer, r->offset, r->count);
    else
        fprintf(out, "%s[%ld+%ld]", dt_buf_name(r->buf), r->offset, r->count);
}

static void print_op(const struct dt_plan *plan, const struct dt_op *op, FILE *out)
{
    switch (op->kind) {
    case DT_OP_COMPUTE:
        fprintf(out, "COMPUTE %s layer %d (%s) mb %d slot %d x%d",
                op->recompute ? "recompute" : dt_phase_name(op->phase),
                op->layer, plan->model->layers[op->layer].name, op->micro, op->slot,
                op->samples);
        if (op->shards > 1)
            fprintf(out, " shard of %d", op->shards);
        break;
    case DT_OP_SEND:
    case DT_OP_RECV:
        fprintf(out, "%s peer %d tag %d ", op->kind == DT_OP_SEND ? "SEND" : "RECV", op->peer,
                op->tag);
        print_region(out, &op->region);
        fprintf(out, "%s", op->sum ? " sum" : "");
        break;
    case DT_OP_COLL:
        fprintf(out, "COLL %s/%s group %d (%d ranks) root %d ", dt_coll_kind_name(op->coll),
                dt_coll_alg_name(op->alg), op->group, plan->groups[op->group].n, op->root);
        print_region(out, &op->region);
        fprintf(out, "%s", op->reduction == DT_RED_MAX ? " max" : "");
        if (op->dst.count > 0) {
            fprintf(out, " -> ");
            print_region(out, &op->dst);
        }
        break;
    case DT_OP_WAIT: fprintf(out, "WAIT handle %d", op->handle); break;
    case DT_OP_LOAD:
        fprintf(out, "LOAD mb %d rows %d+%d slot %d (%.0f bytes)", op->micro, op->row0,
                op->samples, op->slot, op->bytes);
        break;
    case DT_OP_ZERO:
        fprintf(out, "ZERO ");
        print_region(out, &op->region);
        break;
    case DT_OP_LOSS:
        fprintf(out, "LOSS layer %d mb %d slot %d x%d / %g%s", op->layer, op->micro, op->slot,
                op->samples, op->scale, loss_part_names[op->loss_part]);
        break;
    case DT_OP_UPDATE:
        fprintf(out, "UPDATE ");
        print_region(out, &op->region);
        fprintf(out, " opt[%ld]", op->dst.offset);
        if (dt_plan_mixed(op->precision))
            fprintf(out, " master[%ld]", op->dst.offset);
        if (op->grads.count > 0) {
            fprintf(out, " ");
            print_region(out, &op->grads);
        }
        break;
    case DT_OP_COPY:
        fprintf(out, "COPY ");
        print_region(out, &op->region);
        fprintf(out, " -> ");
        print_region(out, &op->dst);
        fprintf(out, "%s", op->sum ? " sum" : "");
        break;
    case DT_OP_UNSCALE:
        fprintf(out, "UNSCALE ");
        print_region(out, &op->region);
        fprintf(out, " overflow -> ");
        print_region(out, &op->dst);
        break;
    case DT_OP_RESCALE:
        fprintf(out, "RESCALE ");
        print_region(out, &op->region);
        break;
    }
    if (op->nonblocking)
        fprintf(out, " nonblocking handle %d", op->handle);
    fprintf(out, "\n");
}

void dt_plan_print(const struct dt_plan *plan, FILE *out)
{
    char cfg[256];
    dt_parallel_format(&plan->opt, cfg, sizeof cfg);
    fprintf(out, "plan %s: %d ranks, global batch %d, lr x %g%s%s\n",
            dt_strategy_name(plan->strategy), plan->n_ranks, plan->global_batch, plan->lr_scale,
            cfg[0] ? ", " : "", cfg);
    for (int r = 0; r < plan->n_ranks; r++) {
        const struct dt_rank_plan *rp = &plan->ranks[r];
        struct dt_memory mem;
        dt_plan_rank_memory(plan, r, &mem);
        fprintf(out, "rank %d: stage %d, replica %d of %d, batch %d, %d slot%s x %d rows, "
                     "%ld parameters, %.0f bytes, %d ops\n",
                r, rp->stage, rp->dp_index, rp->dp_count, rp->batch, rp->slots,
                rp->slots == 1 ? "" : "s", rp->slot_rows, rp->n_params, mem.total, rp->n_ops);
        for (int i = 0; i < rp->n_ops; i++) {
            fprintf(out, "  %3d ", i);
            print_op(plan, &rp->ops[i], out);
        }
        if (rp->eval.n_ops)
            fprintf(out, "  eval (%d rows):\n", rp->eval_rows);
        for (int i = 0; i < rp->eval.n_ops; i++) {
            fprintf(out, "  %3d ", i);
            print_op(plan, &rp->eval.ops[i], out);
        }
    }
}

void dt_trace_span(FILE *f, double t0_s, double t1_s)
{
    long long a = llround(t0_s * 1e9), b = llround(t1_s * 1e9);
    fprintf(f, "\"ts\": %lld.%03lld, \"dur\": %lld.%03lld", a / 1000, a % 1000, (b - a) / 1000,
            (b - a) % 1000);
}

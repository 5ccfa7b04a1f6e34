/* The plan checker: what every plan must satisfy before either executor walks it. Runs in
 * dt_plan_build (so dtsim and dtexec both run it) and in the tests on hand-broken plans. */
#include <stdlib.h>
#include <string.h>

#include "compile.h"

static int fail_op(struct dt_error *err, const struct dt_plan *plan, int r, bool eval, int i,
                   const struct dt_op *op, const char *what)
{
    char buf[128];
    return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "plan %s: rank %d %s op %d (%s): %s",
                   dt_strategy_name(plan->strategy), r, eval ? "eval" : "step", i,
                   dt_op_name(plan, op, buf, sizeof buf), what);
}

static double buffer_size(const struct dt_plan *plan, int r, const struct dt_region *g)
{
    if (g->buf == DT_BUF_ACT || g->buf == DT_BUF_DACT) {
        if (g->layer < 0 || g->layer >= plan->model->n_layers)
            return -1;
        return dt_plan_buffer_layer(plan, r, g->buf, g->layer);
    }
    return dt_plan_buffer_elems(plan, r, g->buf);
}

static bool inside(const struct dt_plan *plan, int r, const struct dt_region *g)
{
    if (g->buf < 0 || g->buf >= DT_BUF_COUNT || g->offset < 0 || g->count < 0)
        return false;
    return (double)g->offset + (double)g->count <= buffer_size(plan, r, g);
}

/* Regions, rows and layers of one op. */
static const char *op_problem(const struct dt_plan *plan, int r, const struct dt_op *op)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    const struct dt_model *m = plan->model;
    int cap = rp->slots * rp->slot_rows;
    switch (op->kind) {
    case DT_OP_COMPUTE:
    case DT_OP_LOSS:
        if (op->layer < 0 || op->layer >= m->n_layers || !plan->views[rp->view][op->layer].runs)
            return "a layer this rank does not run";
        if (op->kind == DT_OP_LOSS && op->layer != m->n_layers - 1)
            return "a loss on a layer that is not the last";
        /* fall through */
    case DT_OP_LOAD:
        if (op->slot < 0 || op->samples < 1 ||
            (long)op->slot * rp->slot_rows + op->samples > cap)
            return "rows outside the rank's activation slots";
        if (op->kind == DT_OP_LOAD && op->row0 < 0)
            return "rows outside the rank's step batch";
        return NULL;
    case DT_OP_UPDATE: {
        long opt = (long)dt_optimizer_moments(plan->opt.optimizer) *
                   (op->dst.offset + op->region.count);
        if (op->region.buf != DT_BUF_PARAMS || !inside(plan, r, &op->region))
            return "an update of parameters outside the buffer table";
        if (opt > dt_plan_buffer_elems(plan, r, DT_BUF_OPT) || op->dst.offset < 0)
            return "optimizer state outside the buffer table";
        if (op->grads.count == 0 && op->region.offset + op->region.count >
                                        dt_plan_buffer_elems(plan, r, DT_BUF_GRADS))
            return "gradients outside the buffer table";
        if (op->grads.count > 0 && (op->grads.buf != DT_BUF_GRADS ||
                                    op->grads.count != op->region.count ||
                                    !inside(plan, r, &op->grads)))
            return "gradients outside the buffer table";
        return NULL;
    }
    case DT_OP_COLL:
        if (op->group < 0 || op->group >= plan->n_groups ||
            dtc_group_index(&plan->groups[op->group], r) < 0)
            return "a collective of a group that does not hold this rank";
        if (op->dst.count > 0 && !inside(plan, r, &op->dst))
            return "a destination region outside the buffer table";
        /* fall through */
    case DT_OP_SEND:
    case DT_OP_RECV:
    case DT_OP_ZERO:
    case DT_OP_COPY:
        if (!inside(plan, r, &op->region))
            return "a region outside the buffer table";
        if (op->kind == DT_OP_COPY && !inside(plan, r, &op->dst))
            return "a destination region outside the buffer table";
        if ((op->kind == DT_OP_SEND || op->kind == DT_OP_RECV) &&
            (op->peer < 0 || op->peer >= plan->n_ranks || op->peer == r || op->tag < 0))
            return "a bad peer or tag";
        return NULL;
    case DT_OP_WAIT:
        return NULL;
    }
    return "an unknown op kind";
}

/* Every handle started once, waited once, after its start. */
static int check_handles(const struct dt_plan *plan, int r, bool eval, const struct dt_op *ops,
                         int n, struct dt_error *err)
{
    int H = plan->next_handle;
    char *state = calloc((size_t)H + 1, 1); /* 0 unused, 1 started, 2 waited */
    if (!state)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    int rc = DT_OK;
    for (int i = 0; i < n && !rc; i++) {
        const struct dt_op *op = &ops[i];
        bool starts = op->nonblocking &&
                      (op->kind == DT_OP_COLL || op->kind == DT_OP_SEND || op->kind == DT_OP_RECV);
        if (!starts && op->kind != DT_OP_WAIT)
            continue;
        if (op->handle < 0 || op->handle >= H)
            rc = fail_op(err, plan, r, eval, i, op, "a handle outside the plan's handles");
        else if (starts && state[op->handle])
            rc = fail_op(err, plan, r, eval, i, op, "a handle started twice");
        else if (!starts && state[op->handle] != 1)
            rc = fail_op(err, plan, r, eval, i, op,
                         state[op->handle] ? "a handle waited twice" : "a wait before its start");
        else
            state[op->handle] = starts ? 1 : 2;
    }
    for (int h = 0; h < H && !rc; h++)
        if (state[h] == 1)
            rc = dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "plan %s: rank %d %s program: handle "
                         "%d is never waited", dt_strategy_name(plan->strategy), r,
                         eval ? "eval" : "step", h);
    free(state);
    return rc;
}

static const struct dt_op *program(const struct dt_plan *plan, int r, bool eval, int *n)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    *n = eval ? rp->eval.n_ops : rp->n_ops;
    return eval ? rp->eval.ops : rp->ops;
}

/* The k-th op of kind `kind` that matches (group, or peer/tag as seen from rank r); NULL past
 * the end. */
static const struct dt_op *nth(const struct dt_op *ops, int n, enum dt_op_kind kind, int group,
                               int peer, int tag, int k, int *index)
{
    for (int i = 0; i < n; i++) {
        const struct dt_op *op = &ops[i];
        if (op->kind != kind)
            continue;
        if (kind == DT_OP_COLL ? op->group != group : op->peer != peer || op->tag != tag)
            continue;
        if (k-- == 0) {
            *index = i;
            return op;
        }
    }
    return NULL;
}

/* Members of each group issue the same collectives in the same order. */
static int check_collectives(const struct dt_plan *plan, bool eval, struct dt_error *err)
{
    for (int g = 0; g < plan->n_groups; g++) {
        const struct dt_group *G = &plan->groups[g];
        int n0, i0 = 0, i = 0;
        const struct dt_op *ops0 = program(plan, G->ranks[0], eval, &n0);
        for (int m = 1; m < G->n; m++) {
            int n;
            const struct dt_op *ops = program(plan, G->ranks[m], eval, &n);
            for (int k = 0;; k++) {
                const struct dt_op *a = nth(ops0, n0, DT_OP_COLL, g, 0, 0, k, &i0);
                const struct dt_op *b = nth(ops, n, DT_OP_COLL, g, 0, 0, k, &i);
                if (!a && !b)
                    break;
                if (!a || !b || a->coll != b->coll || a->alg != b->alg || a->root != b->root ||
                    a->region.count != b->region.count)
                    return fail_op(err, plan, G->ranks[m], eval, b ? i : 0, b ? b : a,
                                   "its group's members disagree on this collective (kind, "
                                   "algorithm, root, size or order)");
            }
        }
    }
    return DT_OK;
}

/* Every SEND has a RECV of the same size on its peer, in the same order per (peer, tag). */
static int check_messages(const struct dt_plan *plan, bool eval, struct dt_error *err)
{
    for (int r = 0; r < plan->n_ranks; r++) {
        int n;
        const struct dt_op *ops = program(plan, r, eval, &n);
        for (int i = 0; i < n; i++) {
            const struct dt_op *s = &ops[i];
            if ((s->kind != DT_OP_SEND && s->kind != DT_OP_RECV) || s->peer < 0 ||
                s->peer >= plan->n_ranks)
                continue;
            int k = 0, j, pn;
            for (int q = 0; q < i; q++)
                k += ops[q].kind == s->kind && ops[q].peer == s->peer && ops[q].tag == s->tag;
            const struct dt_op *peer_ops = program(plan, s->peer, eval, &pn);
            const struct dt_op *o = nth(peer_ops, pn, s->kind == DT_OP_SEND ? DT_OP_RECV
                                                                             : DT_OP_SEND,
                                        -1, r, s->tag, k, &j);
            if (!o)
                return fail_op(err, plan, r, eval, i, s,
                               s->kind == DT_OP_SEND ? "no matching receive on its peer"
                                                     : "no matching send on its peer");
            if (o->region.count != s->region.count)
                return fail_op(err, plan, r, eval, i, s, "its peer's matching op has another size");
        }
    }
    return DT_OK;
}

int dt_plan_check(const struct dt_plan *plan, struct dt_error *err)
{
    for (int pass = 0; pass < 2; pass++) {
        bool eval = pass == 1;
        for (int r = 0; r < plan->n_ranks; r++) {
            int n;
            const struct dt_op *ops = program(plan, r, eval, &n);
            const struct dt_rank_plan *rp = &plan->ranks[r];
            if (rp->view < 0 || rp->view >= plan->n_views)
                return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "plan: rank %d has no view", r);
            for (int i = 0; i < n; i++) {
                const char *why = op_problem(plan, r, &ops[i]);
                if (why)
                    return fail_op(err, plan, r, eval, i, &ops[i], why);
            }
            int rc = check_handles(plan, r, eval, ops, n, err);
            if (rc)
                return rc;
        }
        int rc = check_collectives(plan, eval, err);
        if (!rc)
            rc = check_messages(plan, eval, err);
        if (rc)
            return rc;
    }
    return DT_OK;
}

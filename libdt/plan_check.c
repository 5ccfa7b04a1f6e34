/* The plan checker: what every plan must satisfy before either executor walks it. Runs in
 * dt_plan_build (so dtsim and dtexec both run it) and in the tests on hand-broken plans. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "dt/tensor.h"

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

/* A pooled gradient holds one slot, an output in the recomputation workspace ws_rows rows:
 * the region names rows of the rank's slots (dt/plan.h) inside one such block. */
static bool inside_block(const struct dt_plan *plan, int r, const struct dt_region *g,
                         int block_rows)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    long row = dt_shard_act_floats(plan->model, plan->views[rp->view], g->layer);
    long block = row * block_rows;
    return block > 0 && g->offset + g->count <= row * rp->slots * rp->slot_rows &&
           (g->count == 0 || g->offset / block == (g->offset + g->count - 1) / block);
}

/* The output is held in ws_rows rows: in the recomputation workspace, or until sent. */
static bool in_workspace(const struct dt_plan *plan, int r, int layer)
{
    const struct dt_recompute_layout *rc = dt_plan_rank_recompute(plan, r);
    return (rc && rc->act_ws[layer]) || plan->views[plan->ranks[r].view][layer].act_until_sent;
}

static bool inside(const struct dt_plan *plan, int r, const struct dt_region *g)
{
    if (g->buf < 0 || g->buf >= DT_BUF_COUNT || g->offset < 0 || g->count < 0)
        return false;
    if (g->buf == DT_BUF_DACT && g->layer >= 0 && g->layer < plan->model->n_layers &&
        dt_plan_dact_pooled(plan, r, g->layer))
        return inside_block(plan, r, g, plan->ranks[r].slot_rows);
    if (g->buf == DT_BUF_ACT && g->layer >= 0 && g->layer < plan->model->n_layers &&
        in_workspace(plan, r, g->layer))
        return inside_block(plan, r, g, plan->ranks[r].ws_rows);
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
        if (op->kind == DT_OP_LOSS &&
            (op->loss_part < DT_LOSS_WHOLE || op->loss_part > DT_LOSS_FINISH ||
             (op->loss_part != DT_LOSS_WHOLE) !=
                 (dt_shard_loss_stats(m, plan->views[rp->view]) > 0)))
            return "a loss part that does not match its last layer's vocabulary shard";
        /* fall through */
    case DT_OP_LOAD:
        if (op->slot < 0 || op->samples < 1 ||
            (long)op->slot * rp->slot_rows + op->samples > cap)
            return "rows outside the rank's activation slots";
        if (op->kind == DT_OP_COMPUTE && rp->ws_rows > 0 &&
            (long)op->slot * rp->slot_rows % rp->ws_rows + op->samples > rp->ws_rows)
            return "rows across the end of the recomputation workspace";
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
        if (dt_plan_mixed(plan->opt.precision) &&
            op->dst.offset + op->region.count > dt_plan_buffer_elems(plan, r, DT_BUF_MASTER))
            return "master weights outside the buffer table";
        if (op->grads.count == 0 && op->region.offset + op->region.count >
                                        dt_plan_buffer_elems(plan, r, DT_BUF_GRADS))
            return "gradients outside the buffer table";
        if (op->grads.count > 0 && (op->grads.buf != DT_BUF_GRADS ||
                                    op->grads.count != op->region.count ||
                                    !inside(plan, r, &op->grads)))
            return "gradients outside the buffer table";
        return NULL;
    }
    case DT_OP_UNSCALE:
        if (op->region.buf != DT_BUF_GRADS || !inside(plan, r, &op->region))
            return "an unscale of gradients outside the buffer table";
        if (op->dst.buf != DT_BUF_SCALER || op->dst.offset != DT_SCALER_FLAG ||
            !inside(plan, r, &op->dst))
            return "an overflow flag that is not the scaler's";
        return NULL;
    case DT_OP_RESCALE:
        if (op->region.buf != DT_BUF_SCALER || op->region.offset != 0 ||
            op->region.count != DT_SCALER_ELEMS || !inside(plan, r, &op->region))
            return "a loss scale update of a region that is not the scaler";
        return NULL;
    case DT_OP_COLL:
        if (op->group < 0 || op->group >= plan->n_groups ||
            dt_group_index(&plan->groups[op->group], r) < 0)
            return "a collective of a group that does not hold this rank";
        if (op->dst.count > 0 && !inside(plan, r, &op->dst))
            return "a destination region outside the buffer table";
        if (op->reduction != DT_RED_SUM && op->reduction != DT_RED_MAX)
            return "an unknown reduction";
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

/* compile.h: where a region's elements lie in rank r's memory. Rows held in ws_rows rows
 * (slot_rows in the pool) are at row mod ws_rows; while ws_rows is unknown (0: the
 * recomputation is being compiled) such a region spans its whole storage. */
struct dtc_span dtc_span_of(const struct dt_plan *plan, int r, const struct dt_region *g)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    struct dtc_span s = {(int)g->buf, (int)g->buf, -1, g->offset, g->offset + g->count,
                         g->count <= 0};
    if ((g->buf != DT_BUF_ACT && g->buf != DT_BUF_DACT) || g->layer < 0 || s.empty)
        return s;
    int l = dt_layer_storage(plan->model, g->layer), rows = 0;
    const struct dt_recompute_layout *rc = dt_plan_rank_recompute(plan, r);
    const struct dt_dact_layout *d = dt_plan_rank_dact(plan, r);
    long base = 0;
    s.layer = l;
    if (g->buf == DT_BUF_ACT && rc && rc->act_ws[l]) {
        s.buf = DT_BUF_KEEP;
        s.layer = -1;
        base = rc->act_at[l] * rp->ws_rows;
        rows = rp->ws_rows ? rp->ws_rows : -1;
    } else if (g->buf == DT_BUF_ACT && plan->views[rp->view][l].act_until_sent) {
        rows = rp->ws_rows ? rp->ws_rows : -1;
    } else if (g->buf == DT_BUF_DACT && d && d->at[l] >= 0) {
        s.layer = -1;
        base = d->at[l] * rp->slot_rows;
        rows = rp->slot_rows;
    }
    long block = dt_shard_act_floats(plan->model, plan->views[rp->view], l) * rows;
    if (rows < 0 || (rows > 0 && block <= 0))
        s.lo = 0, s.hi = LONG_MAX;
    else if (rows > 0)
        s.lo = base + g->offset % block, s.hi = s.lo + g->count;
    return s;
}

bool dtc_spans_overlap(const struct dtc_span *x, const struct dtc_span *y)
{
    if (x->region_buf != y->region_buf || x->empty || y->empty) /* a buffer kept apart */
        return false;
    return x->buf == y->buf && x->layer == y->layer && x->lo < y->hi && y->lo < x->hi;
}

static bool overlap(const struct dt_plan *plan, int r, const struct dt_region *a,
                    const struct dt_region *b)
{
    if (a->buf != b->buf || a->count <= 0 || b->count <= 0) /* spans keep a buffer apart */
        return false;
    struct dtc_span x = dtc_span_of(plan, r, a), y = dtc_span_of(plan, r, b);
    return dtc_spans_overlap(&x, &y);
}

/* The regions op writes (at most 2; their number). A forward writes its layer's output rows
 * (a view's forward writes nothing); a non-blocking summing RECV writes nothing until its
 * WAIT (the executor adds what arrived there); backward and loss are not counted here. */
int dtc_written(const struct dt_plan *plan, int r, const struct dt_op *op, struct dt_region *w)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    switch (op->kind) {
    case DT_OP_COMPUTE: {
        if (op->phase != DT_PH_FORWARD || dt_layer_is_view(&plan->model->layers[op->layer]))
            return 0;
        long row = dt_shard_act_floats(plan->model, plan->views[rp->view], op->layer);
        w[0] = (struct dt_region){DT_BUF_ACT, (long)op->slot * rp->slot_rows * row,
                                  op->samples * row, op->layer};
        return 1;
    }
    case DT_OP_COLL:
        w[0] = op->dst.count > 0 ? op->dst : op->region;
        return 1;
    case DT_OP_COPY:
        w[0] = op->dst;
        return 1;
    case DT_OP_UNSCALE:
        w[0] = op->region;
        w[1] = op->dst;
        return 2;
    case DT_OP_RECV:
        if (op->nonblocking && op->sum)
            return 0;
        /* fall through */
    case DT_OP_ZERO:
    case DT_OP_UPDATE:
    case DT_OP_RESCALE:
        w[0] = op->region;
        return 1;
    default:
        return 0;
    }
}

bool dtc_any_overlap(const struct dt_plan *plan, int r, const struct dt_region *w, int n,
                     const struct dt_region *read)
{
    for (int k = 0; k < n; k++)
        if (overlap(plan, r, &w[k], read))
            return true;
    return false;
}

/* A pending non-blocking op: the SEND's reads, a summing RECV's writes when waited. */
struct pending {
    const struct dt_op **op;
    int n;
};

/* Takes the op of this handle out of p; it, or NULL. */
static const struct dt_op *take(struct pending *p, int handle)
{
    const struct dt_op *found = NULL;
    int kept = 0;
    for (int k = 0; k < p->n; k++) {
        if (p->op[k]->handle == handle)
            found = p->op[k];
        else
            p->op[kept++] = p->op[k];
    }
    p->n = kept;
    return found;
}

/* What op writes now: a WAIT, the summing receive it ends (as a blocking one). */
static const struct dt_op *landing(struct pending *recvs, const struct dt_op *op,
                                   struct dt_op *scratch)
{
    if (op->kind != DT_OP_WAIT)
        return op;
    const struct dt_op *recv = take(recvs, op->handle);
    if (!recv)
        return NULL;
    *scratch = *recv;
    scratch->nonblocking = false;
    return scratch;
}

/* No op writes what a pending non-blocking SEND reads: the buffer is the send's until its
 * WAIT (MPI 4.0 section 3.7.2; a GPU copy engine would race). */
static int check_send_buffers(const struct dt_plan *plan, int r, bool eval,
                              const struct dt_op *ops, int n, struct dt_error *err)
{
    struct pending sends = {malloc(((size_t)n + 1) * sizeof *sends.op), 0};
    struct pending recvs = {malloc(((size_t)n + 1) * sizeof *recvs.op), 0};
    int rc = sends.op && recvs.op ? DT_OK : dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int i = 0; i < n && !rc; i++) {
        const struct dt_op *op = &ops[i];
        struct dt_op scratch;
        const struct dt_op *writer = landing(&recvs, op, &scratch);
        struct dt_region w[2];
        int n_w = writer && sends.n ? dtc_written(plan, r, writer, w) : 0;
        if (op->kind == DT_OP_WAIT)
            take(&sends, op->handle);
        for (int k = 0; k < sends.n && n_w && !rc; k++)
            if (dtc_any_overlap(plan, r, w, n_w, &sends.op[k]->region)) {
                char what[96];
                snprintf(what, sizeof what, "it writes what the pending send of handle %d "
                         "reads (wait for it first)", sends.op[k]->handle);
                rc = fail_op(err, plan, r, eval, i, op, what);
            }
        if (op->nonblocking && op->kind == DT_OP_SEND)
            sends.op[sends.n++] = op;
        if (op->nonblocking && op->kind == DT_OP_RECV && op->sum)
            recvs.op[recvs.n++] = op;
    }
    free(sends.op);
    free(recvs.op);
    return rc;
}

/* Every handle started once, waited once, after its start. state: the plan's handles, all 0
 * on entry and on return (only the entries this program touched are reset: linear in its
 * ops, not in the plan's handles). */
static int check_handles(const struct dt_plan *plan, int r, bool eval, const struct dt_op *ops,
                         int n, char *state, struct dt_error *err)
{
    int H = plan->next_handle;
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
    for (int i = 0; i < n; i++) {
        int h = ops[i].handle;
        if ((ops[i].nonblocking || ops[i].kind == DT_OP_WAIT) && h >= 0 && h < H) {
            if (state[h] == 1 && !rc)
                rc = dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "plan %s: rank %d %s program: "
                             "handle %d is never waited", dt_strategy_name(plan->strategy), r,
                             eval ? "eval" : "step", h);
            state[h] = 0;
        }
    }
    return rc;
}

static const struct dt_op *program(const struct dt_plan *plan, int r, bool eval, int *n)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    *n = eval ? rp->eval.n_ops : rp->n_ops;
    return eval ? rp->eval.ops : rp->ops;
}

/* The next collective of group g at or after *i; NULL past the end. */
static const struct dt_op *next_coll(const struct dt_op *ops, int n, int g, int *i)
{
    for (; *i < n; ++*i)
        if (ops[*i].kind == DT_OP_COLL && ops[*i].group == g)
            return &ops[(*i)++];
    return NULL;
}

/* Members of each group issue the same collectives in the same order: each member's walk
 * beside the first member's, one pass each. */
static int check_collectives(const struct dt_plan *plan, bool eval, struct dt_error *err)
{
    for (int g = 0; g < plan->n_groups; g++) {
        const struct dt_group *G = &plan->groups[g];
        int n0;
        const struct dt_op *ops0 = program(plan, G->ranks[0], eval, &n0);
        for (int m = 1; m < G->n; m++) {
            int n, i0 = 0, i = 0;
            const struct dt_op *ops = program(plan, G->ranks[m], eval, &n);
            for (;;) {
                const struct dt_op *a = next_coll(ops0, n0, g, &i0);
                const struct dt_op *b = next_coll(ops, n, g, &i);
                if (!a && !b)
                    break;
                if (!a || !b || a->coll != b->coll || a->alg != b->alg || a->root != b->root ||
                    a->region.count != b->region.count || a->reduction != b->reduction)
                    return fail_op(err, plan, G->ranks[m], eval, b ? i - 1 : 0, b ? b : a,
                                   "its group's members disagree on this collective (kind, "
                                   "algorithm, root, size, reduction or order)");
            }
        }
    }
    return DT_OK;
}

/* A point-to-point op of a rank, to be matched: sorted by (peer, tag, kind, program order). */
struct p2p {
    int peer, tag, kind, index;
    long count;
};

static int cmp_p2p(const void *a, const void *b)
{
    const struct p2p *x = a, *y = b;
    if (x->peer != y->peer)
        return x->peer - y->peer;
    if (x->tag != y->tag)
        return x->tag - y->tag;
    if (x->kind != y->kind)
        return x->kind - y->kind;
    return x->index - y->index;
}

/* Rank r's SEND and RECV ops with a valid peer, sorted; their number, or -1 (out of memory). */
static int p2p_list(const struct dt_plan *plan, int r, bool eval, struct p2p **out)
{
    int n, k = 0;
    const struct dt_op *ops = program(plan, r, eval, &n);
    struct p2p *l = malloc(((size_t)n + 1) * sizeof *l);
    if (!l)
        return -1;
    for (int i = 0; i < n; i++)
        if ((ops[i].kind == DT_OP_SEND || ops[i].kind == DT_OP_RECV) && ops[i].peer >= 0 &&
            ops[i].peer < plan->n_ranks)
            l[k++] = (struct p2p){ops[i].peer, ops[i].tag, ops[i].kind, i, ops[i].region.count};
    qsort(l, (size_t)k, sizeof *l, cmp_p2p);
    *out = l;
    return k;
}

/* The first entry of l (n, sorted) with this peer, tag and kind. */
static int lower_bound(const struct p2p *l, int n, int peer, int tag, int kind)
{
    struct p2p key = {peer, tag, kind, -1, 0};
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cmp_p2p(&l[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Every SEND has a RECV of the same size on its peer, in the same order per (peer, tag), and
 * every RECV a SEND: the k-th op to a peer with a tag meets the peer's k-th op of the other
 * kind from this rank with that tag. */
static int check_messages(const struct dt_plan *plan, bool eval, struct dt_error *err)
{
    struct p2p **lists = calloc((size_t)plan->n_ranks, sizeof *lists);
    int *len = calloc((size_t)plan->n_ranks, sizeof *len);
    int rc = lists && len ? DT_OK : dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int r = 0; r < plan->n_ranks && !rc; r++)
        if ((len[r] = p2p_list(plan, r, eval, &lists[r])) < 0)
            rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int r = 0; r < plan->n_ranks && !rc; r++) {
        const struct p2p *l = lists[r];
        for (int i = 0, k = 0; i < len[r] && !rc; i++) {
            k = i > 0 && l[i].peer == l[i - 1].peer && l[i].tag == l[i - 1].tag &&
                l[i].kind == l[i - 1].kind ? k + 1 : 0;
            int other = l[i].kind == DT_OP_SEND ? DT_OP_RECV : DT_OP_SEND, q = l[i].peer;
            int j = lower_bound(lists[q], len[q], r, l[i].tag, other) + k;
            const struct dt_op *s = &program(plan, r, eval, &(int){0})[l[i].index];
            if (j >= len[q] || lists[q][j].peer != r || lists[q][j].tag != l[i].tag ||
                lists[q][j].kind != other)
                rc = fail_op(err, plan, r, eval, l[i].index, s,
                             s->kind == DT_OP_SEND ? "no matching receive on its peer"
                                                   : "no matching send on its peer");
            else if (lists[q][j].count != l[i].count)
                rc = fail_op(err, plan, r, eval, l[i].index, s,
                             "its peer's matching op has another size");
        }
    }
    for (int r = 0; lists && r < plan->n_ranks; r++)
        free(lists[r]);
    free(lists);
    free(len);
    return rc;
}

/* One program of every rank (step or eval). */
static int check_pass(const struct dt_plan *plan, bool eval, char *state, struct dt_error *err)
{
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
        int rc = check_handles(plan, r, eval, ops, n, state, err);
        if (!rc)
            rc = check_send_buffers(plan, r, eval, ops, n, err);
        if (rc)
            return rc;
    }
    int rc = check_collectives(plan, eval, err);
    return rc ? rc : check_messages(plan, eval, err);
}

int dt_plan_check(const struct dt_plan *plan, struct dt_error *err)
{
    char *state = calloc((size_t)plan->next_handle + 1, 1); /* 0 unused, 1 started, 2 waited */
    if (!state)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    int rc = check_pass(plan, false, state, err);
    if (!rc)
        rc = check_pass(plan, true, state, err);
    free(state);
    return rc;
}

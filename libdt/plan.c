/* The plan container, names and listing. The strategies that fill it are in strategy.c. */
#include "dt/plan.h"

#include <stdlib.h>
#include <string.h>

static const char *const strategy_names[DT_STRAT_COUNT] = {
    "sequential",     "reduce-bcast-linear", "reduce-bcast", "ring",
    "recursive-doubling", "rabenseifner",    "hierarchical", "mpi-allreduce",
    "ps-central",     "ps-sharded",
};

static const char *const strategy_descriptions[DT_STRAT_COUNT] = {
    "one device, no communication",
    "gradients sent by every rank to rank 0, summed, averaged gradient sent back to each (seed 002)",
    "gradients reduced to rank 0 and broadcast by binomial trees (MPI_Reduce + MPI_Bcast in MPICH)",
    "ring allreduce: reduce-scatter + allgather in 2(p-1) steps (Horovod, NCCL)",
    "recursive-doubling allreduce (MPICH, short messages)",
    "Rabenseifner allreduce: recursive-halving reduce-scatter + recursive-doubling allgather",
    "intra-node reduce, ring allreduce among node leaders, intra-node broadcast",
    "the MPI library's MPI_Allreduce (simulated as MPICH 4.0's default choice)",
    "central parameter server on rank 0: push gradients, server updates, pull weights",
    "sharded parameter server: each rank owns 1/p of the weights (reduce-scatter, allgather)",
};

const char *dt_strategy_name(enum dt_strategy s) { return strategy_names[s]; }
const char *dt_strategy_description(enum dt_strategy s) { return strategy_descriptions[s]; }

int dt_strategy_parse(const char *name)
{
    for (int i = 0; i < DT_STRAT_COUNT; i++)
        if (strcmp(name, strategy_names[i]) == 0)
            return i;
    /* Aliases people write. */
    if (strcmp(name, "reduce-bcast-binomial") == 0)
        return DT_STRAT_REDUCE_BCAST_BINOMIAL;
    if (strcmp(name, "allreduce") == 0 || strcmp(name, "library") == 0)
        return DT_STRAT_ALLREDUCE_LIBRARY;
    if (strcmp(name, "ring-allreduce") == 0)
        return DT_STRAT_ALLREDUCE_RING;
    return -1;
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
                                    "rabenseifner", "direct", "library"};
    return a < DT_ALG_COUNT ? n[a] : "?";
}

const char *dt_phase_name(enum dt_phase p)
{
    static const char *const n[] = {"forward", "backward", "update"};
    return n[p];
}

int dt_plan_push(struct dt_plan *plan, int rank, const struct dt_op *op)
{
    struct dt_rank_plan *r = &plan->ranks[rank];
    if (r->n_ops == r->cap_ops) {
        int cap = r->cap_ops ? 2 * r->cap_ops : 64;
        struct dt_op *ops = realloc(r->ops, (size_t)cap * sizeof *ops);
        if (!ops)
            return DT_ENOMEM;
        r->ops = ops;
        r->cap_ops = cap;
    }
    r->ops[r->n_ops++] = *op;
    return DT_OK;
}

int dt_plan_add_group(struct dt_plan *plan, int n, const int *ranks)
{
    struct dt_group *g = realloc(plan->groups, (size_t)(plan->n_groups + 1) * sizeof *g);
    if (!g)
        return -1;
    plan->groups = g;
    int *copy = malloc((size_t)n * sizeof *copy);
    if (!copy)
        return -1;
    memcpy(copy, ranks, (size_t)n * sizeof *copy);
    g[plan->n_groups] = (struct dt_group){n, copy};
    return plan->n_groups++;
}

void dt_plan_destroy(struct dt_plan *plan)
{
    if (!plan)
        return;
    for (int r = 0; r < plan->n_ranks; r++)
        free(plan->ranks[r].ops);
    free(plan->ranks);
    for (int g = 0; g < plan->n_groups; g++)
        free(plan->groups[g].ranks);
    free(plan->groups);
    free(plan);
}

const char *dt_op_name(const struct dt_plan *plan, const struct dt_op *op, char *buf, size_t len)
{
    switch (op->kind) {
    case DT_OP_LOAD: return "load";
    case DT_OP_WAIT: return "wait";
    case DT_OP_SEND: return "send";
    case DT_OP_RECV: return "recv";
    case DT_OP_COLL:
        snprintf(buf, len, "%s/%s", dt_coll_kind_name(op->coll), dt_coll_alg_name(op->alg));
        return buf;
    case DT_OP_COMPUTE:
        if (op->phase == DT_PH_UPDATE)
            return "update";
        snprintf(buf, len, "%s %s", dt_phase_name(op->phase), plan->model->layers[op->layer].name);
        return buf;
    }
    return "?";
}

static const char *buf_name(enum dt_buf b) { return b == DT_BUF_PARAMS ? "params" : "grads"; }

void dt_plan_print(const struct dt_plan *plan, FILE *out)
{
    fprintf(out, "plan %s: %d ranks, global batch %d, lr x %g\n",
            dt_strategy_name(plan->strategy), plan->n_ranks, plan->global_batch, plan->lr_scale);
    for (int r = 0; r < plan->n_ranks; r++) {
        const struct dt_rank_plan *rp = &plan->ranks[r];
        fprintf(out, "rank %d: batch %d, %d ops\n", r, rp->batch, rp->n_ops);
        for (int i = 0; i < rp->n_ops; i++) {
            const struct dt_op *op = &rp->ops[i];
            fprintf(out, "  %3d ", i);
            switch (op->kind) {
            case DT_OP_COMPUTE:
                if (op->phase == DT_PH_UPDATE)
                    fprintf(out, "COMPUTE update params[%ld+%ld]\n", op->region.offset,
                            op->region.count);
                else
                    fprintf(out, "COMPUTE %s layer %d (%s) x%d\n", dt_phase_name(op->phase),
                            op->layer, plan->model->layers[op->layer].name, op->samples);
                break;
            case DT_OP_SEND:
            case DT_OP_RECV:
                fprintf(out, "%s peer %d tag %d %s[%ld+%ld]%s\n",
                        op->kind == DT_OP_SEND ? "SEND" : "RECV", op->peer, op->tag,
                        buf_name(op->region.buf), op->region.offset, op->region.count,
                        op->sum ? " sum" : "");
                break;
            case DT_OP_COLL:
                fprintf(out, "COLL %s/%s group %d (%d ranks) root %d %s[%ld+%ld]%s\n",
                        dt_coll_kind_name(op->coll), dt_coll_alg_name(op->alg), op->group,
                        plan->groups[op->group].n, op->root, buf_name(op->region.buf),
                        op->region.offset, op->region.count,
                        op->nonblocking ? " nonblocking" : "");
                if (op->nonblocking)
                    fprintf(out, "        handle %d\n", op->handle);
                break;
            case DT_OP_WAIT:
                fprintf(out, "WAIT handle %d\n", op->handle);
                break;
            case DT_OP_LOAD:
                fprintf(out, "LOAD %d samples (%.0f bytes)\n", op->samples, op->bytes);
                break;
            }
        }
    }
}

/* A pipeline probe's tensor ranks (dt_plan.probe_tensor). The T tensor ranks of a stage and
 * replica run one emission (pipeline.c) that differs only in the peers and groups it names
 * (rank_of(s, d, k), the tensor group's members) and in its layers' shard_index, which no
 * size reads (tensor.c: every shard of a layer has the same parameters, activations and kept
 * state; the vocabulary is padded to T equal shards). Their ops and buffer tables are then
 * alike but for one quantity: the receive scratch of a collective on the tensor group
 * (dt_coll_scratch_floats), which depends on the member's index for some algorithms and
 * counts (a ring's reduce-scatter of n = qT + 1 floats, trees, recursive doubling on other
 * than powers of two). And the compute bound prices a rank's ops on its node group's device:
 * alike where the tensor group sits in one node group. */
#include "compile.h"
#include "dt/topology.h"

int dtc_probe_tensor_width(const struct dt_plan *plan)
{
    const struct dt_plan_options *o = &plan->opt;
    if (!dt_strategy_info(o->strategy)->pipeline || o->tp <= 1)
        return 0;
    for (int r = 0; r < plan->n_ranks; r++)
        if (dt_topology_group_of_rank(plan->topo, r) !=
            dt_topology_group_of_rank(plan->topo, r - r % o->tp))
            return 0;
    return o->tp;
}

/* Whether g is the tensor group of ranks base .. base + T - 1 (pipeline.c's order). */
static bool is_tensor_group(const struct dt_group *g, int base, int T)
{
    if (g->n != T)
        return false;
    for (int i = 0; i < T; i++)
        if (g->ranks[i] != base + i)
            return false;
    return true;
}

/* Whether two collectives on groups of one size receive alike at every member's index: the
 * same collective, algorithm, root and count (all that dt_coll_scratch_floats reads). */
bool dtc_same_scratch(const struct dt_op *a, const struct dt_op *b)
{
    return a->coll == b->coll && a->alg == b->alg && a->root == b->root &&
           a->region.count == b->region.count;
}

/* Whether each collective of ops on the tensor group of rank r (tensor rank 0) receives as
 * much at every member's index as at r's. A collective like the last one checked is not
 * checked again (a stage's tensor allreduces repeat every micro-batch). */
static bool scratch_alike(const struct dt_plan *plan, int r, const struct dt_op *ops, int n)
{
    int T = plan->probe_tensor;
    const struct dt_op *last = NULL;
    for (int i = 0; i < n; i++) {
        const struct dt_op *op = &ops[i];
        if (op->kind != DT_OP_COLL || (last && dtc_same_scratch(op, last)) ||
            !is_tensor_group(&plan->groups[op->group], r, T))
            continue;
        last = op;
        long own = dt_coll_scratch_floats(op, T, 0);
        for (int k = 1; k < T; k++)
            if (dt_coll_scratch_floats(op, T, k) != own)
                return false;
    }
    return true;
}

bool dtc_probe_tensor_alike(const struct dt_plan *plan)
{
    for (int r = 0; r < plan->n_ranks && plan->probe_tensor > 1; r++) {
        const struct dt_rank_plan *rp = &plan->ranks[r];
        if (dt_plan_dropped(plan, r))
            continue;
        if (!scratch_alike(plan, r, rp->ops, rp->n_ops) ||
            !scratch_alike(plan, r, rp->eval.ops, rp->eval.n_ops))
            return false;
    }
    return true;
}

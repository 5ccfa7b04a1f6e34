/* A pipeline probe's last replica (dt_plan.probe_replica). The D replicas of a pipeline run
 * one emission (pipeline.c) that differs only in the peers and groups it names (rank_of(s, d,
 * k): the replica's own tensor and tied groups, mirrored member for member), in the rows of
 * its batch (dt_chunk of the global batch over the replicas) and under ZeRO-1 in the chunk of
 * parameters it updates (dt_chunk: the last replica's is never larger). Where the first and
 * the last replica get the same rows, the last one's ops and buffers are then the first's or
 * smaller but for one quantity: the receive scratch of a collective on a group across the
 * replicas (dt_coll_scratch_floats), which depends on the member's index for some algorithms
 * and counts. And the compute bound prices a rank's ops on its node group's device: alike
 * where each last-replica rank sits in its first-replica rank's node group. */
#include "compile.h"
#include "dt/topology.h"

/* Replicas, and tensor ranks per stage, of a pipeline plan's options (as pipeline.c's). */
static void replica_shape(const struct dt_plan *plan, int *D, int *T)
{
    int S;
    dt_plan_shape(&plan->opt, plan->topo, T, &S, D);
}

bool dtc_probe_replica_ok(const struct dt_plan *plan)
{
    const struct dt_plan_options *o = &plan->opt;
    int D, T;
    if (!dt_strategy_info(o->strategy)->pipeline)
        return false;
    replica_shape(plan, &D, &T);
    /* weak scaling: every replica runs --batch rows; strong: the global batch in D chunks */
    if (D < 2 || (o->scaling != DT_SCALING_WEAK && o->batch % D))
        return false;
    for (int r = 0; r < plan->n_ranks; r++) /* rank_of(s, d, k) = (s D + d) T + k */
        if (r / T % D == D - 1 && dt_topology_group_of_rank(plan->topo, r) !=
                                      dt_topology_group_of_rank(plan->topo, r - (D - 1) * T))
            return false;
    return true;
}

/* Whether each collective of ops on a group holding first-replica rank r and its last
 * replica's rank receives as much at the latter's index as at r's. A collective like the
 * last one checked is not checked again (a stage's tensor collectives repeat). */
static bool scratch_alike(const struct dt_plan *plan, int r, int last, const struct dt_op *ops,
                          int n)
{
    const struct dt_op *seen = NULL;
    for (int i = 0; i < n; i++) {
        const struct dt_op *op = &ops[i];
        if (op->kind != DT_OP_COLL ||
            (seen && op->group == seen->group && dtc_same_scratch(op, seen)))
            continue;
        seen = op;
        const struct dt_group *g = &plan->groups[op->group];
        int j = dt_group_index(g, last);
        if (j >= 0 && dt_coll_scratch_floats(op, g->n, j) !=
                          dt_coll_scratch_floats(op, g->n, dt_group_index(g, r)))
            return false;
    }
    return true;
}

bool dtc_probe_replica_alike(const struct dt_plan *plan)
{
    int D, T;
    if (!plan->probe_replica)
        return true;
    replica_shape(plan, &D, &T);
    for (int r = 0; r < plan->n_ranks; r++) {
        const struct dt_rank_plan *rp = &plan->ranks[r];
        if (dt_plan_dropped(plan, r))
            continue;
        int last = r + (D - 1) * T;
        if (!scratch_alike(plan, r, last, rp->ops, rp->n_ops) ||
            !scratch_alike(plan, r, last, rp->eval.ops, rp->eval.n_ops))
            return false;
    }
    return true;
}

/* Forecast of a simulation's run time (see estimate.h). */
#include "estimate.h"

#include "dt/collective.h"

/* End-to-end simulation rate of `dtsim -s ring -m mlp-fmnist` on h100-superpod-2048n cut to
 * 512 nodes (4,096 ranks, 33.5 million flows): about 100 s on the 2-core VM the project is
 * developed on (README, "Fabrics"), so 3.3e5 flows/s. Smaller runs go faster (1,024 ranks:
 * about 6e5 flows/s), so the forecast errs long, the safe side for a warning. */
#define FLOWS_PER_S 3.3e5

/* Flows of member `me` of a collective: the sends of its first round times its rounds. */
static double coll_flows(const struct dt_op *op, int p, int me, struct dt_schedule *s)
{
    int total = 0;
    if (dt_coll_schedule_rounds(op->coll, op->alg, p, me, op->root, op->region.count, 0, 1, s,
                                &total, NULL) != DT_OK ||
        s->n_rounds < 1)
        return 0;
    int sends = 0;
    for (int x = s->round_start[0]; x < s->round_start[1]; x++)
        sends += s->xfers[x].send;
    return (double)sends * total;
}

double dt_estimate_flows(const struct dt_plan *plan)
{
    double flows = 0;
    struct dt_schedule s;
    dt_schedule_init(&s);
    for (int r = 0; r < plan->n_ranks; r++) {
        const struct dt_rank_plan *rp = &plan->ranks[r];
        for (int i = 0; i < rp->n_ops; i++)
            flows += rp->ops[i].kind == DT_OP_SEND;
    }
    /* Collectives group by group, so that each member knows its index. */
    for (int g = 0; g < plan->n_groups; g++) {
        const struct dt_group *grp = &plan->groups[g];
        for (int me = 0; me < grp->n; me++) {
            const struct dt_rank_plan *rp = &plan->ranks[grp->ranks[me]];
            for (int i = 0; i < rp->n_ops; i++)
                if (rp->ops[i].kind == DT_OP_COLL && rp->ops[i].group == g)
                    flows += coll_flows(&rp->ops[i], grp->n, me, &s);
        }
    }
    dt_schedule_free(&s);
    return flows;
}

double dt_estimate_seconds(double flows, double *rate)
{
    if (rate)
        *rate = FLOWS_PER_S;
    return flows / FLOWS_PER_S;
}

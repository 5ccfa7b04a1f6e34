/* Forecast of a simulation's run time (see estimate.h). */
#include "estimate.h"

#include "dt/collective.h"

/* End-to-end simulation rate, flows per CPU second (user + sys), measured with
 * `dtsim -s rail-ring -m resnet50-imagenet -b 32` on h100-128n-fattree with 1,024 and 2,048
 * nodes (8,192 and 16,384 ranks, 1.7e7 and 6.7e7 flows; README, "dtsim at scale", scale5) on
 * the 2-core VM the project is developed on while other jobs ran: 1.0e6 to 1.2e6 flows/s at
 * 8,192 ranks (load 16-24), 8.5e5 at 16,384 (78.8 CPU s, load 21-25); the slowest is kept.
 * A quiet machine and smaller runs go faster (2,048 ranks: about 3e6 flows/s), so the
 * forecast errs long, the safe side for a warning. It was 3.3e5 (a 4,096-rank flat ring
 * before the engine's records were made compact), which forecast 204 s for a 16,384-rank
 * rail-ring that took 51 CPU s at load 5. */
#define FLOWS_PER_S 8.5e5

/* Flows of member `me` of a collective: the sends of its first round times its rounds. */
static double coll_flows(const struct dt_op *op, int p, int me, struct dt_schedule *s)
{
    int total = 0;
    if (dt_coll_schedule_rounds(op->coll, op->alg, p, me, op->root, op->region.count, 0, 1, s,
                                &total, NULL) != DT_OK ||
        s->n_rounds < 1)
        return 0;
    int sends = 0, lo, hi;
    dt_schedule_round(s, 0, &lo, &hi);
    for (int x = lo; x < hi; x++)
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

/* One replica simulated, the replicas' allreduce in closed form (see symmetry.h). */
#include "symmetry.h"

#include <math.h>

#include "epoch.h"

bool dt_sym_applies(const struct dt_plan_options *o, const struct dt_topology *topo)
{
    const struct dt_strategy_info *info = dt_strategy_info(o->strategy);
    bool ring = !o->grad_alg_given || o->grad_alg == DT_ALG_RING || o->grad_alg == DT_ALG_LINEAR;
    int T, S, D;
    dt_plan_shape(o, topo, &T, &S, &D);
    return info->pipeline && o->strategy != DT_STRAT_NAIVE_MP && ring && o->zero <= 1 && D > 1;
}

bool dt_sym_used(const struct dt_plan_options *o, const struct dt_topology *topo)
{
    return dt_plan_ranks(o, topo) > DT_SYM_MIN_RANKS && dt_sym_applies(o, topo);
}

/* 2 (D - 1) steps of bytes / D, each at the slowest hop's bandwidth and latency. */
double dt_sym_allreduce_s(const struct dt_topology *topo, int D, int stride, double bytes)
{
    const struct dt_node_group *g = &topo->groups[0];
    bool across = (long)D * stride > g->devices;
    double bw = g->intra.bw_Bps, lat = g->intra.lat_s;
    if (across) { /* the node's NICs shared by its devices, each sending at once */
        double share = g->nics < g->devices ? (double)g->nics / g->devices : 1.0;
        bw = g->nic.bw_Bps * share;
        lat = 2 * g->nic.lat_s + (2 * topo->net.levels - 1) * topo->net.switch_lat_s;
    }
    return 2.0 * (D - 1) * (bytes / D / bw + lat);
}

int dt_sym_estimate(const struct dt_model *m, const struct dt_topology *topo,
                    const struct dt_cost_params *group_cp, const struct dt_plan_options *o,
                    struct dt_sym_result *out, struct dt_error *err)
{
    int T, S, D;
    dt_plan_shape(o, topo, &T, &S, &D);
    struct dt_plan_options one = *o;
    one.dp = 1;
    one.n_ranks = 0;
    one.zero = 0; /* one replica shards nothing; ZeRO-1's exchange is the allreduce below */
    one.batch = (int)(o->batch / D); /* strong scaling: this replica's share of the step */
    struct dt_plan *plan;
    int rc = dt_plan_build(m, topo, &one, &plan, err);
    if (rc)
        return rc;
    struct dt_memory peak;
    dt_plan_peak_memory(plan, &peak);
    struct dt_step st;
    rc = dt_step_simulate(plan, group_cp, &st, err);
    if (!rc) {
        double allreduce = dt_sym_allreduce_s(topo, D, T, peak.grads);
        *out = (struct dt_sym_result){.iter_s = fmax(st.sim_s + allreduce, st.read_s),
                                      .compute_s = st.compute_s, .comm_s = st.comm_s + allreduce,
                                      .idle_s = st.idle_s, .allreduce_s = allreduce};
    }
    dt_plan_destroy(plan);
    return rc;
}

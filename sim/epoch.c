/* Reading the training data (sim/epoch.h). */
#include "epoch.h"

#include <math.h>
#include <stdlib.h>

#include "player.h"

double dt_sample_read_bytes(const struct dt_model *m)
{
    if (m->dataset_bytes > 0 && m->dataset_samples > 0)
        return m->dataset_bytes / (double)m->dataset_samples;
    return (double)dt_shape_size(&m->input) * (m->input_is_tokens ? 4 : 1);
}

double *dt_step_node_samples(const struct dt_plan *plan)
{
    const struct dt_topology *t = plan->topo;
    double *samples = calloc((size_t)t->n_nodes, sizeof *samples);
    if (!samples)
        return NULL;
    for (int r = 0; r < plan->n_ranks; r++) {
        const struct dt_rank_plan *rp = &plan->ranks[r];
        for (int i = 0; i < rp->n_ops; i++)
            if (rp->ops[i].kind == DT_OP_LOAD)
                samples[dt_topology_node_of(t, r)] += rp->ops[i].samples;
    }
    return samples;
}

double dt_step_read_from(const struct dt_plan *plan, const double *node_samples,
                         const struct dt_cost_params *cp)
{
    const struct dt_topology *t = plan->topo;
    double worst = 0, per_sample = dt_sample_read_bytes(plan->model);
    for (int n = 0; n < t->n_nodes; n++) {
        double bw = cp->read_Bps > 0 ? cp->read_Bps
                                     : dt_topology_group_of_node(t, n)->data_read_Bps;
        if (bw > 0)
            worst = fmax(worst, node_samples[n] * per_sample / bw);
    }
    return worst;
}

double dt_step_read_s(const struct dt_plan *plan, const struct dt_cost_params *cp)
{
    double *samples = dt_step_node_samples(plan);
    if (!samples)
        return NAN;
    double s = dt_step_read_from(plan, samples, cp);
    free(samples);
    return s;
}

void dt_step_fill(const struct dt_sim_result *res, double read_s, struct dt_step *out)
{
    *out = (struct dt_step){.sim_s = res->iter_s, .read_s = read_s};
    out->iter_s = fmax(out->sim_s, out->read_s);
    for (int r = 0; r < res->n_ranks; r++) {
        out->compute_s += res->rank[r].compute_s / res->n_ranks;
        out->comm_s += res->rank[r].comm_s / res->n_ranks;
        out->idle_s += res->rank[r].idle_s / res->n_ranks;
    }
}

int dt_step_simulate(const struct dt_plan *plan, const struct dt_cost_params *group_cp,
                     struct dt_step *out, struct dt_error *err)
{
    struct dt_sim_result res;
    struct dt_sim_options so = {.group_cp = group_cp};
    int rc = dt_sim_run(plan, &group_cp[0], &so, &res, err);
    if (rc)
        return rc;
    dt_step_fill(&res, dt_step_read_s(plan, &group_cp[0]), out);
    dt_sim_result_free(&res);
    return DT_OK;
}

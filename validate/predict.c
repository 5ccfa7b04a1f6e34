/* Simulated iteration of a measured run's configuration. */
#include "predict.h"

#include <math.h>

#include "player.h"

void dtv_base_params(const struct dtv_run *run, struct dt_cost_params *cp)
{
    dt_cost_defaults(cp, run->topo->groups[0].device.kind);
}

int dtv_predict(const struct dtv_run *run, const struct dt_cost_params *cp,
                struct dtv_pred *out, struct dt_error *err)
{
    struct dt_sim_result res;
    int rc = dt_sim_run(run->plan, cp, NULL, &res, err);
    if (rc)
        return rc;
    *out = (struct dtv_pred){.iter_s = res.iter_s};
    out->epoch_s = out->epoch_lo_s = out->epoch_hi_s = res.iter_s * run->iters_per_epoch;
    for (int r = 0; r < res.n_ranks; r++) {
        out->compute_s += res.rank[r].compute_s / res.n_ranks;
        out->comm_s += res.rank[r].comm_s / res.n_ranks;
        out->idle_s += res.rank[r].idle_s / res.n_ranks;
    }
    dt_sim_result_free(&res);
    double bw = dt_cal_param_effective(cp, run->topo, DT_CAL_READ_BW);
    out->read_s = run->data_bytes > 0 && bw > 0 ? run->data_bytes / bw : NAN;
    return DT_OK;
}

static int iter_of(void *ctx, const struct dt_cost_params *cp, double *value,
                   struct dt_error *err)
{
    struct dtv_pred p;
    int rc = dtv_predict(ctx, cp, &p, err);
    *value = p.iter_s;
    return rc;
}

int dtv_predict_cal(const struct dtv_run *run, const struct dt_calibration *cal,
                    struct dtv_pred *out, struct dt_error *err)
{
    struct dt_cost_params cp;
    dtv_base_params(run, &cp);
    if (!cal)
        return dtv_predict(run, &cp, out, err);
    double v, lo, hi;
    int rc = dt_calibration_interval(cal, &cp, DT_CAL_PREDICTION, iter_of, (void *)run, &v, &lo,
                                     &hi, err);
    if (rc)
        return rc;
    dt_calibration_apply(cal, &cp);
    if ((rc = dtv_predict(run, &cp, out, err)))
        return rc;
    out->epoch_lo_s = lo * run->iters_per_epoch;
    out->epoch_hi_s = hi * run->iters_per_epoch;
    return DT_OK;
}

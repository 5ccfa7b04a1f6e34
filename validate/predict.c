/* Simulated iteration of a measured run's configuration. */
#include "predict.h"

#include <math.h>

void dtv_base_params(const struct dtv_run *run, struct dt_cost_params *cp)
{
    dt_cost_defaults(cp, run->topo->groups[0].device.kind);
    if (run->unfused_activations)
        cp->fuse_activations = false;
    cp->conv_nchw = run->conv_nchw;
}

/* The prediction from dtsim's step (the slower of the iteration and the data read). */
static void from_step(const struct dtv_run *run, const struct dt_cost_params *cp,
                      const struct dt_step *st, struct dtv_pred *out)
{
    *out = (struct dtv_pred){.iter_s = st->iter_s, .compute_s = st->compute_s,
                             .comm_s = st->comm_s, .idle_s = st->idle_s};
    out->epoch_s = out->epoch_lo_s = out->epoch_hi_s = st->iter_s * run->iters_per_epoch;
    double bw = dt_cal_param_effective(cp, run->topo, DT_CAL_READ_BW);
    out->read_s = run->data_bytes > 0 && bw > 0 ? run->data_bytes / bw : NAN;
}

int dtv_predict(const struct dtv_run *run, const struct dt_cost_params *cp,
                struct dtv_pred *out, struct dt_error *err)
{
    struct dt_step st;
    int rc = dtv_step_simulate(run->plan, cp, &st, err);
    if (!rc)
        from_step(run, cp, &st, out);
    return rc;
}

int dtv_predict_fast(const struct dtv_fast *f, const struct dt_cost_params *cp,
                     struct dtv_pred *out, struct dt_error *err)
{
    struct dt_step st;
    int rc = dtv_fast_step(f, cp, &st, NULL, err);
    if (!rc)
        from_step(f->run, cp, &st, out);
    return rc;
}

static int iter_of(void *ctx, const struct dt_cost_params *cp, double *value,
                   struct dt_error *err)
{
    struct dtv_pred p;
    int rc = dtv_predict_fast(ctx, cp, &p, err);
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
    struct dtv_fast fast;
    int rc = dtv_fast_init(&fast, run, err);
    if (rc)
        return rc;
    rc = dt_calibration_interval(cal, &cp, DT_CAL_PREDICTION, iter_of, &fast, &v, &lo, &hi,
                                 err);
    dtv_fast_free(&fast);
    if (rc)
        return rc;
    dt_calibration_apply(cal, &cp);
    if ((rc = dtv_predict(run, &cp, out, err)))
        return rc;
    out->epoch_lo_s = lo * run->iters_per_epoch;
    out->epoch_hi_s = hi * run->iters_per_epoch;
    return DT_OK;
}

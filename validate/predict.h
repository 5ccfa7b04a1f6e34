/* Predictions of measured runs by the simulator: the run's step as dtsim counts it
 * (dt_step_simulate: the plan played with given cost parameters, the slower of that and the
 * data read); epoch = iterations per epoch x step (as dtsim does). */
#ifndef DTV_PREDICT_H
#define DTV_PREDICT_H

#include "dt/calibration.h"
#include "dt/costmodel.h"
#include "fastsim.h"
#include "runs.h"

struct dtv_pred {
    double iter_s, epoch_s;
    double compute_s, comm_s, idle_s; /* mean per rank per iteration */
    double read_s;                    /* data_bytes / read bandwidth; NaN if unknown */
    double epoch_lo_s, epoch_hi_s;    /* 95% interval (= epoch_s without one) */
};

/* dt_cost_defaults for the run's device kind, activations unfused where the run's were. */
void dtv_base_params(const struct dtv_run *run, struct dt_cost_params *cp);

/* Simulates one step of run with cp. */
int dtv_predict(const struct dtv_run *run, const struct dt_cost_params *cp,
                struct dtv_pred *out, struct dt_error *err);

/* The same, cheaply, with the run prepared for many predictions (fastsim.h). */
int dtv_predict_fast(const struct dtv_fast *f, const struct dt_cost_params *cp,
                     struct dtv_pred *out, struct dt_error *err);

/* With a calibration applied to the defaults; the interval is the calibration's 95%
 * prediction interval (validate/README.md) or none when cal is NULL or has no covariance. */
int dtv_predict_cal(const struct dtv_run *run, const struct dt_calibration *cal,
                    struct dtv_pred *out, struct dt_error *err);

#endif

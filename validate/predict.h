/* Predictions of measured runs by the simulator: the run's plan played by dt_sim_run with
 * given cost parameters; epoch = iterations per epoch x iteration time (as dtsim does). */
#ifndef DTV_PREDICT_H
#define DTV_PREDICT_H

#include "dt/calibration.h"
#include "dt/costmodel.h"
#include "runs.h"

struct dtv_pred {
    double iter_s, epoch_s;
    double compute_s, comm_s, idle_s; /* mean per rank per iteration */
    double read_s;                    /* data_bytes / read bandwidth; NaN if unknown */
    double epoch_lo_s, epoch_hi_s;    /* 95% interval (= epoch_s without one) */
};

/* dt_cost_defaults for the run's device kind. */
void dtv_base_params(const struct dtv_run *run, struct dt_cost_params *cp);

/* Simulates one iteration of run with cp. */
int dtv_predict(const struct dtv_run *run, const struct dt_cost_params *cp,
                struct dtv_pred *out, struct dt_error *err);

/* With a calibration applied to the defaults; the interval is the calibration's 95%
 * prediction interval (validate/README.md) or none when cal is NULL or has no covariance. */
int dtv_predict_cal(const struct dtv_run *run, const struct dt_calibration *cal,
                    struct dtv_pred *out, struct dt_error *err);

#endif

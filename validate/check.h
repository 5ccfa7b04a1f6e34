/* Validation: predictions of runs that were not used to fit them, and the errors.
 *   DTV_MODE_CAL       a given calibration predicts every run
 *   DTV_MODE_DEFAULTS  no calibration (dtsim's defaults): how wrong the datasheet model is
 *   DTV_MODE_LOO       leave-one-out: each run predicted by a fit on all the others
 *   DTV_MODE_SPLIT     fit on the runs a selection names, predict the rest
 * Errors are (predicted - measured) / measured of the epoch time; MAPE is their mean absolute
 * value over held-out runs, per strategy and overall. The ranking check compares, for every
 * training job measured with several strategies (or parallel configs of one), the order of
 * the strategies by measured and by predicted epoch time. */
#ifndef DTV_CHECK_H
#define DTV_CHECK_H

#include <stdbool.h>
#include <stdio.h>

#include "calibrate.h"
#include "predict.h"
#include "runs.h"

enum dtv_mode { DTV_MODE_CAL, DTV_MODE_DEFAULTS, DTV_MODE_LOO, DTV_MODE_SPLIT };

struct dtv_check_item {
    int run;                /* index in the run set */
    bool held_out;          /* false: the run was in the fit (SPLIT mode) */
    struct dtv_pred pred;
    double err_pct;         /* epoch: 100 (predicted - measured) / measured */
    bool inside;            /* measured within the 95% interval */
};

struct dtv_check {
    enum dtv_mode mode;
    char what[512];         /* how the predictions were made, in words */
    int n;
    struct dtv_check_item *items;
    bool have_calib;        /* SPLIT: the fit on the training runs */
    struct dtv_calib calib;
    double mape_held, mape_fit;     /* % over held-out / fitted runs (NaN if none) */
    int n_held, n_fit;
};

/* spec NULL: dtv_fitspec_default on each training set. cal: for DTV_MODE_CAL. */
int dtv_check_run(const struct dtv_runset *set, enum dtv_mode mode, const char *train_sel,
                  const struct dtv_fitspec *spec, const struct dt_calibration *cal,
                  FILE *verbose, struct dtv_check *out, struct dt_error *err);
void dtv_check_free(struct dtv_check *c);

/* The table (or CSV with csv = true), MAPE per strategy and overall, interval coverage, the
 * plan buffers against the records' alloc_bytes (when they have them) and the ranking check:
 * per training job (model, node shape, samples per step), the strategies with their parallel
 * configs in measured and predicted order, and data parallelism against the pipelines where
 * a job was measured with both. */
void dtv_check_print(FILE *f, const struct dtv_runset *set, const struct dtv_check *c, bool csv);

#endif

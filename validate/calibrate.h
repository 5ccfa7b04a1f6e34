/* Calibration: fits cost-model parameters to measured runs, with the simulator as the model
 * function. For run i, with theta the logs of the fitted parameters,
 *
 *   r_i(theta) = iter_sim(run_i; theta) / iter_measured_i - 1
 *
 * (relative residuals: runs of 20 s and 140 s weigh alike and MAPE is what is minimised in
 * the least-squares sense). The read bandwidth, when fitted, is fitted apart on the runs that
 * measured their start-up read: r_i = (data_bytes_i / read_bw) / read_s_i - 1. Parameters the
 * runs cannot identify are dropped from the fit, kept at their defaults and named in the
 * calibration's notes. */
#ifndef DTV_CALIBRATE_H
#define DTV_CALIBRATE_H

#include <stdbool.h>
#include <stdio.h>

#include "dt/calibration.h"
#include "fit.h"
#include "runs.h"

struct dtv_fitspec {
    int n;
    enum dt_cal_param p[DT_CAL_COUNT];
};

/* "iter_overhead,eff_gemm,intra_bw" -> spec; -1 with a reason on an unknown name. */
int dtv_fitspec_parse(const char *list, struct dtv_fitspec *spec, char *why, size_t len);
/* The default: per-iteration overhead, GEMM efficiency, and intra-node bandwidth when some
 * training run has several ranks on a node, NIC bandwidth when some run spans nodes; plus the
 * read bandwidth when runs measured their read. */
void dtv_fitspec_default(const struct dtv_runset *set, const bool *use, struct dtv_fitspec *spec);

/* A calibration a fit starts from: what the fit's runs cannot tell keeps its values (e.g. a
 * framework's fit on a few rows keeps the device fit's), not dtsim's defaults. */
struct dtv_base {
    const struct dt_calibration *cal;
    const char *name;               /* in the notes and sources: "the v100 calibration" */
};

struct dtv_calib {
    const struct dtv_base *base;    /* what the fit started from; NULL: dtsim's defaults */
    struct dt_calibration cal;
    struct dtv_fit fit;             /* last fit of the simulator parameters (log space) */
    struct dtv_fitspec requested;   /* what the caller asked to fit */
    struct dtv_fitspec fitted;      /* what was finally fitted (after dropping) */
    int n_used;
    int used[4096];                 /* run indices of the fit's residuals, in order */
    bool have_read;
    struct dtv_fit read_fit;
};

/* Fits spec's parameters on the runs with use[i] (all when use is NULL). verbose (or NULL)
 * gets one line per dropped parameter. The result's fits must be freed (dtv_calib_free). */
int dtv_calibrate(const struct dtv_runset *set, const bool *use, const struct dtv_fitspec *spec,
                  FILE *verbose, struct dtv_calib *out, struct dt_error *err);

/* dtv_calibrate from base's values (NULL: dtsim's defaults); base's entries that are not
 * fitted are carried into the result with their source. */
int dtv_calibrate_on(const struct dtv_runset *set, const bool *use,
                     const struct dtv_fitspec *spec, const struct dtv_base *base, FILE *verbose,
                     struct dtv_calib *out, struct dt_error *err);
void dtv_calib_free(struct dtv_calib *c);

/* Fills a calibration's created (UTC now), host (this machine) and tool (dtvalidate, version,
 * git revision). */
void dtv_stamp(struct dt_calibration *cal);

/* Prints the fitted parameters (value, standard error, 95% CI, source), the correlations of
 * the fitted parameters, and each fitted run's residual. */
void dtv_calib_print(FILE *f, const struct dtv_runset *set, const struct dtv_calib *c);

#endif

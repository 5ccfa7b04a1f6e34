/* Op-by-op comparison of a dtexec per-op trace (`dtexec --ops-csv FILE`) with the cost model,
 * and per-class efficiencies fitted from it. The trace's ops are the plan's ops (same rank,
 * same index, same kind: compute, update, zero, loss, copy, load, send, recv, coll, wait), so
 * each measured local op has its predicted cost (dt_cost_op); a layer's forward or backward
 * and the optimizer step (the ops with a class) cost
 *   t = max(flops / (peak x eff[class]), bytes / mem_bw) + overhead[class];
 * a LOSS op is predicted 0 (the model folds it into the last layer's forward). Traces written
 * before plan v2 (no zero op, the update a compute op) do not match today's plans.
 * Per class, the medians of the measured compute ops are regressed on their FLOPs,
 *   t_i = a flops_i + b   (GSL gsl_fit_linear),
 * so that eff = 1 / (a peak) and the per-op overhead is b; standard errors come from the
 * regression's covariance (delta method for eff: se(log eff) = se(a) / a). Convolutions are
 * regressed on their FLOPs and their lowered bytes together, through the origin,
 *   t_i = a flops_i + c lowered_i   (GSL gsl_multifit_linear),
 * which also gives lower_bw = 1 / c; without an intercept, so that the calibration (which has
 * no per-class overhead to put one in) reproduces the convolutions' total time. */
#ifndef DTV_OPS_H
#define DTV_OPS_H

#include <stdio.h>

#include "dt/calibration.h"
#include "runs.h"

struct dtv_ops_class {
    int n_ops;                  /* distinct compute ops of the class in the trace */
    double measured_s, predicted_s; /* sums of the per-op medians, rank 0, one iteration */
    bool fitted;                /* a regression was possible (>= 3 ops with distinct FLOPs) */
    double eff, eff_lo, eff_hi, se_log_eff;
    double overhead_s, overhead_se;
    int dof;
    bool lower_fitted;          /* conv: lower_bw from the joint regression */
    double lower_Bps, lower_lo, lower_hi, se_log_lower;
};

struct dtv_ops_report {
    int n_rows;                 /* lines of the trace */
    int n_iters;                /* sampled iterations */
    struct dtv_ops_class cls[DT_CLASS_COUNT];
};

/* Compares the trace at path with run (the run that wrote it) under cal (NULL: defaults);
 * prints the per-op table and the per-class summary to out (may be NULL). Errors name the
 * trace's file:line:column (DT_EINPUT). */
int dtv_ops_compare(const struct dtv_run *run, const char *path,
                    const struct dt_calibration *cal, FILE *out, struct dtv_ops_report *rep,
                    struct dt_error *err);

/* Convolutions: t_i = a x_i + c low_i through the origin (x: FLOPs, low: lowered bytes, t:
 * seconds), filling eff = 1 / (a peak) and lower_Bps = 1 / c with their intervals. Returns
 * false when the ops do not determine both (fewer than 3, a singular design, or a coefficient
 * that is not positive). */
bool dtv_ops_fit_conv(const double *x, const double *low, const double *t, int n, double peak,
                      struct dtv_ops_class *out);

/* The calibration of the fitted GEMM classes (eff_conv, eff_dense, and lower_bw when the
 * convolutions determine it) from a report. */
void dtv_ops_calibration(const struct dtv_run *run, const char *path,
                         const struct dtv_ops_report *rep, struct dt_calibration *cal);

#endif

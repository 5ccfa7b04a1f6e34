/* Nonlinear least squares with GSL's trust-region solver (gsl_multifit_nlinear, Levenberg-
 * Marquardt steps, finite-difference Jacobian), and the statistics dtvalidate reports:
 *
 *   minimise  sum_i f_i(theta)^2      (f_i: the caller's residuals, already weighted)
 *   s^2       = chisq / (n - p)        (residual variance; dof = n - p)
 *   cov       = s^2 (J' J)^-1          (gsl_multifit_nlinear_covar at the solution)
 *   se_k      = sqrt(cov_kk);  95% CI = theta_k -/+ t_{0.975, dof} se_k
 *
 * A parameter the data cannot identify (a Jacobian column that is numerically a combination
 * of the others) gets cov_kk = 0 from GSL's pivoted QR; it is reported as such
 * (identified[k] = false) rather than given a meaningless error. */
#ifndef DTV_FIT_H
#define DTV_FIT_H

#include <stdbool.h>

#include "dt/error.h"

#define DTV_FIT_MAX_P 16

/* Fills f[0..n) with the residuals at theta; non-zero stops the fit (err says why). */
typedef int (*dtv_resid_fn)(const double *theta, void *ctx, double *f, struct dt_error *err);

struct dtv_fit_options {
    int max_iter;           /* default 500 */
    double xtol, gtol, ftol;/* defaults 1e-10, 1e-10, 0 */
    double h_df;            /* finite-difference step relative to |theta_k|; default 1e-6 */
};

struct dtv_fit {
    int n, p;
    double theta[DTV_FIT_MAX_P];
    double se[DTV_FIT_MAX_P];
    double lo[DTV_FIT_MAX_P], hi[DTV_FIT_MAX_P];  /* theta -/+ t95 se */
    bool identified[DTV_FIT_MAX_P];
    double jnorm[DTV_FIT_MAX_P];                  /* |column k of the Jacobian|: influence */
    double cov[DTV_FIT_MAX_P * DTV_FIT_MAX_P];    /* scaled by s^2 */
    double corr[DTV_FIT_MAX_P * DTV_FIT_MAX_P];
    double *resid;          /* n residuals at the solution (malloc'd) */
    double chisq, s2, t95;
    int dof;
    int iterations, evaluations;
    int status;             /* GSL status of the driver (0 = converged) */
    int converged_by;       /* 1: small step, 2: small gradient */
};

double dtv_t95(int dof);

/* Fits theta (p <= DTV_FIT_MAX_P, starting at theta0) to n >= p residuals. Returns DT_OK with
 * the best point found (fit->status: 0 converged, GSL_ENOPROG at a minimum to working
 * precision, GSL_EMAXITER out of iterations), DT_EINPUT when no fit was possible (err says
 * why), or the status of a failing fn. fit->resid must be released with dtv_fit_free. */
int dtv_fit_run(int n, int p, dtv_resid_fn fn, void *ctx, const double *theta0,
                const struct dtv_fit_options *opt, struct dtv_fit *fit, struct dt_error *err);
void dtv_fit_free(struct dtv_fit *fit);

#endif

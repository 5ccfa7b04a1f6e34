/* gsl_multifit_nlinear driven by a residual callback. */
#include "fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit_nlinear.h>

struct cb {
    dtv_resid_fn fn;
    void *ctx;
    int n, p;
    int rc;                 /* first failure of fn */
    struct dt_error *err;
    int evaluations;
    double *buf;            /* n residuals */
};

static int gsl_f(const gsl_vector *x, void *params, gsl_vector *f)
{
    struct cb *c = params;
    double theta[DTV_FIT_MAX_P];
    for (int k = 0; k < c->p; k++)
        theta[k] = gsl_vector_get(x, (size_t)k);
    c->evaluations++;
    /* f may be a column of the Jacobian (GSL's finite differences): stride != 1 */
    int rc = c->fn(theta, c->ctx, c->buf, c->err);
    if (rc) {
        if (!c->rc)
            c->rc = rc;
        return GSL_EBADFUNC;
    }
    for (int i = 0; i < c->n; i++) {
        if (!isfinite(c->buf[i]))
            return GSL_EBADFUNC;
        gsl_vector_set(f, (size_t)i, c->buf[i]);
    }
    return GSL_SUCCESS;
}

double dtv_t95(int dof)
{
    return dof >= 1 ? gsl_cdf_tdist_Pinv(0.975, dof) : 0;
}

int dtv_fit_run(int n, int p, dtv_resid_fn fn, void *ctx, const double *theta0,
                const struct dtv_fit_options *opt, struct dtv_fit *fit, struct dt_error *err)
{
    gsl_set_error_handler_off();
    memset(fit, 0, sizeof *fit);
    if (p < 1 || p > DTV_FIT_MAX_P)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "%d parameters to fit (1 to %d allowed)", p,
                       DTV_FIT_MAX_P);
    if (n < p)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "%d measurements cannot determine %d parameters: fit fewer parameters "
                       "(--fit) or give more runs", n, p);
    fit->n = n;
    fit->p = p;
    fit->resid = calloc((size_t)n, sizeof *fit->resid);
    if (!fit->resid)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    struct cb c = {.fn = fn, .ctx = ctx, .n = n, .p = p, .err = err, .buf = fit->resid};
    gsl_multifit_nlinear_fdf fdf = {.f = gsl_f, .df = NULL, .fvv = NULL, .n = (size_t)n,
                                    .p = (size_t)p, .params = &c};
    gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
    fp.h_df = opt && opt->h_df > 0 ? opt->h_df : 1e-6;
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &fp, (size_t)n, (size_t)p);
    gsl_vector *x = gsl_vector_alloc((size_t)p);
    gsl_matrix *covar = gsl_matrix_alloc((size_t)p, (size_t)p);
    int rc = DT_OK;
    if (!w || !x || !covar) {
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    for (int k = 0; k < p; k++)
        gsl_vector_set(x, (size_t)k, theta0[k]);
    int status = gsl_multifit_nlinear_init(x, &fdf, w);
    int info = 0;
    if (status == GSL_SUCCESS)
        status = gsl_multifit_nlinear_driver((size_t)(opt && opt->max_iter ? opt->max_iter : 500),
                                             opt && opt->xtol > 0 ? opt->xtol : 1e-10,
                                             opt && opt->gtol > 0 ? opt->gtol : 1e-10,
                                             opt && opt->ftol > 0 ? opt->ftol : 0.0, NULL, NULL,
                                             &info, w);
    fit->status = status;
    fit->converged_by = info;
    fit->iterations = (int)gsl_multifit_nlinear_niter(w);
    fit->evaluations = c.evaluations;
    if (c.rc) {
        rc = c.rc;
        goto done;
    }
    /* GSL_EMAXITER / GSL_ENOPROG: report what we have, but say it did not converge */
    if (status != GSL_SUCCESS && status != GSL_EMAXITER && status != GSL_ENOPROG) {
        rc = dt_fail(err, DT_EINPUT, NULL, 0, 0, "the fit failed: %s", gsl_strerror(status));
        goto done;
    }
    const gsl_vector *xs = gsl_multifit_nlinear_position(w);
    const gsl_vector *fs = gsl_multifit_nlinear_residual(w);
    gsl_matrix *J = gsl_multifit_nlinear_jac(w);
    gsl_multifit_nlinear_covar(J, 1e-9, covar);
    for (int k = 0; k < p; k++) {
        gsl_vector_view col = gsl_matrix_column(J, (size_t)k);
        fit->jnorm[k] = gsl_blas_dnrm2(&col.vector);
    }
    gsl_blas_ddot(fs, fs, &fit->chisq);
    fit->dof = n - p;
    fit->s2 = fit->dof > 0 ? fit->chisq / fit->dof : NAN;
    fit->t95 = dtv_t95(fit->dof);
    for (int i = 0; i < n; i++)
        fit->resid[i] = gsl_vector_get(fs, (size_t)i);
    for (int k = 0; k < p; k++) {
        fit->theta[k] = gsl_vector_get(xs, (size_t)k);
        for (int j = 0; j < p; j++)
            fit->cov[k * DTV_FIT_MAX_P + j] =
                gsl_matrix_get(covar, (size_t)k, (size_t)j) * (fit->dof > 0 ? fit->s2 : NAN);
    }
    for (int k = 0; k < p; k++) {
        double v = fit->cov[k * DTV_FIT_MAX_P + k];
        fit->identified[k] = gsl_matrix_get(covar, (size_t)k, (size_t)k) > 0;
        fit->se[k] = fit->identified[k] && v >= 0 ? sqrt(v) : NAN;
        fit->lo[k] = fit->theta[k] - fit->t95 * fit->se[k];
        fit->hi[k] = fit->theta[k] + fit->t95 * fit->se[k];
        for (int j = 0; j < p; j++) {
            double d = sqrt(fit->cov[k * DTV_FIT_MAX_P + k] * fit->cov[j * DTV_FIT_MAX_P + j]);
            fit->corr[k * DTV_FIT_MAX_P + j] = d > 0 ? fit->cov[k * DTV_FIT_MAX_P + j] / d : NAN;
        }
    }
    /* GSL_ENOPROG: no step reduces the cost any more, i.e. at a minimum to working
     * precision. GSL_EMAXITER: the best point found is kept and fit->status says it did not
     * converge (typically a parameter crawling towards 0 or infinity, which the caller then
     * finds unidentifiable). */
done:
    gsl_matrix_free(covar);
    gsl_vector_free(x);
    if (w)
        gsl_multifit_nlinear_free(w);
    return rc;
}

void dtv_fit_free(struct dtv_fit *fit)
{
    free(fit->resid);
    fit->resid = NULL;
}

/* Fitting the cost model to measured runs through the simulator. */
#include "config.h"

#include "calibrate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "predict.h"

#ifndef DT_GIT_REVISION
#define DT_GIT_REVISION "unknown"
#endif

/* Whether a and b cannot be fitted together: a tie and one of its parts. */
static bool tied_with(enum dt_cal_param a, enum dt_cal_param b)
{
    enum dt_cal_param ta = dt_cal_param_tie(a), tb = dt_cal_param_tie(b);
    return a != b && ta == tb && (ta == a || tb == b);
}

int dtv_fitspec_parse(const char *list, struct dtv_fitspec *spec, char *why, size_t len)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    spec->n = 0;
    for (char *save, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        int p = dt_cal_param_parse(t);
        if (p < 0) {
            size_t o = (size_t)snprintf(why, len, "unknown parameter '%s' (known:", t);
            for (int i = 0; i < DT_CAL_COUNT && o < len; i++)
                o += (size_t)snprintf(why + o, len - o, " %s", dt_cal_param_name(i));
            if (o < len)
                snprintf(why + o, len - o, ")");
            return -1;
        }
        for (int i = 0; i < spec->n; i++)
            if ((int)spec->p[i] == p) {
                snprintf(why, len, "parameter '%s' given twice", t);
                return -1;
            }
        for (int i = 0; i < spec->n; i++)
            if (tied_with(spec->p[i], (enum dt_cal_param)p)) {
                const char *tie = (int)dt_cal_param_tie(p) == p ? t : dt_cal_param_name(spec->p[i]);
                snprintf(why, len, "%s ties the conv and dense efficiencies: fit either %s "
                         "or the two apart", tie, tie);
                return -1;
            }
        spec->p[spec->n++] = (enum dt_cal_param)p;
    }
    if (!spec->n) {
        snprintf(why, len, "no parameter named");
        return -1;
    }
    return 0;
}

void dtv_fitspec_default(const struct dtv_runset *set, const bool *use, struct dtv_fitspec *spec)
{
    bool intra = false, inter = false, read = false;
    for (int i = 0; i < set->n; i++) {
        const struct dtv_run *r = &set->runs[i];
        if (use && !use[i])
            continue;
        intra = intra || (r->ranks > 1 && r->ppn > 1);
        inter = inter || r->nodes > 1;
        read = read || (isfinite(r->read_s) && r->data_bytes > 0);
    }
    spec->n = 0;
    spec->p[spec->n++] = DT_CAL_ITER_OVERHEAD;
    spec->p[spec->n++] = DT_CAL_EFF_GEMM;
    if (intra)
        spec->p[spec->n++] = DT_CAL_INTRA_BW;
    if (inter)
        spec->p[spec->n++] = DT_CAL_NIC_BW;
    if (read)
        spec->p[spec->n++] = DT_CAL_READ_BW;
}

/* Parameters a fit drove out of their range, held at the range's nearest value. */
struct pins {
    int n;
    enum dt_cal_param p[DTV_FIT_MAX_P];
    double v[DTV_FIT_MAX_P], driven[DTV_FIT_MAX_P]; /* held at v; the fit's value */
};

struct fitctx {
    const struct dtv_runset *set;
    const int *used;
    const struct dtv_fast *fast;    /* used[i]'s run prepared for many predictions */
    int n;
    const struct dtv_fitspec *spec;
    const struct pins *pins;
    const struct dtv_base *base;
};

/* dtsim's defaults for the run's device, then base's values. */
static void start_params(const struct dtv_run *run, const struct dtv_base *base,
                         struct dt_cost_params *cp)
{
    dtv_base_params(run, cp);
    if (base)
        dt_calibration_apply(base->cal, cp);
}

static void params_at(const struct dtv_run *run, const struct fitctx *c, const double *theta,
                      struct dt_cost_params *cp)
{
    const struct dtv_fitspec *spec = c->spec;
    start_params(run, c->base, cp);
    for (int k = 0; c->pins && k < c->pins->n; k++)
        dt_cal_param_set(cp, c->pins->p[k], c->pins->v[k]);
    for (int k = 0; k < spec->n; k++)
        dt_cal_param_set(cp, spec->p[k], exp(fmax(fmin(theta[k], 700), -700)));
}

static int sim_resid(const double *theta, void *ctx, double *f, struct dt_error *err)
{
    const struct fitctx *c = ctx;
    for (int i = 0; i < c->n; i++) {
        const struct dtv_run *run = &c->set->runs[c->used[i]];
        struct dt_cost_params cp;
        params_at(run, c, theta, &cp);
        struct dtv_pred p;
        int rc = dtv_predict_fast(&c->fast[i], &cp, &p, err);
        if (rc)
            return rc;
        f[i] = p.iter_s / run->iter_s - 1;
    }
    return DT_OK;
}

static int read_resid(const double *theta, void *ctx, double *f, struct dt_error *err)
{
    const struct fitctx *c = ctx;
    double bw = exp(fmax(fmin(theta[0], 700), -700));
    for (int i = 0; i < c->n; i++) {
        const struct dtv_run *run = &c->set->runs[c->used[i]];
        f[i] = run->data_bytes / bw / run->read_s - 1;
    }
    return DT_OK;
}

/* A starting point: the defaults; the per-iteration overhead starts at the smallest gap
 * between measured and simulated iterations (it is additive), so that the solver does not
 * have to travel ten orders of magnitude. */
static int start_point(const struct dtv_runset *set, const int *used,
                       const struct dtv_fast *fast, int n, const struct dtv_fitspec *spec,
                       const struct dtv_base *base, double *theta, struct dt_error *err)
{
    const struct dtv_run *r0 = &set->runs[used[0]];
    struct dt_cost_params cp;
    start_params(r0, base, &cp);
    double gap = INFINITY;
    for (int i = 0; i < n; i++) {
        const struct dtv_run *run = &set->runs[used[i]];
        struct dt_cost_params c2;
        start_params(run, base, &c2);
        struct dtv_pred p;
        int rc = dtv_predict_fast(&fast[i], &c2, &p, err);
        if (rc)
            return rc;
        gap = fmin(gap, run->iter_s - p.iter_s);
    }
    for (int k = 0; k < spec->n; k++) {
        double v = dt_cal_param_effective(&cp, r0->topo, spec->p[k]);
        if (spec->p[k] == DT_CAL_ITER_OVERHEAD && gap > v)
            v = gap;
        /* its default is where contention starts (a kink): start inside, where it acts */
        if (spec->p[k] == DT_CAL_NODE_MEM_BW)
            v *= 0.8;
        /* unset, a libm evaluation costs some nanoseconds on a CPU core */
        if (!(v > 0) && (spec->p[k] == DT_CAL_EXP_TIME || spec->p[k] == DT_CAL_TANH_TIME))
            v = 5e-9;
        if (!(v > 0))
            v = dt_cal_param_kind(spec->p[k]) == DT_CAL_BANDWIDTH ? 1e9
                : dt_cal_param_kind(spec->p[k]) == DT_CAL_TIME    ? 1e-6
                                                                  : 0.1;
        theta[k] = log(v);
    }
    return DT_OK;
}

static void utc_now(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tmv;
    gmtime_r(&t, &tmv);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tmv);
}

void dtv_stamp(struct dt_calibration *cal)
{
    utc_now(cal->created, sizeof cal->created);
    if (gethostname(cal->host, sizeof cal->host) != 0)
        snprintf(cal->host, sizeof cal->host, "unknown");
    cal->host[sizeof cal->host - 1] = '\0';
    snprintf(cal->tool, sizeof cal->tool, "dtvalidate %s (git %s)", PACKAGE_VERSION,
             DT_GIT_REVISION);
}

static void append(char *buf, size_t len, const char *fmt, const char *s)
{
    size_t o = strlen(buf);
    if (o < len)
        snprintf(buf + o, len - o, fmt, s);
}

/* Which runs of which file, measured where and when. */
static void record_data(struct dt_calibration *cal, const struct dtv_runset *set,
                        const int *used, int n)
{
    for (int i = 0; i < n; i++) {
        const struct dtv_run *r = &set->runs[used[i]];
        struct dt_cal_data *d = NULL;
        for (int j = 0; j < cal->n_data; j++)
            if (strcmp(cal->data[j].file, r->file) == 0)
                d = &cal->data[j];
        if (!d) {
            if (cal->n_data == DT_CAL_MAX_DATA)
                continue;
            d = &cal->data[cal->n_data++];
            memset(d, 0, sizeof *d);
            snprintf(d->file, sizeof d->file, "%s", r->file);
        }
        char item[160];
        snprintf(item, sizeof item, "%sline %d %.120s", d->rows[0] ? "; " : "", r->line,
                 r->label);
        append(d->rows, sizeof d->rows, "%s", item);
        if (r->host[0] && !strstr(d->host, r->host)) {
            if (d->host[0])
                append(d->host, sizeof d->host, "%s", "; ");
            append(d->host, sizeof d->host, "%s", r->host);
        }
        if (r->when[0] && !strstr(d->when, r->when)) {
            if (!d->when[0])
                snprintf(d->when, sizeof d->when, "%s", r->when);
            else if (!strstr(d->when, " .. "))
                append(d->when, sizeof d->when, " .. %.25s", r->when);
            else { /* keep the first, replace the last */
                char *dots = strstr(d->when, " .. ");
                snprintf(dots + 4, sizeof d->when - (size_t)(dots + 4 - d->when), "%s",
                         r->when);
            }
        }
    }
}

static void remove_param(struct dtv_fitspec *spec, int k)
{
    for (int j = k; j + 1 < spec->n; j++)
        spec->p[j] = spec->p[j + 1];
    spec->n--;
}

/* The fitted parameter farthest out of its range (in log distance), or -1. */
static int out_of_range(const struct dtv_fitspec *sim, const struct dtv_fit *F)
{
    int worst = -1;
    double far = 0;
    for (int k = 0; k < sim->n; k++) {
        double v = exp(F->theta[k]), c = dt_cal_param_clamp(sim->p[k], v);
        double d = c > 0 ? fabs(log(v / c)) : INFINITY;
        if (c != v && d > far)
            worst = k, far = d;
    }
    return worst;
}

/* Fits sim's parameters (pins held); of those the pivoted QR finds dependent on the others,
 * drops the one the runs depend on least (smallest Jacobian column) and fits again. */
static int fit_identifiable(const struct dtv_runset *set, const struct dtv_fast *fast,
                            struct dtv_calib *out, struct dtv_fitspec *sim,
                            const struct pins *pins, char *dropped, size_t dropped_len,
                            FILE *verbose, struct dt_error *err)
{
    const int n = out->n_used;
    while (sim->n > 0) {
        double theta0[DTV_FIT_MAX_P];
        int rc = start_point(set, out->used, fast, n, sim, out->base, theta0, err);
        if (rc)
            return rc;
        struct fitctx ctx = {set, out->used, fast, n, sim, pins, out->base};
        dtv_fit_free(&out->fit);
        if ((rc = dtv_fit_run(n, sim->n, sim_resid, &ctx, theta0, NULL, &out->fit, err)))
            return rc;
        int bad = -1;
        for (int k = 0; k < sim->n; k++)
            if (!out->fit.identified[k] && (bad < 0 || out->fit.jnorm[k] < out->fit.jnorm[bad]))
                bad = k;
        if (bad < 0)
            return DT_OK;
        if (verbose)
            fprintf(verbose, "dtvalidate: %s is not identifiable from these %d runs (the fit "
                             "took it to %.3g, where they no longer depend on it): kept at "
                             "%.80s%s, fitting the others again\n",
                    dt_cal_param_name(sim->p[bad]), n, exp(out->fit.theta[bad]),
                    out->base ? out->base->name : "its default", out->base ? "'s value" : "");
        append(dropped, dropped_len, "%s", dropped[0] ? ", " : "");
        append(dropped, dropped_len, "%s", dt_cal_param_name(sim->p[bad]));
        remove_param(sim, bad);
    }
    return DT_OK;
}

/* Fits sim's parameters on out's runs; one driven out of its range is held at the range's
 * nearest value (pins) and the others fitted again. Each run is prepared once for the fit's
 * many predictions (fastsim.h). */
static int fit_in_range(const struct dtv_runset *set, struct dtv_calib *out,
                        struct dtv_fitspec *sim, struct pins *pins, char *dropped,
                        size_t dropped_len, FILE *verbose, struct dt_error *err)
{
    struct dtv_fast *fast = calloc((size_t)out->n_used, sizeof *fast);
    if (!fast)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    int rc = DT_OK, ready = 0;
    while (!rc && ready < out->n_used)
        if (!(rc = dtv_fast_init(&fast[ready], &set->runs[out->used[ready]], err)))
            ready++;
    while (!rc) {
        if ((rc = fit_identifiable(set, fast, out, sim, pins, dropped, dropped_len, verbose,
                                   err)))
            break;
        int k = out_of_range(sim, &out->fit);
        if (k < 0)
            break;
        double v = exp(out->fit.theta[k]);
        pins->p[pins->n] = sim->p[k];
        pins->driven[pins->n] = v;
        pins->v[pins->n++] = dt_cal_param_clamp(sim->p[k], v);
        if (verbose)
            fprintf(verbose, "dtvalidate: the fit took %s to %.3g, out of its range: held at "
                             "%.3g, fitting the others again\n",
                    dt_cal_param_name(sim->p[k]), v, pins->v[pins->n - 1]);
        remove_param(sim, k);
    }
    while (ready > 0)
        dtv_fast_free(&fast[--ready]);
    free(fast);
    return rc;
}

/* base's entries the fit left alone, with where they came from. A conv or dense part
 * (eff_conv_half) whose tie the fit set (eff_gemm_half) is not one of them: the fit set both
 * parts over the base's, and dt_calibration_apply lets a part win over its tie. */
static void carry_base(struct dt_calibration *cal, const struct dtv_base *base)
{
    for (int i = 0; base && i < base->cal->n_entries; i++) {
        const struct dt_cal_entry *b = &base->cal->entry[i];
        enum dt_cal_param tie = dt_cal_param_tie(b->param);
        if (dt_calibration_find(cal, b->param) ||
            (tie != b->param && dt_calibration_find(cal, tie)))
            continue;
        struct dt_cal_entry *e = dt_calibration_set(cal, b->param, b->value);
        snprintf(e->source, sizeof e->source, "kept from %.60s: %.180s", base->name, b->source);
    }
}

int dtv_calibrate(const struct dtv_runset *set, const bool *use, const struct dtv_fitspec *spec,
                  FILE *verbose, struct dtv_calib *out, struct dt_error *err)
{
    return dtv_calibrate_on(set, use, spec, NULL, verbose, out, err);
}

int dtv_calibrate_on(const struct dtv_runset *set, const bool *use,
                     const struct dtv_fitspec *spec, const struct dtv_base *base, FILE *verbose,
                     struct dtv_calib *out, struct dt_error *err)
{
    memset(out, 0, sizeof *out);
    out->base = base;
    dt_calibration_init(&out->cal);
    struct dt_calibration *cal = &out->cal;
    int n = 0, n_read = 0;
    int read_used[4096];
    for (int i = 0; i < set->n && n < 4096; i++) {
        if (use && !use[i])
            continue;
        out->used[n++] = i;
        const struct dtv_run *r = &set->runs[i];
        if (isfinite(r->read_s) && r->read_s > 0 && r->data_bytes > 0)
            read_used[n_read++] = i;
    }
    out->n_used = n;
    out->requested = *spec;
    if (n == 0)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "no runs to fit");
    /* The simulator's parameters, and the read bandwidth apart. */
    struct dtv_fitspec sim = {0};
    bool want_read = false;
    for (int k = 0; k < spec->n; k++) {
        if (spec->p[k] == DT_CAL_READ_BW)
            want_read = true;
        else
            sim.p[sim.n++] = spec->p[k];
    }
    char dropped[1024] = "";
    struct pins pins = {0};
    int rc = fit_in_range(set, out, &sim, &pins, dropped, sizeof dropped, verbose, err);
    if (rc)
        return rc;
    out->fitted = sim;
    if (sim.n == 0)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "no parameter is identifiable from these "
                       "runs (dropped: %s)", dropped);
    const struct dtv_fit *F = &out->fit;
    /* fill the calibration */
    for (int i = 0; i < n; i++)
        dt_calibration_add_device(cal, &set->runs[out->used[i]].topo->groups[0].device);
    dtv_stamp(cal);
    snprintf(cal->method, sizeof cal->method,
             "nonlinear least squares (GSL gsl_multifit_nlinear, trust region, LM, finite-"
             "difference Jacobian) of log-parameters; residuals: simulated/measured iteration "
             "time - 1; model: dtsim's plan player; covariance s^2 (J'J)^-1; CI: "
             "exp(log value -/+ t95 se)");
    record_data(cal, set, out->used, n);
    cal->n_obs = n;
    cal->dof = F->dof;
    cal->resid_sd = F->dof > 0 ? sqrt(F->s2) : 0;
    cal->t95 = F->t95;
    double mape = 0;
    for (int i = 0; i < n; i++)
        mape += fabs(F->resid[i]);
    cal->mape_pct = 100 * mape / n;
    for (int k = 0; k < sim.n; k++) {
        double v = exp(F->theta[k]);
        struct dt_cal_entry *e = dt_calibration_set(cal, sim.p[k], v);
        e->fitted = F->dof > 0;
        e->se = F->dof > 0 ? v * F->se[k] : 0; /* delta method: se(x) = x se(log x) */
        e->lo = F->dof > 0 ? exp(F->lo[k]) : v;
        e->hi = F->dof > 0 ? exp(F->hi[k]) : v;
        snprintf(e->source, sizeof e->source, "fitted to the epoch times of %d run%s (%.180s)", n,
                 n > 1 ? "s" : "", cal->data[0].file);
        if (F->dof > 0) {
            cal->cov_param[cal->n_cov] = sim.p[k];
            cal->n_cov++;
        }
    }
    for (int k = 0; k < pins.n; k++) {
        struct dt_cal_entry *e = dt_calibration_set(cal, pins.p[k], pins.v[k]);
        snprintf(e->source, sizeof e->source, "held at the end of its range: fitted to the "
                 "epoch times of %d runs, it went to %.4g", n, pins.driven[k]);
    }
    for (int i = 0; i < cal->n_cov; i++)
        for (int j = 0; j < cal->n_cov; j++)
            cal->cov[i * DT_CAL_COUNT + j] = F->cov[i * DTV_FIT_MAX_P + j];
    carry_base(cal, base);
    /* read bandwidth: its own one-parameter fit */
    if (want_read && n_read > 0) {
        struct dtv_fitspec rs = {1, {DT_CAL_READ_BW}};
        struct fitctx ctx = {set, read_used, NULL, n_read, &rs, NULL, NULL};
        double bw0 = 0;
        for (int i = 0; i < n_read; i++)
            bw0 += set->runs[read_used[i]].data_bytes / set->runs[read_used[i]].read_s / n_read;
        double theta0 = log(bw0);
        if ((rc = dtv_fit_run(n_read, 1, read_resid, &ctx, &theta0, NULL, &out->read_fit, err)))
            return rc;
        out->have_read = true;
        const struct dtv_fit *R = &out->read_fit;
        double v = exp(R->theta[0]);
        struct dt_cal_entry *e = dt_calibration_set(cal, DT_CAL_READ_BW, v);
        e->fitted = R->dof > 0;
        e->se = R->dof > 0 ? v * R->se[0] : 0;
        e->lo = R->dof > 0 ? exp(R->lo[0]) : v;
        e->hi = R->dof > 0 ? exp(R->hi[0]) : v;
        snprintf(e->source, sizeof e->source, "fitted apart to the start-up read times of %d "
                 "run%s (bytes read / read_s)", n_read, n_read > 1 ? "s" : "");
        if (R->dof > 0 && cal->n_cov > 0) {
            /* block diagonal: the read fit is independent of the iteration fit */
            int m = cal->n_cov++;
            cal->cov_param[m] = DT_CAL_READ_BW;
            for (int j = 0; j < m; j++)
                cal->cov[m * DT_CAL_COUNT + j] = cal->cov[j * DT_CAL_COUNT + m] = 0;
            cal->cov[m * DT_CAL_COUNT + m] = R->cov[0];
        }
    } else if (want_read && verbose) {
        fprintf(verbose, "dtvalidate: read_bw not fitted: no run measured its read with a "
                         "known size\n");
    }
    /* what the predictions rest on besides the fitted values */
    char notes[2048] = "";
    snprintf(notes, sizeof notes, "Fitted: ");
    for (int k = 0; k < sim.n; k++)
        append(notes, sizeof notes, "%s ", dt_cal_param_name(sim.p[k]));
    if (out->have_read)
        append(notes, sizeof notes, "%s ", "read_bw");
    if (base)
        append(notes, sizeof notes, "(the rest keep the values of %.100s", base->name);
    else
        append(notes, sizeof notes, "%s", "(the rest keep dtsim's defaults for the device kind "
                                          "and the topology's datasheet values");
    if (dropped[0]) {
        append(notes, sizeof notes, "%s", "; not identifiable from these runs, so kept at "
                                          "those values: ");
        append(notes, sizeof notes, "%s", dropped);
    }
    append(notes, sizeof notes, "%s", ").");
    for (int k = 0; k < pins.n; k++) {
        char w[240];
        bool eff = dt_cal_param_kind(pins.p[k]) == DT_CAL_FRACTION && pins.driven[k] > 1;
        snprintf(w, sizeof w, " The fit took %s to %.4g, out of its range%s: held at %.4g, the "
                 "others fitted again.", dt_cal_param_name(pins.p[k]), pins.driven[k],
                 eff ? " (above 1: the device's peak is set too low, e.g. from a nominal clock "
                       "below the one it runs at)" : "", pins.v[k]);
        append(notes, sizeof notes, "%s", w);
    }
    for (int k = 0; k < sim.n && F->dof > 0; k++) {
        /* a 95% interval wider than a factor 100: the value is barely constrained */
        if (F->hi[k] - F->lo[k] > log(100.0)) {
            char w[200];
            snprintf(w, sizeof w, " %s is barely constrained (its 95%% interval spans a factor "
                     "%.3g).", dt_cal_param_name(sim.p[k]), exp(F->hi[k] - F->lo[k]));
            append(notes, sizeof notes, "%s", w);
        }
    }
    if (F->dof == 0)
        append(notes, sizeof notes, "%s", " As many parameters as runs: no interval.");
    if (F->status == GSL_EMAXITER) {
        append(notes, sizeof notes, "%s", " The solver ran out of iterations: the values are "
                                          "the best point found, not a converged minimum.");
        if (verbose)
            fprintf(verbose, "dtvalidate: warning: the fit did not converge in %d iterations; "
                             "using the best point found\n", F->iterations);
    }
    snprintf(cal->notes, sizeof cal->notes, "%s", notes);
    return DT_OK;
}

void dtv_calib_free(struct dtv_calib *c)
{
    dtv_fit_free(&c->fit);
    dtv_fit_free(&c->read_fit);
}

static void fmt(char *buf, size_t len, enum dt_cal_param p, double v)
{
    if (!isfinite(v)) {
        snprintf(buf, len, "-");
        return;
    }
    switch (dt_cal_param_kind(p)) {
    case DT_CAL_FRACTION: snprintf(buf, len, "%.4g", v); break;
    case DT_CAL_TIME: dt_format_quantity(v, DT_UNIT_TIME, buf, len); break;
    case DT_CAL_BANDWIDTH: dt_format_quantity(v, DT_UNIT_BANDWIDTH, buf, len); break;
    }
}

void dtv_calib_print(FILE *f, const struct dtv_runset *set, const struct dtv_calib *c)
{
    const struct dt_calibration *cal = &c->cal;
    fprintf(f, "Fit: %d runs, %d parameters, %d degrees of freedom, %d iterations; residual SD "
               "%.2f%%, MAPE %.2f%% (fitted runs), t95 = %.3g\n",
            cal->n_obs, c->fitted.n, cal->dof, c->fit.iterations, 100 * cal->resid_sd,
            cal->mape_pct, cal->t95);
    fprintf(f, "%-14s %14s %14s %30s  %s\n", "parameter", "value", "std. error",
            "95% confidence interval", "description");
    for (int i = 0; i < cal->n_entries; i++) {
        const struct dt_cal_entry *e = &cal->entry[i];
        char v[32], s[32], lo[32], hi[32], ci[80];
        fmt(v, sizeof v, e->param, e->value);
        fmt(s, sizeof s, e->param, e->fitted ? e->se : NAN);
        fmt(lo, sizeof lo, e->param, e->lo);
        fmt(hi, sizeof hi, e->param, e->hi);
        snprintf(ci, sizeof ci, e->fitted ? "[%s, %s]" : "-", lo, hi);
        fprintf(f, "%-14s %14s %14s %30s  %s\n", dt_cal_param_name(e->param), v, s, ci,
                dt_cal_param_description(e->param));
    }
    if (c->fitted.n > 1 && c->fit.dof > 0) {
        fprintf(f, "Correlations of the fitted log-parameters:\n%-14s", "");
        for (int j = 0; j < c->fitted.n; j++)
            fprintf(f, " %14s", dt_cal_param_name(c->fitted.p[j]));
        fputc('\n', f);
        for (int k = 0; k < c->fitted.n; k++) {
            fprintf(f, "%-14s", dt_cal_param_name(c->fitted.p[k]));
            for (int j = 0; j < c->fitted.n; j++)
                fprintf(f, " %14.3f", c->fit.corr[k * DTV_FIT_MAX_P + j]);
            fputc('\n', f);
        }
    }
    fprintf(f, "Residuals of the fitted runs (simulated / measured - 1):\n");
    int w = dtv_label_width(set);
    fprintf(f, "  %-*s %12s %12s %9s\n", w, "run", "measured", "simulated", "resid %");
    for (int i = 0; i < c->n_used; i++) {
        const struct dtv_run *r = &set->runs[c->used[i]];
        double m = r->iter_s * r->iters_per_epoch;
        fprintf(f, "  %-*.*s %11.4gs %11.4gs %+9.2f\n", w, w, r->label, m,
                m * (1 + c->fit.resid[i]), 100 * c->fit.resid[i]);
    }
    if (c->have_read) {
        fprintf(f, "Read-time residuals (data bytes / read_bw vs read_s):\n");
        int j = 0;
        for (int i = 0; i < set->n; i++) {
            const struct dtv_run *r = &set->runs[i];
            bool used = false;
            for (int u = 0; u < c->n_used; u++)
                used = used || c->used[u] == i;
            if (!used || !(isfinite(r->read_s) && r->read_s > 0 && r->data_bytes > 0))
                continue;
            fprintf(f, "  %-*.*s %11.4gs %11.4gs %+9.2f\n", w, w, r->label, r->read_s,
                    r->read_s * (1 + c->read_fit.resid[j]), 100 * c->read_fit.resid[j]);
            j++;
        }
    }
    /* what the predictions rest on besides the fitted values */
    const struct dtv_run *r0 = c->n_used ? &set->runs[c->used[0]] : NULL;
    bool any = false;
    for (int k = 0; k < c->requested.n && r0; k++) {
        enum dt_cal_param p = c->requested.p[k];
        if (dt_calibration_find(cal, p))
            continue;
        struct dt_cost_params cp;
        dtv_base_params(r0, &cp);
        char v[32];
        fmt(v, sizeof v, p, dt_cal_param_effective(&cp, r0->topo, p));
        fprintf(f, "%s%s = %s", any ? ", " : "Kept at their defaults (not identifiable): ",
                dt_cal_param_name(p), v);
        any = true;
    }
    if (any)
        fprintf(f, " (dtsim's %s defaults and %s's datasheet values)\n", cal->device,
                r0->topo->name);
    if (cal->notes[0])
        fprintf(f, "Notes: %s\n", cal->notes);
}

/* Per-op traces against the cost model. */
#include "ops.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_fit.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "calibrate.h"
#include "fit.h"
#include "predict.h"

struct samples {
    int n, cap;
    double *v;
};

static int push(struct samples *s, double v)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        double *p = realloc(s->v, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = v;
    return 0;
}

static double median(struct samples *s)
{
    if (!s->n)
        return NAN;
    gsl_sort(s->v, 1, (size_t)s->n);
    return gsl_stats_median_from_sorted_data(s->v, 1, (size_t)s->n);
}

/* Ops with a class: a layer's forward or backward (COMPUTE) and the optimizer step (UPDATE). */
static bool has_class(const struct dt_op *op)
{
    return op->kind == DT_OP_COMPUTE || op->kind == DT_OP_UPDATE;
}

static enum dt_op_class class_of(const struct dt_model *m, const struct dt_op *op)
{
    return op->kind == DT_OP_UPDATE ? DT_CLASS_UPDATE : dt_layer_class(m->layers[op->layer].kind);
}

/* Local ops: the device runs them (dt_cost_op); communication and WAIT are the network's. */
static bool is_local(const struct dt_op *op)
{
    return op->kind == DT_OP_COMPUTE || op->kind == DT_OP_UPDATE || op->kind == DT_OP_LOAD ||
           op->kind == DT_OP_ZERO || op->kind == DT_OP_LOSS || op->kind == DT_OP_COPY;
}

static int find_col(char **f, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(f[i], name) == 0)
            return i;
    return -1;
}

/* Reads the trace into per-(rank, op) samples of durations. */
static int read_trace(const struct dtv_run *run, const char *path, struct samples **per_rank,
                      struct dtv_ops_report *rep, struct dt_error *err)
{
    FILE *f = dtv_open_input(path, "a per-op trace (dtexec --ops-csv)", err);
    if (!f)
        return DT_EINPUT;
    const struct dt_plan *plan = run->plan;
    char line[4096], *fl[64];
    int cols[64], lineno = 0, rc = DT_OK, c_rank = -1, c_op = -1, c_kind = -1, c_dur = -1,
        c_iter = -1, c_name = -1, n_cols = 0;
    long max_iter = -1, min_iter = -1;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = dt_fail(err, DT_EINPUT, path, lineno, 0, "line longer than %zu bytes",
                         sizeof line - 2);
            break;
        }
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0])
            continue;
        int bad = 0, n = dtv_split_csv(line, fl, cols, 64, &bad);
        if (n < 0) {
            rc = dt_fail(err, DT_EINPUT, path, lineno, bad, "%s", dtv_csv_why(n));
            break;
        }
        if (lineno == 1) {
            c_rank = find_col(fl, n, "rank");
            c_op = find_col(fl, n, "op");
            c_kind = find_col(fl, n, "kind");
            c_dur = find_col(fl, n, "duration_s");
            c_iter = find_col(fl, n, "iteration");
            c_name = find_col(fl, n, "name");
            n_cols = n;
            if (c_rank < 0 || c_op < 0 || c_kind < 0 || c_dur < 0 || c_iter < 0)
                rc = dt_fail(err, DT_EINPUT, path, 1, 1,
                             "not a dtexec per-op trace: the header needs rank, iteration, op, "
                             "kind and duration_s");
            continue;
        }
        if (n != n_cols) {
            rc = dt_fail(err, DT_EINPUT, path, lineno, 1, "%d fields where the header has %d",
                         n, n_cols);
            break;
        }
        char *end;
        long rank = strtol(fl[c_rank], &end, 10);
        if (*end || end == fl[c_rank] || rank < 0 || rank >= plan->n_ranks) {
            rc = dt_fail(err, DT_EINPUT, path, lineno, cols[c_rank],
                         "rank '%s' is not one of the run's %d ranks", fl[c_rank],
                         plan->n_ranks);
            break;
        }
        const struct dt_rank_plan *rp = &plan->ranks[rank];
        long op = strtol(fl[c_op], &end, 10);
        if (*end || end == fl[c_op] || op < 0 || op >= rp->n_ops) {
            rc = dt_fail(err, DT_EINPUT, path, lineno, cols[c_op],
                         "op '%s' is not one of rank %ld's %d ops: the trace is of another run",
                         fl[c_op], rank, rp->n_ops);
            break;
        }
        int kind = rp->ops[op].kind;
        if (strcmp(fl[c_kind], dt_op_kind_name(kind)) != 0) {
            rc = dt_fail(err, DT_EINPUT, path, lineno, cols[c_kind],
                         "op %ld of rank %ld is a %s op in the run's plan, the trace says '%s': "
                         "the trace is of another run", op, rank, dt_op_kind_name(kind), fl[c_kind]);
            break;
        }
        char buf[160];
        const char *want = dt_op_name(plan, &rp->ops[op], buf, sizeof buf);
        if (c_name >= 0 && strcmp(fl[c_name], want) != 0) {
            rc = dt_fail(err, DT_EINPUT, path, lineno, cols[c_name],
                         "op %ld of rank %ld is '%s' in the run's plan, the trace says '%s': the "
                         "trace is of another run", op, rank, want, fl[c_name]);
            break;
        }
        errno = 0;
        double d = strtod(fl[c_dur], &end);
        if (*end || end == fl[c_dur] || errno || !isfinite(d) || d < 0) {
            rc = dt_fail(err, DT_EINPUT, path, lineno, cols[c_dur],
                         "duration_s: expected a number of seconds >= 0, found '%s'", fl[c_dur]);
            break;
        }
        long it = strtol(fl[c_iter], &end, 10);
        if (*end || end == fl[c_iter] || it < 0) {
            rc = dt_fail(err, DT_EINPUT, path, lineno, cols[c_iter],
                         "iteration: expected a whole number >= 0, found '%s'", fl[c_iter]);
            break;
        }
        if (max_iter < 0 || it > max_iter)
            max_iter = it;
        if (min_iter < 0 || it < min_iter)
            min_iter = it;
        if (push(&per_rank[rank][op], d)) {
            rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
            break;
        }
        rep->n_rows++;
    }
    fclose(f);
    if (!rc && rep->n_rows == 0)
        rc = dt_fail(err, DT_EINPUT, path, 0, 0, "no ops in the trace");
    rep->n_iters = rc ? 0 : (int)(max_iter - min_iter + 1);
    return rc;
}

bool dtv_ops_fit_conv(const double *x, const double *low, const double *y, int n, double peak,
                      struct dtv_ops_class *out)
{
    if (n < 3)
        return false;
    gsl_matrix *X = gsl_matrix_alloc((size_t)n, 2), *cov = gsl_matrix_alloc(2, 2);
    gsl_vector *Y = gsl_vector_alloc((size_t)n), *c = gsl_vector_alloc(2);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc((size_t)n, 2);
    bool ok = false;
    if (X && cov && Y && c && w) {
        for (int i = 0; i < n; i++) {
            gsl_matrix_set(X, (size_t)i, 0, x[i]);
            gsl_matrix_set(X, (size_t)i, 1, low[i]);
            gsl_vector_set(Y, (size_t)i, y[i]);
        }
        size_t rank;
        double chisq;
        ok = !gsl_multifit_linear_tsvd(X, Y, 1e-9, c, cov, &chisq, &rank, w) && rank == 2;
        double a = gsl_vector_get(c, 0), b = gsl_vector_get(c, 1);
        if (ok && a > 0 && b > 0) {
            double t = dtv_t95(n - 2);
            out->fitted = out->lower_fitted = true;
            out->dof = n - 2;
            out->eff = 1 / (a * peak);
            out->se_log_eff = sqrt(gsl_matrix_get(cov, 0, 0)) / a;
            out->eff_lo = out->eff * exp(-t * out->se_log_eff);
            out->eff_hi = out->eff * exp(t * out->se_log_eff);
            out->lower_Bps = 1 / b;
            out->se_log_lower = sqrt(gsl_matrix_get(cov, 1, 1)) / b;
            out->lower_lo = out->lower_Bps * exp(-t * out->se_log_lower);
            out->lower_hi = out->lower_Bps * exp(t * out->se_log_lower);
            out->overhead_s = out->overhead_se = 0;
        } else {
            ok = false;
        }
    }
    gsl_multifit_linear_free(w);
    gsl_vector_free(c);
    gsl_vector_free(Y);
    gsl_matrix_free(cov);
    gsl_matrix_free(X);
    return ok;
}

/* Regression of the class's rank-0 op medians on their FLOPs (convolutions: jointly with
 * their lowered bytes when the ops determine both; else less their lowering time under cp). */
static void fit_class(const struct dtv_run *run, const struct dt_cost_params *cp,
                      enum dt_op_class c, const double *med, struct dtv_ops_class *out)
{
    const struct dt_device_spec *dev = &run->topo->groups[0].device;
    const struct dt_rank_plan *rp = &run->plan->ranks[0];
    double x[4096], y[4096], low[4096];
    int n = 0;
    for (int i = 0; i < rp->n_ops && n < 4096; i++) {
        const struct dt_op *op = &rp->ops[i];
        if (!has_class(op) || class_of(run->model, op) != c || !isfinite(med[i]))
            continue;
        double flops, bytes;
        dt_op_work(run->model, op, &flops, &bytes);
        x[n] = flops;
        low[n] = dt_op_lowered_bytes(run->model, op);
        y[n] = med[i];
        n++;
    }
    double peak = dev->peak_flops[DT_FP32];
    if (c == DT_CLASS_CONV && dtv_ops_fit_conv(x, low, y, n, peak, out))
        return;
    double lower_bw = dt_cost_lower_bw(cp, dev);
    for (int i = 0; i < n; i++) /* the lowering does not scale with FLOPs: take it off */
        if (low[i] > 0 && lower_bw > 0)
            y[i] -= low[i] / lower_bw;
    bool distinct = false;
    for (int i = 1; i < n; i++)
        distinct = distinct || x[i] != x[0];
    if (n < 3 || !distinct)
        return;
    double c0, c1, cov00, cov01, cov11, sumsq;
    if (gsl_fit_linear(x, 1, y, 1, (size_t)n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq) ||
        !(c1 > 0))
        return;
    out->fitted = true;
    out->dof = n - 2;
    out->eff = 1 / (c1 * peak);
    out->se_log_eff = sqrt(cov11) / c1;
    double t = dtv_t95(out->dof);
    out->eff_lo = out->eff * exp(-t * out->se_log_eff);
    out->eff_hi = out->eff * exp(t * out->se_log_eff);
    out->overhead_s = c0;
    out->overhead_se = sqrt(cov00);
}

int dtv_ops_compare(const struct dtv_run *run, const char *path,
                    const struct dt_calibration *cal, FILE *out, struct dtv_ops_report *rep,
                    struct dt_error *err)
{
    memset(rep, 0, sizeof *rep);
    const struct dt_plan *plan = run->plan;
    struct samples **per_rank = calloc((size_t)plan->n_ranks, sizeof *per_rank);
    double *med = NULL;
    int rc = per_rank ? DT_OK : dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int r = 0; r < plan->n_ranks && !rc; r++)
        if (!(per_rank[r] = calloc((size_t)plan->ranks[r].n_ops + 1, sizeof **per_rank)))
            rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    if (!rc)
        rc = read_trace(run, path, per_rank, rep, err);
    const struct dt_rank_plan *rp = &plan->ranks[0];
    if (!rc && !(med = calloc((size_t)rp->n_ops + 1, sizeof *med)))
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    if (rc)
        goto done;
    struct dt_cost_params cp;
    dtv_base_params(run, &cp);
    if (cal)
        dt_calibration_apply(cal, &cp);
    const struct dt_device_spec *dev = &run->topo->groups[0].device;
    if (out)
        fprintf(out, "Per-op trace %s (%d rows, %d sampled iterations) against the cost model "
                     "(%s), run %s line %d (%s):\nrank 0, median over the sampled iterations\n"
                     "%-4s %-28s %-12s %10s %12s %12s %9s\n",
                path, rep->n_rows, rep->n_iters, cal ? "calibrated" : "defaults", run->file,
                run->line, run->label, "op", "name", "class", "MFLOP", "measured ms",
                "model ms", "error %");
    for (int i = 0; i < rp->n_ops; i++) {
        const struct dt_op *op = &rp->ops[i];
        med[i] = median(&per_rank[0][i]);
        char nbuf[128];
        double flops = 0, bytes = 0, pred = NAN;
        const char *cname = dt_op_kind_name(op->kind);
        if (is_local(op))
            pred = dt_cost_op(&cp, dev, run->model, op);
        if (has_class(op)) {
            enum dt_op_class c = class_of(run->model, op);
            dt_op_work(run->model, op, &flops, &bytes);
            cname = dt_op_class_name(c);
            if (isfinite(med[i])) {
                rep->cls[c].n_ops++;
                rep->cls[c].measured_s += med[i];
                rep->cls[c].predicted_s += pred;
            }
        }
        const char *name = dt_op_name(plan, op, nbuf, sizeof nbuf);
        if (out) {
            char e[32] = "-", p[32] = "-";
            if (isfinite(pred)) {
                snprintf(p, sizeof p, "%.4f", 1e3 * pred);
                if (med[i] > 0)
                    snprintf(e, sizeof e, "%+.1f", 100 * (pred - med[i]) / med[i]);
            }
            fprintf(out, "%-4d %-28.28s %-12s %10.3f %12.4f %12s %9s\n", i, name, cname,
                    flops / 1e6, 1e3 * med[i], p, e);
        }
    }
    for (int c = 0; c < DT_CLASS_COUNT; c++)
        fit_class(run, &cp, (enum dt_op_class)c, med, &rep->cls[c]);
    if (out) {
        double peak = dev->peak_flops[DT_FP32];
        fprintf(out, "\nPer class (rank 0, one iteration; peak %.4g GFLOP/s per rank):\n"
                     "%-12s %4s %12s %12s %9s   %s\n", peak / 1e9, "class", "ops",
                "measured ms", "model ms", "error %",
                "fit t = flops / (peak eff) + overhead");
        for (int c = 0; c < DT_CLASS_COUNT; c++) {
            const struct dtv_ops_class *k = &rep->cls[c];
            if (!k->n_ops)
                continue;
            fprintf(out, "%-12s %4d %12.4f %12.4f %+9.1f   ", dt_op_class_name(c), k->n_ops,
                    1e3 * k->measured_s, 1e3 * k->predicted_s,
                    100 * (k->predicted_s - k->measured_s) / k->measured_s);
            if (k->lower_fitted)
                fprintf(out, "eff %.4g [%.4g, %.4g] (model: %.4g), lower_bw %.3g GB/s [%.3g, "
                             "%.3g] (t = flops / (peak eff) + lowered / lower_bw)\n",
                        k->eff, k->eff_lo, k->eff_hi, cp.eff[c], k->lower_Bps / 1e9,
                        k->lower_lo / 1e9, k->lower_hi / 1e9);
            else if (k->fitted)
                fprintf(out, "eff %.4g [%.4g, %.4g] (model: %.4g), overhead %.3g +/- %.2g us\n",
                        k->eff, k->eff_lo, k->eff_hi, cp.eff[c], 1e6 * k->overhead_s,
                        1e6 * k->overhead_se);
            else
                fprintf(out, "(too few ops with distinct FLOPs to fit)\n");
        }
    }
done:
    if (per_rank)
        for (int r = 0; r < plan->n_ranks; r++) {
            for (int i = 0; per_rank[r] && i < plan->ranks[r].n_ops; i++)
                free(per_rank[r][i].v);
            free(per_rank[r]);
        }
    free(per_rank);
    free(med);
    return rc;
}

void dtv_ops_calibration(const struct dtv_run *run, const char *path,
                         const struct dtv_ops_report *rep, struct dt_calibration *cal)
{
    dt_calibration_init(cal);
    dtv_stamp(cal);
    dt_calibration_add_device(cal, &run->topo->groups[0].device);
    snprintf(cal->method, sizeof cal->method,
             "per class, linear least squares (GSL gsl_fit_linear) of the per-op median "
             "durations of a dtexec trace on their FLOPs: eff = 1 / (slope x peak)");
    cal->n_data = 1;
    snprintf(cal->data[0].file, sizeof cal->data[0].file, "%s", path);
    snprintf(cal->data[0].rows, sizeof cal->data[0].rows, "%d op rows, %d iterations (run: %.200s "
             "line %d)", rep->n_rows, rep->n_iters, run->file, run->line);
    snprintf(cal->data[0].host, sizeof cal->data[0].host, "%s", run->host);
    snprintf(cal->data[0].when, sizeof cal->data[0].when, "%s", run->when);
    const struct {
        enum dt_op_class c;
        enum dt_cal_param p;
    } gemm[] = {{DT_CLASS_CONV, DT_CAL_EFF_CONV}, {DT_CLASS_DENSE, DT_CAL_EFF_DENSE}};
    int dof = 0;
    for (size_t g = 0; g < 2; g++) {
        const struct dtv_ops_class *k = &rep->cls[gemm[g].c];
        if (!k->fitted || k->dof < 1)
            continue;
        struct dt_cal_entry *e = dt_calibration_set(cal, gemm[g].p, k->eff);
        e->fitted = true;
        e->se = k->eff * k->se_log_eff;
        e->lo = k->eff_lo;
        e->hi = k->eff_hi;
        snprintf(e->source, sizeof e->source, "regression of %d %s op durations of the trace "
                 "on their FLOPs", k->n_ops, dt_op_class_name(gemm[g].c));
        int m = cal->n_cov++;
        cal->cov_param[m] = gemm[g].p;
        cal->cov[m * DT_CAL_COUNT + m] = k->se_log_eff * k->se_log_eff;
        dof = dof == 0 || k->dof < dof ? k->dof : dof;
        cal->n_obs += k->n_ops;
        if (k->lower_fitted) {
            e = dt_calibration_set(cal, DT_CAL_LOWER_BW, k->lower_Bps);
            e->fitted = true;
            e->se = k->lower_Bps * k->se_log_lower;
            e->lo = k->lower_lo;
            e->hi = k->lower_hi;
            snprintf(e->source, sizeof e->source, "joint regression of %d conv op durations "
                     "on their FLOPs and lowered bytes", k->n_ops);
            m = cal->n_cov++;
            cal->cov_param[m] = DT_CAL_LOWER_BW;
            cal->cov[m * DT_CAL_COUNT + m] = k->se_log_lower * k->se_log_lower;
        }
    }
    cal->dof = dof;
    cal->t95 = dtv_t95(dof);
    snprintf(cal->notes, sizeof cal->notes,
             "Compute efficiencies from one per-op trace; the per-op overhead of the regression "
             "is printed by dtvalidate ops but not applied (it is not one number per class in "
             "dtsim). No residual spread of whole iterations: intervals reflect the efficiencies' "
             "uncertainty only.");
}

/* dtvalidate gpu: GPU calibrations from NVIDIA's published tables and what they predict. */
#include "gpureport.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "predict.h"
#include "published.h"

#define DEFAULT_TABLE "gpu-published.csv"

static const char *const devices[] = {"v100", "a100"};

/* Which rows a fit or a prediction takes. */
struct sel {
    const char *device;         /* NULL: any */
    int gpus;                   /* 0 any, 1 one GPU, 2 several */
    const char *framework;      /* NULL: any */
    bool not_framework;         /* every framework but that one */
};

static bool selected(const struct dtv_pubrow *row, const struct sel *s)
{
    if (s->device && strcmp(row->device, s->device) != 0)
        return false;
    if ((s->gpus == 1 && row->gpus != 1) || (s->gpus == 2 && row->gpus == 1))
        return false;
    if (s->framework && (strcmp(row->framework, s->framework) == 0) == s->not_framework)
        return false;
    return true;
}

/* use[i] for the set's rows that s takes; their count. */
static int select_rows(const struct dtv_runset *set, const struct dtv_published *pub,
                       const struct sel *s, bool *use)
{
    int n = 0;
    for (int i = 0; i < set->n; i++)
        n += use[i] = selected(&pub->row[i], s);
    return n;
}

/* The GEMM class (conv or dense) that does most of a model's forward FLOPs. */
static enum dt_op_class main_gemm_class(const struct dt_model *m)
{
    double flops[DT_CLASS_COUNT] = {0};
    for (int i = 0; i < m->n_layers; i++)
        flops[dt_layer_class(m->layers[i].kind)] += m->layers[i].fwd_flops;
    return flops[DT_CLASS_CONV] >= flops[DT_CLASS_DENSE] ? DT_CLASS_CONV : DT_CLASS_DENSE;
}

/* Adds the GEMM efficiencies of one precision class: conv and dense apart when the rows
 * have models of both kinds (ResNet-50's convolutions and BERT's dense layers reach different
 * fractions of the peak), the tie when one kind is all the rows can tell. */
static void add_gemm(struct dtv_fitspec *spec, const bool seen[2], enum dt_cal_param tie,
                     enum dt_cal_param conv, enum dt_cal_param dense)
{
    if (seen[0] && seen[1]) {
        spec->p[spec->n++] = conv;
        spec->p[spec->n++] = dense;
    } else if (seen[0] || seen[1]) {
        spec->p[spec->n++] = tie;
    }
}

/* The GPU model's parameters, each only where the rows can tell it: the framework's
 * per-iteration overhead; the GEMM efficiencies at fp32, at tf32 and at 16 bits (tf32 and
 * 16 bits on tensor cores, each a fraction of its own peak), where rows of that precision
 * class are fitted, conv and dense apart where both kinds of model are; the fraction of the
 * memory bandwidth the streaming layers reach (a fraction, so that it carries over to another
 * datasheet); then the links dtv_fitspec_default adds. The launch overhead per kernel keeps
 * its default: with ResNet-50 alone it is the per-iteration overhead over again, and with
 * BERT's rows beside them the fit drove it to 1e-11 s (out of range). */
static void gpu_fitspec(const struct dtv_runset *set, const bool *use, struct dtv_fitspec *spec)
{
    /* [precision class: fp32, tf32, 16 bits][0 conv, 1 dense] */
    bool seen[3][2] = {{false, false}, {false, false}, {false, false}};
    for (int i = 0; i < set->n; i++) {
        if (!use[i])
            continue;
        const struct dtv_run *r = &set->runs[i];
        int k = main_gemm_class(r->model) == DT_CLASS_DENSE;
        enum dt_precision p = r->opt.precision;
        seen[p == DT_TF32 ? 1 : dt_dtype_size(dt_precision_storage(p)) <= 2 ? 2 : 0][k] = true;
    }
    struct dtv_fitspec links;
    dtv_fitspec_default(set, use, &links);
    spec->n = 0;
    spec->p[spec->n++] = DT_CAL_ITER_OVERHEAD;
    add_gemm(spec, seen[0], DT_CAL_EFF_GEMM, DT_CAL_EFF_CONV, DT_CAL_EFF_DENSE);
    add_gemm(spec, seen[1], DT_CAL_EFF_GEMM_TF32, DT_CAL_EFF_CONV_TF32, DT_CAL_EFF_DENSE_TF32);
    add_gemm(spec, seen[2], DT_CAL_EFF_GEMM_HALF, DT_CAL_EFF_CONV_HALF, DT_CAL_EFF_DENSE_HALF);
    spec->p[spec->n++] = DT_CAL_EFF_MEM;
    for (int k = 0; k < links.n; k++)
        if (links.p[k] != DT_CAL_ITER_OVERHEAD && links.p[k] != DT_CAL_EFF_GEMM)
            spec->p[spec->n++] = links.p[k];
}

/* Keeps the first of spec's parameters (gpu_fitspec's order: the overhead, the GEMM
 * efficiencies, the memory, the links) that n rows can fit with one degree of freedom left
 * for an interval; the count dropped. */
static int fit_fewer(struct dtv_fitspec *spec, int n)
{
    int keep = n > 2 ? n - 1 : 1, cut = spec->n > keep ? spec->n - keep : 0;
    spec->n -= cut;
    return cut;
}

static bool fitted_param(const struct dtv_calib *cb, enum dt_cal_param p)
{
    for (int k = 0; k < cb->fitted.n; k++)
        if (cb->fitted.p[k] == p)
            return true;
    return false;
}

/* Says which of want's parameters a fit from a base left at the base's values, and why:
 * not identifiable from the rows, or not fitted (the last cut of want: too few rows). */
static void print_kept(FILE *out, const struct dtv_calib *cb, const struct dtv_fitspec *want,
                       int cut)
{
    static const char *const why[] = {"not identifiable from these rows",
                                      "not fitted (too few rows)"};
    for (int w = 0; w < 2; w++) {
        char names[512] = "";
        for (int k = 0; k < want->n; k++) {
            const struct dt_cal_entry *e = dt_calibration_find(&cb->cal, want->p[k]);
            bool pinned = e && strncmp(e->source, "held", 4) == 0;
            if (fitted_param(cb, want->p[k]) || pinned || (k >= want->n - cut) != (w == 1))
                continue;
            size_t o = strlen(names);
            snprintf(names + o, sizeof names - o, "%s%s", o ? ", " : "",
                     dt_cal_param_name(want->p[k]));
        }
        if (names[0])
            fprintf(out, "  %s, kept at %s's values: %s\n", why[w], cb->base->name, names);
    }
}

/* Fits on the rows of use (n of them), from base's values when base is not NULL (then only
 * as many parameters as the rows can fit); false (and a line saying why) when no fit is
 * possible. */
static bool fit_on(const struct dtv_runset *set, const bool *use, int n,
                   const struct dtv_gpu_options *o, const struct dtv_base *base,
                   struct dtv_calib *cb, FILE *out)
{
    struct dtv_fitspec spec, want;
    if (o->spec)
        spec = *o->spec;
    else
        gpu_fitspec(set, use, &spec);
    want = spec;
    int cut = base && !o->spec ? fit_fewer(&spec, n) : 0;
    struct dt_error err;
    dt_error_clear(&err);
    if (dtv_calibrate_on(set, use, &spec, base, o->verbose, cb, &err)) {
        fprintf(out, "  no fit: %s\n", err.msg);
        return false;
    }
    if (base)
        print_kept(out, cb, &want, cut);
    return true;
}

static void print_params(FILE *out, const struct dt_calibration *cal)
{
    fprintf(out, "  fit: %d rows, %d dof, residual SD %.1f%%, in-sample MAPE %.1f%%\n",
            cal->n_obs, cal->dof, 100 * cal->resid_sd, cal->mape_pct);
    for (int i = 0; i < cal->n_entries; i++) {
        const struct dt_cal_entry *e = &cal->entry[i];
        double scale = dt_cal_param_kind(e->param) == DT_CAL_TIME        ? 1e3
                       : dt_cal_param_kind(e->param) == DT_CAL_BANDWIDTH ? 1e-9
                                                                          : 1;
        const char *unit = scale == 1e3 ? " ms" : scale == 1e-9 ? " GB/s" : "";
        fprintf(out, "  %-14s %.4g%s", dt_cal_param_name(e->param), e->value * scale, unit);
        if (e->fitted)
            fprintf(out, "  95%% CI [%.4g, %.4g]", e->lo * scale, e->hi * scale);
        fputc('\n', out);
    }
    char why[160];
    for (int i = 0; i < cal->n_entries; i++)
        if (!dt_cal_param_in_range(cal->entry[i].param, cal->entry[i].value, why, sizeof why))
            fprintf(out, "  out of range: %s\n", why);
}

struct tally {
    int n, within;
    double sum_abs, max_abs;
};

/* Predicts the rows of use with cal; one line per row, then the summary against target. */
static int predict_rows(FILE *out, const struct dtv_runset *set, const struct dtv_published *pub,
                        const struct dt_calibration *cal, const bool *use, double target_pct,
                        struct dt_error *err)
{
    struct tally t = {0};
    char warn[512], warned[512] = ""; /* device names warned about, once each */
    fprintf(out, "  %-5s %-52s %10s %10s %8s  %s\n", "line", "row (framework system gpu xN "
            "precision batch)", "published", "predicted", "error", "95% interval");
    for (int i = 0; i < set->n; i++) {
        if (!use[i])
            continue;
        const struct dtv_run *r = &set->runs[i];
        int rc = dt_calibration_check_device(cal, r->topo, warn, sizeof warn, err);
        if (rc)
            return rc;
        const char *dev = r->topo->groups[0].device.name;
        if (warn[0] && !strstr(warned, dev)) {
            fprintf(out, "  warning: %s\n", warn);
            snprintf(warned + strlen(warned), sizeof warned - strlen(warned), "%.100s|", dev);
        }
        struct dtv_pred p;
        if ((rc = dtv_predict_cal(r, cal, &p, err)))
            return rc;
        double got = dtv_published_rate(r, p.iter_s), want = pub->row[i].throughput;
        double e = 100 * (got / want - 1);
        char iv[64] = "none";
        if (p.epoch_hi_s > p.epoch_lo_s)
            snprintf(iv, sizeof iv, "[%.0f, %.0f]",
                     dtv_published_rate(r, p.epoch_hi_s / r->iters_per_epoch),
                     dtv_published_rate(r, p.epoch_lo_s / r->iters_per_epoch));
        fprintf(out, "  %-5d %-52.52s %10.1f %10.1f %+7.1f%%  %s%s\n", r->line, r->label, want,
                got, e, iv, fabs(e) > target_pct ? "  miss" : "");
        t.n++;
        t.within += fabs(e) <= target_pct;
        t.sum_abs += fabs(e);
        t.max_abs = fmax(t.max_abs, fabs(e));
    }
    if (t.n)
        fprintf(out, "  => %d rows: MAPE %.1f%%, worst %.1f%%, %d of %d within %.0f%%\n", t.n,
                t.sum_abs / t.n, t.max_abs, t.within, t.n, target_pct);
    else
        fprintf(out, "  => no row to predict\n");
    return DT_OK;
}

/* Writes DIR/NAME.yaml when --dir is given and every value is in range (else says why). */
static int save_calibration(FILE *out, const struct dtv_runset *set,
                            const struct dtv_gpu_options *o, const char *name,
                            struct dt_calibration *cal, struct dt_error *err)
{
    if (!o->dir || !name)
        return DT_OK;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.yaml", o->dir, name);
    snprintf(cal->notes + strlen(cal->notes), sizeof cal->notes - strlen(cal->notes),
             " Rows of %s the simulator could not run were left out: see `dtvalidate gpu`.",
             set->runs[0].file);
    int rc = DT_OK;
    if (dt_calibration_check_values(cal, err)) {
        fprintf(out, "  not written to %s: %s\n", path, err->msg);
        dt_error_clear(err);
    } else if ((rc = dt_calibration_save(path, cal, err)) == DT_OK) {
        fprintf(out, "  written to %s\n", path);
    }
    return rc;
}

/* One report: fit on `train` (from base's values when base is set), predict `test`. */
struct report {
    char title[200];
    struct sel train, test;
    double target;
    const char *save_as;            /* write the fit as DIR/SAVE_AS.yaml; NULL: not written */
    const struct dtv_base *base;    /* NULL: from dtsim's defaults */
};

/* Runs report r; the fit stays in keep (to be freed by the caller; fitted.n is 0 when there
 * was none). */
static int train_test(FILE *out, const struct dtv_runset *set, const struct dtv_published *pub,
                      const struct dtv_gpu_options *o, const struct report *r,
                      struct dtv_calib *keep, struct dt_error *err)
{
    memset(keep, 0, sizeof *keep);
    bool *tr = calloc((size_t)set->n, sizeof *tr), *te = calloc((size_t)set->n, sizeof *te);
    if (!tr || !te) {
        free(tr);
        free(te);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    int n_tr = select_rows(set, pub, &r->train, tr), n_te = select_rows(set, pub, &r->test, te);
    fprintf(out, "\n%s (fit on %d rows, predict %d)\n", r->title, n_tr, n_te);
    int rc = DT_OK;
    if (n_tr == 0 || n_te == 0)
        fprintf(out, "  nothing to %s\n", n_tr == 0 ? "fit on" : "predict");
    else if (fit_on(set, tr, n_tr, o, r->base, keep, out)) {
        print_params(out, &keep->cal);
        rc = predict_rows(out, set, pub, &keep->cal, te, r->target, err);
        if (!rc)
            rc = save_calibration(out, set, o, r->save_as, &keep->cal, err);
    } else {
        keep->fitted.n = 0;
    }
    free(tr);
    free(te);
    return rc;
}

/* Predicts the test rows of r (no fit) with a calibration fitted before. */
static int predict_only(FILE *out, const struct dtv_runset *set, const struct dtv_published *pub,
                        const struct report *r, const struct dtv_calib *cb, struct dt_error *err)
{
    bool *te = calloc((size_t)set->n, sizeof *te);
    if (!te)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    int n_te = select_rows(set, pub, &r->test, te);
    fprintf(out, "\n%s (fitted above on %d rows, predict %d)\n", r->title, cb->n_used, n_te);
    int rc = DT_OK;
    if (cb->fitted.n == 0)
        fprintf(out, "  no fit to predict from\n");
    else if (n_te == 0)
        fprintf(out, "  nothing to predict\n");
    else
        rc = predict_rows(out, set, pub, &cb->cal, te, r->target, err);
    free(te);
    return rc;
}

/* The calibration of one device on all its rows, printed and written to DIR/DEVICE.yaml. */
static int device_calibration(FILE *out, const struct dtv_runset *set,
                              const struct dtv_published *pub, const struct dtv_gpu_options *o,
                              const char *device, struct dtv_calib *keep, struct dt_error *err)
{
    struct report r = {.train = {.device = device}, .test = {.device = device}, .target = 5,
                       .save_as = device};
    bool *use = calloc((size_t)set->n, sizeof *use);
    if (!use)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    int n = select_rows(set, pub, &r.train, use);
    free(use);
    snprintf(r.title, sizeof r.title, "%s: calibration on all %d of its rows the simulator runs",
             device, n);
    if (n)
        return train_test(out, set, pub, o, &r, keep, err);
    memset(keep, 0, sizeof *keep);
    fprintf(out, "\n%s\n  no calibration for %s\n", r.title, device);
    return DT_OK;
}

static void print_skipped(FILE *out, const struct dtv_runset *set,
                          const struct dtv_published *pub, const char *table)
{
    fprintf(out, "%s: %d rows the simulator runs, %d left out%s\n", table, set->n,
            pub->n_skipped, pub->n_skipped ? ":" : "");
    for (int i = 0; i < pub->n_skipped; i++)
        fprintf(out, "  line %-4d %s\n", pub->skipped[i].line, pub->skipped[i].why);
}

static const char *const frameworks[] = {"pytorch", "mxnet", "tensorflow"};

/* The fits a report keeps for later reports: [device] and [device][framework]. */
struct kept {
    struct dtv_calib dev[2], one_gpu[2], fw[2][3];
};

static void kept_free(struct kept *k)
{
    for (int d = 0; d < 2; d++) {
        dtv_calib_free(&k->dev[d]);
        dtv_calib_free(&k->one_gpu[d]);
        for (int f = 0; f < 3; f++)
            dtv_calib_free(&k->fw[d][f]);
    }
}

/* The device-level reports: 1-GPU -> multi-GPU, one framework -> the others. */
static int device_reports(FILE *out, const struct dtv_runset *set,
                          const struct dtv_published *pub, const struct dtv_gpu_options *o,
                          struct kept *k, struct dt_error *err)
{
    int rc = DT_OK;
    for (int d = 0; d < 2 && !rc; d++)
        rc = device_calibration(out, set, pub, o, devices[d], &k->dev[d], err);
    for (int d = 0; d < 2 && !rc; d++) {
        struct report r = {.train = {devices[d], 1, NULL, false},
                           .test = {devices[d], 2, NULL, false}, .target = 5};
        snprintf(r.title, sizeof r.title, "%s: fit on the 1-GPU rows, predict the multi-GPU "
                 "rows (target 5%%)", devices[d]);
        rc = train_test(out, set, pub, o, &r, &k->one_gpu[d], err);
    }
    for (int d = 0; d < 2 && !rc; d++)
        for (int f = 0; f < 3 && !rc; f++) {
            struct dtv_calib cb;
            struct report r = {.train = {devices[d], 0, frameworks[f], false},
                               .test = {devices[d], 0, frameworks[f], true}, .target = 5};
            snprintf(r.title, sizeof r.title, "%s: fit on %s, predict the other frameworks "
                     "(target 5%%)", devices[d], frameworks[f]);
            rc = train_test(out, set, pub, o, &r, &cb, err);
            dtv_calib_free(&cb);
        }
    return rc;
}

/* Per framework (the user books a cluster for one): its 1-GPU rows -> its multi-GPU rows
 * from the device's 1-GPU fit; its calibration on all its rows from the device's, written as
 * DIR/DEVICE-FRAMEWORK.yaml; what the parameters its rows cannot tell keep is said. */
static int framework_reports(FILE *out, const struct dtv_runset *set,
                             const struct dtv_published *pub, const struct dtv_gpu_options *o,
                             struct kept *k, struct dt_error *err)
{
    int rc = DT_OK;
    for (int d = 0; d < 2 && !rc; d++)
        for (int f = 0; f < 3 && !rc; f++) {
            char base_name[2][64], name[64];
            snprintf(base_name[0], sizeof base_name[0], "the %s 1-GPU fit", devices[d]);
            snprintf(base_name[1], sizeof base_name[1], "the %s calibration", devices[d]);
            struct dtv_base one = {&k->one_gpu[d].cal, base_name[0]},
                            all = {&k->dev[d].cal, base_name[1]};
            struct report r = {.train = {devices[d], 1, frameworks[f], false},
                               .test = {devices[d], 2, frameworks[f], false}, .target = 5,
                               .base = k->one_gpu[d].fitted.n ? &one : NULL};
            snprintf(r.title, sizeof r.title, "%s %s: fit on its 1-GPU rows, predict its "
                     "multi-GPU rows (target 5%%)", devices[d], frameworks[f]);
            struct dtv_calib cb;
            rc = train_test(out, set, pub, o, &r, &cb, err);
            dtv_calib_free(&cb);
            snprintf(name, sizeof name, "%s-%s", devices[d], frameworks[f]);
            struct report all_rows = {.train = {devices[d], 0, frameworks[f], false},
                                      .test = {devices[d], 0, frameworks[f], false},
                                      .target = 5, .save_as = name,
                                      .base = k->dev[d].fitted.n ? &all : NULL};
            snprintf(all_rows.title, sizeof all_rows.title, "%s %s: calibration on all its "
                     "rows, in sample", devices[d], frameworks[f]);
            if (!rc)
                rc = train_test(out, set, pub, o, &all_rows, &k->fw[d][f], err);
        }
    return rc;
}

/* Fit on one device, predict the other from its datasheet: all rows, then per framework. */
static int cross_device_reports(FILE *out, const struct dtv_runset *set,
                                const struct dtv_published *pub,
                                const struct dtv_gpu_options *o, const struct kept *k,
                                struct dt_error *err)
{
    int rc = DT_OK;
    for (int d = 0; d < 2 && !rc; d++) {
        struct dtv_calib cb;
        struct report r = {.train = {devices[d], 0, NULL, false},
                           .test = {devices[1 - d], 0, NULL, false}, .target = 15};
        snprintf(r.title, sizeof r.title, "fit on %s, predict %s from its datasheet (target "
                 "15%%)", devices[d], devices[1 - d]);
        rc = train_test(out, set, pub, o, &r, &cb, err);
        dtv_calib_free(&cb);
    }
    for (int d = 0; d < 2 && !rc; d++)
        for (int f = 0; f < 3 && !rc; f++) {
            struct report r = {.test = {devices[1 - d], 0, frameworks[f], false}, .target = 15};
            snprintf(r.title, sizeof r.title, "%s %s: predict %s %s from its datasheet "
                     "(target 15%%)", devices[d], frameworks[f], devices[1 - d], frameworks[f]);
            rc = predict_only(out, set, pub, &r, &k->fw[d][f], err);
        }
    return rc;
}

int dtv_gpu_report(const struct dtv_gpu_options *o, FILE *out, struct dt_error *err)
{
    struct dtv_runset set;
    dtv_runset_init(&set);
    struct dtv_published *pub = calloc(1, sizeof *pub);
    struct kept *k = calloc(1, sizeof *k);
    if (!pub || !k) {
        free(pub);
        free(k);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    const char *table = o->table ? o->table : DEFAULT_TABLE;
    int rc = dtv_published_load(&set, table, pub, err);
    if (!rc)
        print_skipped(out, &set, pub, set.runs[0].file);
    if (!rc)
        rc = device_reports(out, &set, pub, o, k, err);
    if (!rc)
        rc = framework_reports(out, &set, pub, o, k, err);
    if (!rc)
        rc = cross_device_reports(out, &set, pub, o, k, err);
    kept_free(k);
    dtv_runset_free(&set);
    free(pub);
    free(k);
    return rc;
}

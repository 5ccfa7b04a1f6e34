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

/* Fits on the rows of use; false (and a line saying why) when no fit is possible. */
static bool fit_on(const struct dtv_runset *set, const bool *use, const struct dtv_gpu_options *o,
                   struct dtv_calib *cb, FILE *out)
{
    struct dtv_fitspec spec;
    if (o->spec)
        spec = *o->spec;
    else
        gpu_fitspec(set, use, &spec);
    struct dt_error err;
    dt_error_clear(&err);
    if (dtv_calibrate(set, use, &spec, o->verbose, cb, &err)) {
        fprintf(out, "  no fit: %s\n", err.msg);
        return false;
    }
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

/* One report: fit on `train`, predict `test`; the fit is written as DIR/SAVE_AS.yaml when
 * save_as is not NULL. */
static int train_test(FILE *out, const struct dtv_runset *set, const struct dtv_published *pub,
                      const struct dtv_gpu_options *o, const char *title, const struct sel *train,
                      const struct sel *test, double target, const char *save_as,
                      struct dt_error *err)
{
    bool *tr = calloc((size_t)set->n, sizeof *tr), *te = calloc((size_t)set->n, sizeof *te);
    if (!tr || !te) {
        free(tr);
        free(te);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    int n_tr = select_rows(set, pub, train, tr), n_te = select_rows(set, pub, test, te);
    fprintf(out, "\n%s (fit on %d rows, predict %d)\n", title, n_tr, n_te);
    int rc = DT_OK;
    struct dtv_calib cb;
    memset(&cb, 0, sizeof cb);
    if (n_tr == 0 || n_te == 0)
        fprintf(out, "  nothing to %s\n", n_tr == 0 ? "fit on" : "predict");
    else if (fit_on(set, tr, o, &cb, out)) {
        print_params(out, &cb.cal);
        rc = predict_rows(out, set, pub, &cb.cal, te, target, err);
        if (!rc)
            rc = save_calibration(out, set, o, save_as, &cb.cal, err);
    }
    dtv_calib_free(&cb);
    free(tr);
    free(te);
    return rc;
}

/* The calibration of one device on all its rows, printed and written to DIR/DEVICE.yaml. */
static int device_calibration(FILE *out, const struct dtv_runset *set,
                              const struct dtv_published *pub, const struct dtv_gpu_options *o,
                              const char *device, struct dt_error *err)
{
    struct sel s = {.device = device};
    bool *use = calloc((size_t)set->n, sizeof *use);
    if (!use)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    int n = select_rows(set, pub, &s, use);
    fprintf(out, "\n%s: calibration on all %d of its rows the simulator runs\n", device, n);
    struct dtv_calib cb;
    memset(&cb, 0, sizeof cb);
    int rc = DT_OK;
    if (n && fit_on(set, use, o, &cb, out)) {
        print_params(out, &cb.cal);
        rc = predict_rows(out, set, pub, &cb.cal, use, 5, err);
        if (!rc)
            rc = save_calibration(out, set, o, device, &cb.cal, err);
    } else if (!n) {
        fprintf(out, "  no calibration for %s\n", device);
    }
    dtv_calib_free(&cb);
    free(use);
    return rc;
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

int dtv_gpu_report(const struct dtv_gpu_options *o, FILE *out, struct dt_error *err)
{
    struct dtv_runset set;
    dtv_runset_init(&set);
    struct dtv_published *pub = calloc(1, sizeof *pub);
    if (!pub)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    const char *table = o->table ? o->table : DEFAULT_TABLE;
    int rc = dtv_published_load(&set, table, pub, err);
    if (!rc)
        print_skipped(out, &set, pub, set.runs[0].file);
    for (int d = 0; d < 2 && !rc; d++)
        rc = device_calibration(out, &set, pub, o, devices[d], err);
    for (int d = 0; d < 2 && !rc; d++) {
        char title[160];
        snprintf(title, sizeof title, "%s: fit on the 1-GPU rows, predict the multi-GPU rows "
                 "(target 5%%)", devices[d]);
        rc = train_test(out, &set, pub, o, title, &(struct sel){devices[d], 1, NULL, false},
                        &(struct sel){devices[d], 2, NULL, false}, 5, NULL, err);
    }
    for (int d = 0; d < 2 && !rc; d++)
        for (int f = 0; f < 3 && !rc; f++) {
            char title[160], name[64];
            snprintf(title, sizeof title, "%s: fit on %s, predict the other frameworks "
                     "(target 5%%)", devices[d], frameworks[f]);
            snprintf(name, sizeof name, "%s-%s", devices[d], frameworks[f]);
            rc = train_test(out, &set, pub, o, title,
                            &(struct sel){devices[d], 0, frameworks[f], false},
                            &(struct sel){devices[d], 0, frameworks[f], true}, 5, name, err);
        }
    for (int d = 0; d < 2 && !rc; d++) {
        char title[160];
        snprintf(title, sizeof title, "fit on %s, predict %s from its datasheet (target 15%%)",
                 devices[d], devices[1 - d]);
        rc = train_test(out, &set, pub, o, title, &(struct sel){devices[d], 0, NULL, false},
                        &(struct sel){devices[1 - d], 0, NULL, false}, 15, NULL, err);
    }
    dtv_runset_free(&set);
    free(pub);
    return rc;
}

/* Held-out predictions and their errors. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fill_item(const struct dtv_run *r, struct dtv_check_item *it)
{
    it->err_pct = 100 * (it->pred.epoch_s - r->epoch_s) / r->epoch_s;
    it->inside = r->epoch_s >= it->pred.epoch_lo_s * (1 - 1e-12) &&
                 r->epoch_s <= it->pred.epoch_hi_s * (1 + 1e-12);
}

static void summarise(const struct dtv_runset *set, struct dtv_check *c)
{
    double h = 0, f = 0;
    c->n_held = c->n_fit = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->items[i].held_out) {
            h += fabs(c->items[i].err_pct);
            c->n_held++;
        } else {
            f += fabs(c->items[i].err_pct);
            c->n_fit++;
        }
    }
    c->mape_held = c->n_held ? h / c->n_held : NAN;
    c->mape_fit = c->n_fit ? f / c->n_fit : NAN;
    (void)set;
}

int dtv_check_run(const struct dtv_runset *set, enum dtv_mode mode, const char *train_sel,
                  const struct dtv_fitspec *spec, const struct dt_calibration *cal,
                  FILE *verbose, struct dtv_check *out, struct dt_error *err)
{
    memset(out, 0, sizeof *out);
    out->mode = mode;
    out->n = set->n;
    out->items = calloc((size_t)set->n, sizeof *out->items);
    bool *use = calloc((size_t)set->n, sizeof *use);
    int rc = DT_OK;
    if (!out->items || !use) {
        free(use);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    for (int i = 0; i < set->n; i++) {
        out->items[i].run = i;
        out->items[i].held_out = true;
    }
    struct dtv_fitspec sp;
    switch (mode) {
    case DTV_MODE_CAL:
    case DTV_MODE_DEFAULTS:
        if (mode == DTV_MODE_CAL)
            snprintf(out->what, sizeof out->what, "calibration %.400s",
                     cal->path[0] ? cal->path : "(in memory)");
        else
            snprintf(out->what, sizeof out->what,
                     "no calibration: dtsim's default cost parameters and datasheet values");
        for (int i = 0; i < set->n && !rc; i++) {
            rc = dtv_predict_cal(&set->runs[i], mode == DTV_MODE_CAL ? cal : NULL,
                                 &out->items[i].pred, err);
            fill_item(&set->runs[i], &out->items[i]);
        }
        break;
    case DTV_MODE_LOO:
        snprintf(out->what, sizeof out->what,
                 "leave-one-out: each run predicted by a fit on the %d others", set->n - 1);
        if (set->n < 2) {
            rc = dt_fail(err, DT_EINPUT, NULL, 0, 0, "leave-one-out needs at least 2 runs");
            break;
        }
        for (int i = 0; i < set->n && !rc; i++) {
            for (int j = 0; j < set->n; j++)
                use[j] = j != i;
            if (spec)
                sp = *spec;
            else
                dtv_fitspec_default(set, use, &sp);
            struct dtv_calib cb;
            rc = dtv_calibrate(set, use, &sp, NULL, &cb, err);
            if (!rc)
                rc = dtv_predict_cal(&set->runs[i], &cb.cal, &out->items[i].pred, err);
            dtv_calib_free(&cb);
            if (rc) {
                char buf[1400];
                dt_error_format(err, buf, sizeof buf);
                rc = dt_fail(err, rc, NULL, 0, 0, "leave-one-out without %s line %d: %s",
                             set->runs[i].file, set->runs[i].line, buf);
            }
            fill_item(&set->runs[i], &out->items[i]);
            if (verbose)
                fprintf(verbose, "dtvalidate: leave-one-out %d/%d done\n", i + 1, set->n);
        }
        break;
    case DTV_MODE_SPLIT: {
        int n_train = 0;
        for (int i = 0; i < set->n; i++) {
            use[i] = dtv_run_matches(&set->runs[i], train_sel);
            n_train += use[i];
        }
        if (n_train == 0 || n_train == set->n) {
            rc = dt_fail(err, DT_EINPUT, NULL, 0, 0,
                         "--train '%s' selects %d of %d runs: it must leave some to fit and "
                         "some to predict", train_sel, n_train, set->n);
            break;
        }
        snprintf(out->what, sizeof out->what,
                 "split: fitted on the %d runs with '%s', %d runs held out", n_train, train_sel,
                 set->n - n_train);
        if (spec)
            sp = *spec;
        else
            dtv_fitspec_default(set, use, &sp);
        if ((rc = dtv_calibrate(set, use, &sp, verbose, &out->calib, err)))
            break;
        out->have_calib = true;
        for (int i = 0; i < set->n && !rc; i++) {
            out->items[i].held_out = !use[i];
            rc = dtv_predict_cal(&set->runs[i], &out->calib.cal, &out->items[i].pred, err);
            fill_item(&set->runs[i], &out->items[i]);
        }
        break;
    }
    }
    free(use);
    if (!rc)
        summarise(set, out);
    return rc;
}

void dtv_check_free(struct dtv_check *c)
{
    if (c->have_calib)
        dtv_calib_free(&c->calib);
    free(c->items);
    memset(c, 0, sizeof *c);
}

/* Configurations that differ only by strategy share a key. */
static void config_key(const struct dtv_run *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s %dn%dp batch %d %s", r->model->name, r->nodes, r->ppn, r->batch,
             r->scaling == DT_SCALING_WEAK ? "weak" : "strong");
}

struct ranked {
    int item;
    double v;
};

static int cmp_ranked(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    return (x->v > y->v) - (x->v < y->v);
}

/* Pairs of strategies of one configuration whose measured epoch times differ by more than
 * `noise` (relative): how many the predictions order the same way. Closer pairs are not
 * counted: their measured order is itself a matter of chance. */
static void count_resolved_pairs(const struct ranked *m, const struct dtv_check *c, int k,
                                 double noise, int *resolved, int *ordered)
{
    for (int a = 0; a < k; a++)
        for (int b = a + 1; b < k; b++) { /* m is sorted: m[a] measured faster than m[b] */
            if (!(m[b].v > m[a].v * (1 + noise)))
                continue;
            (*resolved)++;
            *ordered += c->items[m[a].item].pred.epoch_s < c->items[m[b].item].pred.epoch_s;
        }
}

static void print_ranking(FILE *f, const struct dtv_runset *set, const struct dtv_check *c)
{
    int groups = 0, matched = 0, resolved = 0, ordered = 0;
    /* the runs' own repeatability, when they were repeated; else any difference counts */
    double noise = set->repeat_spread > 0 ? set->repeat_spread : 0;
    bool *done = calloc((size_t)c->n, sizeof *done);
    struct ranked *m = calloc((size_t)c->n, sizeof *m), *p = calloc((size_t)c->n, sizeof *p);
    if (!done || !m || !p)
        goto out;
    fprintf(f, "\nRanking of strategies (fastest first), per configuration measured with "
               "several:\n");
    for (int i = 0; i < c->n; i++) {
        if (done[i])
            continue;
        char ki[160], kj[160];
        config_key(&set->runs[c->items[i].run], ki, sizeof ki);
        int k = 0;
        for (int j = i; j < c->n; j++) {
            config_key(&set->runs[c->items[j].run], kj, sizeof kj);
            if (!done[j] && strcmp(ki, kj) == 0) {
                done[j] = true;
                m[k] = (struct ranked){j, set->runs[c->items[j].run].epoch_s};
                p[k] = (struct ranked){j, c->items[j].pred.epoch_s};
                k++;
            }
        }
        if (k < 2)
            continue;
        qsort(m, (size_t)k, sizeof *m, cmp_ranked);
        qsort(p, (size_t)k, sizeof *p, cmp_ranked);
        count_resolved_pairs(m, c, k, noise, &resolved, &ordered);
        bool same = true;
        for (int a = 0; a < k; a++)
            same = same && m[a].item == p[a].item;
        groups++;
        matched += same;
        fprintf(f, "  %-32s measured:", ki);
        for (int a = 0; a < k; a++)
            fprintf(f, " %s", dt_strategy_name(set->runs[c->items[m[a].item].run].strategy));
        fprintf(f, "\n  %-32s predicted:", "");
        for (int a = 0; a < k; a++)
            fprintf(f, " %s", dt_strategy_name(set->runs[c->items[p[a].item].run].strategy));
        fprintf(f, "   -> %s\n", same ? "same order" : "DIFFERENT order");
        /* the fastest is what a user acts on */
        if (!same && m[0].item == p[0].item)
            fprintf(f, "  %-32s (the fastest strategy is predicted right)\n", "");
    }
    if (groups == 0)
        fprintf(f, "  none: no configuration was measured with more than one strategy, so the "
                   "ranking is not checked.\n");
    else {
        fprintf(f, "  ranking matches in %d of %d configurations\n", matched, groups);
        fprintf(f, "  pairs of strategies measured further apart than the runs repeat (%.3g %%): "
                   "%d of %d ordered right by the predictions\n",
                100 * noise, ordered, resolved);
    }
out:
    free(done);
    free(m);
    free(p);
}

void dtv_check_print(FILE *f, const struct dtv_runset *set, const struct dtv_check *c, bool csv)
{
    if (csv) {
        fprintf(f, "file,line,model,nodes,ppn,ranks,strategy,batch,scaling,held_out,"
                   "measured_epoch_s,predicted_epoch_s,low_s,high_s,error_pct,inside,"
                   "measured_iter_s,predicted_iter_s,compute_s,comm_s,idle_s\n");
        for (int i = 0; i < c->n; i++) {
            const struct dtv_check_item *it = &c->items[i];
            const struct dtv_run *r = &set->runs[it->run];
            fprintf(f, "%s,%d,%s,%d,%d,%d,%s,%d,%s,%d,%.9g,%.9g,%.9g,%.9g,%.6g,%d,%.9g,%.9g,"
                       "%.9g,%.9g,%.9g\n",
                    r->file, r->line, r->model->name, r->nodes, r->ppn, r->ranks,
                    dt_strategy_name(r->strategy), r->batch,
                    r->scaling == DT_SCALING_WEAK ? "weak" : "strong", it->held_out,
                    r->epoch_s, it->pred.epoch_s, it->pred.epoch_lo_s, it->pred.epoch_hi_s,
                    it->err_pct, it->inside, r->iter_s, it->pred.iter_s, it->pred.compute_s,
                    it->pred.comm_s, it->pred.idle_s);
        }
        return;
    }
    fprintf(f, "Predictions: %s\n", c->what);
    fprintf(f, "%-5s %-40s %6s %11s %11s %25s %9s %s\n", "line", "configuration", "batch",
            "measured", "predicted", "95% prediction interval", "error %", "");
    for (int i = 0; i < c->n; i++) {
        const struct dtv_check_item *it = &c->items[i];
        const struct dtv_run *r = &set->runs[it->run];
        char iv[64] = "-";
        if (it->pred.epoch_hi_s > it->pred.epoch_lo_s)
            snprintf(iv, sizeof iv, "[%.4g, %.4g] s", it->pred.epoch_lo_s, it->pred.epoch_hi_s);
        fprintf(f, "%-5d %-40.40s %6d %10.4gs %10.4gs %25s %+9.2f %s%s\n", r->line, r->label,
                r->batch, r->epoch_s, it->pred.epoch_s, iv, it->err_pct,
                it->held_out ? "" : "(fitted) ",
                it->pred.epoch_hi_s > it->pred.epoch_lo_s && !it->inside ? "outside" : "");
    }
    /* MAPE per strategy over the held-out runs */
    fprintf(f, "\nMAPE of held-out runs (epoch time):\n");
    int covered = 0, with_iv = 0;
    for (int s = 0; s < DT_STRAT_COUNT; s++) {
        double sum = 0;
        int k = 0;
        for (int i = 0; i < c->n; i++)
            if (c->items[i].held_out && set->runs[c->items[i].run].strategy == (enum dt_strategy)s) {
                sum += fabs(c->items[i].err_pct);
                k++;
            }
        if (k)
            fprintf(f, "  %-22s %7.2f %%  (%d run%s)\n", dt_strategy_name(s), sum / k, k,
                    k > 1 ? "s" : "");
    }
    for (int i = 0; i < c->n; i++)
        if (c->items[i].held_out && c->items[i].pred.epoch_hi_s > c->items[i].pred.epoch_lo_s) {
            with_iv++;
            covered += c->items[i].inside;
        }
    fprintf(f, "  %-22s %7.2f %%  (%d runs)\n", "overall", c->mape_held, c->n_held);
    if (c->n_fit)
        fprintf(f, "  %-22s %7.2f %%  (%d runs, in-sample)\n", "fitted runs", c->mape_fit,
                c->n_fit);
    if (with_iv)
        fprintf(f, "  measured inside the 95%% prediction interval: %d of %d held-out runs\n",
                covered, with_iv);
    print_ranking(f, set, c);
}

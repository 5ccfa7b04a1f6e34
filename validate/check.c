/* Held-out predictions and their errors. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ranktest.h"

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

/* Runs of one training job (model, node shape, samples per step) that differ only by how
 * they parallelise it share a key: data parallelism with -b 64 on 2 ranks and a 2-stage
 * pipeline with -b 128 both train on 128 samples per step. */
static void config_key(const struct dtv_run *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s %dn%dp, %d samples per step", r->model->name, r->nodes, r->ppn,
             r->global_batch);
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

/* Whether the measurements tell runs a and b apart, and which is faster (*a_faster). With
 * repeats of both: an exact two-sided Mann-Whitney U test on their repeats at 5%, the order
 * the one its ranks give. Without: a difference beyond `noise` (relative), as with a table of
 * single measurements (noise 0: any difference). */
static bool told_apart(const struct dtv_run *a, const struct dtv_run *b, double noise,
                       bool *a_faster)
{
    if (a->repeats >= 2 && b->repeats >= 2) {
        double u = dtv_mwu_u(a->repeat_iter_s, a->repeats, b->repeat_iter_s, b->repeats);
        *a_faster = u > 0.5 * a->repeats * b->repeats;
        return dtv_mwu_p_two_sided(u, a->repeats, b->repeats) < 0.05;
    }
    *a_faster = a->epoch_s < b->epoch_s;
    double lo = fmin(a->epoch_s, b->epoch_s), hi = fmax(a->epoch_s, b->epoch_s);
    return hi > lo * (1 + noise);
}

struct ranking_tally {
    int groups, checked, same_order, reproduced, fastest_right, pairs, apart, ordered;
    int min_repeats;
    /* configurations with both data parallelism and pipelines: their pairs, and the best of
     * each kind against the other */
    int mixed, mixed_pairs, mixed_apart, mixed_ordered, best_apart, best_right;
};

/* One configuration's k strategies (m: sorted by measured epoch, p: by predicted). Each pair
 * is decided once, into apart/faster[a k + b] (a, b: places in m). */
static void rank_group(FILE *f, const struct dtv_runset *set, const struct dtv_check *c,
                       const char *key, const struct ranked *m, const struct ranked *p, int k,
                       double noise, struct ranking_tally *t)
{
    bool *apart = calloc((size_t)k * (size_t)k, sizeof *apart);
    bool *faster = calloc((size_t)k * (size_t)k, sizeof *faster);
    if (!apart || !faster)
        goto out;
#define RUN(i) (&set->runs[c->items[m[i].item].run])
#define PRED(i) (c->items[m[i].item].pred.epoch_s)
    int n_apart = 0, ordered = 0, fastest = 0; /* fastest: p[0]'s place in m */
    for (int a = 0; a < k; a++) {
        fastest = m[a].item == p[0].item ? a : fastest;
        for (int b = a + 1; b < k; b++) {
            apart[a * k + b] = told_apart(RUN(a), RUN(b), noise, &faster[a * k + b]);
            t->pairs++;
            if (apart[a * k + b]) {
                n_apart++;
                ordered += (PRED(a) < PRED(b)) == faster[a * k + b];
            }
        }
    }
    /* the predicted fastest is right, or not told apart from the measured fastest */
    bool fastest_tied = fastest == 0 || !apart[fastest];
    /* data parallelism against the pipelines: every mixed pair, and the measured fastest of
     * each kind (the first of each in m) */
    int best_dp = -1, best_pipe = -1;
    for (int a = 0; a < k; a++) {
        bool pipe = dtv_run_is_pipeline(RUN(a));
        best_dp = !pipe && best_dp < 0 ? a : best_dp;
        best_pipe = pipe && best_pipe < 0 ? a : best_pipe;
        for (int b = a + 1; b < k; b++)
            if (pipe != dtv_run_is_pipeline(RUN(b))) {
                t->mixed_pairs++;
                t->mixed_apart += apart[a * k + b];
                t->mixed_ordered += apart[a * k + b] && (PRED(a) < PRED(b)) == faster[a * k + b];
            }
    }
    bool same = true;
    for (int a = 0; a < k; a++) {
        same = same && m[a].item == p[a].item;
        t->min_repeats = RUN(a)->repeats < t->min_repeats ? RUN(a)->repeats : t->min_repeats;
    }
    t->groups++;
    t->same_order += same;
    t->checked += n_apart > 0;
    t->reproduced += n_apart > 0 && n_apart == ordered;
    t->fastest_right += fastest_tied;
    t->apart += n_apart;
    t->ordered += ordered;
    /* groups: each starts at the first strategy told apart from the previous group's first */
    fprintf(f, "  %s\n    measured:  [", key);
    for (int a = 0, first = 0; a < k; a++) {
        bool starts = a > 0 && apart[first * k + a] && faster[first * k + a];
        fprintf(f, "%s%s", starts ? "] < [" : a > 0 ? " " : "", RUN(a)->setup);
        first = starts ? a : first;
    }
    fprintf(f, "]\n    predicted:");
    for (int a = 0; a < k; a++)
        fprintf(f, " %s", set->runs[c->items[p[a].item].run].setup);
    for (int a = 0; a < k; a++) /* the pairs told apart and predicted the other way */
        for (int b = a + 1; b < k; b++)
            if (apart[a * k + b] && (PRED(a) < PRED(b)) != faster[a * k + b])
                fprintf(f, "\n    misordered: %s measured %s than %s, predicted %s",
                        RUN(a)->setup, faster[a * k + b] ? "faster" : "slower", RUN(b)->setup,
                        faster[a * k + b] ? "slower" : "faster");
    if (best_dp >= 0 && best_pipe >= 0) {
        /* the faster kind: told apart by the best run of each, and predicted so or not */
        int lo = best_dp < best_pipe ? best_dp : best_pipe;
        int hi = best_dp < best_pipe ? best_pipe : best_dp;
        bool told = apart[lo * k + hi], dp_faster = (lo == best_dp) == faster[lo * k + hi];
        bool pred_dp_faster = PRED(best_dp) < PRED(best_pipe);
        t->mixed++;
        t->best_apart += told;
        t->best_right += told && pred_dp_faster == dp_faster;
        fprintf(f, "\n    data parallelism vs pipelines: the best data-parallel run (%s) "
                   "measured %s than the best pipeline (%s)%s; predicted %s%s",
                RUN(best_dp)->setup, dp_faster ? "faster" : "slower", RUN(best_pipe)->setup,
                told ? "" : ", not told apart", pred_dp_faster ? "faster" : "slower",
                !told ? "" : pred_dp_faster == dp_faster ? ": right" : ": WRONG");
    }
    fprintf(f, "\n    -> %s: %d of the %d pairs the measurements tell apart ordered right; "
               "full order %s; fastest %s\n",
            n_apart == ordered ? (n_apart ? "REPRODUCED" : "nothing to check") : "NOT reproduced",
            ordered, n_apart, same ? "the same" : "different",
            fastest_tied ? "right (or tied with the measured fastest)" : "WRONG");
#undef RUN
#undef PRED
out:
    free(apart);
    free(faster);
}

static void print_ranking(FILE *f, const struct dtv_runset *set, const struct dtv_check *c)
{
    struct ranking_tally t = {0};
    /* single runs: the repeatability of the others, when known; else any difference counts */
    double noise = set->repeat_spread > 0 ? set->repeat_spread : 0;
    bool repeats = false;
    bool *done = calloc((size_t)c->n, sizeof *done);
    struct ranked *m = calloc((size_t)c->n, sizeof *m), *p = calloc((size_t)c->n, sizeof *p);
    if (!done || !m || !p)
        goto out;
    t.min_repeats = DTV_MAX_REPEATS;
    for (int i = 0; i < c->n; i++)
        repeats = repeats || set->runs[c->items[i].run].repeats >= 2;
    fprintf(f, "\nRanking of strategies (fastest first), per configuration measured with "
               "several;\n  told apart: %s; [a b] < [c]: c is told apart from a, b is not\n",
            repeats ? "exact two-sided Mann-Whitney U test on the repeats, 5%"
                    : "single runs: any difference beyond the repeat spread");
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
        rank_group(f, set, c, ki, m, p, k, noise, &t);
    }
    if (t.groups == 0)
        fprintf(f, "  none: no configuration was measured with more than one strategy, so the "
                   "ranking is not checked.\n");
    else {
        fprintf(f, "  measured ranking reproduced (every pair told apart ordered right) in %d of "
                   "the %d configurations where the measurements tell pairs apart (%d in all); "
                   "%d of the %d pairs told apart (of %d) ordered right; fastest right in %d of "
                   "%d; full order the same in %d of %d\n",
                t.reproduced, t.checked, t.groups, t.ordered, t.apart, t.pairs, t.fastest_right,
                t.groups, t.same_order, t.groups);
        if (t.mixed)
            fprintf(f, "  data parallelism against pipelines, in the %d configurations measured "
                       "with both: the faster kind told apart in %d and predicted right in %d "
                       "of them; %d of the %d data-parallel / pipeline pairs told apart (of "
                       "%d) ordered right\n", t.mixed, t.best_apart, t.best_right,
                    t.mixed_ordered, t.mixed_apart, t.mixed_pairs);
        if (repeats && t.min_repeats < 4)
            fprintf(f, "  note: with %d repeats of a configuration no pair can be told apart at "
                       "5%% (the smallest two-sided p is %.2g): repeat each run 5 times or "
                       "more\n", t.min_repeats,
                    dtv_mwu_p_two_sided(0, t.min_repeats, t.min_repeats));
    }
out:
    free(done);
    free(m);
    free(p);
}

/* The plan buffers dtexec allocated (records with measurements.alloc_bytes) against the
 * buffer table of the plan rebuilt from the record: where they differ, dtvalidate simulates
 * another plan than the one that ran (or dtexec allocates what the plan does not say). */
static void print_memory(FILE *f, const struct dtv_runset *set, const struct dtv_check *c)
{
    int with = 0, agree = 0;
    for (int i = 0; i < c->n; i++) {
        const struct dtv_run *r = &set->runs[c->items[i].run];
        with += r->n_alloc > 0;
        agree += r->n_alloc > 0 && r->alloc_bad_rank < 0;
    }
    if (!with)
        return;
    fprintf(f, "\nPlan buffers (alloc_bytes of the records against the rebuilt plan's buffer "
               "table): every rank agrees in %d of %d runs\n", agree, with);
    for (int i = 0; i < c->n; i++) {
        const struct dtv_run *r = &set->runs[c->items[i].run];
        if (r->n_alloc > 0 && r->alloc_bad_rank >= 0)
            fprintf(f, "  line %d %s: rank %d allocated %.0f bytes, the plan has %.0f (%+.2f "
                       "%%): the record's configuration does not rebuild dtexec's plan\n",
                    r->line, r->label, r->alloc_bad_rank, r->alloc_bad_bytes, r->plan_bad_bytes,
                    100 * (r->alloc_bad_bytes - r->plan_bad_bytes) / fmax(r->plan_bad_bytes, 1));
    }
}

/* The family of a run's parallel config: how its work is split over the ranks. */
static const char *family(const struct dtv_run *r)
{
    if (r->opt.zero > 0)
        return "ZeRO";
    if (r->opt.tp > 1)
        return "tensor parallel";
    if (dt_strategy_info(r->strategy)->pipeline)
        return "pipelines";
    return r->ranks > 1 ? "data parallel" : "one rank";
}

/* Held-out MAPE of the runs whose key(run) is `name`. */
static double group_mape(const struct dtv_runset *set, const struct dtv_check *c,
                         const char *(*key)(const struct dtv_run *), const char *name, int *k)
{
    double sum = 0;
    *k = 0;
    for (int i = 0; i < c->n; i++)
        if (c->items[i].held_out && strcmp(key(&set->runs[c->items[i].run]), name) == 0) {
            sum += fabs(c->items[i].err_pct);
            (*k)++;
        }
    return *k ? sum / *k : NAN;
}

static const char *model_of(const struct dtv_run *r) { return r->model_name; }
static const char *strategy_of(const struct dtv_run *r) { return dt_strategy_name(r->strategy); }

/* MAPE per model and per family of parallel config, each group once, in order of first run. */
static void print_groups(FILE *f, const struct dtv_runset *set, const struct dtv_check *c)
{
    const char *(*keys[2])(const struct dtv_run *) = {model_of, family};
    const char *titles[2] = {"per model", "per family"};
    for (int g = 0; g < 2; g++) {
        fprintf(f, "  %s:\n", titles[g]);
        for (int i = 0; i < c->n; i++) {
            const char *name = keys[g](&set->runs[c->items[i].run]);
            bool seen = false;
            for (int j = 0; j < i && !seen; j++)
                seen = strcmp(keys[g](&set->runs[c->items[j].run]), name) == 0;
            int k;
            double mape = group_mape(set, c, keys[g], name, &k);
            if (!seen && k)
                fprintf(f, "    %-20s %7.2f %%  (%d run%s)\n", name, mape, k, k > 1 ? "s" : "");
        }
    }
}

void dtv_check_print(FILE *f, const struct dtv_runset *set, const struct dtv_check *c, bool csv)
{
    if (csv) {
        fprintf(f, "file,line,model,nodes,ppn,ranks,strategy,batch,scaling,held_out,"
                   "measured_epoch_s,predicted_epoch_s,low_s,high_s,error_pct,inside,"
                   "measured_iter_s,predicted_iter_s,compute_s,comm_s,idle_s,parallel,"
                   "bucket_bytes\n");
        for (int i = 0; i < c->n; i++) {
            const struct dtv_check_item *it = &c->items[i];
            const struct dtv_run *r = &set->runs[it->run];
            fprintf(f, "%s,%d,%s,%d,%d,%d,%s,%d,%s,%d,%.9g,%.9g,%.9g,%.9g,%.6g,%d,%.9g,%.9g,"
                       "%.9g,%.9g,%.9g,\"%s\",%.0f\n",
                    r->file, r->line, r->model->name, r->nodes, r->ppn, r->ranks,
                    dt_strategy_name(r->strategy), r->batch,
                    r->scaling == DT_SCALING_WEAK ? "weak" : "strong", it->held_out,
                    r->epoch_s, it->pred.epoch_s, it->pred.epoch_lo_s, it->pred.epoch_hi_s,
                    it->err_pct, it->inside, r->iter_s, it->pred.iter_s, it->pred.compute_s,
                    it->pred.comm_s, it->pred.idle_s, r->parallel, r->opt.bucket_bytes);
        }
        return;
    }
    fprintf(f, "Predictions: %s\n", c->what);
    int w = dtv_label_width(set);
    fprintf(f, "%-5s %-*s %6s %11s %11s %25s %9s %s\n", "line", w, "configuration", "batch",
            "measured", "predicted", "95% prediction interval", "error %", "");
    for (int i = 0; i < c->n; i++) {
        const struct dtv_check_item *it = &c->items[i];
        const struct dtv_run *r = &set->runs[it->run];
        char iv[64] = "-";
        if (it->pred.epoch_hi_s > it->pred.epoch_lo_s)
            snprintf(iv, sizeof iv, "[%.4g, %.4g] s", it->pred.epoch_lo_s, it->pred.epoch_hi_s);
        fprintf(f, "%-5d %-*.*s %6d %10.4gs %10.4gs %25s %+9.2f %s%s\n", r->line, w, w,
                r->label, r->batch, r->epoch_s, it->pred.epoch_s, iv, it->err_pct,
                it->held_out ? "" : "(fitted) ",
                it->pred.epoch_hi_s > it->pred.epoch_lo_s && !it->inside ? "outside" : "");
    }
    /* MAPE per strategy over the held-out runs */
    fprintf(f, "\nMAPE of held-out runs (epoch time):\n");
    int covered = 0, with_iv = 0;
    for (int s = 0; s < DT_STRAT_COUNT; s++) {
        int k;
        double mape = group_mape(set, c, strategy_of, dt_strategy_name(s), &k);
        if (k)
            fprintf(f, "  %-22s %7.2f %%  (%d run%s)\n", dt_strategy_name(s), mape, k,
                    k > 1 ? "s" : "");
    }
    print_groups(f, set, c);
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
    print_memory(f, set, c);
    print_ranking(f, set, c);
}

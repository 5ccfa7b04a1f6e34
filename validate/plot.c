/* gnuplot data files and scripts for a validation, rendered to PNG and SVG. */
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "player.h"

#ifndef DT_GNUPLOT
#define DT_GNUPLOT "gnuplot"
#endif

const char *dtv_gnuplot(void)
{
    const char *g = getenv("GNUPLOT");
    if (g && *g)
        return strcmp(g, "no") ? g : NULL;
    return strcmp(DT_GNUPLOT, "no") && DT_GNUPLOT[0] != '\0' ? DT_GNUPLOT : NULL;
}

struct plotter {
    const char *dir, *prefix, *title;
    const struct dtv_runset *set;
    const struct dtv_check *c;
    const struct dt_calibration *cal;
    FILE *log;
    struct dt_error *err;
    int n_scripts;
    char scripts[64][1024];
};

static FILE *open_file(struct plotter *P, const char *name, const char *ext, char *path,
                       size_t len)
{
    snprintf(path, len, "%s/%s-%s.%s", P->dir, P->prefix, name, ext);
    FILE *f = fopen(path, "w");
    if (!f)
        dt_fail(P->err, DT_ESYS, path, 0, 0, "cannot write: %s", strerror(errno));
    return f;
}

/* Opens NAME.gp with the common settings; the caller writes the plot command, then
 * end_script() renders it to PNG and SVG. */
static FILE *begin_script(struct plotter *P, const char *name, const char *title,
                          const char *xlabel, const char *ylabel)
{
    char path[1024];
    FILE *f = open_file(P, name, "gp", path, sizeof path);
    if (!f)
        return NULL;
    if (P->n_scripts < 64)
        snprintf(P->scripts[P->n_scripts++], sizeof P->scripts[0], "%s", path);
    fprintf(f, "# %s: written by dtvalidate; redraw with: cd %s && gnuplot %s-%s.gp\n", title,
            P->dir, P->prefix, name);
    fprintf(f, "set terminal pngcairo size 960,640 font 'DejaVu Sans,12'\n"
               "set output '%s-%s.png'\n"
               "set title \"%s\\n{/*0.8 %s}\"\n"
               "set xlabel '%s'\nset ylabel '%s'\n"
               "set grid\nset key top left box opaque\nset border 3\nset tics nomirror\n"
               "set style fill transparent solid 0.2 noborder\n",
            P->prefix, name, title, P->title, xlabel, ylabel);
    return f;
}

static void end_script(FILE *f, struct plotter *P, const char *name)
{
    fprintf(f, "set terminal svg size 960,640 dynamic font 'DejaVu Sans,12'\n"
               "set output '%s-%s.svg'\nreplot\nunset output\n",
            P->prefix, name);
    fclose(f);
    if (P->log)
        fprintf(P->log, "dtvalidate: %s/%s-%s.{dat,gp,png,svg}\n", P->dir, P->prefix, name);
}

static const struct dtv_run *run_of(const struct plotter *P, int i)
{
    return &P->set->runs[P->c->items[i].run];
}

/* Runs that belong to one scaling series: same model, batch, scaling and strategy (the
 * 1-rank sequential run of the same model, batch and scaling starts every series). */
static bool same_series(const struct dtv_run *a, const struct dtv_run *b)
{
    return a->model == b->model && a->batch == b->batch && a->scaling == b->scaling;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Runs of the same strategy with the same parallel config and bucket. */
static bool same_setup(const struct dtv_run *a, const struct dtv_run *b)
{
    return a->strategy == b->strategy && strcmp(a->setup, b->setup) == 0;
}

/* Items of series (model/batch/scaling of `like`, its strategy and parallel config,
 * nodes == 1), by ranks, with the 1-rank run first. Returns the count. */
static int series_items(const struct plotter *P, const struct dtv_run *like, int *idx)
{
    int n = 0;
    int key[4096];
    for (int i = 0; i < P->c->n && n < 4096; i++) {
        const struct dtv_run *r = run_of(P, i);
        if (!same_series(r, like) || r->nodes != 1)
            continue;
        if (r->ranks == 1 || same_setup(r, like))
            key[n] = r->ranks * 4096 + i, n++;
    }
    qsort(key, (size_t)n, sizeof *key, cmp_int);
    /* one run per rank count (the first) */
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || key[i] / 4096 != run_of(P, idx[m - 1])->ranks)
            idx[m++] = key[i] % 4096;
    return m;
}

struct series {
    const struct dtv_run *like;     /* a run of it with more than one rank */
};

/* Every (model, batch, scaling, strategy with its parallel config) with at least two rank
 * counts on one node. */
static int find_series(const struct plotter *P, struct series *out, int max)
{
    int n = 0;
    int idx[4096];
    for (int i = 0; i < P->c->n; i++) {
        const struct dtv_run *r = run_of(P, i);
        if (r->nodes != 1 || r->ranks == 1)
            continue;
        bool seen = false;
        for (int k = 0; k < n && !seen; k++)
            seen = same_series(out[k].like, r) && same_setup(out[k].like, r);
        if (seen || n == max)
            continue;
        if (series_items(P, r, idx) >= 2)
            out[n++] = (struct series){r};
    }
    return n;
}

static void series_title(const struct series *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s %.100s, batch %d%s", s->like->model->name, s->like->setup,
             s->like->batch,
             s->like->scaling == DT_SCALING_STRONG ? " global"
             : dtv_run_is_pipeline(s->like)     ? "/replica"
                                                : "/process");
}

static const char *const colours[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                      "#e69f00", "#56b4e9", "#000000", "#f0e442"};

/* Strong and weak scaling on one node: epoch time, speedup, efficiency, iteration time. */
static int plot_scaling(struct plotter *P)
{
    struct series ser[8];
    int ns = find_series(P, ser, 8);
    if (!ns)
        return DT_OK;
    char path[1024];
    FILE *d = open_file(P, "scaling", "dat", path, sizeof path);
    if (!d)
        return DT_ESYS;
    fprintf(d, "# one block per series (blank lines between); columns:\n# procs measured_epoch_s "
               "predicted_epoch_s low_s high_s measured_speedup predicted_speedup "
               "measured_eff predicted_eff measured_iter_s predicted_iter_s iter_low_s "
               "iter_high_s held_out\n");
    for (int k = 0; k < ns; k++) {
        int idx[4096];
        int m = series_items(P, ser[k].like, idx);
        char t[256];
        series_title(&ser[k], t, sizeof t);
        fprintf(d, "# series %d: %s\n", k, t);
        const struct dtv_run *r1 = run_of(P, idx[0]);
        const struct dtv_pred *p1 = &P->c->items[idx[0]].pred;
        bool base = r1->ranks == 1;
        for (int j = 0; j < m; j++) {
            const struct dtv_run *r = run_of(P, idx[j]);
            const struct dtv_check_item *it = &P->c->items[idx[j]];
            double ms = base ? r1->epoch_s / r->epoch_s : NAN;
            double ps = base ? p1->epoch_s / it->pred.epoch_s : NAN;
            double iters = (double)r->iters_per_epoch;
            fprintf(d, "%d %.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g %d\n",
                    r->ranks, r->epoch_s, it->pred.epoch_s, it->pred.epoch_lo_s,
                    it->pred.epoch_hi_s, ms, ps, ms / r->ranks, ps / r->ranks, r->iter_s,
                    it->pred.iter_s, it->pred.epoch_lo_s / iters, it->pred.epoch_hi_s / iters,
                    it->held_out);
        }
        fprintf(d, "\n\n");
    }
    fclose(d);
    int max_procs = 1;
    for (int i = 0; i < P->c->n; i++)
        if (run_of(P, i)->nodes == 1 && run_of(P, i)->ranks > max_procs)
            max_procs = run_of(P, i)->ranks;
    static const struct {
        const char *name, *title, *ylabel;
        int meas, pred, lo, hi;
        bool ideal, logy;
    } figs[] = {
        {"strong-scaling-epoch-time", "Strong scaling: epoch time vs processes (one node)",
         "epoch time (s)", 2, 3, 4, 5, false, true},
        {"strong-scaling-speedup", "Strong scaling: speedup vs processes (one node)",
         "speedup (epoch of 1 process / epoch)", 6, 7, 0, 0, true, false},
        {"strong-scaling-efficiency", "Strong scaling: parallel efficiency (one node)",
         "efficiency (speedup / processes)", 8, 9, 0, 0, false, false},
        {"weak-scaling-iteration-time",
         "Weak scaling: time per iteration vs processes (fixed batch per process)",
         "time per iteration (s)", 10, 11, 12, 13, false, false},
    };
    for (size_t f = 0; f < sizeof figs / sizeof figs[0]; f++) {
        FILE *g = begin_script(P, figs[f].name, figs[f].title, "processes", figs[f].ylabel);
        if (!g)
            return DT_ESYS;
        fprintf(g, "set logscale x 2\nset xtics (1, 2, 4, 8, 16, 32, 64)\n"
                   "set xrange [0.85:%g]\nset key below\n%s",
                1.2 * max_procs, figs[f].logy ? "set logscale y\n" : "set yrange [0:*]\n");
        fprintf(g, "plot ");
        for (int k = 0; k < ns; k++) {
            char t[256];
            series_title(&ser[k], t, sizeof t);
            const char *c = colours[k % 8];
            const char *dat = strrchr(path, '/') + 1;
            if (figs[f].lo)
                fprintf(g, "'%s' index %d using 1:%d:%d with filledcurves lc rgb '%s' "
                           "title '95%% prediction interval', \\\n     ",
                        dat, k, figs[f].lo, figs[f].hi, c);
            fprintf(g, "'%s' index %d using 1:%d with linespoints lw 2 pt 6 lc rgb '%s' "
                       "title 'predicted: %s', \\\n     "
                       "'%s' index %d using 1:%d with points pt 7 ps 1.5 lc rgb '%s' "
                       "title 'measured'%s",
                    dat, k, figs[f].pred, c, t, dat, k, figs[f].meas, c,
                    k + 1 < ns || figs[f].ideal ? ", \\\n     " : "\n");
        }
        if (figs[f].ideal)
            fprintf(g, "x with lines dt 2 lc rgb 'gray40' title 'ideal (linear)'\n");
        end_script(g, P, figs[f].name);
    }
    return DT_OK;
}

/* The same number of processes over more nodes (seed 002, Figure 9). */
static int plot_nodes(struct plotter *P)
{
    /* groups: (model, batch, scaling, strategy, ranks) with >= 2 node counts */
    struct {
        int item;
        int ranks;
    } groups[8];
    int ng = 0;
    for (int i = 0; i < P->c->n && ng < 8; i++) {
        const struct dtv_run *r = run_of(P, i);
        if (r->ranks < 2)
            continue;
        bool seen = false;
        int nodes_seen[64], nn = 0;
        for (int k = 0; k < ng && !seen; k++) {
            const struct dtv_run *q = run_of(P, groups[k].item);
            seen = same_series(q, r) && same_setup(q, r) && q->ranks == r->ranks;
        }
        if (seen)
            continue;
        for (int j = 0; j < P->c->n; j++) {
            const struct dtv_run *q = run_of(P, j);
            if (!same_series(q, r) || !same_setup(q, r) || q->ranks != r->ranks)
                continue;
            bool dup = false;
            for (int a = 0; a < nn; a++)
                dup = dup || nodes_seen[a] == q->nodes;
            if (!dup && nn < 64)
                nodes_seen[nn++] = q->nodes;
        }
        if (nn >= 2)
            groups[ng++].item = i, groups[ng - 1].ranks = r->ranks;
    }
    if (!ng)
        return DT_OK;
    char path[1024];
    FILE *d = open_file(P, "nodes-effect", "dat", path, sizeof path);
    if (!d)
        return DT_ESYS;
    fprintf(d, "# one block per process count; columns: nodes measured_epoch_s "
               "predicted_epoch_s low_s high_s held_out\n");
    for (int k = 0; k < ng; k++) {
        const struct dtv_run *g0 = run_of(P, groups[k].item);
        fprintf(d, "# %d processes, %s, %s\n", g0->ranks, g0->model->name, g0->setup);
        int keys[64], nk = 0;
        for (int j = 0; j < P->c->n && nk < 64; j++) {
            const struct dtv_run *q = run_of(P, j);
            if (same_series(q, g0) && same_setup(q, g0) && q->ranks == g0->ranks)
                keys[nk++] = q->nodes * 4096 + j;
        }
        qsort(keys, (size_t)nk, sizeof *keys, cmp_int);
        for (int a = 0; a < nk; a++) {
            int j = keys[a] % 4096;
            const struct dtv_run *q = run_of(P, j);
            const struct dtv_check_item *it = &P->c->items[j];
            fprintf(d, "%d %.6g %.6g %.6g %.6g %d\n", q->nodes, q->epoch_s, it->pred.epoch_s,
                    it->pred.epoch_lo_s, it->pred.epoch_hi_s, it->held_out);
        }
        fprintf(d, "\n\n");
    }
    fclose(d);
    const char *name = "nodes-effect-epoch-time";
    FILE *g = begin_script(P, name, "Effect of spreading the same processes over more nodes",
                           "nodes", "epoch time (s)");
    if (!g)
        return DT_ESYS;
    const char *dat = strrchr(path, '/') + 1;
    fprintf(g, "set logscale x 2\nset xtics (1, 2, 4, 8, 16)\nset xrange [0.85:*]\n"
               "set yrange [0:*]\nset offsets 0, 0, graph 0.45, 0\n"
               "set key inside top right vertical font ',10'\nplot ");
    for (int k = 0; k < ng; k++) {
        const struct dtv_run *g0 = run_of(P, groups[k].item);
        const char *c = colours[k % 8];
        fprintf(g, "'%s' index %d using 1:4:5 with filledcurves lc rgb '%s' notitle, \\\n     "
                   "'%s' index %d using 1:3 with linespoints lw 2 pt 6 lc rgb '%s' "
                   "title 'predicted, %d processes (%s)', \\\n     "
                   "'%s' index %d using 1:2 with points pt 7 ps 1.5 lc rgb '%s' "
                   "title 'measured, %d processes'%s",
                dat, k, c, dat, k, c, g0->ranks, g0->setup, dat, k, c,
                g0->ranks, k + 1 < ng ? ", \\\n     " : "\n");
    }
    end_script(g, P, name);
    return DT_OK;
}

/* Runs of one training job on the same ranks (model, node shape, ranks, samples per step):
 * what a breakdown compares. */
static bool same_job(const struct dtv_run *a, const struct dtv_run *b)
{
    return a->model == b->model && a->nodes == b->nodes && a->ppn == b->ppn &&
           a->ranks == b->ranks && a->global_batch == b->global_batch;
}

/* Simulates plan under P's calibration and writes its bar; false when it does not play. */
static bool breakdown_bar(struct plotter *P, FILE *d, const char *name,
                          const struct dt_plan *plan, double measured_s)
{
    struct dt_cost_params cp;
    struct dt_error e2;
    struct dt_sim_result res;
    dt_error_clear(&e2);
    dt_cost_defaults(&cp, plan->topo->groups[0].device.kind);
    if (P->cal)
        dt_calibration_apply(P->cal, &cp);
    if (dt_sim_run(plan, &cp, NULL, &res, &e2))
        return false;
    double comp = 0, comm = 0, idle = 0;
    for (int k = 0; k < res.n_ranks; k++) {
        comp += res.rank[k].compute_s / res.n_ranks;
        comm += res.rank[k].comm_s / res.n_ranks;
        idle += res.rank[k].idle_s / res.n_ranks;
    }
    /* the per-iteration framework overhead is a timer the player counts as compute */
    double fw = fmin(cp.iter_overhead_s, comp);
    fprintf(d, "%s %.6g %.6g %.6g %.6g %.6g %.6g\n", name, 1e3 * (comp - fw), 1e3 * comm,
            1e3 * idle, 1e3 * res.iter_s, 1e3 * measured_s, 1e3 * fw);
    dt_sim_result_free(&res);
    return true;
}

/* Predicted time breakdown of every data-parallel strategy that fits a measured job, and of
 * every measured configuration of it that is more than a strategy's name (a pipeline with
 * its stages and micro-batches, gradient buckets): the plan of that run. */
static int plot_breakdown(struct plotter *P)
{
    /* the jobs with the most ranks (at most 4 of them) */
    int max_ranks = 0;
    for (int i = 0; i < P->c->n; i++)
        if (run_of(P, i)->ranks > max_ranks)
            max_ranks = run_of(P, i)->ranks;
    if (max_ranks < 2)
        return DT_OK;
    int done[4], nd = 0;
    for (int i = 0; i < P->c->n && nd < 4; i++) {
        const struct dtv_run *r = run_of(P, i);
        if (r->ranks != max_ranks)
            continue;
        bool seen = false, named = false;
        for (int k = 0; k < nd; k++) {
            const struct dtv_run *q = run_of(P, done[k]);
            seen = seen || same_job(q, r);
            named = named || (q->model == r->model && q->nodes == r->nodes && q->ppn == r->ppn);
        }
        if (seen)
            continue;
        done[nd++] = i;
        char name[192], path[1024];
        int o = snprintf(name, sizeof name, "breakdown-%.100s-%dn%dp", r->model->name, r->nodes,
                         r->ppn);
        if (named) /* another job of the same model and shape has the plain name */
            snprintf(name + o, sizeof name - (size_t)o, "-b%d", r->global_batch);
        FILE *d = open_file(P, name, "dat", path, sizeof path);
        if (!d)
            return DT_ESYS;
        fprintf(d, "# predicted per iteration (ms), mean per rank; measured iteration where a "
                   "run of the strategy exists (NaN otherwise)\n"
                   "# strategy compute_ms comm_ms idle_ms total_ms measured_ms framework_ms\n");
        int bars = 0;
        /* the data-parallel strategies, on the job's batch (a pipeline's: its samples per step
         * as a global batch) */
        bool dp = !dtv_run_is_pipeline(r);
        for (int s = 0; s < DT_STRAT_COUNT; s++) {
            char why[256];
            if (s == DT_STRAT_SEQUENTIAL || dt_strategy_info(s)->pipeline ||
                !dt_strategy_fits(s, r->topo, r->ranks, why, sizeof why))
                continue;
            struct dt_plan_options po;
            dt_plan_options_init(&po);
            po.strategy = s;
            po.scaling = dp ? r->scaling : DT_SCALING_STRONG;
            po.batch = dp ? r->batch : r->global_batch;
            po.accumulate = dp ? r->opt.accumulate : 1;
            po.n_ranks = r->ranks;
            struct dt_plan *plan;
            struct dt_error e2;
            dt_error_clear(&e2);
            if (dt_plan_build(r->model, r->topo, &po, &plan, &e2))
                continue;
            double meas = NAN;
            for (int j = 0; j < P->c->n; j++) {
                const struct dtv_run *q = run_of(P, j);
                if (same_job(q, r) && (int)q->strategy == s && q->opt.bucket_bytes == 0 &&
                    q->opt.accumulate == po.accumulate)
                    meas = q->iter_s;
            }
            bars += breakdown_bar(P, d, dt_strategy_name(s), plan, meas);
            dt_plan_destroy(plan);
        }
        /* the measured configurations of the job beyond those: their own plans */
        for (int j = 0; j < P->c->n; j++) {
            const struct dtv_run *q = run_of(P, j);
            if (!same_job(q, r) || (!dtv_run_is_pipeline(q) && q->opt.bucket_bytes == 0))
                continue;
            bool dup = false;
            for (int a = 0; a < j && !dup; a++)
                dup = same_job(run_of(P, a), r) && same_setup(run_of(P, a), q);
            if (!dup)
                bars += breakdown_bar(P, d, q->setup, q->plan, q->iter_s);
        }
        fclose(d);
        if (!bars)
            continue;
        char title[256];
        char job[64]; /* a pipeline's batch is per replica: name the step's samples */
        if (dp)
            snprintf(job, sizeof job, "batch %d", r->batch);
        else
            snprintf(job, sizeof job, "%d samples per step", r->global_batch);
        snprintf(title, sizeof title, "Predicted time per iteration by strategy: %s, %d node%s "
                 "x %d processes, %s", r->model->name, r->nodes, r->nodes > 1 ? "s" : "",
                 r->ppn, job);
        FILE *g = begin_script(P, name, title, "", "time per iteration (ms)");
        if (!g)
            return DT_ESYS;
        const char *dat = strrchr(path, '/') + 1;
        fprintf(g, "set style data histograms\nset style histogram rowstacked\n"
                   "set style fill solid 0.85 border -1\nset boxwidth 0.7\n"
                   "set xtics rotate by -30 left\nset yrange [0:*]\n"
                   "set key below\nunset grid\nset grid ytics\n"
                   "plot '%s' using 7:xtic(1) title 'framework overhead per iteration' "
                   "lc rgb '#999999', \\\n"
                   "     '' using 2 title 'compute (layers, update, sums)' lc rgb '#0072b2', \\\n"
                   "     '' using 3 title 'exposed communication' lc rgb '#d55e00', \\\n"
                   "     '' using 4 title 'idle (waiting for peers)' lc rgb '#e69f00', \\\n"
                   "     '' using 0:6 with points pt 9 ps 2 lc rgb 'black' title 'measured "
                   "iteration'\n",
                dat);
        end_script(g, P, name);
    }
    return DT_OK;
}

static int plot_scatter(struct plotter *P)
{
    char path[1024];
    FILE *d = open_file(P, "predicted-vs-measured", "dat", path, sizeof path);
    if (!d)
        return DT_ESYS;
    fprintf(d, "# measured_epoch_s predicted_epoch_s low_s high_s held_out label\n");
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < P->c->n; i++) {
        const struct dtv_run *r = run_of(P, i);
        const struct dtv_check_item *it = &P->c->items[i];
        fprintf(d, "%.6g %.6g %.6g %.6g %d \"%dn%dp\"\n", r->epoch_s, it->pred.epoch_s,
                it->pred.epoch_lo_s, it->pred.epoch_hi_s, it->held_out, r->nodes, r->ppn);
        lo = fmin(lo, fmin(r->epoch_s, it->pred.epoch_lo_s));
        hi = fmax(hi, fmax(r->epoch_s, it->pred.epoch_hi_s));
    }
    fclose(d);
    const char *name = "predicted-vs-measured";
    FILE *g = begin_script(P, name, "Predicted vs measured epoch time",
                           "measured epoch time (s)", "predicted epoch time (s)");
    if (!g)
        return DT_ESYS;
    const char *dat = strrchr(path, '/') + 1;
    int n_fit = 0;
    for (int i = 0; i < P->c->n; i++)
        n_fit += !P->c->items[i].held_out;
    fprintf(g, "set logscale xy\nset xrange [%g:%g]\nset yrange [%g:%g]\nset size square\n"
               "plot x with lines dt 2 lc rgb 'gray40' title 'y = x', \\\n"
               "     '%s' using 1:($5 == 1 ? $2 : 1/0):3:4 with yerrorbars pt 7 ps 1.3 "
               "lc rgb '#d55e00' title 'held out (95%% prediction interval)'",
            lo / 1.3, hi * 1.3, lo / 1.3, hi * 1.3, dat);
    if (n_fit)
        fprintf(g, ", \\\n     '%s' using 1:($5 == 0 ? $2 : 1/0):3:4 with yerrorbars pt 6 "
                   "ps 1.3 lc rgb '#0072b2' title 'used in the fit'", dat);
    /* shape labels while they can be read */
    if (P->c->n <= 12)
        fprintf(g, ", \\\n     '%s' using 1:2:6 with labels offset 1.2,-0.6 font ',9' "
                   "notitle", dat);
    fprintf(g, "\n");
    end_script(g, P, name);
    return DT_OK;
}

static int render(struct plotter *P)
{
    const char *gp = dtv_gnuplot();
    if (!gp)
        return dt_fail(P->err, DT_ESYS, NULL, 0, 0,
                       "gnuplot is not installed (Debian package gnuplot-nox): the data and "
                       "scripts are in %s, the PNG/SVG are not", P->dir);
    for (int i = 0; i < P->n_scripts; i++) {
        const char *base = strrchr(P->scripts[i], '/') + 1;
        char cmd[2400];
        /* the scripts name their outputs relative to the directory */
        snprintf(cmd, sizeof cmd, "cd '%s' && '%s' '%s' 2>&1", P->dir, gp, base);
        FILE *pp = popen(cmd, "r");
        if (!pp)
            return dt_fail(P->err, DT_ESYS, NULL, 0, 0, "cannot run %s: %s", gp,
                           strerror(errno));
        char out[1024] = "", line[256];
        while (fgets(line, sizeof line, pp))
            if (strlen(out) + strlen(line) < sizeof out)
                strcat(out, line);
        int st = pclose(pp);
        if (st != 0)
            return dt_fail(P->err, DT_ESYS, P->scripts[i], 0, 0, "gnuplot failed (status %d): %s",
                           WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
    }
    return DT_OK;
}

int dtv_plot(const char *dir, const char *prefix, const char *title,
             const struct dtv_runset *set, const struct dtv_check *c,
             const struct dt_calibration *cal, FILE *log, struct dt_error *err)
{
    if (strchr(dir, '\'') || strchr(prefix, '\''))
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "the plot directory may not contain quotes");
    struct plotter *P = calloc(1, sizeof *P);
    if (!P)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    *P = (struct plotter){.dir = dir, .prefix = prefix, .title = title, .set = set, .c = c,
                          .cal = cal, .log = log, .err = err};
    int rc = plot_scaling(P);
    if (!rc)
        rc = plot_nodes(P);
    if (!rc)
        rc = plot_breakdown(P);
    if (!rc)
        rc = plot_scatter(P);
    if (!rc)
        rc = render(P);
    free(P);
    return rc;
}

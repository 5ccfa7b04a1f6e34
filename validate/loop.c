/* The calibration loop on this machine: dtexec runs (data parallelism, pipelines, tensor
 * parallelism, ZeRO) ->
 * records -> fit -> held-out check -> plots. */
#include "loop.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "dt/datafile.h"
#include "dt/model.h"
#include "dt/topology.h"
#include "plot.h"
#include "runs.h"

#ifndef DT_MPIEXEC
#define DT_MPIEXEC "mpiexec"
#endif

/* The loop's default fit: what runs of several models and strategies on one node can tell
 * apart -- the GEMM efficiency of conv and dense layers, the convolutions' lowering rate, the
 * memory bandwidth of ops that stream from memory and of those that fit in cache, the
 * bandwidth the node's ranks share, the link between ranks, and tiny-gpt's libm calls (the
 * tanh of its GELUs is most of its step; exp: its softmax, attention and loss), and the
 * optimizer's own streaming rate (Adam's update and the gradient reset, one prefetched pass
 * each, run at about twice the bandwidth the other ops' mix fits: dtexec --ops-csv). (The
 * per-iteration and per-op overheads were tried too: at 0.4 ms to 40 ms per iteration the
 * runs cannot see them; nor eff_norm, which only --tp 2 tells from tanh_time.) */
#define LOOP_FIT "eff_conv,eff_dense,lower_bw,mem_bw,cache_bw,node_mem_bw,intra_bw,pack_bw,opt_bw," \
                 "tanh_time,exp_time"

static bool executable(const char *path) { return access(path, X_OK) == 0; }

/* prog in PATH -> out */
static bool in_path(const char *prog, char *out, size_t len)
{
    const char *path = getenv("PATH");
    if (!path)
        return false;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, len, "%s/%s", d, prog);
        if (executable(out))
            return true;
    }
    return false;
}

static bool find_dtexec(const char *argv0, const char *given, char *out, size_t len)
{
    if (given) {
        snprintf(out, len, "%s", given);
        return executable(out);
    }
    const char *slash = strrchr(argv0, '/');
    if (slash) {
        snprintf(out, len, "%.*s/dtexec", (int)(slash - argv0), argv0);
        if (executable(out))
            return true;
    }
    return in_path("dtexec", out, len);
}

static bool safe(const char *s) { return !strchr(s, '\''); }

/* The 1-minute load average (NaN where /proc is not there). */
static double load_average(void)
{
    double l = NAN;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = NAN;
        fclose(f);
    }
    return l;
}

/* Whether files a and b hold the same bytes (false when either cannot be read). */
static bool same_contents(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int ca = getc(fa), cb = getc(fb);
        same = ca == cb;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* Each topology file the analysed runs were simulated on, with its run count, and whether its
 * contents are the current topology's: a record names the file its run used, and --reuse
 * keeps it (an older localhost.yaml, say) unless --current-topology. Returns how many runs
 * used a file that differs from `current`. */
static int print_topologies(FILE *f, const struct dtv_runset *set, const char *current)
{
    int differ = 0;
    for (int t = 0; t < set->n_topos; t++) {
        int n = 0;
        for (int i = 0; i < set->n; i++)
            n += set->runs[i].topo == set->topos[t];
        const char *key = set->topo_keys[t], *hash = strrchr(key, '#');
        int len = hash ? (int)(hash - key) : (int)strlen(key);
        char path[600];
        snprintf(path, sizeof path, "%.*s", len, key);
        bool same = same_contents(path, current);
        differ += same ? 0 : n;
        if (n && f)
            fprintf(f, "Topology: %s for %d run%s%s%s\n", path, n, n == 1 ? "" : "s",
                    same ? "" : ", which differs from the current ", same ? "" : current);
    }
    return differ;
}

struct job {
    char model[1024];
    int ranks;
    enum dt_strategy s;
    long iters;             /* per epoch */
    int batch;              /* -b: per rank (data parallelism), per replica (pipelines) */
    char flags[96];         /* the parallel config: "--pp 2 --micro-batches 4" */
    char setup[192];        /* for the log: "gpipe pp=2 micro-batches=4" */
};

/* Whether name is one of the comma-separated list's words. */
static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p; p += strcspn(p, ","), p += *p == ',')
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* Adds the job of po (on r ranks, run with `flags`), or skips it, saying why in the log, when
 * the strategy does not take these options or the plan does not compile (a small --batch,
 * say: the other runs are still worth it). Returns the new job count. */
static int add_job(const struct dt_model *model, const struct dt_topology *topo,
                   const char *mpath, int r, long iters, const struct dt_plan_options *po,
                   const char *flags, struct job *jobs, int n_jobs, int max_jobs, FILE *log)
{
    char why[256];
    bool fits = dt_strategy_fits_options(po, model, topo, r, why, sizeof why);
    if (fits) { /* some refusals come from the compile itself (a tied layer's shard) */
        struct dt_plan *plan = NULL;
        struct dt_error perr = {0};
        fits = dt_plan_build(model, topo, po, &plan, &perr) == DT_OK;
        if (!fits)
            dt_error_format(&perr, why, sizeof why);
        dt_plan_destroy(plan);
    }
    if (!fits) {
        if (log)
            fprintf(log, "dtvalidate: skipped %s %s -b %d on %d ranks of %s: %s\n",
                    dt_strategy_name(po->strategy), flags, po->batch, r, model->name, why);
        return n_jobs;
    }
    if (n_jobs == max_jobs)
        return n_jobs;
    struct job *j = &jobs[n_jobs++];
    memset(j, 0, sizeof *j);
    snprintf(j->model, sizeof j->model, "%s", mpath);
    j->ranks = r;
    j->s = po->strategy;
    j->iters = iters;
    j->batch = po->batch;
    snprintf(j->flags, sizeof j->flags, "%s", flags);
    char par[128];
    dt_parallel_format(po, par, sizeof par);
    snprintf(j->setup, sizeof j->setup, "%s %s", dt_strategy_name(po->strategy), par);
    return n_jobs;
}

/* The pipeline runs of one model on r ranks: each pipeline strategy of o->pipelines with
 * --pp 2 (r / 2 replicas) and each micro-batch count of o->micro_batches (naive-mp: one),
 * on twice the data-parallel batch per replica, so that a step trains on as many samples as
 * data parallelism's on r ranks. Returns the new job count, or -1 with err filled. */
static int pipeline_jobs(const struct dtv_loop_options *o, const struct dt_model *model,
                         const struct dt_topology *topo, const char *mpath, int r, int batch,
                         long iters, struct job *jobs, int n_jobs, int max_jobs, FILE *log,
                         struct dt_error *err)
{
    const char *strategies = o->pipelines ? o->pipelines : "gpipe,1f1b";
    const char *micro = o->micro_batches ? o->micro_batches : "2,4,8";
    if (strcmp(strategies, "none") == 0 || r % 2 || r < 2)
        return n_jobs;
    char sbuf[256];
    snprintf(sbuf, sizeof sbuf, "%s", strategies);
    for (char *save, *sn = strtok_r(sbuf, ",", &save); sn; sn = strtok_r(NULL, ",", &save)) {
        int s = dt_strategy_parse(sn);
        if (s < 0 || !dt_strategy_info(s)->pipeline)
            return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--pipelines: '%s' is not a pipeline "
                           "strategy (gpipe, naive-mp, 1f1b, interleaved)", sn), -1;
        char mbuf[256];
        snprintf(mbuf, sizeof mbuf, "%s", s == DT_STRAT_NAIVE_MP ? "0" : micro);
        for (char *s2, *mb = strtok_r(mbuf, ",", &s2); mb; mb = strtok_r(NULL, ",", &s2)) {
            char *end;
            long m = strtol(mb, &end, 10);
            if (*end || end == mb || m < (s == DT_STRAT_NAIVE_MP ? 0 : 1) || m > 4096)
                return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--micro-batches: expected whole "
                               "numbers from 1 to 4096, got '%s'", mb), -1;
            struct dt_plan_options po;
            dt_plan_options_init(&po);
            po.strategy = (enum dt_strategy)s;
            po.batch = 2 * batch;
            po.pp = 2;
            po.micro_batches = (int)m;
            po.n_ranks = r;
            char flags[64] = "--pp 2";
            if (m)
                snprintf(flags, sizeof flags, "--pp 2 --micro-batches %ld", m);
            n_jobs = add_job(model, topo, mpath, r, iters, &po, flags, jobs, n_jobs, max_jobs,
                             log);
        }
    }
    return n_jobs;
}

/* The tensor-parallel and ZeRO runs of one model on r ranks (even r only), all on ring:
 * --tp 2 (r / 2 replicas, -b twice --batch per replica: a step trains on as many samples as
 * data parallelism's on r ranks) when the model is in tensor_models, and --zero 1, 2, 3 (-b
 * per rank, as data parallelism) when it is in zero_models. */
static int sharded_jobs(const struct dtv_loop_options *o, const struct dt_model *model,
                        const struct dt_topology *topo, const char *m, const char *mpath,
                        int r, int batch, long iters, struct job *jobs, int n_jobs,
                        int max_jobs, FILE *log)
{
    const char *tmodels = o->tensor_models ? o->tensor_models : "mlp-wide,tiny-gpt";
    const char *zmodels = o->zero_models ? o->zero_models : "mlp-wide,tiny-gpt";
    if (r < 2 || r % 2)
        return n_jobs;
    struct dt_plan_options po;
    dt_plan_options_init(&po);
    po.strategy = DT_STRAT_ALLREDUCE_RING;
    po.n_ranks = r;
    if (listed(tmodels, m) || listed(tmodels, model->name)) {
        po.tp = 2;
        po.batch = 2 * batch;
        n_jobs = add_job(model, topo, mpath, r, iters, &po, "--tp 2", jobs, n_jobs, max_jobs,
                         log);
        po.tp = 0;
    }
    if (listed(zmodels, m) || listed(zmodels, model->name))
        for (int z = 1; z <= 3; z++) {
            char flags[32];
            snprintf(flags, sizeof flags, "--zero %d", z);
            po.zero = z;
            po.batch = batch;
            n_jobs = add_job(model, topo, mpath, r, iters, &po, flags, jobs, n_jobs, max_jobs,
                             log);
        }
    return n_jobs;
}

/* Iterations per epoch for a model: enough that an epoch takes about target_s at the device's
 * peak (training = forward + backward FLOPs; the real rate is lower, so epochs come out
 * longer), at least 30 and at most 2000. A fixed count would give mlp-fmnist epochs of 13 ms,
 * where a scheduler tick is noise, and cnn690k ones of over a second. */
static long iters_for(const struct dt_model *m, const struct dt_topology *t, int batch,
                      double target_s)
{
    double peak = t->groups[0].device.peak_flops[DT_FP32];
    double iter_s = (m->fwd_flops + m->bwd_flops) * batch / (peak > 0 ? peak : 1e11);
    double n = ceil(target_s / (iter_s > 0 ? iter_s : 1e-6));
    return n < 30 ? 30 : n > 2000 ? 2000 : (long)n;
}

int dtv_loop(const char *argv0, const struct dtv_loop_options *o, FILE *log,
             struct dt_error *err)
{
    char dtexec[PATH_MAX], mpiexec[PATH_MAX], topo_path[1024];
    /* --reuse analyses the records already there: no dtexec or mpiexec needed */
    if (o->reuse)
        snprintf(dtexec, sizeof dtexec, "dtexec");
    else if (!find_dtexec(argv0, o->dtexec, dtexec, sizeof dtexec)) {
        dt_fail(err, DT_EINPUT, NULL, 0, 0,
                "loop skipped: dtexec is not built (looked for %s%s): build it with `make "
                "dtexec`, or give --dtexec PATH",
                o->dtexec ? o->dtexec : "dtexec beside dtvalidate and in PATH",
                o->dtexec ? "" : "");
        return DTV_LOOP_SKIP;
    }
    const char *mp = o->mpiexec ? o->mpiexec
                     : strcmp(DT_MPIEXEC, "no") && DT_MPIEXEC[0] != '\0' ? DT_MPIEXEC
                                                                 : "mpiexec";
    if (strchr(mp, '/'))
        snprintf(mpiexec, sizeof mpiexec, "%s", mp);
    if (o->reuse)
        snprintf(mpiexec, sizeof mpiexec, "%s", mp);
    else if ((strchr(mp, '/') && !executable(mpiexec)) ||
             (!strchr(mp, '/') && !in_path(mp, mpiexec, sizeof mpiexec))) {
        dt_fail(err, DT_EINPUT, NULL, 0, 0,
                "loop skipped: %s not found (install the Debian package mpich, or give "
                "--mpiexec PATH)", mp);
        return DTV_LOOP_SKIP;
    }
    const char *topo_name = o->topology ? o->topology : "localhost";
    if (dt_find_data_file("topologies", topo_name, topo_path, sizeof topo_path))
        return dt_fail(err, DT_EINPUT, topo_name, 0, 0, "topology not found");
    if (!safe(o->dir) || !safe(dtexec) || !safe(mpiexec) || !safe(topo_path))
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "paths may not contain single quotes");
    if (mkdir(o->dir, 0777) != 0 && errno != EEXIST)
        return dt_fail(err, DT_ESYS, o->dir, 0, 0, "cannot create: %s", strerror(errno));
    struct dt_topology *topo;
    int rc = dt_topology_load(topo_path, &topo, err);
    if (rc)
        return rc;
    int max_ranks = o->max_ranks > 0 ? o->max_ranks : 2;
    if (max_ranks > topo->n_ranks)
        max_ranks = topo->n_ranks;
    int epochs = o->epochs > 0 ? o->epochs : 3;
    int batch = o->batch > 0 ? o->batch : 64;
    char records[1200], logpath[1200];
    snprintf(records, sizeof records, "%s/records.jsonl", o->dir);
    snprintf(logpath, sizeof logpath, "%s/dtexec.log", o->dir);
    /* the jobs: every model x 1..max_ranks x every data-parallel strategy that fits; on the
     * pipeline models, the pipelines with 2 stages on every even rank count */
    struct job jobs[512];
    int n_jobs = 0;
    const char *pmodels = o->pipeline_models ? o->pipeline_models : "mlp-wide,cnn690k";
    char models[512];
    snprintf(models, sizeof models, "%s", o->models ? o->models : "mlp-fmnist,mlp-wide,cnn21k,cnn690k,tiny-gpt");
    for (char *save, *m = strtok_r(models, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        char mpath[1024];
        struct dt_model *model = NULL;
        if (dt_find_data_file("models", m, mpath, sizeof mpath) || !safe(mpath)) {
            dt_topology_destroy(topo);
            return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--models: unknown model '%s'", m);
        }
        if ((rc = dt_model_load(mpath, &model, err))) {
            dt_topology_destroy(topo);
            return rc;
        }
        long iters = o->max_iters > 0 ? o->max_iters : iters_for(model, topo, batch, 0.25);
        for (int r = 1; r <= max_ranks; r++) {
            for (int s = 0; s < DT_STRAT_COUNT && n_jobs < 512; s++) {
                char why[256];
                if ((r == 1) != (s == DT_STRAT_SEQUENTIAL) || dt_strategy_info(s)->pipeline ||
                    !dt_strategy_fits(s, topo, r, why, sizeof why))
                    continue;
                struct job *j = &jobs[n_jobs++];
                memset(j, 0, sizeof *j);
                snprintf(j->model, sizeof j->model, "%s", mpath);
                j->ranks = r;
                j->s = (enum dt_strategy)s;
                j->iters = iters;
                j->batch = batch;
                snprintf(j->setup, sizeof j->setup, "%s", dt_strategy_name(s));
            }
            if (listed(pmodels, m) || listed(pmodels, model->name))
                n_jobs = pipeline_jobs(o, model, topo, mpath, r, batch, iters, jobs, n_jobs, 512,
                                       o->reuse ? NULL : log, err);
            if (n_jobs < 0)
                break;
            n_jobs = sharded_jobs(o, model, topo, m, mpath, r, batch, iters, jobs, n_jobs, 512,
                                  o->reuse ? NULL : log);
        }
        dt_model_destroy(model);
        if (n_jobs < 0) {
            dt_topology_destroy(topo);
            return DT_EINPUT;
        }
    }
    dt_topology_destroy(topo);
    double load_before = load_average(), load_after = NAN;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (!o->reuse && log && load_before > 0.5)
        fprintf(log, "dtvalidate: warning: load average %.1f on %ld CPUs before the runs: other "
                     "work competes with them and the times will be noisy\n", load_before, cpus);
    if (!o->reuse) {
        remove(records);
        remove(logpath);
        int repeat = o->repeat > 0 ? o->repeat : 5;
        if (log)
            fprintf(log, "dtvalidate: %d configurations x %d repeats = %d dtexec runs\n",
                    n_jobs, repeat, n_jobs * repeat);
        for (int k = 0; k < n_jobs * repeat; k++) {
            int j = k % n_jobs; /* rounds: a burst of other work spoils one repeat, not all */
            char cmd[16384];
            /* one BLAS thread per rank, pinned to its own core: the topology's device is
             * one core, and unpinned ranks make whole runs slow at random (dtexec(1)) */
            /* --synthetic: the samples of iters steps of batch x ranks (a pipeline's replicas
             * x its batch per replica is the same) */
            snprintf(cmd, sizeof cmd,
                     "'%.4000s' -n %d '%.4000s' -m '%.1000s' -t '%.1000s' -s %s %s -b %d -e %d "
                     "--max-iters %ld --synthetic %ld --threads 1 --bind -q --record '%.1100s' "
                     ">>'%.1100s' 2>&1",
                     mpiexec, jobs[j].ranks, dtexec, jobs[j].model, topo_path,
                     dt_strategy_name(jobs[j].s), jobs[j].flags, jobs[j].batch, epochs,
                     jobs[j].iters, jobs[j].iters * batch * jobs[j].ranks, records, logpath);
            if (log)
                fprintf(log, "dtvalidate: run %d/%d: %s on %d rank%s, %s, %ld iterations\n",
                        k + 1, n_jobs * repeat, jobs[j].model, jobs[j].ranks,
                        jobs[j].ranks > 1 ? "s" : "", jobs[j].setup, jobs[j].iters);
            int st = system(cmd);
            if (st != 0)
                return dt_fail(err, DT_ESYS, logpath, 0, 0,
                               "dtexec failed (status %d) running: %s", WIFEXITED(st) ?
                               WEXITSTATUS(st) : -1, cmd);
        }
    }
    if (!o->reuse)
        load_after = load_average();
    /* analyse */
    struct dtv_runset set;
    dtv_runset_init(&set);
    struct dtv_load_options lo = {.topology = topo_path,
                                  .topology_for_all = o->current_topology};
    if ((rc = dtv_runset_load(&set, records, &lo, err))) {
        dtv_runset_free(&set);
        return rc;
    }
    int old_topo = print_topologies(NULL, &set, topo_path);
    if (log && old_topo)
        fprintf(log, "dtvalidate: warning: %d of %d runs are simulated on the topology file "
                     "their records name, which differs from the current %s (see the report's "
                     "Topology lines): --current-topology analyses them with the current one\n",
                old_topo, set.n, topo_path);
    int dropped = dtv_runset_keep_fastest(&set);
    if (log && dropped)
        fprintf(log, "dtvalidate: %d repeated runs: kept the fastest of each configuration\n",
                dropped);
    struct dtv_fitspec spec;
    char why[512];
    if (dtv_fitspec_parse(o->fit ? o->fit : LOOP_FIT, &spec, why, sizeof why)) {
        dtv_runset_free(&set);
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--fit: %s", why);
    }
    char report[1200], calpath[1200], plots[1200];
    snprintf(report, sizeof report, "%s/report.txt", o->dir);
    snprintf(calpath, sizeof calpath, "%s/calibration.yaml", o->dir);
    snprintf(plots, sizeof plots, "%s/plots", o->dir);
    FILE *rep = fopen(report, "w");
    if (!rep) {
        dtv_runset_free(&set);
        return dt_fail(err, DT_ESYS, report, 0, 0, "cannot write: %s", strerror(errno));
    }
    struct dtv_calib all;
    struct dtv_check loo, split;
    memset(&loo, 0, sizeof loo);
    memset(&split, 0, sizeof split);
    rc = dtv_calibrate(&set, NULL, &spec, log, &all, err);
    if (!rc)
        rc = dt_calibration_save(calpath, &all.cal, err);
    if (!rc)
        rc = dtv_check_run(&set, DTV_MODE_LOO, NULL, &spec, NULL, NULL, &loo, err);
    if (!rc && o->train)
        rc = dtv_check_run(&set, DTV_MODE_SPLIT, o->train, &spec, NULL, NULL, &split, err);
    if (!rc) {
        FILE *outs[2] = {stdout, rep};
        for (int k = 0; k < 2; k++) {
            FILE *f = outs[k];
            fprintf(f, "dtvalidate loop: %d runs of dtexec (%s) in %s\n\n"
                       "=== Calibration on every run (%s) ===\n",
                    set.n, records, o->dir, calpath);
            dtv_calib_print(f, &set, &all);
            fprintf(f, "\n=== Leave-one-out ===\n");
            dtv_check_print(f, &set, &loo, false);
            if (o->train) {
                fprintf(f, "\n=== Fitted on '%s', the rest held out ===\n", o->train);
                dtv_check_print(f, &set, &split, false);
            }
            fprintf(f, "\nHeld-out MAPE: %.2f %% leave-one-out (target: 3 %%)\n", loo.mape_held);
            if (set.repeat_configs)
                fprintf(f, "Repeatability: the repeats of one configuration differ by a median "
                           "of %.0f %% (slowest / fastest - 1, %d configurations): no model can "
                           "be checked here to better than the measurements repeat.\n",
                        100 * set.repeat_spread, set.repeat_configs);
            if (isfinite(load_after))
                fprintf(f, "Machine: %ld CPUs, load average %.2f before and %.2f after the runs "
                           "(above 0.5 means other work shared the CPUs with the runs).\n",
                        cpus, load_before, load_after);
            print_topologies(f, &set, topo_path);
            if (o->train)
                fprintf(f, "Held-out MAPE: %.2f %% with --train '%s'\n", split.mape_held,
                        o->train);
        }
        mkdir(plots, 0777);
        int prc = dtv_plot(plots, "loop", "this machine, dtexec runs, leave-one-out", &set, &loo,
                           &all.cal, log, err);
        if (prc && log) {
            char buf[1400];
            dt_error_format(err, buf, sizeof buf);
            fprintf(log, "dtvalidate: plots: %s\n", buf);
        }
        if (log)
            fprintf(log, "dtvalidate: wrote %s, %s and %s/\n", report, calpath, plots);
    }
    fclose(rep);
    dtv_calib_free(&all);
    dtv_check_free(&loo);
    dtv_check_free(&split);
    dtv_runset_free(&set);
    return rc;
}

/* Loading measured runs: dtexec records (JSON lines) and reference tables (CSV). */
#include "runs.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dt/datafile.h"
#include "json.h"

#define MAX_LINE 65536
#define MAX_COLS 64

void dtv_runset_init(struct dtv_runset *set) { memset(set, 0, sizeof *set); }

void dtv_runset_free(struct dtv_runset *set)
{
    for (int i = 0; i < set->n; i++)
        dt_plan_destroy(set->runs[i].plan);
    for (int i = 0; i < set->n_models; i++)
        dt_model_destroy(set->models[i]);
    for (int i = 0; i < set->n_topos; i++)
        dt_topology_destroy(set->topos[i]);
    free(set->runs);
    free(set->models);
    free(set->topos);
    free(set->topo_keys);
    dtv_runset_init(set);
}

/* ---- caches ---- */

int dtv_runset_model(struct dtv_runset *set, const char *name, const char *file, int line,
                     int col, const struct dt_model **out, struct dt_error *err)
{
    char path[1024];
    if (dt_find_data_file("models", name, path, sizeof path))
        return dt_fail(err, DT_EINPUT, file, line, col,
                       "unknown model '%s': no such file, and no models/%s.yaml", name, name);
    for (int i = 0; i < set->n_models; i++)
        if (strcmp(set->models[i]->path, path) == 0) {
            *out = set->models[i];
            return DT_OK;
        }
    struct dt_model *m;
    struct dt_error merr;
    dt_error_clear(&merr);
    if (dt_model_load(path, &m, &merr)) {
        char buf[1200];
        dt_error_format(&merr, buf, sizeof buf);
        return dt_fail(err, DT_EINPUT, file, line, col, "model '%s': %s", name, buf);
    }
    struct dt_model **ms = realloc(set->models, (size_t)(set->n_models + 1) * sizeof *ms);
    if (!ms) {
        dt_model_destroy(m);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    set->models = ms;
    set->models[set->n_models++] = m;
    *out = m;
    return DT_OK;
}

/* The topology file `name`, reshaped to nodes x ppn when both are > 0 and differ from its
 * shape. */
int dtv_runset_topo(struct dtv_runset *set, const char *name, int nodes, int ppn,
                    const char *file, int line, int col, const struct dt_topology **out,
                    struct dt_error *err)
{
    char path[1024], key[600];
    if (dt_find_data_file("topologies", name, path, sizeof path))
        return dt_fail(err, DT_EINPUT, file, line, col,
                       "unknown topology '%s': no such file, and no topologies/%s.yaml", name,
                       name);
    snprintf(key, sizeof key, "%.500s#%dx%d", path, nodes, ppn);
    for (int i = 0; i < set->n_topos; i++)
        if (strcmp(set->topo_keys[i], key) == 0) {
            *out = set->topos[i];
            return DT_OK;
        }
    struct dt_topology *t;
    struct dt_error terr;
    dt_error_clear(&terr);
    int rc = dt_topology_load(path, &t, &terr);
    if (!rc && nodes > 0 && ppn > 0 &&
        (t->n_nodes != nodes || t->n_groups != 1 || t->groups[0].devices != ppn)) {
        struct dt_topology *r;
        rc = dt_topology_reshape(t, nodes, ppn, &r, &terr);
        dt_topology_destroy(t);
        t = rc ? NULL : r;
    }
    if (rc) {
        char buf[1200];
        dt_error_format(&terr, buf, sizeof buf);
        return dt_fail(err, DT_EINPUT, file, line, col, "topology '%s': %s", name, buf);
    }
    struct dt_topology **ts = realloc(set->topos, (size_t)(set->n_topos + 1) * sizeof *ts);
    char(*ks)[600] = realloc(set->topo_keys, (size_t)(set->n_topos + 1) * sizeof *ks);
    if (ts)
        set->topos = ts;
    if (ks)
        set->topo_keys = ks;
    if (!ts || !ks) {
        dt_topology_destroy(t);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    snprintf(set->topo_keys[set->n_topos], sizeof set->topo_keys[0], "%s", key);
    set->topos[set->n_topos++] = t;
    *out = t;
    return DT_OK;
}

struct dtv_run *dtv_runset_new_run(struct dtv_runset *set, const char *file, int line)
{
    if (set->n == set->cap) {
        int cap = set->cap ? 2 * set->cap : 16;
        struct dtv_run *r = realloc(set->runs, (size_t)cap * sizeof *r);
        if (!r)
            return NULL;
        set->runs = r;
        set->cap = cap;
    }
    struct dtv_run *run = &set->runs[set->n];
    memset(run, 0, sizeof *run);
    snprintf(run->file, sizeof run->file, "%s", file);
    run->line = line;
    run->epoch_s = run->iter_s = run->read_s = run->update_s = run->total_s = NAN;
    run->params_l2 = run->params_sum = NAN;
    run->alloc_bad_rank = -1;
    run->scaling = DT_SCALING_WEAK;
    dt_plan_options_init(&run->opt);
    return run;
}

int dtv_label_width(const struct dtv_runset *set)
{
    int w = 40;
    for (int i = 0; i < set->n; i++) {
        int n = (int)strlen(set->runs[i].label);
        w = n > w ? n : w;
    }
    return w < 100 ? w : 100;
}

bool dtv_run_is_pipeline(const struct dtv_run *run)
{
    return dt_strategy_info(run->strategy)->pipeline;
}

/* A bucket size for a name: "1MiB", "64KiB", "1000B". */
static void bucket_text(double bytes, char *buf, size_t len)
{
    if (bytes >= 1 << 20 && fmod(bytes, 1 << 20) == 0)
        snprintf(buf, len, "%.0fMiB", bytes / (1 << 20));
    else if (bytes >= 1 << 10 && fmod(bytes, 1 << 10) == 0)
        snprintf(buf, len, "%.0fKiB", bytes / (1 << 10));
    else
        snprintf(buf, len, "%.0fB", bytes);
}

/* run->parallel, run->setup ("gpipe(pp=2,micro-batches=4)") and run->label. */
static void name_run(struct dtv_run *run)
{
    dt_parallel_format(&run->opt, run->parallel, sizeof run->parallel);
    char extra[320] = "";
    snprintf(extra, sizeof extra, "%s", run->parallel);
    for (char *p = extra; *p; p++)
        if (*p == ' ')
            *p = ',';
    if (run->opt.bucket_bytes > 0) {
        char b[64];
        bucket_text(run->opt.bucket_bytes, b, sizeof b);
        size_t n = strlen(extra);
        snprintf(extra + n, sizeof extra - n, "%sbucket=%s", n ? "," : "", b);
    }
    snprintf(run->setup, sizeof run->setup, "%s%s%.150s%s", dt_strategy_name(run->strategy),
             extra[0] ? "(" : "", extra, extra[0] ? ")" : "");
    snprintf(run->label, sizeof run->label, "%dn%dp %s %.60s", run->nodes, run->ppn, run->setup,
             run->model->name);
}

/* Builds the plan of a run whose configuration is complete; fills the derived fields. */
int dtv_run_finish(struct dtv_run *run, int col, struct dt_error *err)
{
    const struct dt_topology *t = run->topo;
    if (run->ranks < 1)
        run->ranks = t->n_ranks;
    if (run->ranks > t->n_ranks)
        return dt_fail(err, DT_EINPUT, run->file, run->line, col,
                       "%d ranks do not fit topology '%s' (%d devices)", run->ranks, t->name,
                       t->n_ranks);
    if (run->ranks == 1) {
        run->strategy = DT_STRAT_SEQUENTIAL; /* a 1-process run of any strategy */
        run->opt.bucket_bytes = 0;           /* no gradients to exchange: no effect */
    }
    char why[256];
    if (!dt_strategy_fits(run->strategy, t, run->ranks, why, sizeof why))
        return dt_fail(err, DT_EINPUT, run->file, run->line, col,
                       "strategy %s cannot run on %d ranks of '%s': %s",
                       dt_strategy_name(run->strategy), run->ranks, t->name, why);
    /* the record's parallel config, bucket and optimizer are in run->opt already */
    run->opt.strategy = run->strategy;
    run->opt.scaling = run->scaling;
    run->opt.batch = run->batch;
    run->opt.n_ranks = run->ranks;
    struct dt_error perr;
    dt_error_clear(&perr);
    if (dt_plan_build(run->model, t, &run->opt, &run->plan, &perr)) {
        char buf[1200];
        dt_error_format(&perr, buf, sizeof buf);
        return dt_fail(err, DT_EINPUT, run->file, run->line, col, "cannot build the plan: %s",
                       buf);
    }
    /* sequential runs on one rank whatever the run says: a 2-rank "sequential" run is not
     * what the plan simulates */
    if (run->plan->n_ranks != run->ranks) {
        int plan_ranks = run->plan->n_ranks;
        dt_plan_destroy(run->plan);
        run->plan = NULL;
        return dt_fail(err, DT_EINPUT, run->file, run->line, col,
                       "strategy %s runs on %d rank%s, but the run has %d",
                       dt_strategy_name(run->strategy), plan_ranks, plan_ranks == 1 ? "" : "s",
                       run->ranks);
    }
    run->global_batch = run->plan->global_batch;
    run->nodes = dt_topology_node_of(t, run->ranks - 1) + 1;
    run->ppn = dt_topology_node_ranks(t, 0);
    if (run->ppn > run->ranks)
        run->ppn = run->ranks;
    name_run(run);
    return DT_OK;
}

/* ---- records (JSON lines) ---- */

struct rec_ctx {
    const char *file;
    int line;
    struct dt_error *err;
};

static int rec_fail(struct rec_ctx *c, const struct dtv_json *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int rec_fail(struct rec_ctx *c, const struct dtv_json *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dt_vfail(c->err, DT_EINPUT, c->file, c->line, at ? at->col : 0, fmt, ap);
    va_end(ap);
    return DT_EINPUT;
}

/* The same at a column inside a value (a pair of config.parallel). */
static int rec_fail_col(struct rec_ctx *c, int col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int rec_fail_col(struct rec_ctx *c, int col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dt_vfail(c->err, DT_EINPUT, c->file, c->line, col, fmt, ap);
    va_end(ap);
    return DT_EINPUT;
}

/* A field of section (e.g. config.strategy). */
static const struct dtv_json *field(const struct dtv_json *rec, const char *section,
                                    const char *key)
{
    return dtv_json_get(dtv_json_get(rec, section), key);
}

static int want_str(struct rec_ctx *c, const struct dtv_json *rec, const char *section,
                    const char *key, bool required, const char **out)
{
    const struct dtv_json *v = field(rec, section, key);
    if (!v || v->type == DTV_J_NULL) {
        if (required)
            return rec_fail(c, v ? v : rec, "record has no '%s.%s'", section, key);
        return DT_OK;
    }
    if (v->type != DTV_J_STR)
        return rec_fail(c, v, "'%s.%s' must be a string, found %s", section, key,
                        dtv_json_type_name(v->type));
    *out = v->str;
    return DT_OK;
}

/* A number in [min, max]; `unit` names what it is for messages ("seconds"). */
static int want_num(struct rec_ctx *c, const struct dtv_json *rec, const char *section,
                    const char *key, bool required, double min, double max, const char *unit,
                    double *out)
{
    const struct dtv_json *v = field(rec, section, key);
    if (!v) {
        if (required)
            return rec_fail(c, rec, "record has no '%s.%s'", section, key);
        return DT_OK;
    }
    if (v->type == DTV_J_NULL) {
        if (required)
            return rec_fail(c, v, "'%s.%s' is null (not measured, or NaN when written)",
                            section, key);
        return DT_OK;
    }
    if (v->type != DTV_J_NUM)
        return rec_fail(c, v, "'%s.%s' must be a number of %s, found %s%s%s%s", section, key,
                        unit, dtv_json_type_name(v->type), v->type == DTV_J_STR ? " '" : "",
                        v->type == DTV_J_STR ? v->str : "", v->type == DTV_J_STR ? "'" : "");
    if (!(v->num >= min && v->num <= max))
        return rec_fail(c, v, "'%s.%s' = %g is out of range [%g, %g] %s", section, key, v->num,
                        min, max, unit);
    *out = v->num;
    return DT_OK;
}

/* A whole number in [min, max]: a count of ranks, samples or iterations, or bytes. A fraction
 * would be truncated silently into another configuration than the run's. */
static int want_count(struct rec_ctx *c, const struct dtv_json *rec, const char *section,
                      const char *key, bool required, double min, double max, const char *unit,
                      double *out)
{
    int rc = want_num(c, rec, section, key, required, min, max, unit, out);
    const struct dtv_json *v = field(rec, section, key);
    if (!rc && v && v->type == DTV_J_NUM && v->num != floor(v->num))
        return rec_fail(c, v, "'%s.%s' = %.10g must be a whole number of %s", section, key,
                        v->num, unit);
    return rc;
}

/* A field that belongs in `section` but was written elsewhere (top level or another section)
 * is an error: read from nowhere, it would leave the plan silently different from the run's. */
static int misplaced(struct rec_ctx *c, const struct dtv_json *rec, const char *section,
                     const char *key)
{
    static const char *const sections[] = {"config", "environment", "measurements"};
    if (field(rec, section, key))
        return DT_OK;
    const struct dtv_json *v = dtv_json_get(rec, key);
    if (v)
        return rec_fail(c, v, "'%s' belongs in '%s', found at the top level", key, section);
    for (int i = 0; i < 3; i++)
        if (strcmp(sections[i], section) && (v = field(rec, sections[i], key)))
            return rec_fail(c, v, "'%s' belongs in '%s', found in '%s'", key, section,
                            sections[i]);
    return DT_OK;
}

/* config.parallel: blank-separated key=value pairs as dt_parallel_format writes them, each
 * set as its flag (--key value) would be. Columns point at the pair. */
static int read_parallel(struct rec_ctx *c, const struct dtv_json *v, struct dt_plan_options *o)
{
    int at;
    struct dt_error perr;
    dt_error_clear(&perr);
    if (dt_parallel_set_pairs(o, v->str, &at, &perr))
        return rec_fail_col(c, v->col + 1 + at, "'config.parallel': %s", perr.msg);
    return DT_OK;
}

/* config.optimizer ("adam-torch" is Adam; "sgd" with config.momentum > 0 keeps a momentum
 * buffer), config.bucket_bytes and config.parallel into run->opt. */
static int read_plan_options(struct rec_ctx *c, const struct dtv_json *rec, struct dtv_run *run)
{
    const char *optimizer = NULL;
    double momentum = 0, bucket = 0;
    int rc;
    if ((rc = misplaced(c, rec, "config", "parallel")) ||
        (rc = want_str(c, rec, "config", "optimizer", false, &optimizer)) ||
        (rc = want_num(c, rec, "config", "momentum", false, 0, 1, "(a fraction)", &momentum)) ||
        (rc = want_count(c, rec, "config", "bucket_bytes", false, 0, 1e15, "bytes", &bucket)))
        return rc;
    struct dt_plan_options *o = &run->opt;
    struct dt_error perr;
    dt_error_clear(&perr);
    if (optimizer && dt_parallel_set(o, "--optimizer", optimizer, &perr))
        return rec_fail(c, field(rec, "config", "optimizer"), "'config.optimizer': %s",
                        perr.msg);
    if (o->optimizer == DT_OPTIM_SGD && momentum > 0)
        o->optimizer = DT_OPTIM_MOMENTUM;
    if (bucket > 0 && bucket < 4)
        return rec_fail(c, field(rec, "config", "bucket_bytes"),
                        "'config.bucket_bytes' = %g: a bucket holds at least one float (4 "
                        "bytes); 0 means none", bucket);
    o->bucket_bytes = bucket;
    o->batch = run->batch;
    o->scaling = run->scaling;
    const char *parallel = NULL;
    if ((rc = want_str(c, rec, "config", "parallel", false, &parallel)) ||
        (parallel && (rc = read_parallel(c, field(rec, "config", "parallel"), o))))
        return rc;
    run->batch = o->batch; /* as the flags would: a pair may set them too */
    run->scaling = o->scaling;
    return DT_OK;
}

/* measurements.alloc_bytes (one entry per rank) against the plan's buffer table, and the
 * parameter checksums. After finish_run: the plan is built. */
static int read_alloc(struct rec_ctx *c, const struct dtv_json *rec, struct dtv_run *run)
{
    int rc;
    if ((rc = misplaced(c, rec, "measurements", "alloc_bytes")) ||
        (rc = misplaced(c, rec, "measurements", "params_l2")) ||
        (rc = misplaced(c, rec, "measurements", "params_sum")) ||
        (rc = want_num(c, rec, "measurements", "params_l2", false, 0, DBL_MAX, "(a norm)",
                       &run->params_l2)) ||
        (rc = want_num(c, rec, "measurements", "params_sum", false, -DBL_MAX, DBL_MAX, "(a sum)",
                       &run->params_sum)))
        return rc;
    const struct dtv_json *a = field(rec, "measurements", "alloc_bytes");
    if (!a || a->type == DTV_J_NULL)
        return DT_OK;
    if (a->type != DTV_J_ARR)
        return rec_fail(c, a, "'measurements.alloc_bytes' must be an array of bytes, one per "
                        "rank, found %s", dtv_json_type_name(a->type));
    if (a->n != run->plan->n_ranks)
        return rec_fail(c, a, "'measurements.alloc_bytes' has %d entries for %d ranks", a->n,
                        run->plan->n_ranks);
    double worst = 0;
    for (int r = 0; r < a->n; r++) {
        const struct dtv_json *v = a->items[r];
        if (v->type != DTV_J_NUM || !(v->num >= 0) || v->num != floor(v->num))
            return rec_fail(c, v, "'measurements.alloc_bytes' entry %d must be a whole number "
                            "of bytes >= 0, found %s", r, v->type != DTV_J_NUM
                            ? dtv_json_type_name(v->type) : v->num < 0 ? "a negative number"
                            : "a fraction");
        struct dt_memory mem;
        dt_plan_rank_memory(run->plan, r, &mem);
        /* the record keeps 9 significant digits */
        double d = fabs(v->num - mem.total) / fmax(mem.total, 1);
        if (fabs(v->num - mem.total) > 0.5 && d > 1e-8 &&
            (run->alloc_bad_rank < 0 || d > worst)) {
            worst = d;
            run->alloc_bad_rank = r;
            run->alloc_bad_bytes = v->num;
            run->plan_bad_bytes = mem.total;
        }
    }
    run->n_alloc = a->n;
    return DT_OK;
}

static int parse_record(struct dtv_runset *set, struct rec_ctx *c, const struct dtv_json *rec,
                        const struct dtv_load_options *opt)
{
    if (rec->type != DTV_J_OBJ)
        return rec_fail(c, rec, "a record must be a JSON object, found %s",
                        dtv_json_type_name(rec->type));
    static const char *const sections[] = {"config", "environment", "measurements"};
    for (int i = 0; i < 3; i++) {
        const struct dtv_json *s = dtv_json_get(rec, sections[i]);
        if (!s)
            return rec_fail(c, rec, "record has no '%s' object (not a dtexec record?)",
                            sections[i]);
        if (s->type != DTV_J_OBJ)
            return rec_fail(c, s, "'%s' must be an object", sections[i]);
    }
    struct dtv_run *run = dtv_runset_new_run(set, c->file, c->line);
    if (!run)
        return dt_fail(c->err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    const char *model = NULL, *model_path = NULL, *topo = NULL, *topo_path = NULL;
    const char *strategy = NULL, *scaling = "weak", *host = NULL, *git = NULL, *when = NULL;
    const char *data = NULL;
    double ranks = 0, batch = 0, iters = 0, epochs = 0, train = 0, test = 0;
    int rc;
    if ((rc = want_str(c, rec, "config", "model", true, &model)) ||
        (rc = want_str(c, rec, "config", "model_path", false, &model_path)) ||
        (rc = want_str(c, rec, "config", "topology", false, &topo)) ||
        (rc = want_str(c, rec, "config", "topology_path", false, &topo_path)) ||
        (rc = want_str(c, rec, "config", "strategy", true, &strategy)) ||
        (rc = want_str(c, rec, "config", "scaling", false, &scaling)) ||
        (rc = want_str(c, rec, "config", "data", false, &data)) ||
        (rc = want_count(c, rec, "config", "ranks", true, 1, 1 << 20, "ranks", &ranks)) ||
        (rc = want_count(c, rec, "config", "batch", true, 1, 1 << 24, "samples", &batch)) ||
        (rc = want_count(c, rec, "config", "epochs", true, 1, 1e6, "epochs", &epochs)) ||
        (rc = want_count(c, rec, "config", "iters_per_epoch", true, 1, 1e12, "iterations",
                       &iters)) ||
        (rc = want_count(c, rec, "config", "train_samples", false, 0, 1e12, "samples", &train)) ||
        (rc = want_count(c, rec, "config", "test_samples", false, 0, 1e12, "samples", &test)) ||
        (rc = want_str(c, rec, "environment", "host", false, &host)) ||
        (rc = want_str(c, rec, "environment", "git_revision", false, &git)))
        return rc;
    const struct dtv_json *w = dtv_json_get(rec, "start_utc");
    if (w && w->type == DTV_J_STR)
        when = w->str;
    int s = dt_strategy_parse(strategy);
    if (s < 0)
        return rec_fail(c, field(rec, "config", "strategy"), "unknown strategy '%s'", strategy);
    run->strategy = (enum dt_strategy)s;
    if (strcmp(scaling, "weak") && strcmp(scaling, "strong"))
        return rec_fail(c, field(rec, "config", "scaling"),
                        "scaling must be weak or strong, found '%s'", scaling);
    run->scaling = strcmp(scaling, "strong") == 0 ? DT_SCALING_STRONG : DT_SCALING_WEAK;
    run->ranks = (int)ranks;
    run->batch = (int)batch;
    run->iters_per_epoch = (long)iters;
    if ((rc = read_plan_options(c, rec, run)))
        return rc;
    if ((rc = want_num(c, rec, "measurements", "epoch_median_s", true, 1e-9, 1e7, "seconds",
                       &run->epoch_s)) ||
        (rc = want_num(c, rec, "measurements", "update_per_batch_s", false, 1e-12, 1e6,
                       "seconds", &run->update_s)) ||
        (rc = want_num(c, rec, "measurements", "read_s", false, 0, 1e6, "seconds",
                       &run->read_s)) ||
        (rc = want_num(c, rec, "measurements", "total_s", false, 0, 1e8, "seconds",
                       &run->total_s)))
        return rc;
    /* Times are seconds: an epoch far from iterations x median iteration means another unit
     * (ms for s is a factor 1000) or a broken record. Short runs on a busy machine have slow
     * iterations (first-touch, MPI progress, other processes): the mean can be several times
     * the median, and a tiny model's few iterations weigh little beside the epoch's fixed
     * costs (76 x seen for a 36-parameter model over 3 iterations), hence the wide bound. */
    run->iter_s = run->epoch_s / run->iters_per_epoch;
    if (isfinite(run->update_s)) {
        double ratio = run->iter_s / run->update_s;
        if (ratio > 300 || ratio < 1.0 / 300)
            return rec_fail(c, field(rec, "measurements", "epoch_median_s"),
                            "epoch_median_s (%g) is %.3g x iters_per_epoch (%ld) x "
                            "update_per_batch_s (%g): the times must all be seconds",
                            run->epoch_s, ratio, run->iters_per_epoch, run->update_s);
        /* The median iteration: robust to a slow first iteration and to the stalls a shared
         * machine inflicts; the measured epoch is then iterations x median iteration. */
        run->iter_s = run->update_s;
        run->epoch_s = run->iter_s * run->iters_per_epoch;
    }
    snprintf(run->host, sizeof run->host, "%s", host ? host : "");
    snprintf(run->git, sizeof run->git, "%s", git ? git : "");
    snprintf(run->when, sizeof run->when, "%s", when ? when : "");
    snprintf(run->model_name, sizeof run->model_name, "%s", model);
    const struct dtv_json *mf = field(rec, "config", model_path ? "model_path" : "model");
    if ((rc = dtv_runset_model(set, model_path ? model_path : model, c->file, c->line, mf->col,
                        &run->model, c->err)))
        return rc;
    /* The topology the run used: its file, else one named like it, else the caller's (or the
     * caller's for every run when it says so). */
    const char *tname = topo_path ? topo_path : topo;
    char tpath[1024];
    if ((!topo_path && (!topo || dt_find_data_file("topologies", topo, tpath, sizeof tpath))) ||
        (opt && opt->topology && opt->topology_for_all))
        tname = opt && opt->topology ? opt->topology : NULL;
    if (!tname)
        return rec_fail(c, field(rec, "config", "topology"),
                        "the run's topology '%s' was derived from the MPI layout and is not a "
                        "file: run dtexec with --topology FILE, or give dtvalidate --topology "
                        "FILE for such records", topo ? topo : "?");
    if (tname == topo_path && dt_find_data_file("topologies", topo_path, tpath, sizeof tpath))
        return rec_fail(c, field(rec, "config", "topology_path"),
                        "the run's topology file '%s' is not there (moved or deleted): "
                        "`dtvalidate loop --reuse --current-topology` analyses the records "
                        "with the current one", topo_path);
    snprintf(run->topo_name, sizeof run->topo_name, "%s", tname);
    const struct dtv_json *tf = field(rec, "config", "topology");
    if ((rc = dtv_runset_topo(set, tname, 0, 0, c->file, c->line, tf ? tf->col : 0, &run->topo,
                       c->err)))
        return rc;
    /* Bytes read at start: uint8 inputs of the samples each rank loads (real data only). */
    if (data && strncmp(data, "synthetic", 9) != 0 && train > 0) {
        double in = (double)dt_shape_size(&run->model->input);
        run->data_bytes = (train + test) * (in + 1);
    }
    if ((rc = dtv_run_finish(run, field(rec, "config", "strategy")->col, c->err)))
        return rc;
    if ((rc = read_alloc(c, rec, run))) {
        dt_plan_destroy(run->plan);
        run->plan = NULL;
        return rc;
    }
    set->n++;
    return DT_OK;
}

static int load_records(struct dtv_runset *set, const char *path, FILE *f,
                        const struct dtv_load_options *opt, struct dt_error *err)
{
    char *line = malloc(MAX_LINE);
    if (!line)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    int rc = DT_OK, lineno = 0, found = 0;
    while (!rc && fgets(line, MAX_LINE, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == MAX_LINE - 1 && line[len - 1] != '\n') {
            rc = dt_fail(err, DT_EINPUT, path, lineno, 0, "line longer than %d bytes",
                         MAX_LINE - 2);
            break;
        }
        line[strcspn(line, "\r\n")] = '\0';
        const char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            continue;
        struct dtv_json *rec;
        int col = 0;
        char why[256];
        if (dtv_json_parse(line, &rec, &col, why, sizeof why)) {
            rc = dt_fail(err, DT_EINPUT, path, lineno, col, "not a JSON record: %s", why);
            break;
        }
        struct rec_ctx c = {path, lineno, err};
        rc = parse_record(set, &c, rec, opt);
        dtv_json_free(rec);
        found++;
    }
    free(line);
    if (!rc && ferror(f))
        rc = dt_fail(err, DT_ESYS, path, 0, 0, "read error: %s", strerror(errno));
    if (!rc && !found)
        rc = dt_fail(err, DT_EINPUT, path, 0, 0, "no records in the file");
    return rc;
}

/* ---- reference tables (CSV) ---- */

int dtv_split_csv(char *s, char **fields, int *cols, int max, int *bad_col)
{
    int n = 0;
    char *start = s;
    for (;;) {
        char *p = s;
        while (*p == ' ')
            p++;
        if (n == max) {
            *bad_col = (int)(p - start) + 1;
            return -2;
        }
        cols[n] = (int)(p - start) + 1;
        if (*p == '"') {
            char *out = ++p;
            fields[n] = out;
            for (;;) {
                if (*p == '\0' || *p == '\n') {
                    *bad_col = cols[n];
                    return -1;
                }
                if (*p == '"' && p[1] == '"') {
                    *out++ = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    *out++ = *p++;
                }
            }
            *out = '\0';
            while (*p && *p != ',' && *p != '\n')
                p++;
        } else {
            fields[n] = p;
            while (*p && *p != ',' && *p != '\n' && *p != '\r')
                p++;
        }
        char end = *p;
        *p = '\0';
        /* trim trailing blanks */
        for (char *q = p - 1; q >= fields[n] && (*q == ' ' || *q == '\t' || *q == '\r'); q--)
            *q = '\0';
        n++;
        if (end != ',')
            return n;
        s = p + 1;
    }
}

const char *dtv_csv_why(int rc)
{
    return rc == -2 ? "too many fields (at most 64)" : "unterminated quoted field";
}

enum col_key {
    C_NODES, C_PPN, C_PROCS, C_EPOCH, C_ITER, C_READ, C_UPDATE, C_TOTAL, C_MODEL, C_STRATEGY,
    C_SCALING, C_BATCH, C_DATASET, C_TOPOLOGY, C_HOST, C_WHEN, C_DATA_BYTES, C_COUNT
};
static const char *const col_names[C_COUNT] = {
    "nodes", "ppn", "procs", "epoch_s", "iter_s", "read_s", "update_per_batch_s", "total_s",
    "model", "strategy", "scaling", "batch", "dataset_size", "topology", "host", "when",
    "data_bytes"};

static int col_parse(const char *name)
{
    for (int i = 0; i < C_COUNT; i++)
        if (strcmp(name, col_names[i]) == 0)
            return i;
    return -1;
}

struct table {
    const char *path;
    char defaults[C_COUNT][256];
    int default_line[C_COUNT];  /* the line of each '#% key: value' setting, 0 if none */
    int default_col[C_COUNT];   /* the column of its value */
    int col_of[C_COUNT];        /* field index of each key, -1 if absent */
    int header_line;            /* 0 until the header is read */
    int n_cols;
};

/* One row's value of every key and where it was written: the row's field, else the table's
 * '#%' setting (so that a bad setting is reported where it is), else NULL. */
struct row {
    const char *val[C_COUNT];
    int line[C_COUNT], col[C_COUNT];
};

/* A number: plain decimal, finite, in [min, max], whole when asked. */
static int table_num(const struct table *t, const struct row *r, int k, double min, double max,
                     bool whole, double *out, struct dt_error *err)
{
    const char *s = r->val[k], *key = col_names[k];
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    const char *d = s + (*s == '-' || *s == '+');
    if (!*s || end == s || *end || errno == ERANGE || !isfinite(v) || isalpha((unsigned char)*d))
        return dt_fail(err, DT_EINPUT, t->path, r->line[k], r->col[k],
                       "%s: expected a plain number%s, found '%s'", key,
                       strstr(key, "_s") ? " of seconds (the unit is in the column name)" : "",
                       s);
    if (v < min || v > max)
        return dt_fail(err, DT_EINPUT, t->path, r->line[k], r->col[k],
                       "%s = %g is out of range [%g, %g]", key, v, min, max);
    if (whole && v != floor(v))
        return dt_fail(err, DT_EINPUT, t->path, r->line[k], r->col[k],
                       "%s = %s must be a whole number", key, s);
    *out = v;
    return DT_OK;
}

static void row_values(const struct table *t, int line, char **f, const int *cols,
                       struct row *r)
{
    for (int k = 0; k < C_COUNT; k++) {
        int i = t->col_of[k];
        r->val[k] = i >= 0 ? f[i] : t->default_line[k] ? t->defaults[k] : NULL;
        r->line[k] = i >= 0 ? line : t->default_line[k];
        r->col[k] = i >= 0 ? cols[i] : t->default_col[k];
        if (r->val[k] && !*r->val[k])
            r->val[k] = NULL;
    }
}

/* The shape and sizes of a row: nodes, ppn, procs (0 when absent), batch and dataset_size. */
static int row_counts(const struct table *t, const struct row *r, double *nodes, double *ppn,
                      double *procs, double *batch, double *dataset, struct dt_error *err)
{
    *nodes = *ppn = *procs = 0;
    int rc;
    if ((r->val[C_NODES] &&
         (rc = table_num(t, r, C_NODES, 1, DT_TOPO_MAX_NODES, true, nodes, err))) ||
        (r->val[C_PPN] && (rc = table_num(t, r, C_PPN, 1, DT_TOPO_MAX_DEVICES, true, ppn, err))) ||
        (r->val[C_PROCS] &&
         (rc = table_num(t, r, C_PROCS, 1, DT_TOPO_MAX_RANKS, true, procs, err))) ||
        (rc = table_num(t, r, C_BATCH, 1, 1 << 24, true, batch, err)) ||
        (rc = table_num(t, r, C_DATASET, 1, 1e12, true, dataset, err)))
        return rc;
    if (*nodes && *ppn && *procs && *procs != *nodes * *ppn)
        return dt_fail(err, DT_EINPUT, t->path, r->line[C_PROCS], r->col[C_PROCS],
                       "procs (%g) is not nodes x ppn (%g x %g)", *procs, *nodes, *ppn);
    return DT_OK;
}

/* The measured times (and data_bytes) of a row into run. */
static int row_times(const struct table *t, const struct row *r, struct dtv_run *run,
                     struct dt_error *err)
{
    struct {
        int k;
        double *out;
        double max;
    } meas[] = {{C_EPOCH, &run->epoch_s, 1e8},  {C_ITER, &run->iter_s, 1e6},
                {C_READ, &run->read_s, 1e6},    {C_UPDATE, &run->update_s, 1e6},
                {C_TOTAL, &run->total_s, 1e9},  {C_DATA_BYTES, &run->data_bytes, 1e18}};
    for (size_t i = 0; i < sizeof meas / sizeof meas[0]; i++) {
        int k = meas[i].k, rc;
        if (r->val[k] && (rc = table_num(t, r, k, 0, meas[i].max, k == C_DATA_BYTES,
                                         meas[i].out, err)))
            return rc;
    }
    for (int k = C_EPOCH; k <= C_ITER; k++) /* meas[0] and meas[1] */
        if (r->val[k] && !(*meas[k - C_EPOCH].out > 0))
            return dt_fail(err, DT_EINPUT, t->path, r->line[k], r->col[k],
                           "%s: a measured time must be positive", col_names[k]);
    return DT_OK;
}

/* The topology name with {nodes} and {ppn} substituted. */
static void topology_name(const char *pattern, int nodes, int ppn, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (const char *p = pattern; *p && o + 12 < len; p++) {
        if (strncmp(p, "{nodes}", 7) == 0) {
            o += (size_t)snprintf(out + o, len - o, "%d", nodes);
            p += 6;
        } else if (strncmp(p, "{ppn}", 5) == 0) {
            o += (size_t)snprintf(out + o, len - o, "%d", ppn);
            p += 4;
        } else {
            out[o++] = *p;
            out[o] = '\0';
        }
    }
}

static int table_row(struct dtv_runset *set, const struct table *t, int line, char **f,
                     const int *cols, int n, struct dt_error *err)
{
    if (n != t->n_cols)
        return dt_fail(err, DT_EINPUT, t->path, line, 0,
                       "%d fields where the header has %d", n, t->n_cols);
    struct row r;
    row_values(t, line, f, cols, &r);
    struct dtv_run *run = dtv_runset_new_run(set, t->path, line);
    if (!run)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    static const char *const need[] = {"model", "strategy", "batch", "dataset_size", "topology"};
    static const int need_k[] = {C_MODEL, C_STRATEGY, C_BATCH, C_DATASET, C_TOPOLOGY};
    for (int i = 0; i < 5; i++)
        if (!r.val[need_k[i]])
            return dt_fail(err, DT_EINPUT, t->path, line, 0,
                           "the run has no %s: add a '%s' column or a '#%% %s: ...' line",
                           need[i], need[i], need[i]);
    if (!r.val[C_EPOCH] && !r.val[C_ITER])
        return dt_fail(err, DT_EINPUT, t->path, line, 0, "the run has no epoch_s (or iter_s)");
    double nodes, ppn, procs, batch, dataset;
    int rc;
    if ((rc = row_counts(t, &r, &nodes, &ppn, &procs, &batch, &dataset, err)) ||
        (rc = row_times(t, &r, run, err)))
        return rc;
    int s = dt_strategy_parse(r.val[C_STRATEGY]);
    if (s < 0)
        return dt_fail(err, DT_EINPUT, t->path, r.line[C_STRATEGY], r.col[C_STRATEGY],
                       "unknown strategy '%s'", r.val[C_STRATEGY]);
    run->strategy = (enum dt_strategy)s;
    const char *scaling = r.val[C_SCALING];
    if (scaling && strcmp(scaling, "weak") && strcmp(scaling, "strong"))
        return dt_fail(err, DT_EINPUT, t->path, r.line[C_SCALING], r.col[C_SCALING],
                       "scaling must be weak or strong, found '%s'", scaling);
    if (scaling && strcmp(scaling, "strong") == 0)
        run->scaling = DT_SCALING_STRONG;
    run->batch = (int)batch;
    run->ranks = (int)(procs ? procs : nodes && ppn ? nodes * ppn : 0);
    snprintf(run->model_name, sizeof run->model_name, "%s", r.val[C_MODEL]);
    snprintf(run->host, sizeof run->host, "%s", r.val[C_HOST] ? r.val[C_HOST] : "");
    snprintf(run->when, sizeof run->when, "%s", r.val[C_WHEN] ? r.val[C_WHEN] : "");
    topology_name(r.val[C_TOPOLOGY], (int)nodes, (int)ppn, run->topo_name,
                  sizeof run->topo_name);
    /* what finish_run refuses is this row's: at its strategy field, or the whole row when the
     * strategy is a table-wide setting (its column is on another line) */
    int strategy_col = r.line[C_STRATEGY] == line ? r.col[C_STRATEGY] : 0;
    if ((rc = dtv_runset_model(set, r.val[C_MODEL], t->path, r.line[C_MODEL], r.col[C_MODEL],
                        &run->model, err)) ||
        (rc = dtv_runset_topo(set, run->topo_name, (int)nodes, (int)ppn, t->path, r.line[C_TOPOLOGY],
                       r.col[C_TOPOLOGY], &run->topo, err)) ||
        (rc = dtv_run_finish(run, strategy_col, err)))
        return rc;
    run->iters_per_epoch = ((long)dataset + run->global_batch - 1) / run->global_batch;
    if (r.val[C_EPOCH] && !r.val[C_ITER])
        run->iter_s = run->epoch_s / run->iters_per_epoch;
    if (!r.val[C_EPOCH])
        run->epoch_s = run->iter_s * run->iters_per_epoch;
    set->n++;
    return DT_OK;
}

/* "#% key: value" at p (line lineno): a table-wide value of a column the table does not
 * have. Each key once, before the header: a second value, or a setting after rows that
 * were read without it, would leave it unclear which value a run had. */
static int table_setting(struct table *t, char *line, char *p, int lineno,
                         struct dt_error *err)
{
    char *k = p + 2;
    while (*k == ' ')
        k++;
    int kcol = (int)(k - line) + 1;
    char *colon = strchr(k, ':');
    if (!colon)
        return dt_fail(err, DT_EINPUT, t->path, lineno, kcol, "expected '#%% key: value'");
    *colon = '\0';
    for (char *q = colon - 1; q >= k && *q == ' '; q--)
        *q = '\0';
    int key = col_parse(k);
    if (key < 0 || key <= C_TOTAL)
        return dt_fail(err, DT_EINPUT, t->path, lineno, kcol,
                       "'%s' cannot be a table-wide setting (settings: model, strategy, "
                       "scaling, batch, dataset_size, topology, host, when, data_bytes)", k);
    if (t->header_line)
        return dt_fail(err, DT_EINPUT, t->path, lineno, kcol,
                       "'#%% %s' comes after the header (line %d): settings go before it", k,
                       t->header_line);
    if (t->default_line[key])
        return dt_fail(err, DT_EINPUT, t->path, lineno, kcol,
                       "'#%% %s' is set twice (first on line %d)", k, t->default_line[key]);
    char *v = colon + 1;
    while (*v == ' ')
        v++;
    v[strcspn(v, "\r\n")] = '\0';
    for (char *q = v + strlen(v) - 1; q >= v && *q == ' '; q--)
        *q = '\0';
    snprintf(t->defaults[key], sizeof t->defaults[key], "%s", v);
    t->default_line[key] = lineno;
    t->default_col[key] = (int)(v - line) + 1;
    return DT_OK;
}

static int table_header(struct table *t, char **fields, const int *cols, int n, int lineno,
                        struct dt_error *err)
{
    for (int i = 0; i < n; i++) {
        int k = col_parse(fields[i]);
        if (k < 0)
            continue; /* other columns (test accuracy...) are kept in the file, not used */
        if (t->col_of[k] >= 0)
            return dt_fail(err, DT_EINPUT, t->path, lineno, cols[i],
                           "column '%s' appears twice", fields[i]);
        if (t->default_line[k])
            return dt_fail(err, DT_EINPUT, t->path, lineno, cols[i],
                           "'%s' is both a column and a '#%% %s' setting (line %d)", fields[i],
                           fields[i], t->default_line[k]);
        t->col_of[k] = i;
    }
    t->n_cols = n;
    t->header_line = lineno;
    if (t->col_of[C_EPOCH] < 0 && t->col_of[C_ITER] < 0)
        return dt_fail(err, DT_EINPUT, t->path, lineno, 1,
                       "the header has no epoch_s or iter_s column");
    return DT_OK;
}

static int load_table(struct dtv_runset *set, const char *path, FILE *f,
                      struct dt_error *err)
{
    struct table t = {.path = path};
    for (int k = 0; k < C_COUNT; k++)
        t.col_of[k] = -1;
    char line[4096];
    char *fields[MAX_COLS];
    int cols[MAX_COLS];
    int lineno = 0, rc = DT_OK, rows = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f))
            return dt_fail(err, DT_EINPUT, path, lineno, 0, "line longer than %zu bytes",
                           sizeof line - 2);
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\n' || *p == '\r' || !*p)
            continue;
        if (strncmp(p, "#%", 2) == 0) {
            rc = table_setting(&t, line, p, lineno, err);
            continue;
        }
        if (*p == '#')
            continue;
        int bad = 0, n = dtv_split_csv(line, fields, cols, MAX_COLS, &bad);
        if (n < 0)
            return dt_fail(err, DT_EINPUT, path, lineno, bad, "%s", dtv_csv_why(n));
        if (!t.header_line) {
            rc = table_header(&t, fields, cols, n, lineno, err);
            continue;
        }
        rc = table_row(set, &t, lineno, fields, cols, n, err);
        rows++;
    }
    if (!rc && ferror(f))
        rc = dt_fail(err, DT_ESYS, path, 0, 0, "read error: %s", strerror(errno));
    if (!rc && !rows)
        rc = dt_fail(err, DT_EINPUT, path, 0, 0, "no runs in the table");
    return rc;
}

FILE *dtv_open_input(const char *path, const char *what, struct dt_error *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        dt_fail(err, DT_EINPUT, path, 0, 0, "is a directory, not %s", what);
        return NULL;
    }
    FILE *f = fopen(path, "r");
    if (!f)
        dt_fail(err, DT_EINPUT, path, 0, 0, "cannot open: %s", strerror(errno));
    return f;
}

int dtv_runset_load(struct dtv_runset *set, const char *path,
                    const struct dtv_load_options *opt, struct dt_error *err)
{
    char found[1024];
    if (dt_find_data_file("validate/data", path, found, sizeof found))
        snprintf(found, sizeof found, "%s", path);
    FILE *f = dtv_open_input(found, "a records file (dtexec --record) or a reference table "
                             "(.csv)", err);
    if (!f)
        return DT_EINPUT;
    size_t len = strlen(found);
    bool csv = len > 4 && strcmp(found + len - 4, ".csv") == 0;
    int first = set->n;
    int rc = csv ? load_table(set, found, f, err) : load_records(set, found, f, opt, err);
    fclose(f);
    if (rc) {
        /* drop what this file added, so the set stays consistent */
        for (int i = first; i < set->n; i++)
            dt_plan_destroy(set->runs[i].plan);
        set->n = first;
    }
    return rc;
}

/* Runs of the same configuration (model, topology, ranks, strategy with its parallel config
 * and bucket, scaling, batch). */
static bool same_config(const struct dtv_run *a, const struct dtv_run *b)
{
    return a->model == b->model && a->topo == b->topo && a->ranks == b->ranks &&
           a->strategy == b->strategy && a->scaling == b->scaling && a->batch == b->batch &&
           a->iters_per_epoch == b->iters_per_epoch && strcmp(a->setup, b->setup) == 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* How repeatable the kept runs are: over the configurations run more than once, the median
 * of (slowest / fastest repeat - 1); NaN when none was repeated. */
static double repeat_spread(const struct dtv_runset *set, int *n_configs)
{
    double *spread = malloc((size_t)(set->n + 1) * sizeof *spread);
    int k = 0;
    for (int i = 0; spread && i < set->n; i++) {
        const struct dtv_run *r = &set->runs[i];
        double hi = r->repeat_iter_s[0];
        for (int j = 1; j < r->repeats; j++)
            hi = fmax(hi, r->repeat_iter_s[j]);
        if (r->repeats > 1)
            spread[k++] = hi / r->iter_s - 1; /* iter_s: the fastest repeat's */
    }
    double med = NAN;
    if (k) {
        qsort(spread, (size_t)k, sizeof *spread, cmp_double);
        med = k % 2 ? spread[k / 2] : (spread[k / 2 - 1] + spread[k / 2]) / 2;
    }
    free(spread);
    *n_configs = k;
    return med;
}

int dtv_runset_keep_fastest(struct dtv_runset *set)
{
    int kept = 0, dropped = 0;
    for (int i = 0; i < set->n; i++) {
        int j;
        for (j = 0; j < kept && !same_config(&set->runs[j], &set->runs[i]); j++)
            ;
        struct dtv_run *run = &set->runs[i], *k = &set->runs[j];
        if (j == kept) {
            *k = *run;
            k->repeats = 1;
            k->repeat_iter_s[0] = run->iter_s;
            kept++;
            continue;
        }
        dropped++;
        if (k->repeats < DTV_MAX_REPEATS)
            k->repeat_iter_s[k->repeats++] = run->iter_s;
        struct dtv_run *slower = run->iter_s < k->iter_s ? k : run;
        dt_plan_destroy(slower->plan);
        if (slower == k) { /* the faster run's record, with the repeats gathered so far */
            memcpy(run->repeat_iter_s, k->repeat_iter_s, sizeof run->repeat_iter_s);
            run->repeats = k->repeats;
            *k = *run;
        }
    }
    set->n = kept;
    set->repeat_spread = repeat_spread(set, &set->repeat_configs);
    return dropped;
}

/* ---- selections ---- */

static const char *const sel_keys[] = {"nodes", "ppn", "ranks", "strategy", "model",
                                       "topology", "line", "label", "parallel", NULL};

int dtv_select_parse_check(const char *sel, char *why, size_t len)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", sel ? sel : "");
    for (char *save, *w = strtok_r(buf, " ;", &save); w; w = strtok_r(NULL, " ;", &save)) {
        char *eq = strchr(w, '=');
        if (!eq || eq == w || !eq[1]) {
            snprintf(why, len, "expected key=value[,value...], got '%s'", w);
            return -1;
        }
        *eq = '\0';
        bool ok = false;
        for (const char *const *k = sel_keys; *k; k++)
            ok = ok || strcmp(*k, w) == 0;
        if (!ok) {
            snprintf(why, len, "unknown key '%s' (keys: nodes ppn ranks strategy model "
                               "topology line label parallel)", w);
            return -1;
        }
    }
    return 0;
}

static bool value_matches(const struct dtv_run *r, const char *key, const char *v)
{
    char num[32];
    if (strcmp(key, "nodes") == 0)
        snprintf(num, sizeof num, "%d", r->nodes);
    else if (strcmp(key, "ppn") == 0)
        snprintf(num, sizeof num, "%d", r->ppn);
    else if (strcmp(key, "ranks") == 0)
        snprintf(num, sizeof num, "%d", r->ranks);
    else if (strcmp(key, "line") == 0)
        snprintf(num, sizeof num, "%d", r->line);
    else if (strcmp(key, "strategy") == 0)
        return strcmp(v, dt_strategy_name(r->strategy)) == 0;
    else if (strcmp(key, "model") == 0)
        return strcmp(v, r->model->name) == 0 || strcmp(v, r->model_name) == 0;
    else if (strcmp(key, "topology") == 0)
        return strcmp(v, r->topo_name) == 0 || strcmp(v, r->topo->name) == 0;
    else if (strcmp(key, "label") == 0)
        return strstr(r->label, v) != NULL;
    else if (strcmp(key, "parallel") == 0) {
        if (strcmp(v, "none") == 0)
            return r->parallel[0] == '\0';
        size_t n = strlen(v);
        for (const char *p = r->parallel; *p; p += strcspn(p, " "), p += *p == ' ')
            if (strncmp(p, v, n) == 0 && (p[n] == ' ' || p[n] == '\0'))
                return true;
        return false;
    }
    else
        return false;
    return strcmp(v, num) == 0;
}

bool dtv_run_matches(const struct dtv_run *run, const char *sel)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", sel ? sel : "");
    for (char *save, *w = strtok_r(buf, " ;", &save); w; w = strtok_r(NULL, " ;", &save)) {
        char *eq = strchr(w, '=');
        if (!eq)
            return false;
        *eq = '\0';
        bool any = false;
        for (char *s2, *v = strtok_r(eq + 1, ",", &s2); v && !any; v = strtok_r(NULL, ",", &s2))
            any = value_matches(run, w, v);
        if (!any)
            return false;
    }
    return true;
}

/* See testdata.h. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testdata.h"

static void data_path(const char *dir, const char *name, char *path, size_t len)
{
    const char *top = getenv("top_srcdir");
    snprintf(path, len, "%s/%s/%s.yaml", top ? top : ".", dir, name);
}

struct dt_model *test_zoo_model(const char *name)
{
    char path[1024];
    data_path("models", name, path, sizeof path);
    struct dt_model *m;
    struct dt_error err;
    if (dt_model_load(path, &m, &err) != DT_OK)
        fail_msg("model %s: %s", path, err.msg);
    return m;
}

int test_zoo_each(void (*fn)(const struct dt_model *m, void *ctx), void *ctx)
{
    const char *top = getenv("top_srcdir");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models", top ? top : ".");
    DIR *dp = opendir(dir);
    if (!dp)
        fail_msg("cannot open %s", dir);
    int models = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".yaml"))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(n - 5), e->d_name);
        struct dt_model *m = test_zoo_model(name);
        fn(m, ctx);
        dt_model_destroy(m);
        models++;
    }
    closedir(dp);
    return models;
}

struct dt_model *test_model_text(const char *text)
{
    struct dt_model *m;
    struct dt_error err;
    if (dt_model_load_string("test.yaml", text, &m, &err) != DT_OK)
        fail_msg("model: %s", err.msg);
    return m;
}

struct dt_model *test_chain_model(int n, int width)
{
    char text[4096];
    int len = snprintf(text, sizeof text, "name: chain\nsource: test\ninput: {shape: [%d]}\n"
                       "classes: %d\nlayers:\n", width, width);
    for (int i = 0; i < n && len < (int)sizeof text; i++)
        len += snprintf(text + len, sizeof text - (size_t)len, "  - {kind: dense, units: %d}\n",
                        width);
    if (len >= (int)sizeof text)
        fail_msg("a chain of %d layers does not fit the text buffer", n);
    return test_model_text(text);
}

int test_count_layers(const struct dt_model *m, enum dt_layer_kind k)
{
    int n = 0;
    for (int l = 0; l < m->n_layers; l++)
        n += m->layers[l].kind == k;
    return n;
}

struct dt_topology *test_zoo_topology(const char *name)
{
    char path[1024];
    data_path("topologies", name, path, sizeof path);
    struct dt_topology *t;
    struct dt_error err;
    if (dt_topology_load(path, &t, &err) != DT_OK)
        fail_msg("topology %s: %s", path, err.msg);
    return t;
}

struct dt_plan_options test_options(enum dt_strategy s, int batch, const char *flags)
{
    struct dt_plan_options o;
    dt_plan_options_init(&o);
    o.strategy = s;
    o.batch = batch;
    struct dt_error err;
    int at;
    if (dt_parallel_set_pairs(&o, flags, &at, &err) != DT_OK)
        fail_msg("'%s' at %d: %s", flags, at, err.msg);
    return o;
}

struct dt_plan *test_plan(const struct dt_model *m, const struct dt_topology *t,
                          enum dt_strategy s, int batch, const char *flags)
{
    struct dt_plan_options o = test_options(s, batch, flags);
    struct dt_plan *plan = NULL;
    struct dt_error err;
    if (dt_plan_build(m, t, &o, &plan, &err) != DT_OK)
        fail_msg("%s %s -b %d '%s': %s", m->name, dt_strategy_name(s), batch, flags, err.msg);
    return plan;
}

struct zoo_plans {
    const struct dt_topology *t;
    const struct test_zoo_run *runs;
    int n, plans;
    long sum;
    long (*check)(const struct dt_plan *p, int r, const char *what);
};

static void plans_of(const struct dt_model *m, void *ctx)
{
    struct zoo_plans *z = ctx;
    for (int i = 0; i < z->n; i++) {
        const struct test_zoo_run *run = &z->runs[i];
        struct dt_plan_options o = test_options(run->s, run->batch, run->flags);
        if (run->n_ranks)
            o.n_ranks = run->n_ranks;
        struct dt_plan *plan;
        struct dt_error err;
        if (dt_plan_build(m, z->t, &o, &plan, &err) != DT_OK)
            continue; /* the options do not apply to this model */
        char what[256];
        snprintf(what, sizeof what, "%s %s %s", m->name, dt_strategy_name(run->s), run->flags);
        for (int r = 0; r < plan->n_ranks; r++)
            z->sum += z->check(plan, r, what);
        z->plans++;
        dt_plan_destroy(plan);
    }
}

long test_zoo_plans(const struct dt_topology *t, const struct test_zoo_run *runs, int n,
                    long (*check)(const struct dt_plan *p, int r, const char *what),
                    int *models, int *plans)
{
    struct zoo_plans z = {t, runs, n, 0, 0, check};
    *models = test_zoo_each(plans_of, &z);
    *plans = z.plans;
    return z.sum;
}

/* What the C tests load and build alike: zoo models and topologies by name (from
 * $top_srcdir), and parallel configs from "flag=value ..." text. Each fails the running
 * CMocka test with the loader's message. */
#ifndef DT_TESTDATA_H
#define DT_TESTDATA_H

#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"

struct dt_model *test_zoo_model(const char *name);           /* models/NAME.yaml */
struct dt_topology *test_zoo_topology(const char *name);     /* topologies/NAME.yaml */
struct dt_model *test_model_text(const char *text);          /* a model file's text */
/* Calls fn on each zoo model (each .yaml file in models/), then destroys it; returns how
 * many. */
int test_zoo_each(void (*fn)(const struct dt_model *m, void *ctx), void *ctx);
/* "chain": n dense layers of `width` units on `width` inputs, `width` classes. */
struct dt_model *test_chain_model(int n, int width);
/* How many of m's layers are of kind k. */
int test_count_layers(const struct dt_model *m, enum dt_layer_kind k);
/* Defaults, then strategy s, the batch and the pairs of flags (dt_parallel_set_pairs). */
struct dt_plan_options test_options(enum dt_strategy s, int batch, const char *flags);
/* The plan of those options (dt_plan_build, which also checks it); a refusal fails the test. */
struct dt_plan *test_plan(const struct dt_model *m, const struct dt_topology *t,
                          enum dt_strategy s, int batch, const char *flags);
/* One configuration of test_zoo_plans: strategy, batch, ranks (0: the topology's), flags. */
struct test_zoo_run {
    enum dt_strategy s;
    int batch, n_ranks;
    const char *flags;
};
/* Builds every zoo model's plan for each of the n runs on t (a run the model refuses is
 * skipped) and calls check on each rank of each plan, `what` naming model, strategy and flags;
 * returns the sum of check's values; *models and *plans count what was built. */
long test_zoo_plans(const struct dt_topology *t, const struct test_zoo_run *runs, int n,
                    long (*check)(const struct dt_plan *p, int r, const char *what),
                    int *models, int *plans);

#endif

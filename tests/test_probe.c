/* dt_plan_probe, the plan --recommend sizes candidates with: it builds only the first and the
 * last data-parallel replica's ranks. Held to the full plan (dt_plan_build) on zoo models and
 * every family with three or more replicas: each rank it builds has the full plan's ops and
 * buffer table, and the largest rank of the full plan (memory and op count) is one it built —
 * the middle replicas it drops are never larger. Binomial trees and the hierarchical
 * allreduce are built whole (their inner ranks are larger: the test saw 20 % more). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"
#include "testdata.h"

static void same_as_full(const char *model, enum dt_strategy s, int batch, const char *flags)
{
    struct dt_model *m = test_zoo_model(model);
    struct dt_topology *t = test_zoo_topology("2n4p");
    struct dt_plan_options o = test_options(s, batch, flags);
    struct dt_plan *full, *probe;
    struct dt_error err;
    if (dt_plan_build(m, t, &o, &full, &err) || dt_plan_probe(m, t, &o, &probe, &err))
        fail_msg("%s %s %s: %s", model, dt_strategy_name(s), flags, err.msg);
    double full_max = 0, probe_max = 0;
    int dropped = 0, full_ops = 0, probe_ops = 0;
    for (int r = 0; r < full->n_ranks; r++) {
        struct dt_memory a, b;
        dt_plan_rank_memory(full, r, &a);
        dt_plan_rank_memory(probe, r, &b);
        full_max = a.total > full_max ? a.total : full_max;
        full_ops = full->ranks[r].n_ops > full_ops ? full->ranks[r].n_ops : full_ops;
        if (dt_plan_dropped(probe, r)) {
            dropped++;
            assert_int_equal(probe->ranks[r].n_ops, 0);
            assert_int_equal(probe->ranks[r].n_bufs, 0);
            continue;
        }
        if (a.total != b.total || full->ranks[r].n_ops != probe->ranks[r].n_ops)
            fail_msg("%s %s %s rank %d: full %.0f B %d ops, probe %.0f B %d ops", model,
                     dt_strategy_name(s), flags, r, a.total, full->ranks[r].n_ops, b.total,
                     probe->ranks[r].n_ops);
        probe_max = b.total > probe_max ? b.total : probe_max;
        probe_ops = probe->ranks[r].n_ops > probe_ops ? probe->ranks[r].n_ops : probe_ops;
    }
    if (full_max != probe_max || full_ops != probe_ops)
        fail_msg("%s %s %s: largest rank %.0f B %d ops, probe's %.0f B %d ops", model,
                 dt_strategy_name(s), flags, full_max, full_ops, probe_max, probe_ops);
    /* 3 or more replicas: the probe must leave some out, except where they differ */
    bool alike = s != DT_STRAT_REDUCE_BCAST_BINOMIAL && s != DT_STRAT_ALLREDUCE_HIERARCHICAL &&
                 s != DT_STRAT_ALLREDUCE_TREE && !strstr(flags, "grad-alg=tree");
    assert_int_equal(dropped > 0, alike);
    dt_plan_destroy(full);
    dt_plan_destroy(probe);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

static void data_parallel(void **state)
{
    (void)state;
    const char *models[] = {"mlp-wide", "cnn690k", "tiny-gpt"};
    for (int i = 0; i < 3; i++)
        for (int s = DT_STRAT_REDUCE_BCAST_LINEAR; s <= DT_STRAT_PS_SHARDED; s++) {
            same_as_full(models[i], (enum dt_strategy)s, 24, "scaling=strong");
            same_as_full(models[i], (enum dt_strategy)s, 7, "");
        }
    same_as_full("mlp-wide", DT_STRAT_ALLREDUCE_RING, 48, "scaling=strong accumulate=2");
    same_as_full("mlp-wide", DT_STRAT_ALLREDUCE_RING, 8, "bucket=1MiB");
    same_as_full("cnn690k", DT_STRAT_ALLREDUCE_TREE, 24, "scaling=strong");
    same_as_full("mlp-wide", DT_STRAT_ALLREDUCE_TREE, 7, "");
}

static void sharded(void **state)
{
    (void)state;
    for (int z = 1; z <= 3; z++) {
        char flags[32];
        snprintf(flags, sizeof flags, "zero=%d", z);
        same_as_full("mlp-wide", DT_STRAT_ALLREDUCE_RING, 5, flags);
        same_as_full("cnn690k", DT_STRAT_PS_SHARDED, 4, flags);
    }
    same_as_full("mlp-wide", DT_STRAT_ALLREDUCE_RING, 6, "tp=2");
    same_as_full("tiny-gpt", DT_STRAT_ALLREDUCE_LIBRARY, 6, "tp=2");
}

static void pipelines(void **state)
{
    (void)state;
    same_as_full("mlp-wide", DT_STRAT_GPIPE, 16, "pp=2 dp=4 micro-batches=4");
    same_as_full("cnn690k", DT_STRAT_1F1B, 16, "pp=2 dp=4 micro-batches=4");
    same_as_full("mlp-wide", DT_STRAT_INTERLEAVED, 16, "pp=2 dp=4 micro-batches=4 chunks=2");
    same_as_full("mlp-wide", DT_STRAT_GPIPE, 16, "pp=2 dp=4 micro-batches=4 grad-alg=tree");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(data_parallel),
        cmocka_unit_test(sharded),
        cmocka_unit_test(pipelines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

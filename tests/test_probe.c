/* dt_plan_probe, the plan --recommend sizes candidates with: it builds only the first and the
 * last data-parallel replica's ranks, of a pipeline whose replicas get the same rows only the
 * first's (dt_plan.probe_replica), and of a pipeline with --tp only tensor rank 0 of each
 * stage (dt_plan.probe_tensor). Held to the full plan (dt_plan_build) on zoo models and
 * every family with three or more replicas: each rank it builds has the full plan's ops and
 * buffer table, and the largest rank of the full plan (memory and op count) is one it built —
 * the middle replicas it drops are never larger; the busiest rank's compute (the search's
 * compiled bound) is the full plan's too. Binomial trees and the hierarchical allreduce are
 * built whole (their inner ranks are larger: the test saw 20 % more), and so are the tensor
 * ranks where a tensor group's collective receives more at some member's index. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "dt/costmodel.h"
#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"
#include "testdata.h"

/* Rank r's local ops priced on its device (what --recommend's compiled bound takes the
 * largest of). */
static double rank_compute(const struct dt_plan *plan, int r)
{
    const struct dt_device_spec *dev = &dt_topology_group_of_rank(plan->topo, r)->device;
    struct dt_cost_params cp;
    dt_cost_defaults(&cp, dev->kind);
    double t = 0;
    for (int i = 0; i < plan->ranks[r].n_ops; i++)
        t += dt_cost_op(&cp, dev, plan->model, &plan->ranks[r].ops[i]);
    return t;
}

/* A pipeline's floor plan (dt_plan_floor) builds the first replica's ranks of every stage,
 * with --tp tensor rank 0 alone: S ranks hold a buffer table, each stage's first rank. */
static void floor_every_stage(const struct dt_model *m, const struct dt_topology *t,
                              const struct dt_plan_options *o)
{
    struct dt_plan *floor;
    struct dt_error err;
    if (dt_plan_floor(m, t, o, &floor, &err))
        fail_msg("%s %s floor: %s", m->name, dt_strategy_name(o->strategy), err.msg);
    int T = o->tp > 1 ? o->tp : 1, built = 0;
    for (int r = 0; r < floor->n_ranks; r++)
        built += floor->ranks[r].n_bufs > 0;
    for (int s = 0; s < floor->stages; s++)
        if (floor->ranks[s * floor->dp * T].n_bufs == 0)
            fail_msg("%s %s floor: stage %d's first rank holds nothing", m->name,
                     dt_strategy_name(o->strategy), s);
    assert_int_equal(built, floor->stages * (floor->probe_tensor ? 1 : T));
    /* no ops, so no collective tells its tensor ranks apart: tensor rank 0 alone, always */
    assert_int_equal(floor->probe_tensor, T > 1 ? T : 0);
    dt_plan_destroy(floor);
}

/* What dropping the last replica rests on (probe_replica): in the full plan each rank of the
 * last replica runs as many ops as its first-replica peer, with a receive pool of the same
 * size, no more of any other memory and no more compute. */
static void last_within_first(const struct dt_plan *full, int T, int D, const char *what)
{
    for (int r = 0; r < full->n_ranks; r++) {
        if (full->ranks[r].dp_index != D - 1)
            continue;
        int f = r - (D - 1) * T;
        struct dt_memory a, b;
        dt_plan_rank_memory(full, r, &a);
        dt_plan_rank_memory(full, f, &b);
        if (a.comm != b.comm || a.weights > b.weights || a.grads > b.grads ||
            a.optimizer > b.optimizer || a.activations > b.activations || a.input > b.input ||
            a.state > b.state || a.total > b.total ||
            full->ranks[r].n_ops != full->ranks[f].n_ops ||
            rank_compute(full, r) > rank_compute(full, f))
            fail_msg("%s: last replica's rank %d %.0f B (pool %.0f) %d ops, first's %d %.0f B "
                     "(pool %.0f) %d ops", what, r, a.total, a.comm, full->ranks[r].n_ops, f,
                     b.total, b.comm, full->ranks[f].n_ops);
    }
}

/* What a probe left out: its probe_tensor and probe_replica. */
struct left_out {
    int tensor;
    bool replica;
};

/* The probe of o against its full plan (above). */
static struct left_out probe_as_full(const char *model, const char *topo,
                                     struct dt_plan_options o, const char *flags)
{
    struct dt_model *m = test_zoo_model(model);
    struct dt_topology *t = test_zoo_topology(topo);
    enum dt_strategy s = o.strategy;
    struct dt_plan *full, *probe;
    struct dt_error err;
    if (dt_plan_build(m, t, &o, &full, &err) || dt_plan_probe(m, t, &o, &probe, &err))
        fail_msg("%s %s %s: %s", model, dt_strategy_name(s), flags, err.msg);
    double full_max = 0, probe_max = 0, full_busiest = 0, probe_busiest = 0;
    int dropped = 0, full_ops = 0, probe_ops = 0;
    for (int r = 0; r < full->n_ranks; r++) {
        struct dt_memory a, b;
        dt_plan_rank_memory(full, r, &a);
        dt_plan_rank_memory(probe, r, &b);
        full_max = a.total > full_max ? a.total : full_max;
        full_ops = full->ranks[r].n_ops > full_ops ? full->ranks[r].n_ops : full_ops;
        double busy = rank_compute(full, r), probe_busy = rank_compute(probe, r);
        int T0 = probe->probe_tensor, first = T0 > 1 ? r - r % T0 : r;
        struct dt_memory f0;
        dt_plan_rank_memory(full, first, &f0);
        if (f0.total != a.total || full->ranks[first].n_ops != full->ranks[r].n_ops ||
            rank_compute(full, first) != busy) /* what dropping tensor ranks rests on */
            fail_msg("%s %s %s: rank %d %.0f B %d ops, its tensor rank 0 %.0f B %d ops", model,
                     dt_strategy_name(s), flags, r, a.total, full->ranks[r].n_ops, f0.total,
                     full->ranks[first].n_ops);
        full_busiest = busy > full_busiest ? busy : full_busiest;
        probe_busiest = probe_busy > probe_busiest ? probe_busy : probe_busiest;
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
    if (full_max != probe_max || full_ops != probe_ops || full_busiest != probe_busiest)
        fail_msg("%s %s %s: largest rank %.0f B %d ops, busiest %.9g s; probe's %.0f B %d "
                 "ops, %.9g s", model, dt_strategy_name(s), flags, full_max, full_ops,
                 full_busiest, probe_max, probe_ops, probe_busiest);
    /* 3 or more replicas, or a pipeline's tensor ranks: the probe must leave some out,
     * except where they differ */
    bool alike = s != DT_STRAT_REDUCE_BCAST_BINOMIAL && s != DT_STRAT_ALLREDUCE_HIERARCHICAL &&
                 s != DT_STRAT_ALLREDUCE_TREE && !strstr(flags, "grad-alg=tree");
    int T = o.tp > 1 ? o.tp : 1, S = full->stages > 0 ? full->stages : 1;
    int D = full->n_ranks / (T * S);
    int kept = (D > 1 && !probe->probe_replica ? 2 : 1) * S * (probe->probe_tensor ? 1 : T);
    assert_int_equal(dropped > 0, alike && (D > 2 || probe->probe_tensor || probe->probe_replica));
    if (dt_strategy_info(s)->pipeline && alike)
        assert_int_equal(full->n_ranks - dropped, kept);
    if (probe->probe_replica)
        last_within_first(full, T, D, flags);
    struct left_out left = {probe->probe_tensor, probe->probe_replica};
    if (dt_strategy_info(s)->pipeline)
        floor_every_stage(m, t, &o);
    dt_plan_destroy(full);
    dt_plan_destroy(probe);
    dt_topology_destroy(t);
    dt_model_destroy(m);
    return left;
}

static void same_as_full(const char *model, enum dt_strategy s, int batch, const char *flags)
{
    probe_as_full(model, "2n4p", test_options(s, batch, flags), flags);
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

/* Pipelines with --tp: tensor rank 0 of each stage stands for its peers (probe_tensor). */
static void tensor_ranks(void **state)
{
    (void)state;
    const struct {
        const char *model;
        enum dt_strategy s;
        const char *flags;
    } cases[] = {
        {"tiny-gpt", DT_STRAT_1F1B, "pp=2 dp=2 tp=2 micro-batches=4"},
        {"tiny-gpt", DT_STRAT_GPIPE, "pp=2 dp=1 tp=4 micro-batches=2"},
        {"tiny-gpt", DT_STRAT_INTERLEAVED, "pp=2 dp=2 tp=2 micro-batches=4 chunks=2"},
        {"tiny-gpt", DT_STRAT_1F1B, "pp=2 dp=2 tp=2 micro-batches=4 sequence-parallel=on "
                                    "recompute=full"},
        {"tiny-gpt", DT_STRAT_1F1B, "pp=2 dp=2 tp=2 micro-batches=4 zero=1 precision=bf16"},
        {"tiny-gpt", DT_STRAT_GPIPE, "pp=2 dp=2 tp=2 micro-batches=2 recompute=selective"},
        {"tiny-gpt", DT_STRAT_1F1B, "pp=2 dp=2 tp=2 micro-batches=4 grad-alg=recursive-doubling"},
        {"tiny-gpt", DT_STRAT_INTERLEAVED, "pp=2 dp=1 tp=4 micro-batches=4 chunks=2 "
                                           "sequence-parallel=on precision=fp16"},
        {"mlp-wide", DT_STRAT_GPIPE, "pp=2 dp=2 tp=2 micro-batches=4"},
        {"mlp-wide", DT_STRAT_1F1B, "pp=2 dp=1 tp=4 micro-batches=4 recompute=full"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct dt_plan_options o = test_options(cases[i].s, 16, cases[i].flags);
        o.scaling = DT_SCALING_STRONG;
        int T = probe_as_full(cases[i].model, "2n4p", o, cases[i].flags).tensor;
        if (T != o.tp)
            fail_msg("%s %s: probe_tensor %d", cases[i].model, cases[i].flags, T);
    }
    /* three tensor ranks: Rabenseifner's allreduce gives its extra member (tensor rank 2)
     * less scratch than the others, so every tensor rank is built; recursive doubling
     * receives alike at every member */
    const char *rab = "pp=2 dp=1 tp=3 micro-batches=2 grad-alg=rabenseifner";
    const char *rd = "pp=2 dp=1 tp=3 micro-batches=2 grad-alg=recursive-doubling";
    struct dt_plan_options o = test_options(DT_STRAT_1F1B, 8, rab);
    o.scaling = DT_SCALING_STRONG;
    o.n_ranks = 6;
    assert_int_equal(probe_as_full("gpt2-124m", "1n8p", o, rab).tensor, 0);
    o = test_options(DT_STRAT_1F1B, 8, rd);
    o.scaling = DT_SCALING_STRONG;
    o.n_ranks = 6;
    assert_int_equal(probe_as_full("gpt2-124m", "1n8p", o, rd).tensor, 3);
}

/* Pipelines whose replicas get the same rows: the first replica stands for the last
 * (probe_replica), held to the full plan like every probe above. Not where the rows differ
 * (18 over 4 replicas: the last's eval program is a row shorter), nor where ZeRO-1's ring
 * allgather of a stage's 3q + 1 parameters gives the last of 3 replicas a float more to
 * receive (mlp-wide, cnn690k; with fp32 gradients that allgather alone sizes the bf16 pool). */
static void last_replica(void **state)
{
    (void)state;
    const char *z1 = "pp=2 dp=3 micro-batches=2 zero=1 scaling=strong";
    const char *z1bf = "pp=2 dp=3 micro-batches=2 zero=1 precision=bf16 grad-precision=fp32 "
                       "scaling=strong";
    const struct {
        const char *model, *topo;
        enum dt_strategy s;
        int batch, n_ranks;
        const char *flags;
        bool replica;
    } cases[] = {
        {"mlp-wide", "2n4p", DT_STRAT_GPIPE, 16, 0, "pp=2 dp=4 micro-batches=4 scaling=strong", 1},
        {"mlp-wide", "2n4p", DT_STRAT_GPIPE, 18, 0, "pp=2 dp=4 micro-batches=4 scaling=strong", 0},
        {"mlp-wide", "2n4p", DT_STRAT_1F1B, 5, 0, "pp=2 dp=4 micro-batches=4", 1},
        {"cnn690k", "2n4p", DT_STRAT_1F1B, 16, 0, "pp=4 dp=2 micro-batches=4 scaling=strong", 1},
        {"tiny-gpt", "2n4p", DT_STRAT_1F1B, 16, 0,
         "pp=2 dp=2 tp=2 micro-batches=4 zero=1 precision=bf16 scaling=strong", 1},
        {"tiny-gpt", "2n4p", DT_STRAT_INTERLEAVED, 16, 0,
         "pp=2 dp=4 micro-batches=4 chunks=2 recompute=full scaling=strong", 1},
        {"tiny-gpt", "2n4p", DT_STRAT_GPIPE, 12, 0,
         "pp=2 dp=4 micro-batches=3 zero=1 recompute=selective scaling=strong", 1},
        {"gpt2-124m", "1n8p", DT_STRAT_1F1B, 12, 6, z1, 1},
        {"gpt2-124m", "1n8p", DT_STRAT_1F1B, 12, 6, "pp=2 dp=3 micro-batches=2 scaling=strong", 1},
        {"tiny-gpt", "1n8p", DT_STRAT_GPIPE, 12, 6, z1, 1},
        {"tiny-gpt", "1n8p", DT_STRAT_GPIPE, 12, 6, z1bf, 1},
        {"mlp-wide", "1n8p", DT_STRAT_GPIPE, 12, 6, z1, 0},
        {"cnn690k", "1n8p", DT_STRAT_GPIPE, 12, 6, z1, 0},
        {"mlp-wide", "1n8p", DT_STRAT_GPIPE, 12, 6, z1bf, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct dt_plan_options o = test_options(cases[i].s, cases[i].batch, cases[i].flags);
        if (cases[i].n_ranks)
            o.n_ranks = cases[i].n_ranks;
        bool r = probe_as_full(cases[i].model, cases[i].topo, o, cases[i].flags).replica;
        if (r != cases[i].replica)
            fail_msg("%s %s -b %d %s: probe_replica %d", cases[i].model,
                     dt_strategy_name(cases[i].s), cases[i].batch, cases[i].flags, r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(data_parallel),
        cmocka_unit_test(sharded),
        cmocka_unit_test(pipelines),
        cmocka_unit_test(tensor_ranks),
        cmocka_unit_test(last_replica),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

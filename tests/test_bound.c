/* --recommend's lower bound (sim/bound.c) held to the simulation: on every data-parallel
 * strategy x tensor width x ZeRO stage x bucket x precision of two small models over nodes,
 * the combined bound (compute, and the node-egress bound of the gradient exchange) is never
 * above the simulated iteration; a bound above it would let the search prune the best config.
 * The control: the egress bound is within a factor 2 of the simulation somewhere (it bites:
 * twice it would not be a bound). The pipelines and recompute sweep: gpipe, 1f1b,
 * interleaved and naive-mp x stages x micro-batches x tensor width x recompute of tiny-gpt and
 * gpt2-124m, the bound never above the simulation; the control: under recompute the bound
 * (with its forward counted again) is above the same config's bound without, on every shape,
 * and its closest approach to the simulation is printed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "bound.h"
#include "epoch.h"
#include "testdata.h"

static double simulated(const struct dt_plan *plan, const struct dt_cost_params *cp)
{
    struct dt_step st;
    struct dt_error err;
    assert_int_equal(dt_step_simulate(plan, cp, &st, &err), 0);
    return st.iter_s; /* as recommend.c counts it */
}

struct tally {
    int shapes, with_egress, recomputed;
    double closest; /* largest egress bound / simulated iteration */
    double closest_rc; /* largest compute bound / simulated iteration under recompute */
};

/* One config: its bound below its simulation. */
static void check_one(const struct dt_model *m, const struct dt_topology *t,
                      const struct dt_cost_params *cp, struct dt_plan_options o, long batch,
                      struct tally *tl)
{
    char why[256];
    struct dt_plan *plan;
    struct dt_error err;
    if (!dt_strategy_fits_options(&o, m, t, dt_plan_ranks(&o, t), why, sizeof why) ||
        dt_plan_build(m, t, &o, &plan, &err))
        return;
    struct dt_rec_bound_cache cache = {0};
    double compute = dt_rec_bound(m, t, cp, &o, batch, &cache);
    dt_rec_bound_free(&cache);
    double comm = dt_rec_comm_bound(m, t, cp, &o), lb = dt_rec_total_bound(compute, comm, &o, t);
    double sim = simulated(plan, cp);
    char par[256];
    dt_parallel_format(&o, par, sizeof par);
    if (lb > sim)
        printf("# %s on %s, %s %s bucket %.0f: bound %.6g s (egress %.6g) > simulated %.6g s\n",
               m->name, t->name, dt_strategy_name(o.strategy), par, o.bucket_bytes, lb, comm,
               sim);
    assert_true(compute > 0 && lb <= sim);
    tl->shapes++;
    tl->with_egress += comm > 0;
    tl->closest = fmax(tl->closest, comm / sim);
    if (o.recompute != DT_RECOMPUTE_NONE) {
        struct dt_plan_options plain = o;
        plain.recompute = DT_RECOMPUTE_NONE;
        double without = dt_rec_bound(m, t, cp, &plain, batch, &cache);
        dt_rec_bound_free(&cache);
        assert_true(compute > without); /* the recompute term bites */
        tl->recomputed++;
        tl->closest_rc = fmax(tl->closest_rc, compute / sim);
    }
    dt_plan_destroy(plan);
}

static void check_model(const char *model, long batch, struct tally *tl)
{
    const char *topos[] = {"2n4p", "4n2p", "2n2p"};
    const char *precs[] = {"", "precision=bf16"};
    struct dt_model *m = test_zoo_model(model);
    for (int ti = 0; ti < 3; ti++) {
        struct dt_topology *t = test_zoo_topology(topos[ti]);
        struct dt_cost_params cp;
        dt_cost_defaults(&cp, t->groups[0].device.kind);
        for (int s = 0; s < DT_STRAT_COUNT; s++) {
            if (s == DT_STRAT_SEQUENTIAL || dt_strategy_info((enum dt_strategy)s)->pipeline)
                continue;
            for (int k = 0; k < 2 * 4 * 2 * 2; k++) {
                char flags[128];
                snprintf(flags, sizeof flags, "scaling=strong tp=%d zero=%d %s", 1 + k % 2,
                         k / 2 % 4, precs[k / 8 % 2]);
                struct dt_plan_options o = test_options((enum dt_strategy)s, (int)batch, flags);
                o.bucket_bytes = k / 16 ? 4096 : 0;
                check_one(m, t, &cp, o, batch, tl);
            }
        }
        dt_topology_destroy(t);
    }
    dt_model_destroy(m);
}

static void data_parallel_below_simulation(void **state)
{
    (void)state;
    struct tally tl = {0};
    check_model("tiny-gpt", 32, &tl);
    check_model("mlp-fmnist", 512, &tl);
    check_model("mlp-wide", 64, &tl);
    printf("# %d configs, %d with an egress bound; closest egress bound / simulated: %.3f\n",
           tl.shapes, tl.with_egress, tl.closest);
    assert_true(tl.shapes >= 200 && tl.with_egress >= 100);
    assert_true(2 * tl.closest > 1);
}

static void check_pipelines(const char *model, const char *topo, long batch, struct tally *tl)
{
    const enum dt_strategy strats[] = {DT_STRAT_GPIPE, DT_STRAT_1F1B, DT_STRAT_INTERLEAVED,
                                       DT_STRAT_NAIVE_MP};
    const char *shapes[] = {"pp=2 micro-batches=2", "pp=2 micro-batches=4", "pp=4 micro-batches=4",
                            "pp=2 tp=2 micro-batches=4", "pp=4 micro-batches=8 precision=bf16"};
    const char *rcs[] = {"none", "full", "selective"};
    struct dt_model *m = test_zoo_model(model);
    struct dt_topology *t = test_zoo_topology(topo);
    struct dt_cost_params cp;
    dt_cost_defaults(&cp, t->groups[0].device.kind);
    for (int s = 0; s < 4; s++)
        for (int k = 0; k < 5 * 3; k++) {
            char flags[160];
            snprintf(flags, sizeof flags, "scaling=strong %s recompute=%s", shapes[k / 3],
                     rcs[k % 3]);
            if (strats[s] == DT_STRAT_INTERLEAVED)
                strncat(flags, " chunks=2", sizeof flags - strlen(flags) - 1);
            struct dt_plan_options o = test_options(strats[s], (int)batch, flags);
            check_one(m, t, &cp, o, batch, tl);
        }
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

static void pipelines_below_simulation(void **state)
{
    (void)state;
    struct tally tl = {0};
    check_pipelines("tiny-gpt", "2n4p", 32, &tl);
    check_pipelines("gpt2-124m", "dgx-h100", 16, &tl);
    printf("# %d pipeline configs, %d under recompute; closest compute bound / simulated "
           "under recompute: %.3f\n", tl.shapes, tl.recomputed, tl.closest_rc);
    assert_true(tl.shapes >= 60 && tl.recomputed >= 40);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(data_parallel_below_simulation),
                                       cmocka_unit_test(pipelines_below_simulation)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* dt_plan_memory_floor (libdt/probe_floor.c), the memory lower bound --recommend discards
 * configs by before compiling them, held to the compiled probe's largest rank on small
 * models over 2 nodes x 4 devices: every strategy x tensor width x ZeRO stage x recompute x
 * precision x accumulation, and every pipeline x stages x micro-batches x chunks (with
 * sequence parallelism where the model has a tensor cut). A floor above the peak would drop
 * a config that fits. The control: 1.2 x the floor is above the peak somewhere (the check
 * catches a bound 20 % too high: the floor is that close). Also dt_pipeline_slots against
 * closed forms, and the closed forms against the schedule walked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include "dt/plan.h"
#include "testdata.h"

struct tally {
    int shapes, over_control;
    double closest; /* largest floor / peak */
    int pipelines, plan_control, plan_tighter; /* dt_plan_floor's, on the pipelines */
    double plan_closest;
};

/* A pipeline's floor plan (dt_plan_floor) against its probe's peak, and against the chain
 * floor: never above the peak; the control, 1.05 x it above the peak somewhere. */
static void check_floor_plan(const struct dt_model *m, const struct dt_topology *t,
                             const struct dt_plan_options *o, double peak, double chain,
                             struct tally *tl)
{
    struct dt_plan *plan;
    struct dt_error err;
    char par[256];
    if (dt_plan_floor(m, t, o, &plan, &err))
        fail_msg("%s %s: %s", m->name, dt_strategy_name(o->strategy), err.msg);
    struct dt_memory floor;
    dt_plan_peak_memory(plan, &floor);
    dt_plan_destroy(plan);
    dt_parallel_format(o, par, sizeof par);
    if (floor.total > peak || floor.total <= 0)
        fail_msg("%s %s %s: floor plan %.0f B, peak %.0f B", m->name,
                 dt_strategy_name(o->strategy), par, floor.total, peak);
    tl->pipelines++;
    tl->plan_control += 1.05 * floor.total > peak;
    tl->plan_tighter += floor.total > chain;
    tl->plan_closest = floor.total / peak > tl->plan_closest ? floor.total / peak
                                                              : tl->plan_closest;
}

static void check_one(const struct dt_model *m, const struct dt_topology *t,
                      struct dt_plan_options o, struct tally *tl)
{
    char why[256], par[256];
    struct dt_plan *plan;
    struct dt_error err;
    if (!dt_strategy_fits_options(&o, m, t, dt_plan_ranks(&o, t), why, sizeof why) ||
        dt_plan_probe(m, t, &o, &plan, &err))
        return;
    struct dt_memory peak;
    dt_plan_peak_memory(plan, &peak);
    dt_plan_destroy(plan);
    struct dt_chain_floor c;
    assert_int_equal(dt_plan_chain_floor(m, &o, &c), DT_OK);
    double floor = dt_plan_memory_floor(m, t, &o, &c);
    dt_parallel_format(&o, par, sizeof par);
    if (floor > peak.total || floor <= 0)
        fail_msg("%s %s %s: floor %.0f B, peak %.0f B", m->name, dt_strategy_name(o.strategy),
                 par, floor, peak.total);
    if (dt_strategy_info(o.strategy)->pipeline)
        check_floor_plan(m, t, &o, peak.total, floor, tl);
    tl->shapes++;
    tl->over_control += 1.2 * floor > peak.total;
    tl->closest = floor / peak.total > tl->closest ? floor / peak.total : tl->closest;
}

static const char *const knobs[] = {"zero=0 recompute=none", "zero=1 recompute=full",
                                    "zero=2 recompute=selective", "zero=3 recompute=full",
                                    "zero=1 recompute=none precision=bf16",
                                    "zero=0 recompute=full precision=bf16",
                                    "zero=2 recompute=none precision=fp8",
                                    "zero=0 recompute=selective precision=bf16"};

static void data_parallel(const struct dt_model *m, const struct dt_topology *t, long batch,
                          struct tally *tl)
{
    char flags[160];
    for (int s = 0; s < DT_STRAT_COUNT; s++)
        for (int tp = 1; tp <= 4 && !dt_strategy_info((enum dt_strategy)s)->pipeline; tp *= 2)
            for (size_t k = 0; k < sizeof knobs / sizeof *knobs; k++)
                for (int acc = 1; acc <= 2; acc++) {
                    snprintf(flags, sizeof flags, "tp=%d accumulate=%d scaling=strong %s", tp,
                             acc, knobs[k]);
                    check_one(m, t, test_options((enum dt_strategy)s, (int)batch, flags), tl);
                }
}

static void pipelines(const struct dt_model *m, const struct dt_topology *t, long batch,
                      struct tally *tl)
{
    const enum dt_strategy pipes[] = {DT_STRAT_GPIPE, DT_STRAT_1F1B, DT_STRAT_INTERLEAVED,
                                      DT_STRAT_NAIVE_MP};
    char flags[200];
    for (size_t i = 0; i < sizeof pipes / sizeof *pipes; i++)
        for (int pp = 2; pp <= 4; pp *= 2)
            for (int tp = 1; tp * pp <= 8; tp *= 2)
                for (int mb = pp; mb <= 4 * pp; mb *= 2)
                    for (size_t k = 0; k < sizeof knobs / sizeof *knobs; k += 1 + (tp > 1))
                        for (int sp = 0; sp <= (tp > 1); sp++) {
                            snprintf(flags, sizeof flags,
                                     "pp=%d tp=%d micro-batches=%d chunks=%d scaling=strong "
                                     "sequence-parallel=%s %s", pp, tp, mb,
                                     pipes[i] == DT_STRAT_INTERLEAVED ? 2 : 1, sp ? "on" : "off",
                                     knobs[k]);
                            struct dt_plan_options o = test_options(pipes[i], (int)batch, flags);
                            if (o.zero <= 1)
                                check_one(m, t, o, tl);
                        }
}

static void below_probe(void **state)
{
    (void)state;
    struct dt_topology *t = test_zoo_topology("2n4p");
    const struct { const char *name; long batch; } models[] = {
        {"tiny-gpt", 48}, {"mlp-fmnist", 96}, {"cnn21k", 48}, {"lstm-sentiment", 40}};
    struct tally tl = {0};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        struct dt_model *m = test_zoo_model(models[i].name);
        data_parallel(m, t, models[i].batch, &tl);
        pipelines(m, t, models[i].batch, &tl);
        dt_model_destroy(m);
    }
    printf("# %d configs: floor <= probe peak; closest floor / peak %.3f; 1.2 x floor above "
           "the peak in %d\n", tl.shapes, tl.closest, tl.over_control);
    printf("# %d pipelines: floor plan <= probe peak, above the chain floor in %d; closest "
           "%.3f; 1.05 x floor plan above the peak in %d\n", tl.pipelines, tl.plan_tighter,
           tl.plan_closest, tl.plan_control);
    assert_true(tl.shapes > 500);
    assert_true(tl.over_control > 0); /* the control: a bound 20 % higher fails */
    assert_true(tl.pipelines > 100);
    assert_true(tl.plan_tighter > tl.pipelines / 2);
    assert_true(tl.plan_control > 0); /* the control: a floor plan 5 % higher fails */
    dt_topology_destroy(t);
}

/* 1F1B: stage s holds min(S - s, M) micro-batches; GPipe all M; interleaved at least 1F1B's
 * (the schedule walked). */
static void slots_closed_forms(void **state)
{
    (void)state;
    for (int S = 2; S <= 8; S *= 2)
        for (int M = 1; M <= 4 * S; M *= 2)
            for (int s = 0; s < S; s++) {
                struct dt_plan_options o = test_options(DT_STRAT_1F1B, 64, "");
                o.pp = S;
                o.micro_batches = M;
                assert_int_equal(dt_pipeline_slots_walked(&o, s), S - s < M ? S - s : M);
                o.strategy = DT_STRAT_GPIPE;
                assert_int_equal(dt_pipeline_slots_walked(&o, s), M);
                o.strategy = DT_STRAT_INTERLEAVED;
                o.chunks = 2;
                if (M % S == 0)
                    assert_true(dt_pipeline_slots(&o, s) >= (S - s < M ? S - s : M));
            }
}

/* dt_pipeline_slots (GPipe's, naive-mp's and 1F1B's in closed form, interleaved's counted
 * without the units) equals the walked schedule on every stage of 2 to 64 stages, 1 to
 * 2S + 3 micro-batches, every multiple of S and every power of two up to 8S, interleaved
 * with 2, 3 and 4 chunks, as --recommend's pipelines go. */
static bool in_sweep(int S, int M) { return M <= 2 * S + 3 || M % S == 0 || !(M & (M - 1)); }

static void slots_as_walked(void **state)
{
    (void)state;
    const struct {
        enum dt_strategy k;
        int chunks;
    } runs[] = {{DT_STRAT_1F1B, 0},        {DT_STRAT_GPIPE, 0},       {DT_STRAT_NAIVE_MP, 0},
                {DT_STRAT_INTERLEAVED, 2}, {DT_STRAT_INTERLEAVED, 3}, {DT_STRAT_INTERLEAVED, 4}};
    long checked = 0;
    for (int S = 2; S <= 64; S++)
        for (int M = 1; M <= 8 * S; M++)
            for (size_t i = 0; i < sizeof runs / sizeof runs[0] && in_sweep(S, M); i++) {
                struct dt_plan_options o = test_options(runs[i].k, 64, "");
                o.pp = S;
                o.micro_batches = runs[i].k == DT_STRAT_NAIVE_MP ? 1 : M;
                o.chunks = runs[i].chunks;
                if (runs[i].k == DT_STRAT_INTERLEAVED && M % S)
                    continue;
                for (int s = 0; s < S; s++, checked++)
                    assert_int_equal(dt_pipeline_slots(&o, s), dt_pipeline_slots_walked(&o, s));
            }
    printf("slots_as_walked: %ld stages checked\n", checked);
    assert_true(checked > 10000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(slots_closed_forms),
                                       cmocka_unit_test(slots_as_walked),
                                       cmocka_unit_test(below_probe)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

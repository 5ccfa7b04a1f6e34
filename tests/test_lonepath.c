/* The engine's lone path (a flow alone on its links gets its end when its transfer begins)
 * against the general engine (DTSIM_LONE_PATH=off): random networks, flows, computes and
 * timers, with reactions to completions, played both ways; every completion, link statistic
 * and count must be the same, bit for bit. Times and sizes are drawn from a few values so
 * that events of equal time, the order of which the outputs depend on, are common. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

enum { MAX_LINKS = 6, MAX_DEVS = 3, MAX_OPS = 160, MAX_C = 4 * MAX_OPS };

struct outcome {
    int n;
    struct dt_sim_completion c[MAX_C];
    struct dt_sim_link_stats ls[MAX_LINKS];
    double busy[MAX_DEVS];
    struct dt_sim_counters k;
};

/* A small deterministic generator (each shape replays the same draws both ways). */
static uint32_t draw(uint64_t *s, uint32_t n)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*s >> 33) % n;
}

struct shape {
    uint64_t rng;
    int n_links, n_devs, ops;
};

/* Starts a random flow, compute or timer at now (flows maybe a little later). */
static void start_one(struct dt_sim *sim, struct shape *sh, uint64_t tag)
{
    static const double bytes[] = {0, 1e-12, 1000, 2000, 3000, 4000}; /* 1e-12: ends at once */
    static const double later[] = {0, 0, 1e-6, 2e-6};
    static const double dur[] = {0, 1e-6, 2e-6, 4e-6};
    uint32_t what = draw(&sh->rng, 8);
    if (what < 6) {
        int route[4], hops = 1 + (int)draw(&sh->rng, 3);
        for (int h = 0; h < hops; h++)
            route[h] = (int)draw(&sh->rng, (uint32_t)sh->n_links); /* repeats allowed */
        double t0 = dt_sim_now(sim) + later[draw(&sh->rng, 4)];
        assert_int_equal(dt_sim_flow_at(sim, t0, bytes[draw(&sh->rng, 6)], route, hops,
                                        (int)draw(&sh->rng, 4), (int)draw(&sh->rng, 4), tag, NULL),
                         DT_OK);
    } else if (what == 6) {
        assert_int_equal(dt_sim_compute(sim, (int)draw(&sh->rng, (uint32_t)sh->n_devs),
                                        dur[draw(&sh->rng, 4)], tag, NULL),
                         DT_OK);
    } else {
        assert_int_equal(dt_sim_timer(sim, dur[draw(&sh->rng, 4)], tag, NULL), DT_OK);
    }
}

/* Plays shape seed with the lone path on or off into *out; with pad, after DT_SIM_PREFETCH_LINKS
 * idle links more, so that the engine prefetches (the shape's own links come first). */
static void play_padded(uint64_t seed, bool lone, bool pad, struct outcome *out)
{
    static const double bw[] = {1e9, 1e9, 2e9, 4e9, INFINITY};
    static const double lat[] = {0, 1e-6, 1e-6, 2e-6};
    struct shape sh = {seed, 0, 0, 0};
    if (lone)
        unsetenv("DTSIM_LONE_PATH");
    else
        setenv("DTSIM_LONE_PATH", "off", 1);
    struct dt_sim *sim = NULL;
    assert_int_equal(dt_sim_create(&sim, NULL), DT_OK);
    unsetenv("DTSIM_LONE_PATH");
    sh.n_links = 1 + (int)draw(&sh.rng, MAX_LINKS);
    sh.n_devs = 1 + (int)draw(&sh.rng, MAX_DEVS);
    for (int l = 0; l < sh.n_links; l++) {
        int id;
        assert_int_equal(dt_sim_add_link(sim, bw[draw(&sh.rng, 5)], lat[draw(&sh.rng, 4)], &id,
                                         NULL),
                         DT_OK);
    }
    for (int l = 0; pad && l < DT_SIM_PREFETCH_LINKS; l++)
        assert_int_equal(dt_sim_add_link(sim, 1e9, 0, NULL, NULL), DT_OK);
    for (int d = 0; d < sh.n_devs; d++) {
        int id;
        assert_int_equal(dt_sim_add_device(sim, &id, NULL), DT_OK);
    }
    int first = 1 + (int)draw(&sh.rng, 8);
    for (; sh.ops < first; sh.ops++)
        start_one(sim, &sh, (uint64_t)sh.ops);
    memset(out, 0, sizeof *out);
    struct dt_sim_completion c;
    for (;;) {
        assert_int_equal(dt_sim_next(sim, &c, NULL), DT_OK);
        if (c.kind == DT_SIM_END)
            break;
        assert_true(out->n < MAX_C);
        out->c[out->n++] = c;
        /* react: up to two more ops at this time, while the budget lasts */
        for (int k = (int)draw(&sh.rng, 3); k > 0 && sh.ops < MAX_OPS; k--, sh.ops++)
            start_one(sim, &sh, (uint64_t)sh.ops);
    }
    for (int l = 0; l < sh.n_links; l++)
        dt_sim_link_stats(sim, l, &out->ls[l]);
    for (int d = 0; d < sh.n_devs; d++)
        out->busy[d] = dt_sim_device_busy(sim, d);
    dt_sim_get_counters(sim, &out->k);
    dt_sim_destroy(sim);
}

static void play(uint64_t seed, bool lone, struct outcome *out)
{
    play_padded(seed, lone, false, out);
}

/* Bit for bit: doubles by their bytes (no tolerance; -0 is not 0), fields one by one (no
 * padding compared). */
static bool same_double(double x, double y)
{
    return memcmp(&x, &y, sizeof x) == 0;
}

static bool same_completion(const struct dt_sim_completion *x, const struct dt_sim_completion *y)
{
    return x->kind == y->kind && x->tag == y->tag && same_double(x->t_start, y->t_start) &&
           same_double(x->t_end, y->t_end) && same_double(x->bytes, y->bytes) &&
           x->src == y->src && x->dst == y->dst && x->device == y->device;
}

/* The general engine's outcome: the same but for the lone path's own counts. */
static void assert_same(const struct outcome *a, const struct outcome *b, uint64_t seed)
{
    struct dt_sim_counters ka = a->k, kb = b->k;
    ka.lone_ends = kb.lone_ends = ka.lone_taken_back = kb.lone_taken_back = 0;
    bool same = a->n == b->n && memcmp(&ka, &kb, sizeof ka) == 0;
    for (int i = 0; same && i < a->n; i++)
        same = same_completion(&a->c[i], &b->c[i]);
    for (int l = 0; same && l < MAX_LINKS; l++)
        same = same_double(a->ls[l].bytes, b->ls[l].bytes) &&
               same_double(a->ls[l].busy_s, b->ls[l].busy_s) &&
               a->ls[l].max_flows == b->ls[l].max_flows;
    for (int d = 0; same && d < MAX_DEVS; d++)
        same = same_double(a->busy[d], b->busy[d]);
    if (!same)
        fail_msg("shape %llu: the lone path and the general engine differ",
                 (unsigned long long)seed);
}

/* Ensure that over many shapes the lone path gives the general engine's every output, and
 * that the shapes take it, keep it and take it back (each case met many times). */
static void test_lone_path_as_general(void **state)
{
    (void)state;
    static struct outcome on, off;
    uint64_t ends = 0, back = 0;
    for (uint64_t seed = 1; seed <= 3000; seed++) {
        play(seed, true, &on);
        play(seed, false, &off);
        assert_same(&on, &off, seed);
        assert_int_equal(off.k.lone_ends, 0);
        ends += on.k.lone_ends;
        back += on.k.lone_taken_back;
    }
    print_message("lone ends %llu, taken back %llu\n", (unsigned long long)ends,
                  (unsigned long long)back);
    assert_true(back >= 100);
    assert_true(ends - back >= 1000);
}

/* Ensure that the prefetching of large networks changes nothing: shapes played with
 * DT_SIM_PREFETCH_LINKS idle links more give every output of the same shapes without them. */
static void test_prefetch_changes_nothing(void **state)
{
    (void)state;
    static struct outcome big, small;
    uint64_t events = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        play_padded(seed, true, true, &big);
        play(seed, true, &small);
        assert_same(&big, &small, seed);
        events += big.k.events;
    }
    assert_true(events >= 10000);
}

/* Ensure that a flow alone on its link is taken back when a second flow joins it at the same
 * time: both get half the link (the lone path alone would keep the first at the full rate). */
static void test_joined_at_once_is_taken_back(void **state)
{
    (void)state;
    struct dt_sim *sim = NULL;
    int l;
    unsetenv("DTSIM_LONE_PATH"); /* the path on, whatever the caller's environment */
    assert_int_equal(dt_sim_create(&sim, NULL), DT_OK);
    assert_int_equal(dt_sim_add_link(sim, 1000, 0, &l, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 1000, &l, 1, -1, -1, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 1000, &l, 1, -1, -1, 2, NULL), DT_OK);
    struct dt_sim_completion c;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(dt_sim_next(sim, &c, NULL), DT_OK);
        assert_int_equal(c.kind, DT_SIM_FLOW);
        assert_true(c.t_end == 2.0);
    }
    struct dt_sim_counters k;
    dt_sim_get_counters(sim, &k);
    assert_int_equal(k.lone_ends, 1);
    assert_int_equal(k.lone_taken_back, 1);
    dt_sim_destroy(sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lone_path_as_general),
        cmocka_unit_test(test_prefetch_changes_nothing),
        cmocka_unit_test(test_joined_at_once_is_taken_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

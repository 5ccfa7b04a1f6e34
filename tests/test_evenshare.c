/* A round's time by classes (sim/evenshare.c) held to the engine playing every flow of the
 * round (the time dt_sim_now reads once dt_sim_next says DT_SIM_END), on rounds of every
 * shape a data-parallel collective makes and some it does not: rings, recursive doubling,
 * every member to every other in groups of shifted ranks (ZeRO-3's rounds at scale), random
 * pairs, one or two or many message sizes, no bytes (the latencies alone); on 1:1 and
 * oversubscribed fat-trees, a three-tier ECMP fat-tree, rails, a torus and nodes whose GPUs
 * share a bus. Counts how many rounds had every component even (no flow on the engine), some
 * (both), none; the test asks for each kind to occur, and for the two times to agree to the
 * last bit or 1e-12 relative (evenshare.h: the engine's max-min can round a rate an ulp away).
 * The control solves the classes on a fabric whose NIC bandwidth is 0.9 x the engine's.
 * A uniform round's form (evenform.h) times the round at other sizes as the classes do, bit
 * for bit; its control takes the forms on the 0.9 x fabric. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/topology.h"
#include "engine.h"
#include "evenform.h"
#include "evenshare.h"
#include "network.h"

/* nodes of `devices` GPUs, `nics` NICs of 100 Gbit/s x nic_scale, intra-node `sharing`. */
static struct dt_topology *fabric(int nodes, int devices, int nics, const char *sharing,
                                  double nic_scale, const char *network)
{
    char text[2048];
    snprintf(text, sizeof text,
             "name: f\nnodes:\n  - name: n\n    count: %d\n    devices: %d\n"
             "    device: {kind: gpu, name: g, peak: {fp32: 10 TFLOP/s}, memory: 16 GiB,"
             " memory_bw: 900 GB/s}\n"
             "    intra: {kind: nvswitch, bandwidth: 100 GB/s, latency: 1 us, sharing: %s}\n"
             "    nic: {kind: infiniband, bandwidth: %g Gbit/s, latency: 2 us, count: %d}\n"
             "network: %s\n",
             nodes, devices, strcmp(sharing, "shared") ? sharing
                                                       : "shared, bus_bandwidth: 150 GB/s",
             100 * nic_scale, nics, network);
    struct dt_topology *t = NULL;
    struct dt_error err;
    if (dt_topology_load_string("f.yaml", text, &t, &err) != DT_OK)
        fail_msg("topology: %s", err.msg);
    return t;
}

struct net {
    struct dt_topology *topo;
    struct dt_sim *sim;
    struct dt_simnet sn;
};

static void build(struct net *n, struct dt_topology *t)
{
    struct dt_cost_params cp;
    memset(&cp, 0, sizeof cp); /* no calibration override: the datasheet values */
    n->topo = t;
    assert_int_equal(dt_sim_create(&n->sim, NULL), DT_OK);
    struct dt_error err;
    if (dt_simnet_build(&n->sn, n->sim, t, t->n_ranks, &cp, &err) != DT_OK)
        fail_msg("build: %s", err.msg);
}

static void teardown(struct net *n)
{
    dt_simnet_free(&n->sn);
    dt_sim_destroy(n->sim);
    dt_topology_destroy(n->topo);
}

struct round {
    int n, cap;
    int *src, *dst;
    double *bytes;
};

static void add(struct round *r, int src, int dst, double bytes)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 256;
        r->src = realloc(r->src, (size_t)r->cap * sizeof *r->src);
        r->dst = realloc(r->dst, (size_t)r->cap * sizeof *r->dst);
        r->bytes = realloc(r->bytes, (size_t)r->cap * sizeof *r->bytes);
        assert_non_null(r->src);
        assert_non_null(r->dst);
        assert_non_null(r->bytes);
    }
    r->src[r->n] = src;
    r->dst[r->n] = dst;
    r->bytes[r->n++] = bytes;
}

/* Every flow of the round on the engine from a fresh start. */
static double engine_time(struct net *n, const struct round *r)
{
    struct dt_error err;
    assert_int_equal(dt_sim_restart(n->sim, &err), DT_OK);
    for (int i = 0; i < r->n; i++) {
        int route[DT_SIM_MAX_HOPS];
        int hops = dt_simnet_route(&n->sn, r->src[i], r->dst[i], route);
        if (dt_sim_flow(n->sim, r->bytes[i], route, hops, r->src[i], r->dst[i], (uint64_t)i,
                        &err))
            fail_msg("flow: %s", err.msg);
    }
    struct dt_sim_completion c;
    int rc;
    while ((rc = dt_sim_next(n->sim, &c, &err)) == DT_OK && c.kind != DT_SIM_END)
        ;
    assert_int_equal(rc, DT_OK);
    return dt_sim_now(n->sim);
}

/* The round by classes on n's fabric; *played: flows it left to the engine. */
static double even_time(struct net *n, struct dt_evenshare *es, const struct round *r,
                        long *played)
{
    struct dt_error err;
    dt_evenshare_clear(es);
    for (int i = 0; i < r->n; i++) {
        int route[DT_SIM_MAX_HOPS];
        int hops = dt_simnet_route(&n->sn, r->src[i], r->dst[i], route);
        if (dt_evenshare_flow(es, n->sim, r->bytes[i], route, hops, &err))
            fail_msg("flow: %s", err.msg);
    }
    double s;
    if (dt_evenshare_time(es, n->sim, &s, &err))
        fail_msg("time: %s", err.msg);
    long even;
    dt_evenshare_counts(es, &even, played);
    return s;
}

/* Message sizes: 0 all alike, 1 two sizes by sender parity, 2 a different size per sender. */
static double size_of(int kind, int src, double bytes)
{
    return kind == 0 ? bytes : kind == 1 ? bytes * (1 + src % 2) : bytes * (1 + src % 37);
}

/* Rounds of p ranks: pattern 0 ring shift k, 1 recursive doubling partner, 2 every member to
 * every other in groups of g ranks strided p / g apart (the shifted data-parallel groups),
 * 3 random pairs, 4 the groups within nodes of `local` ranks plus a ring across them. */
static void make_round(struct round *r, int pattern, int p, int k, int sizes, double bytes,
                       int local)
{
    r->n = 0;
    unsigned seed = 12345u + (unsigned)k;
    for (int i = 0; i < p; i++) {
        double b = size_of(sizes, i, bytes);
        if (pattern == 0)
            add(r, i, (i + k) % p, b);
        else if (pattern == 1 && (i ^ k) < p)
            add(r, i, i ^ k, b);
        else if (pattern == 2) {
            int stride = p / k, base = i % stride;
            for (int m = 0; m < k; m++)
                if (base + m * stride != i)
                    add(r, i, base + m * stride, b);
        } else if (pattern == 3) {
            seed = seed * 1103515245u + 12345u;
            int peer = (int)(seed >> 8) % p;
            if (peer != i)
                add(r, i, peer, b);
        } else if (pattern == 4) {
            int node = i / local;
            for (int m = 0; m < local; m++)
                if (node * local + m != i)
                    add(r, i, node * local + m, b);
            add(r, i, (i + local) % p, b);
        }
    }
}

struct tally {
    int rounds, exact, all_even, mixed, none_even;
    double worst;
};

/* Every pattern x size kind x bytes (0: the latencies alone) on n; es solves on `even_net`
 * (n itself, or the control's other fabric). */
static void rounds_on(struct net *n, struct net *even_net, struct dt_evenshare *es,
                      struct tally *t, const char *name)
{
    int p = n->topo->n_ranks, local = p / n->topo->n_nodes;
    const double sizes_bytes[] = {0, 1e3, 3.3e6};
    struct round r = {0};
    for (int pattern = 0; pattern <= 4; pattern++)
        for (int k = 1; k <= p; k *= 2) {
            if (pattern == 2 && (p % k || k < 2))
                continue;
            if (pattern == 4 && k > 1)
                continue;
            for (int sizes = 0; sizes < 3; sizes++)
                for (int b = 0; b < 3; b++) {
                    make_round(&r, pattern, p, k, sizes, sizes_bytes[b], local);
                    long played;
                    double want = engine_time(n, &r), got = even_time(even_net, es, &r, &played);
                    double rel = fabs(got / want - 1);
                    t->rounds++;
                    t->exact += got == want;
                    t->all_even += played == 0 && r.n > 0;
                    t->mixed += played > 0 && played < r.n;
                    t->none_even += played == r.n && r.n > 0;
                    if (rel > t->worst)
                        t->worst = rel;
                    if (rel > 1e-12 && n == even_net)
                        printf("# %s pattern %d k %d sizes %d bytes %g: engine %.17g, classes "
                               "%.17g (%ld of %d flows played)\n",
                               name, pattern, k, sizes, sizes_bytes[b], want, got, played, r.n);
                }
        }
    free(r.src);
    free(r.dst);
    free(r.bytes);
}

/* The seven fabrics both checks run on. */
static const struct {
    const char *name;
    int nodes, devices, nics;
    const char *sharing, *network;
} fabrics[] = {
    {"fat-tree 1:1", 16, 4, 4, "crossbar", "{kind: fat-tree, latency: 100 ns, radix: 8}"},
    {"fat-tree 2:1", 16, 4, 4, "crossbar",
     "{kind: fat-tree, latency: 100 ns, radix: 8, oversubscription: 2}"},
    {"fat-tree 3 tiers ecmp", 16, 2, 1, "crossbar",
     "{kind: fat-tree, latency: 100 ns, radix: 4, routing: ecmp}"},
    {"fat-tree rail-optimised", 8, 4, 4, "crossbar",
     "{kind: fat-tree, latency: 100 ns, radix: 8, rail_optimized: true}"},
    {"rails", 8, 4, 4, "crossbar", "{kind: rail, latency: 100 ns}"},
    {"torus 4x4", 16, 2, 1, "crossbar", "{kind: torus, latency: 100 ns, dims: [4, 4]}"},
    {"bus, one nic per node", 4, 8, 1, "shared", "{kind: switch, latency: 100 ns}"},
};

/* A check on one fabric: the engine's net n, the other net (n itself, or the control's
 * fabric at another NIC bandwidth), the shared solver, the check's tally. */
typedef void (*fabric_check)(struct net *n, struct net *other, struct dt_evenshare *es,
                             const char *name, void *tally);

/* Runs check on every fabric, the other net's NICs at nic_scale. */
static void each_fabric(double nic_scale, fabric_check check, void *tally)
{
    struct dt_evenshare *es;
    assert_int_equal(dt_evenshare_create(&es, NULL), DT_OK);
    for (size_t f = 0; f < sizeof fabrics / sizeof *fabrics; f++) {
        struct net n, other;
        build(&n, fabric(fabrics[f].nodes, fabrics[f].devices, fabrics[f].nics,
                         fabrics[f].sharing, 1, fabrics[f].network));
        if (nic_scale != 1)
            build(&other, fabric(fabrics[f].nodes, fabrics[f].devices, fabrics[f].nics,
                                 fabrics[f].sharing, nic_scale, fabrics[f].network));
        check(&n, nic_scale != 1 ? &other : &n, es, fabrics[f].name, tally);
        if (nic_scale != 1)
            teardown(&other);
        teardown(&n);
    }
    dt_evenshare_destroy(es);
}

static void rounds_check(struct net *n, struct net *other, struct dt_evenshare *es,
                         const char *name, void *tally)
{
    rounds_on(n, other, es, tally, name);
}

/* The classes on every fabric, each at nic_scale (1: the same as the engine's). */
static struct tally all_fabrics(double nic_scale)
{
    struct tally t = {0};
    each_fabric(nic_scale, rounds_check, &t);
    printf("# NIC x %g: %d rounds, %d bit for bit, worst %.3g relative; every component even "
           "%d, some %d, none %d\n",
           nic_scale, t.rounds, t.exact, t.worst, t.all_even, t.mixed, t.none_even);
    return t;
}

/* Ensure that the classes' time is the engine's on every round, and that the rounds include
 * all-even ones, uneven ones and rounds of both. */
static void classes_match_the_engine(void **state)
{
    (void)state;
    struct tally t = all_fabrics(1);
    assert_true(t.worst <= 1e-12);
    assert_true(t.all_even > 0 && t.mixed > 0 && t.none_even > 0);
}

/* Control: the classes solved on NICs at 0.9 x the engine's bandwidth are caught. */
static void wrong_share_fails(void **state)
{
    (void)state;
    assert_true(all_fabrics(0.9).worst > 1e-3);
}

struct form_tally {
    int timings, by_form, retimed, exact;
    double worst; /* against the engine */
};

/* A uniform round's form (evenform.h) taken at 1 kB a flow on `form_net`, then every size
 * timed by the form on n: where the form has seen what the size reaches, against the classes
 * and the engine playing every flow; where not, the round solved, its moments added, and the
 * form asked again (it must answer then). */
static void forms_on(struct net *n, struct net *form_net, struct dt_evenshare *es,
                     struct form_tally *t)
{
    int p = n->topo->n_ranks, local = p / n->topo->n_nodes;
    const double sizes_bytes[] = {1, 48, 1e3, 3.3e4, 1e6, 3.3e6, 1e8};
    struct round r = {0};
    struct dt_evenform f = {0};
    long played;
    for (int pattern = 0; pattern <= 4; pattern++)
        for (int k = 1; k <= p; k *= 2) {
            if ((pattern == 2 && (p % k || k < 2)) || (pattern == 4 && k > 1))
                continue;
            make_round(&r, pattern, p, k, 0, 1e3, local);
            even_time(form_net, es, &r, &played);
            if (!dt_evenshare_form(es))
                continue; /* an uneven round: no form */
            assert_int_equal(dt_evenform_copy(&f, dt_evenshare_form(es)), 0);
            for (size_t b = 0; b < sizeof sizes_bytes / sizeof *sizes_bytes; b++) {
                make_round(&r, pattern, p, k, 0, sizes_bytes[b], local);
                double got, want = even_time(n, es, &r, &played);
                bool known = dt_evenshare_form_time(&f, sizes_bytes[b], &got);
                if (!known && dt_evenshare_form(es) && form_net == n) {
                    assert_int_equal(dt_evenform_merge(&f, dt_evenshare_form(es)), 0);
                    assert_true(dt_evenshare_form_time(&f, sizes_bytes[b], &got));
                    t->retimed++;
                } else if (!known)
                    continue;
                double rel = fabs(got / engine_time(n, &r) - 1);
                t->timings++;
                t->by_form += known;
                t->exact += got == want;
                t->worst = rel > t->worst ? rel : t->worst;
            }
        }
    dt_evenform_free(&f);
    free(r.src);
    free(r.dst);
    free(r.bytes);
}

static void forms_check(struct net *n, struct net *other, struct dt_evenshare *es,
                        const char *name, void *tally)
{
    (void)name;
    forms_on(n, other, es, tally);
}

/* Forms on every fabric, taken at nic_scale (1: the engine's fabric). */
static struct form_tally all_forms(double nic_scale)
{
    struct form_tally t = {0};
    each_fabric(nic_scale, forms_check, &t);
    printf("# forms, NIC x %g: %d timings (%d by the form as taken, %d after adding the "
           "round's moments), %d equal to the classes bit for bit, worst %.3g relative to the "
           "engine\n",
           nic_scale, t.timings, t.by_form, t.retimed, t.exact, t.worst);
    return t;
}

/* Ensure that a form times every size of its round as the classes do, bit for bit, and
 * that both cases (the form as taken, the form after adding moments) occur. */
static void forms_match_the_classes(void **state)
{
    (void)state;
    struct form_tally t = all_forms(1);
    assert_int_equal(t.exact, t.timings);
    assert_true(t.worst <= 1e-12);
    assert_true(t.by_form > 0 && t.retimed > 0);
}

/* Control: forms taken on NICs at 0.9 x the engine's bandwidth are caught. */
static void wrong_form_fails(void **state)
{
    (void)state;
    struct form_tally t = all_forms(0.9);
    assert_true(t.by_form > 0 && t.exact < t.timings && t.worst > 1e-3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(classes_match_the_engine),
                                       cmocka_unit_test(wrong_share_fails),
                                       cmocka_unit_test(forms_match_the_classes),
                                       cmocka_unit_test(wrong_form_fails)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

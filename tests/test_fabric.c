/* Routes of fat-trees, rail-optimised fabrics and tori (dt_simnet_route), with hops counted
 * by hand from the layouts in sim/fabric.c, and max-min sharing on those routes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dt/topology.h"
#include "engine.h"
#include "fabric.h"
#include "network.h"

/* nodes of `devices` GPUs and `nics` NICs of 100 Gbit/s (12.5 GB/s, 2 us), then `network`. */
static struct dt_topology *fabric(int nodes, int devices, int nics, const char *network)
{
    char text[2048];
    snprintf(text, sizeof text,
             "name: f\nnodes:\n  - name: n\n    count: %d\n    devices: %d\n"
             "    device: {kind: gpu, name: g, peak: {fp32: 10 TFLOP/s}, memory: 16 GiB,"
             " memory_bw: 900 GB/s}\n"
             "    intra: {kind: nvswitch, bandwidth: 100 GB/s, latency: 1 us, sharing: crossbar}\n"
             "    nic: {kind: infiniband, bandwidth: 100 Gbit/s, latency: 2 us, count: %d}\n"
             "network: %s\n",
             nodes, devices, nics, network);
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

/* The route from src to dst as link names joined by " | ". */
static const char *route_names(const struct net *n, int src, int dst, int *hops)
{
    static char buf[1024];
    int route[DT_SIM_MAX_HOPS];
    *hops = dt_simnet_route(&n->sn, src, dst, route);
    buf[0] = 0;
    for (int h = 0; h < *hops; h++) {
        if (h)
            strcat(buf, " | ");
        strcat(buf, n->sn.link_name[route[h]]);
    }
    return buf;
}

static void expect_route(const struct net *n, int src, int dst, int want_hops, const char *want)
{
    int hops;
    const char *got = route_names(n, src, dst, &hops);
    if (hops != want_hops || strcmp(got, want) != 0)
        fail_msg("route %d -> %d: got %d hops '%s', want %d hops '%s'", src, dst, hops, got,
                 want_hops, want);
}

/* Sum of the latencies along the route. */
static double route_latency(const struct net *n, int src, int dst)
{
    int route[DT_SIM_MAX_HOPS], hops = dt_simnet_route(&n->sn, src, dst, route);
    double sum = 0;
    for (int h = 0; h < hops; h++) {
        double bw, lat;
        dt_sim_link_params(n->sim, route[h], &bw, &lat);
        sum += lat;
    }
    return sum;
}

/* Ensure that a two-tier fat-tree routes within a leaf through the leaf only, and across leaves
 * up to the spine D-mod-K picks and down: radix 8 at 1:1 gives leaves of 4 ports down and 4 up,
 * so 8 one-NIC nodes sit on 2 leaves under 4 spines. Node 5 is port 1 of leaf 1, port number
 * 4 + 1 = 5 over the fabric, so its spine is 5 mod 4 = 1. */
static void test_fattree_two_tiers(void **state)
{
    (void)state;
    struct net n;
    build(&n, fabric(8, 1, 1, "{kind: fat-tree, latency: 100 ns, radix: 8}"));
    assert_int_equal(n.sn.ft.levels, 2);
    assert_int_equal(n.sn.ft.up, 4);
    expect_route(&n, 0, 1, 3, "node 0 nic-up 0 | switch | node 1 nic-down 0");
    expect_route(&n, 0, 5, 5,
                 "node 0 nic-up 0 | switch | leaf-up 0-1 | leaf-down 1-1 | node 5 nic-down 0");
    expect_route(&n, 3, 5, 5,
                 "node 3 nic-up 0 | switch | leaf-up 0-1 | leaf-down 1-1 | node 5 nic-down 0");
    expect_route(&n, 0, 6, 5,
                 "node 0 nic-up 0 | switch | leaf-up 0-2 | leaf-down 1-2 | node 6 nic-down 0");
    expect_route(&n, 7, 0, 5,
                 "node 7 nic-up 0 | switch | leaf-up 1-0 | leaf-down 0-0 | node 0 nic-down 0");
    /* NIC 2 us, then three switches of 100 ns: leaf, spine, leaf */
    assert_true(fabs(route_latency(&n, 0, 5) - 2.3e-6) < 1e-15);
    assert_true(fabs(route_latency(&n, 0, 1) - 2.1e-6) < 1e-15);
    teardown(&n);
}

/* Ensure that a three-tier fat-tree goes through the core only between pods: radix 4 at 1:1
 * gives leaves of 2 ports down (2 one-NIC nodes) and 2 up, pods of 2 leaves; 16 nodes make
 * 8 leaves in 4 pods. Node 15 is port 1 of leaf 7 (pod 3), port number 15: the aggregation
 * switch is 15 mod 2 = 1 and the core of that plane 15 / 2 mod 2 = 1, so the links are
 * leaf 0 -> agg (pod 0, 1) = agg row 0*2+1 = 1, core 1, then agg row 3*2+1 = 7, leaf 7. */
static void test_fattree_three_tiers(void **state)
{
    (void)state;
    struct net n;
    build(&n, fabric(16, 1, 1, "{kind: fat-tree, latency: 100 ns, radix: 4}"));
    assert_int_equal(n.sn.ft.levels, 3);
    expect_route(&n, 0, 1, 3, "node 0 nic-up 0 | switch | node 1 nic-down 0");
    /* node 2 is port 0 of leaf 1 (pod 0), port number 2: aggregation switch 0 */
    expect_route(&n, 0, 2, 5,
                 "node 0 nic-up 0 | switch | leaf-up 0-0 | leaf-down 1-0 | node 2 nic-down 0");
    expect_route(&n, 0, 15, 7,
                 "node 0 nic-up 0 | switch | leaf-up 0-1 | agg-up 1-1 | agg-down 7-1 | "
                 "leaf-down 7-1 | node 15 nic-down 0");
    /* five switches: leaf, aggregation, core, aggregation, leaf */
    assert_true(fabs(route_latency(&n, 0, 15) - 2.5e-6) < 1e-15);
    teardown(&n);
}

/* Ensure that ECMP picks the uplink from the flow hash, keeps one spine on the way up and down
 * (shortest path), and spreads the 16 cross-leaf flows of the two-tier case over the spines,
 * while static routing sends every flow to one destination over one spine. */
static void test_fattree_ecmp(void **state)
{
    (void)state;
    struct net n;
    build(&n, fabric(8, 1, 1, "{kind: fat-tree, latency: 100 ns, radix: 8, routing: ecmp}"));
    int used[4] = {0};
    for (int a = 0; a < 4; a++)
        for (int b = 4; b < 8; b++) {
            int s = (int)(dt_flow_hash(a, b) % 4), hops;
            char want[256];
            snprintf(want, sizeof want,
                     "node %d nic-up 0 | switch | leaf-up 0-%d | leaf-down 1-%d | "
                     "node %d nic-down 0",
                     a, s, s, b);
            const char *got = route_names(&n, a, b, &hops);
            if (hops != 5 || strcmp(got, want) != 0)
                fail_msg("ecmp %d -> %d: got '%s', want '%s'", a, b, got, want);
            used[s]++;
        }
    int spines_used = 0;
    for (int s = 0; s < 4; s++)
        spines_used += used[s] > 0;
    assert_true(spines_used >= 3); /* 16 hashes on 4 spines */
    assert_int_not_equal(dt_flow_hash(0, 5), dt_flow_hash(5, 0));
    teardown(&n);
}

/* Ensure that a rail-optimised fat-tree puts NIC k of a group of nodes on one leaf: radix 4 at
 * 1:1 gives 2 ports down, so nodes 0-1 have leaves 0 (NIC 0) and 1 (NIC 1), nodes 2-3 leaves 2
 * and 3. Rank r is GPU r mod 2 of node r / 2 and uses NIC r mod 2. Same rail, same group: the
 * leaf only; another rail or group: up to a spine. Without rail_optimized a leaf holds one node
 * (both of its NICs), so any two nodes cross a spine. */
static void test_fattree_rail_optimized(void **state)
{
    (void)state;
    struct net n;
    build(&n, fabric(4, 2, 2, "{kind: fat-tree, latency: 100 ns, radix: 4, rail_optimized: "
                              "true}"));
    assert_int_equal(n.topo->net.n_leaves, 4);
    expect_route(&n, 0, 2, 3, "node 0 nic-up 0 | switch | node 1 nic-down 0");
    expect_route(&n, 1, 3, 3, "node 0 nic-up 1 | switch | node 1 nic-down 1");
    /* rank 3 is NIC 1 of node 1: leaf 1, port 1 of it, port number 1 * 2 + 1 = 3, spine 1 */
    expect_route(&n, 0, 3, 5,
                 "node 0 nic-up 0 | switch | leaf-up 0-1 | leaf-down 1-1 | node 1 nic-down 1");
    /* rank 4 is NIC 0 of node 2: leaf 2, port 0, port number 4, spine 0 */
    expect_route(&n, 0, 4, 5,
                 "node 0 nic-up 0 | switch | leaf-up 0-0 | leaf-down 2-0 | node 2 nic-down 0");
    /* same node: NVSwitch, no NIC */
    expect_route(&n, 0, 1, 2, "rank 0 out | rank 1 in");
    teardown(&n);

    build(&n, fabric(4, 2, 2, "{kind: fat-tree, latency: 100 ns, radix: 4}"));
    assert_int_equal(n.topo->net.n_leaves, 4);
    /* leaf 1 holds node 1 alone: ports 2 (NIC 0) and 3 (NIC 1); spine 2 mod 2 = 0 */
    expect_route(&n, 0, 2, 5,
                 "node 0 nic-up 0 | switch | leaf-up 0-0 | leaf-down 1-0 | node 1 nic-down 0");
    teardown(&n);
}

/* Ensure that kind: rail crosses the rail switch on the same rail and the spine as well across
 * rails (one more switch latency, no shared spine link). */
static void test_rail(void **state)
{
    (void)state;
    struct net n;
    build(&n, fabric(2, 2, 2, "{kind: rail, latency: 100 ns}"));
    expect_route(&n, 0, 2, 3, "node 0 nic-up 0 | switch | node 1 nic-down 0");
    expect_route(&n, 0, 3, 4, "node 0 nic-up 0 | switch | switch | node 1 nic-down 1");
    assert_true(fabs(route_latency(&n, 0, 3) - 2.2e-6) < 1e-15);
    teardown(&n);
}

/* Ensure that a 2D torus routes x first, then y, the shorter way round, + on a tie: on 4 x 4,
 * node n is at (n mod 4, n / 4). 0 -> 5 = (1, 1): +x then +y; 0 -> 3 = (3, 0): one step -x
 * (wrap-around); 0 -> 2 = (2, 0): a tie, two steps +x; 0 -> 10 = (2, 2): +x +x +y +y. */
static void test_torus_2d(void **state)
{
    (void)state;
    struct net n;
    build(&n, fabric(16, 1, 1, "{kind: torus, latency: 100 ns, dims: [4, 4]}"));
    expect_route(&n, 0, 5, 5,
                 "node 0 nic-up 0 | switch | torus 0 +x | torus 1 +y | node 5 nic-down 0");
    expect_route(&n, 0, 3, 4, "node 0 nic-up 0 | switch | torus 0 -x | node 3 nic-down 0");
    expect_route(&n, 0, 2, 5,
                 "node 0 nic-up 0 | switch | torus 0 +x | torus 1 +x | node 2 nic-down 0");
    expect_route(&n, 0, 10, 7,
                 "node 0 nic-up 0 | switch | torus 0 +x | torus 1 +x | torus 2 +y | "
                 "torus 6 +y | node 10 nic-down 0");
    expect_route(&n, 15, 0, 5,
                 "node 15 nic-up 0 | switch | torus 15 +x | torus 12 +y | node 0 nic-down 0");
    /* NIC 2 us, source router and two hops of 100 ns */
    assert_true(fabs(route_latency(&n, 0, 5) - 2.3e-6) < 1e-15);
    teardown(&n);
}

/* Ensure that a 3D torus corrects x, y, then z: on 4 x 4 x 4, node 63 = (3, 3, 3) is one
 * step back in each dimension from 0: 0 -x to 3, -y to 3 + 12 = 15, -z to 15 + 48 = 63. */
static void test_torus_3d(void **state)
{
    (void)state;
    struct net n;
    build(&n, fabric(64, 1, 1, "{kind: torus, latency: 100 ns, dims: [4, 4, 4]}"));
    expect_route(&n, 0, 63, 6,
                 "node 0 nic-up 0 | switch | torus 0 -x | torus 3 -y | torus 15 -z | "
                 "node 63 nic-down 0");
    expect_route(&n, 21, 42, 6, /* (1,1,1) -> (2,2,2) */
                 "node 21 nic-up 0 | switch | torus 21 +x | torus 22 +y | torus 26 +z | "
                 "node 42 nic-down 0");
    teardown(&n);
}

/* Finish time of flow `tag` after running the simulation with the flows given. */
static void run_flows(struct net *n, const int (*pairs)[2], int count, double bytes,
                      double *end)
{
    for (int i = 0; i < count; i++) {
        int route[DT_SIM_MAX_HOPS];
        int hops = dt_simnet_route(&n->sn, pairs[i][0], pairs[i][1], route);
        assert_int_equal(dt_sim_flow(n->sim, bytes, route, hops, -1, -1, (uint64_t)i, NULL),
                         DT_OK);
    }
    struct dt_sim_completion c;
    while (dt_sim_next(n->sim, &c, NULL) == DT_OK && c.kind != DT_SIM_END)
        end[c.tag] = c.t_end;
}

/* Ensure that oversubscription halves cross-leaf flows under load: radix 6 at 2:1 leaves 4
 * ports down and 2 up (12.5 GB/s each). Four flows 0->4, 1->5, 2->6, 3->7 go over spines
 * 4, 5, 6, 7 mod 2 = 0, 1, 0, 1: two flows per uplink, 6.25 GB/s each, so 1 GB takes 0.16 s
 * after the 2.3 us of latency. At 1:1 (radix 8, 4 uplinks) each flow has its own uplink and
 * its NIC's full 12.5 GB/s: 0.08 s. */
static void test_oversubscription_halves(void **state)
{
    (void)state;
    static const int pairs[4][2] = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
    double end[4];
    struct net n;
    build(&n, fabric(8, 1, 1, "{kind: fat-tree, latency: 100 ns, radix: 6, "
                              "oversubscription: 2}"));
    assert_int_equal(n.sn.ft.up, 2);
    run_flows(&n, pairs, 4, 1e9, end);
    for (int i = 0; i < 4; i++)
        assert_true(fabs(end[i] - (2.3e-6 + 1e9 / 6.25e9)) < 1e-12);
    teardown(&n);

    build(&n, fabric(8, 1, 1, "{kind: fat-tree, latency: 100 ns, radix: 8}"));
    run_flows(&n, pairs, 4, 1e9, end);
    for (int i = 0; i < 4; i++)
        assert_true(fabs(end[i] - (2.3e-6 + 1e9 / 12.5e9)) < 1e-12);
    teardown(&n);
}

/* Ensure that two torus flows that share a link share its bandwidth: 0 -> 2 and 1 -> 2 on a
 * 4 x 4 torus both cross "torus 1 +x" (and node 2's NIC-down), 6.25 GB/s each. */
static void test_torus_shared_link(void **state)
{
    (void)state;
    static const int pairs[2][2] = {{0, 2}, {1, 2}};
    double end[2];
    struct net n;
    build(&n, fabric(16, 1, 1, "{kind: torus, latency: 100 ns, dims: [4, 4]}"));
    run_flows(&n, pairs, 2, 1e9, end);
    /* 1 -> 2 waits 2 us + 2 x 100 ns of latency and moves alone for 100 ns (1250 bytes) until
     * 0 -> 2 (one hop more) starts; they share 12.5 GB/s until 1 -> 2 ends, then 0 -> 2 moves
     * its last 1250 bytes alone. */
    double shared_end = 2.3e-6 + (1e9 - 1250) / 6.25e9;
    assert_true(fabs(end[1] - shared_end) < 1e-12);
    assert_true(fabs(end[0] - (shared_end + 1250 / 12.5e9)) < 1e-12);
    teardown(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fattree_two_tiers),
        cmocka_unit_test(test_fattree_three_tiers),
        cmocka_unit_test(test_fattree_ecmp),
        cmocka_unit_test(test_fattree_rail_optimized),
        cmocka_unit_test(test_rail),
        cmocka_unit_test(test_torus_2d),
        cmocka_unit_test(test_torus_3d),
        cmocka_unit_test(test_oversubscription_halves),
        cmocka_unit_test(test_torus_shared_link),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

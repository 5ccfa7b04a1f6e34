/* Tests of the plan player against closed-form alpha-beta costs (Thakur, Rabenseifner and
 * Gropp 2005, "Optimization of Collective Communication Operations in MPICH", section 4),
 * and of strategy rankings whose two figures the test computes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/collective.h"
#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"
#include "player.h"
#include "testdata.h"

#define REL_TOL 1e-9

/* p nodes of one device each, on one switch: every inter-node message crosses the sender's
 * NIC (10 GB/s, 2 us) and the switch (0.5 us), then the receiver's NIC. So for an
 * uncontended message of b bytes: alpha = 2.5 us, time = alpha + b / 10e9. */
static const double ALPHA = 2.5e-6, BETA_BPS = 10e9;

static struct dt_topology *cluster_nics(int nodes, int ppn, int nics, const char *intra_bw,
                                        const char *nic_bw)
{
    char text[2048];
    snprintf(text, sizeof text,
             "name: test\nsource: test\nnodes:\n"
             "  - name: n\n    count: %d\n    devices: %d\n"
             "    device: {kind: gpu, name: g, peak: {fp32: 10 TFLOP/s}, memory: 16 GiB,"
             " memory_bw: 900 GB/s}\n"
             "    intra: {kind: nvswitch, bandwidth: %s, latency: 1 us, sharing: crossbar}\n"
             "    nic: {kind: infiniband, bandwidth: %s, latency: 2 us, count: %d}\n"
             "    data_read: 1 GB/s\n"
             "network: {kind: switch, latency: 0.5 us}\n",
             nodes, ppn, intra_bw, nic_bw, nics);
    struct dt_topology *t;
    struct dt_error err;
    if (dt_topology_load_string("test.yaml", text, &t, &err) != DT_OK)
        fail_msg("topology: %s", err.msg);
    return t;
}

static struct dt_topology *cluster(int nodes, int ppn, const char *intra_bw, const char *nic_bw)
{
    return cluster_nics(nodes, ppn, 1, intra_bw, nic_bw);
}

/* A plan of every rank of t with no model and no ops (dt_plan_alloc's). */
static struct dt_plan *empty_plan(const struct dt_topology *t)
{
    struct dt_plan_options po;
    dt_plan_options_init(&po);
    struct dt_plan *plan;
    assert_int_equal(dt_plan_alloc(NULL, t, &po, t->n_ranks, &plan), DT_OK);
    return plan;
}

/* A plan with one collective over all ranks and nothing else. */
static struct dt_plan *one_collective(const struct dt_topology *t, enum dt_coll_kind kind,
                                      enum dt_coll_alg alg, long floats)
{
    struct dt_plan *plan = empty_plan(t);
    int *all = malloc((size_t)t->n_ranks * sizeof *all);
    for (int r = 0; r < t->n_ranks; r++)
        all[r] = r;
    int g = dt_plan_add_group(plan, t->n_ranks, all);
    free(all);
    for (int r = 0; r < t->n_ranks; r++) {
        struct dt_op op = {.kind = DT_OP_COLL, .coll = kind, .alg = alg, .group = g,
                           .region = {DT_BUF_GRADS, 0, floats}};
        assert_int_equal(dt_plan_push(plan, r, &op), DT_OK);
    }
    return plan;
}

/* Costs without compute: no framework overhead, summing is free. */
static void comm_only(struct dt_cost_params *cp)
{
    dt_cost_defaults(cp, DT_DEV_GPU);
    cp->iter_overhead_s = 0;
    cp->reduce_Bps = INFINITY;
}

/* Plays plan under comm_only costs: the iteration time in *t_iter, after checking that bytes
 * sent equal bytes received (conservation: every byte sent is received). */
static int run_plan(const struct dt_plan *plan, double *t_iter, struct dt_error *err)
{
    struct dt_cost_params cp;
    comm_only(&cp);
    struct dt_sim_result res;
    int rc = dt_sim_run(plan, &cp, NULL, &res, err);
    if (rc)
        return rc;
    double sent = 0, recv = 0;
    for (int r = 0; r < res.n_ranks; r++) {
        sent += res.rank[r].bytes_sent;
        recv += res.rank[r].bytes_recv;
    }
    assert_true(sent == recv);
    *t_iter = res.iter_s;
    dt_sim_result_free(&res);
    return DT_OK;
}

/* Plays plan, then destroys it and its topology; returns the iteration time. */
static double play(struct dt_plan *plan)
{
    double t_iter = 0;
    struct dt_error err;
    if (run_plan(plan, &t_iter, &err) != DT_OK)
        fail_msg("sim: %s", err.msg);
    struct dt_topology *t = (struct dt_topology *)plan->topo;
    dt_plan_destroy(plan);
    dt_topology_destroy(t);
    return t_iter;
}

static double simulate_collective(int nodes, enum dt_coll_kind kind, enum dt_coll_alg alg,
                                  long floats)
{
    struct dt_topology *t = cluster(nodes, 1, "100 GB/s", "10 GB/s");
    return play(one_collective(t, kind, alg, floats));
}

static void assert_close(double got, double want)
{
    if (!(fabs(got - want) <= REL_TOL * fabs(want)))
        fail_msg("got %.12g s, want %.12g s (relative error %.3g)", got, want,
                 fabs(got - want) / want);
}

/* Ensure that ring allreduce of n bytes on p uncontended nodes takes
 * 2(p-1)(alpha + n/(p beta)): p-1 reduce-scatter and p-1 allgather steps of n/p bytes. */
static void test_ring_allreduce_closed_form(void **state)
{
    (void)state;
    long floats = 1 << 20;
    double n = 4.0 * floats;
    for (int p = 2; p <= 8; p *= 2)
        assert_close(simulate_collective(p, DT_COLL_ALLREDUCE, DT_ALG_RING, floats),
                     2 * (p - 1) * (ALPHA + n / p / BETA_BPS));
}

/* Ensure that recursive doubling on p = 2^k nodes takes log2(p)(alpha + n beta). */
static void test_recursive_doubling_closed_form(void **state)
{
    (void)state;
    long floats = 1 << 18;
    double n = 4.0 * floats;
    assert_close(simulate_collective(8, DT_COLL_ALLREDUCE, DT_ALG_RECURSIVE_DOUBLING, floats),
                 3 * (ALPHA + n / BETA_BPS));
}

/* Ensure that Rabenseifner's allreduce takes 2 log2(p) alpha + 2 (p-1)/p n beta. */
static void test_rabenseifner_closed_form(void **state)
{
    (void)state;
    long floats = 1 << 20;
    double n = 4.0 * floats;
    assert_close(simulate_collective(8, DT_COLL_ALLREDUCE, DT_ALG_RABENSEIFNER, floats),
                 2 * 3 * ALPHA + 2.0 * 7 / 8 * n / BETA_BPS);
}

/* Ensure NCCL's double binary tree allreduce costs what its model says. On 2 nodes each
 * tree is one edge, the other way round: every round moves one chunk of n/(2k) bytes each
 * way, k chunks up then k down: 2k alpha + n beta exactly (k = 1 unpipelined, k = 4 in
 * chunks of DT_TREE_CHUNK floats). On 8 and 64 nodes a small message is latency: the data
 * climbs log2(p) levels and comes back down, 2 log2(p) alpha, plus at most 4 flows (two
 * children in each tree) sharing a NIC for each hop's bytes. */
static void test_tree_closed_form(void **state)
{
    (void)state;
    long floats = 1 << 16;
    double n = 4.0 * floats;
    assert_close(simulate_collective(2, DT_COLL_ALLREDUCE, DT_ALG_TREE, floats),
                 2 * ALPHA + n / BETA_BPS);
    floats = 8 * DT_TREE_CHUNK;
    n = 4.0 * floats;
    assert_int_equal(dt_tree_chunks(floats), 4);
    assert_close(simulate_collective(2, DT_COLL_ALLREDUCE, DT_ALG_TREE, floats),
                 8 * ALPHA + n / BETA_BPS);
    for (int lg = 3; lg <= 6; lg += 3) {
        double t = simulate_collective(1 << lg, DT_COLL_ALLREDUCE, DT_ALG_TREE, 2);
        if (!(t >= 2 * lg * ALPHA * (1 - REL_TOL) && t <= 2 * lg * (ALPHA + 4 * 4.0 / BETA_BPS)))
            fail_msg("p = %d: %.12g s, want 2 log2(p) alpha = %.12g s", 1 << lg, t,
                     2 * lg * ALPHA);
    }
}

/* The collectives of a strategy's plan for model m on t, alone in a plan of their own (on
 * copies of its groups): what the strategy's gradient exchange costs without compute. */
static struct dt_plan *collectives_of(const struct dt_model *m, const struct dt_topology *t,
                                      enum dt_strategy s)
{
    struct dt_plan *full = test_plan(m, t, s, 32, ""), *plan = empty_plan(t);
    for (int g = 0; g < full->n_groups; g++)
        assert_int_equal(dt_plan_add_group(plan, full->groups[g].n, full->groups[g].ranks), g);
    for (int r = 0; r < full->n_ranks; r++)
        for (int i = 0; i < full->ranks[r].n_ops; i++)
            if (full->ranks[r].ops[i].kind == DT_OP_COLL)
                assert_int_equal(dt_plan_push(plan, r, &full->ranks[r].ops[i]), DT_OK);
    dt_plan_destroy(full);
    return plan;
}

/* Ensure that the multi-level ring (rail-ring) on N nodes of g devices costs its three
 * phases: a ring reduce-scatter of n bytes among the g devices of a node, g - 1 steps of n/g
 * at 1 us + n/(g B_intra); a ring allreduce of n/g bytes along each rail, 2(N-1) steps of
 * n/(gN) at alpha + n/(gN B_nic) when every device has its own NIC (g NICs), or with the g
 * rails' flows sharing the node's one NIC, alpha + n/(N B_nic); and an allgather like the
 * reduce-scatter. cnn21k's 21,840 gradients split evenly in 8 and 16. */
static void test_rail_ring_closed_form(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("cnn21k");
    const double n = 4.0 * 21840, b_intra = 100e9, alpha_intra = 1e-6;
    static const int shapes[][3] = {{2, 4, 4}, {4, 4, 4}, {2, 4, 1}, {4, 2, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int N = shapes[i][0], g = shapes[i][1], nics = shapes[i][2];
        struct dt_topology *t = cluster_nics(N, g, nics, "100 GB/s", "10 GB/s");
        double rail_bytes = nics == g ? n / (g * N) : n / N;
        double want = 2 * (g - 1) * (alpha_intra + n / g / b_intra) +
                      2 * (N - 1) * (ALPHA + rail_bytes / BETA_BPS);
        assert_close(play(collectives_of(m, t, DT_STRAT_ALLREDUCE_RAIL_RING)), want);
    }
    dt_model_destroy(m);
}

/* Ensure that binomial reduce and bcast take ceil(log2 p)(alpha + n beta). */
static void test_binomial_closed_form(void **state)
{
    (void)state;
    long floats = 100000;
    double n = 4.0 * floats;
    assert_close(simulate_collective(8, DT_COLL_REDUCE, DT_ALG_BINOMIAL, floats),
                 3 * (ALPHA + n / BETA_BPS));
    assert_close(simulate_collective(5, DT_COLL_BCAST, DT_ALG_BINOMIAL, floats),
                 3 * (ALPHA + n / BETA_BPS));
}

/* Ensure that the contention of a linear reduce is simulated, not assumed away: p-1 senders
 * share the root's NIC, so each gets beta/(p-1) and all finish at alpha + (p-1) n beta. */
static void test_linear_reduce_contends_at_root(void **state)
{
    (void)state;
    long floats = 100000;
    double n = 4.0 * floats;
    assert_close(simulate_collective(4, DT_COLL_REDUCE, DT_ALG_LINEAR, floats),
                 ALPHA + 3 * n / BETA_BPS);
}

/* Ensure that a ring allreduce's breakdown counts all of its 2(p-1) steps as communication:
 * p = 4 uncontended nodes start together, so no rank ever waits for a peer that has not sent
 * (idle 0), and each rank is blocked exactly 2(p-1)(alpha + n/(p beta)) moving data. With
 * summing at reduce_bw = 1 GB/s, each of the p-1 reduce-scatter steps then adds 12 bytes per
 * float of its chunk, (p-1) 12 (n/4/p) / 1e9 s on the device: compute, not communication, and
 * the communication stays 2(p-1)(alpha + n/(p beta)). */
static void test_ring_breakdown_all_comm(void **state)
{
    (void)state;
    const int p = 4;
    const long floats = 1 << 20;
    const double n = 4.0 * floats, steps = 2 * (p - 1) * (ALPHA + n / p / BETA_BPS);
    for (int summing = 0; summing < 2; summing++) {
        struct dt_topology *t = cluster(p, 1, "100 GB/s", "10 GB/s");
        struct dt_plan *plan = one_collective(t, DT_COLL_ALLREDUCE, DT_ALG_RING, floats);
        struct dt_cost_params cp;
        comm_only(&cp);
        cp.reduce_Bps = summing ? 1e9 : INFINITY;
        double sums = summing ? (p - 1) * 12.0 * (floats / p) / 1e9 : 0;
        struct dt_sim_result res;
        struct dt_error err;
        if (dt_sim_run(plan, &cp, NULL, &res, &err) != DT_OK)
            fail_msg("sim: %s", err.msg);
        assert_close(res.iter_s, steps + sums);
        for (int r = 0; r < p; r++) {
            assert_close(res.rank[r].comm_s, steps);
            assert_true(res.rank[r].idle_s <= REL_TOL * steps);
            if (summing)
                assert_close(res.rank[r].compute_s, sums);
        }
        dt_sim_result_free(&res);
        dt_plan_destroy(plan);
        dt_topology_destroy(t);
    }
}

static double iteration(const struct dt_model *m, const struct dt_topology *t,
                        enum dt_strategy s)
{
    struct dt_plan_options po = {.strategy = s, .scaling = DT_SCALING_WEAK, .batch = 32,
                                 .precision = DT_FP32};
    struct dt_plan *plan;
    struct dt_error err;
    if (dt_plan_build(m, t, &po, &plan, &err) != DT_OK)
        fail_msg("plan: %s", err.msg);
    struct dt_cost_params cp;
    dt_cost_defaults(&cp, t->groups[0].device.kind);
    struct dt_sim_result res;
    if (dt_sim_run(plan, &cp, NULL, &res, &err) != DT_OK)
        fail_msg("sim: %s", err.msg);
    double it = res.iter_s;
    dt_sim_result_free(&res);
    dt_plan_destroy(plan);
    return it;
}

/* The compute time the player should charge rank r of plan under cp: the per-iteration
 * overhead, then every local op, each by the cost model's own functions (tested against
 * hand-worked values in test_costmodel): compute and update ops by dt_cost_compute, loads as
 * their bytes at mem_bw, and the ZERO op that starts every step as the gradient reset of its
 * region (the reset the player used to add to the start of the iteration is this op now);
 * plus sum_floats summed. */
static double expected_compute(const struct dt_plan *plan, int r, const struct dt_cost_params *cp,
                               long sum_floats)
{
    const struct dt_device_spec *dev = &plan->topo->groups[0].device;
    double t = cp->iter_overhead_s;
    for (int i = 0; i < plan->ranks[r].n_ops; i++) {
        const struct dt_op *op = &plan->ranks[r].ops[i];
        if (op->kind == DT_OP_COMPUTE || op->kind == DT_OP_UPDATE)
            t += dt_cost_compute(cp, dev, plan->model, op);
        else if (op->kind == DT_OP_LOAD)
            t += 2.0 * op->bytes / dt_cost_mem_bw(cp, dev); /* reads and writes its rows */
        else if (op->kind == DT_OP_ZERO)
            t += dt_cost_grad_reset(cp, dev, op->region.count, 4.0);
    }
    return t + (sum_floats ? dt_cost_reduce(cp, dev, sum_floats, 4.0) : 0);
}

static double rank0_compute(const struct dt_model *m, const struct dt_topology *t,
                            enum dt_strategy s, int ranks, const struct dt_cost_params *cp,
                            struct dt_plan **plan)
{
    struct dt_plan_options po = {.strategy = s, .scaling = DT_SCALING_WEAK, .batch = 64,
                                 .n_ranks = ranks, .precision = DT_FP32};
    struct dt_error err;
    if (dt_plan_build(m, t, &po, plan, &err) != DT_OK)
        fail_msg("plan: %s", err.msg);
    struct dt_sim_result res;
    if (dt_sim_run(*plan, cp, NULL, &res, &err) != DT_OK)
        fail_msg("sim: %s", err.msg);
    double c = res.rank[0].compute_s;
    dt_sim_result_free(&res);
    return c;
}

/* Ensure that every rank's compute + comm + idle is the iteration, for every strategy (data
 * parallel with and without buckets, the pipelines) on 2 nodes x 2 devices, with default
 * costs: nothing is counted twice (a sum of received data is compute only) or left out. */
static void test_breakdown_sums_to_iteration(void **state)
{
    (void)state;
    static const char *const models[] = {"mlp-fmnist", "cnn690k"};
    struct dt_topology *t = cluster(2, 2, "100 GB/s", "10 GB/s");
    for (size_t mi = 0; mi < 2; mi++) {
        struct dt_model *m = test_zoo_model(models[mi]);
        for (int s = 0; s < DT_STRAT_COUNT; s++)
            for (int buckets = 0; buckets < 2; buckets++) {
                struct dt_plan_options po;
                dt_plan_options_init(&po);
                po.strategy = s;
                po.batch = 32;
                po.bucket_bytes = buckets ? 65536 : 0;
                char why[512];
                if (!dt_strategy_fits_options(&po, m, t, dt_plan_ranks(&po, t), why, sizeof why))
                    continue;
                struct dt_plan *plan;
                struct dt_error err;
                if (dt_plan_build(m, t, &po, &plan, &err) != DT_OK)
                    fail_msg("%s: %s", dt_strategy_name(s), err.msg);
                struct dt_cost_params cp;
                dt_cost_defaults(&cp, DT_DEV_GPU);
                struct dt_sim_result res;
                if (dt_sim_run(plan, &cp, NULL, &res, &err) != DT_OK)
                    fail_msg("%s: %s", dt_strategy_name(s), err.msg);
                for (int r = 0; r < res.n_ranks; r++) {
                    const struct dt_rank_stats *st = &res.rank[r];
                    double sum = st->compute_s + st->comm_s + st->idle_s;
                    if (!(fabs(sum - res.iter_s) <= 1e-9 * res.iter_s))
                        fail_msg("%s%s rank %d: compute %.9g + comm %.9g + idle %.9g = %.9g, "
                                 "iteration %.9g", dt_strategy_name(s), buckets ? " buckets" : "",
                                 r, st->compute_s, st->comm_s, st->idle_s, sum, res.iter_s);
                }
                dt_sim_result_free(&res);
                dt_plan_destroy(plan);
            }
        dt_model_destroy(m);
    }
    dt_topology_destroy(t);
}

/* Ensure the player charges each rank the iteration overhead and its ops, the first being the
 * ZERO of all its gradients (the gradient reset: 4 bytes per parameter, here inside the 1 MiB
 * cache at cache_bw); and that two ranks of one node share node_mem_bw: at 20 GB/s for two
 * ranks of mem_bw 20 GB/s each gets half, every memory-bound cost (ring's sum of its
 * 50,885-float half of mlp-fmnist's 101,770 gradients included) by dt_cost_colocated's
 * parameters. */
static void test_compute_reset_and_colocation(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("mlp-fmnist");
    struct dt_topology *t;
    struct dt_error err;
    const char *text =
        "name: t\nsource: test\nnodes:\n  - name: n\n    count: 1\n    devices: 2\n"
        "    device: {kind: cpu, name: c, cores: 1, peak: {fp32: 100 GFLOP/s}, memory: 8 GiB,"
        " memory_bw: 20 GB/s, cache: 1 MiB}\n"
        "    intra: {kind: shm, bandwidth: 5 GB/s, latency: 1 us}\n";
    if (dt_topology_load_string("t.yaml", text, &t, &err) != DT_OK)
        fail_msg("topology: %s", err.msg);
    struct dt_cost_params cp, shared;
    dt_cost_defaults(&cp, DT_DEV_CPU);
    cp.cache_Bps = 80e9;
    struct dt_plan *plan;
    double got = rank0_compute(m, t, DT_STRAT_SEQUENTIAL, 1, &cp, &plan);
    const struct dt_op *zero = &plan->ranks[0].ops[0];
    assert_int_equal(zero->kind, DT_OP_ZERO);
    assert_int_equal(zero->region.buf, DT_BUF_GRADS);
    assert_int_equal(zero->region.count, 101770);
    assert_close(got, expected_compute(plan, 0, &cp, 0));
    dt_plan_destroy(plan);

    double alone = rank0_compute(m, t, DT_STRAT_ALLREDUCE_RING, 2, &cp, &plan);
    assert_close(alone, expected_compute(plan, 0, &cp, 50885));
    dt_plan_destroy(plan);
    cp.node_mem_Bps = 20e9;
    dt_cost_colocated(&cp, &t->groups[0].device, 2, &shared);
    assert_close(dt_cost_mem_bw(&shared, &t->groups[0].device), 10e9);
    got = rank0_compute(m, t, DT_STRAT_ALLREDUCE_RING, 2, &cp, &plan);
    assert_close(got, expected_compute(plan, 0, &shared, 50885));
    assert_true(got > alone);
    dt_plan_destroy(plan);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* Ensure that on 2 nodes x 4 devices with inter-node bandwidth 10x below intra-node,
 * hierarchical allreduce beats the flat ring. Flat ring: 14 steps of n/8 each cross a NIC
 * = 1.75 n/B_nic; hierarchical: 2 intra-node reduce steps + 2 leader-ring steps of n/2 + 2
 * intra-node bcast steps = n/B_nic + 4 n/(10 B_nic) = 1.4 n/B_nic. */
static void test_hierarchical_beats_ring_on_slow_network(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("cnn690k");
    struct dt_topology *t = cluster(2, 4, "100 GB/s", "10 GB/s");
    double ring = iteration(m, t, DT_STRAT_ALLREDUCE_RING);
    double hier = iteration(m, t, DT_STRAT_ALLREDUCE_HIERARCHICAL);
    if (!(hier < ring))
        fail_msg("hierarchical %.6g s is not below ring %.6g s", hier, ring);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* Ensure that reduce+broadcast through rank 0 (linear) is the slowest strategy on 4 nodes x
 * 2 devices at 1 Gbit/s: rank 0's NIC carries 6 full gradients in and 6 out. The pipelines
 * (2 stages x 4 replicas) each allreduce half of the gradients among 4 ranks instead. */
static void test_linear_reduce_bcast_slowest_on_4n2p(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("cnn690k");
    struct dt_topology *t = cluster(4, 2, "100 GB/s", "1 Gbit/s");
    double linear = iteration(m, t, DT_STRAT_REDUCE_BCAST_LINEAR);
    for (int s = DT_STRAT_REDUCE_BCAST_BINOMIAL; s < DT_STRAT_COUNT; s++) {
        double other = iteration(m, t, s);
        if (s == DT_STRAT_PS_CENTRAL) /* the same traffic through rank 0 */
            assert_true(other <= linear * (1 + 1e-6));
        else if (!(other < linear))
            fail_msg("%s %.6g s is not below reduce-bcast-linear %.6g s", dt_strategy_name(s),
                     other, linear);
    }
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* Ensure that gradient buckets overlap communication with backward: with buckets the
 * iteration is shorter than without, and never shorter than compute alone. */
static void test_buckets_overlap(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("cnn690k");
    struct dt_topology *t = cluster(4, 1, "100 GB/s", "10 Gbit/s");
    struct dt_plan_options po = {.strategy = DT_STRAT_ALLREDUCE_RING, .batch = 32,
                                 .precision = DT_FP32};
    struct dt_plan *plain, *buck;
    struct dt_error err;
    assert_int_equal(dt_plan_build(m, t, &po, &plain, &err), DT_OK);
    po.bucket_bytes = 256 * 1024;
    assert_int_equal(dt_plan_build(m, t, &po, &buck, &err), DT_OK);
    struct dt_cost_params cp;
    dt_cost_defaults(&cp, DT_DEV_GPU);
    struct dt_sim_result a, b;
    assert_int_equal(dt_sim_run(plain, &cp, NULL, &a, &err), DT_OK);
    assert_int_equal(dt_sim_run(buck, &cp, NULL, &b, &err), DT_OK);
    if (!(b.iter_s < a.iter_s))
        fail_msg("buckets %.6g s not below %.6g s", b.iter_s, a.iter_s);
    assert_true(b.iter_s >= b.rank[0].compute_s);
    dt_sim_result_free(&a);
    dt_sim_result_free(&b);
    dt_plan_destroy(plain);
    dt_plan_destroy(buck);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* Ensure that a message arriving while its receiver is still summing the previous round is
 * kept for the next round, not lost (a deadlock the 1024-rank fat-tree once showed). Two
 * nodes whose devices sum at 900 GB/s and at 1 GB/s: in a 2-rank ring the fast rank finishes
 * its reduce-scatter sum and sends its allgather chunk while the slow one is still summing.
 * Every algorithm must finish, with every byte sent received. */
static void test_messages_during_summing(void **state)
{
    (void)state;
    const char *text =
        "name: uneven\nsource: test\nnodes:\n"
        "  - {name: fast, count: 1, devices: 1,\n"
        "     device: {kind: gpu, name: f, peak: {fp32: 10 TFLOP/s}, memory: 16 GiB,"
        " memory_bw: 900 GB/s},\n"
        "     intra: {kind: nvswitch, bandwidth: 100 GB/s, latency: 1 us},\n"
        "     nic: {kind: infiniband, bandwidth: 100 Gbit/s, latency: 1 us}, data_read: 1 GB/s}\n"
        "  - {name: slow, count: 1, devices: 1,\n"
        "     device: {kind: gpu, name: s, peak: {fp32: 10 TFLOP/s}, memory: 16 GiB,"
        " memory_bw: 1 GB/s},\n"
        "     intra: {kind: nvswitch, bandwidth: 100 GB/s, latency: 1 us},\n"
        "     nic: {kind: infiniband, bandwidth: 100 Gbit/s, latency: 1 us}, data_read: 1 GB/s}\n"
        "network: {kind: switch, latency: 0.5 us}\n";
    struct dt_topology *t;
    struct dt_error err;
    if (dt_topology_load_string("uneven.yaml", text, &t, &err) != DT_OK)
        fail_msg("topology: %s", err.msg);
    enum dt_coll_alg algs[] = {DT_ALG_RING, DT_ALG_RECURSIVE_DOUBLING, DT_ALG_RABENSEIFNER,
                               DT_ALG_DIRECT};
    for (size_t a = 0; a < sizeof algs / sizeof algs[0]; a++) {
        struct dt_plan *plan = one_collective(t, DT_COLL_ALLREDUCE, algs[a], 600000);
        struct dt_cost_params cp;
        comm_only(&cp);
        cp.reduce_Bps = 0; /* each device sums at its own memory bandwidth */
        struct dt_sim_result res;
        if (dt_sim_run(plan, &cp, NULL, &res, &err) != DT_OK)
            fail_msg("%s: %s", dt_coll_alg_name(algs[a]), err.msg);
        assert_true(res.rank[0].bytes_sent + res.rank[1].bytes_sent ==
                        res.rank[0].bytes_recv + res.rank[1].bytes_recv);
        dt_sim_result_free(&res);
        dt_plan_destroy(plan);
    }
    dt_topology_destroy(t);
}

/* A topology of one-device nodes in a row, each a group of its own: node i's memory
 * bandwidth (which its sums run at under reduce_Bps = 0) mem_bw[i], its NIC nic_bw[i]. */
static struct dt_topology *row_of_nodes(int n, const char *const *mem_bw,
                                        const char *const *nic_bw)
{
    char text[4096];
    int len = snprintf(text, sizeof text, "name: row\nsource: test\nnodes:\n");
    for (int i = 0; i < n; i++)
        len += snprintf(text + len, sizeof text - (size_t)len,
                        "  - {name: n%d, count: 1, devices: 1,\n"
                        "     device: {kind: gpu, name: g%d, peak: {fp32: 10 TFLOP/s},"
                        " memory: 16 GiB, memory_bw: %s},\n"
                        "     intra: {kind: nvswitch, bandwidth: 100 GB/s, latency: 1 us},\n"
                        "     nic: {kind: infiniband, bandwidth: %s, latency: 1 us},"
                        " data_read: 1 GB/s}\n",
                        i, i, mem_bw[i], nic_bw[i]);
    snprintf(text + len, sizeof text - (size_t)len, "network: {kind: switch, latency: 0.5 us}\n");
    struct dt_topology *t;
    struct dt_error err;
    if (dt_topology_load_string("row.yaml", text, &t, &err) != DT_OK)
        fail_msg("topology: %s", err.msg);
    return t;
}

/* Ensure that a message from another source waits for the receive that names it, in a round
 * of one receive: a binomial reduce to rank 0 on 4 nodes receives from rank 1, then from
 * rank 2. Rank 1's NIC is 100 times slower, so rank 2's message (round 2) arrives first and
 * waits; rank 0 sums twice after rank 1's arrival at t1: t1 + 2d, d = 12 n / reduce_Bps
 * for n fp32 floats. Taken for round 1's receive it would end at t1 + d. t1 is the time
 * with free sums (d = 0), when rank 0 ends as rank 1's message arrives. */
static void test_single_receive_matches_its_source(void **state)
{
    (void)state;
    const char *mem[] = {"900 GB/s", "900 GB/s", "900 GB/s", "900 GB/s"};
    const char *nic[] = {"100 Gbit/s", "1 Gbit/s", "100 Gbit/s", "100 Gbit/s"};
    struct dt_topology *t = row_of_nodes(4, mem, nic);
    struct dt_error err;
    long n = 1000000;
    struct dt_plan *plan = one_collective(t, DT_COLL_REDUCE, DT_ALG_BINOMIAL, n);
    double t_end[2], reduce_Bps[2] = {INFINITY, 1e12};
    for (int k = 0; k < 2; k++) {
        struct dt_cost_params cp;
        comm_only(&cp);
        cp.reduce_Bps = reduce_Bps[k];
        struct dt_sim_result res;
        if (dt_sim_run(plan, &cp, NULL, &res, &err) != DT_OK)
            fail_msg("sim: %s", err.msg);
        t_end[k] = res.iter_s;
        dt_sim_result_free(&res);
    }
    assert_close(t_end[1], t_end[0] + 2 * 12.0 * (double)n / reduce_Bps[1]);
    dt_plan_destroy(plan);
    dt_topology_destroy(t);
}

/* Ensure that a round of one receive takes one message from its source, not two: in a ring
 * allreduce over 4 ranks whose last node's NIC is 100 times slower, rank 1 (fast on both
 * sides) sends its next round to rank 2 while rank 2, its receive done, still sends to rank 3
 * over the slow NIC; that message must wait for rank 2's next round. The slow NIC then
 * carries rank 2's chunks one after another: 2 (p - 1) = 6 rounds, each a chunk (n / p
 * floats) over 1 Gbit/s and a few microseconds of latency. Taken as the current round's, the
 * early message ended that round early, and two of rank 2's sends shared the slow NIC (16 %
 * longer). */
static void test_single_receive_takes_one_message(void **state)
{
    (void)state;
    const char *mem[] = {"900 GB/s", "900 GB/s", "900 GB/s", "900 GB/s"};
    const char *nic[] = {"100 Gbit/s", "100 Gbit/s", "100 Gbit/s", "1 Gbit/s"};
    struct dt_topology *t = row_of_nodes(4, mem, nic);
    struct dt_error err;
    long n = 1000000;
    struct dt_plan *plan = one_collective(t, DT_COLL_ALLREDUCE, DT_ALG_RING, n);
    double t_iter = 0;
    if (run_plan(plan, &t_iter, &err) != DT_OK)
        fail_msg("sim: %s", err.msg);
    double chunks = 6 * (4.0 * (double)n / 4) / (1e9 / 8); /* the slow NIC's seconds */
    if (!(t_iter >= chunks && t_iter < 1.01 * chunks)) /* latencies: microseconds */
        fail_msg("%.9g s, want the slow NIC's %.9g s and latencies", t_iter, chunks);
    dt_plan_destroy(plan);
    dt_topology_destroy(t);
}

/* Ensure that a message that comes before its round is posted (kept in the activity's
 * mailbox) is taken by one round only: a ring allreduce over 4 ranks where rank 1 sums at
 * 1 GB/s (d = 12 bytes per float of a chunk of n / 4 floats) and rank 0's NIC is 10 times
 * slower than the others'. While rank 1 sums, rank 0 runs ahead and its messages wait for
 * rank 1's next rounds. Every rank's result holds the chunk rank 1 reduces
 * last, after its 3 sums: no rank ends before 3 d, and rank 0 gets that chunk through its
 * slow NIC (C for a chunk): the iteration is at least 3 d + C. A message left in the mailbox
 * once taken (so taken again) ended rank 0 at 2.9 ms, before 3 d = 5.4 ms. The other
 * algorithms (rounds that receive from several sources: a message from a source the round
 * does not receive waits) must complete with every byte received. */
static void test_early_messages_wait_their_round(void **state)
{
    (void)state;
    const char *mem[] = {"900 GB/s", "1 GB/s", "900 GB/s", "900 GB/s"};
    const char *nic[] = {"10 Gbit/s", "100 Gbit/s", "100 Gbit/s", "100 Gbit/s"};
    long n = 600000;
    enum dt_coll_alg algs[] = {DT_ALG_RING, DT_ALG_RECURSIVE_DOUBLING, DT_ALG_RABENSEIFNER,
                               DT_ALG_DIRECT};
    for (size_t a = 0; a < sizeof algs / sizeof algs[0]; a++) {
        struct dt_topology *t = row_of_nodes(4, mem, nic);
        struct dt_plan *plan = one_collective(t, DT_COLL_ALLREDUCE, algs[a], n);
        struct dt_cost_params cp;
        comm_only(&cp);
        cp.reduce_Bps = 0; /* each device sums at its own memory bandwidth */
        struct dt_sim_result res;
        struct dt_error err;
        if (dt_sim_run(plan, &cp, NULL, &res, &err) != DT_OK)
            fail_msg("%s: %s", dt_coll_alg_name(algs[a]), err.msg);
        double sent = 0, recv = 0;
        for (int r = 0; r < 4; r++) {
            sent += res.rank[r].bytes_sent;
            recv += res.rank[r].bytes_recv;
        }
        assert_true(sent == recv);
        if (algs[a] == DT_ALG_RING) {
            double chunk = (double)n / 4;
            double d = 12 * chunk / 1e9, C = 4 * chunk / (10e9 / 8);
            for (int r = 0; r < 4; r++)
                if (!(res.rank[r].end_s >= 3 * d))
                    fail_msg("rank %d ends at %.9g s, before rank 1's sums (%.9g s)", r,
                             res.rank[r].end_s, 3 * d);
            if (!(res.iter_s >= 3 * d + C))
                fail_msg("%.9g s, want at least %.9g s", res.iter_s, 3 * d + C);
        }
        dt_sim_result_free(&res);
        dt_plan_destroy(plan);
        dt_topology_destroy(t);
    }
}

/* A plan on `nodes` nodes of one device each (the cluster of ALPHA and BETA_BPS) with ranks
 * but no ops: the tests push SEND/RECV/WAIT ops themselves. */
static struct dt_plan *p2p_plan(int nodes, int handles)
{
    struct dt_plan *plan = empty_plan(cluster(nodes, 1, "100 GB/s", "10 GB/s"));
    plan->next_handle = handles;
    return plan;
}

static void push_p2p(struct dt_plan *plan, int rank, enum dt_op_kind kind, int peer, int tag,
                     long floats, int handle)
{
    struct dt_op op = {.kind = kind, .peer = peer, .tag = tag,
                       .region = {DT_BUF_GRADS, 0, floats}, .nonblocking = handle >= 0,
                       .handle = handle};
    assert_int_equal(dt_plan_push(plan, rank, &op), DT_OK);
}

static void push_wait(struct dt_plan *plan, int rank, int handle)
{
    struct dt_op op = {.kind = DT_OP_WAIT, .handle = handle};
    assert_int_equal(dt_plan_push(plan, rank, &op), DT_OK);
}

/* Ensure that a plan's SEND/RECV pair of n bytes between two uncontended nodes takes
 * alpha + n beta, like one step of any collective. */
static void test_send_recv_closed_form(void **state)
{
    (void)state;
    long floats = 1 << 20;
    struct dt_plan *plan = p2p_plan(2, 0);
    push_p2p(plan, 0, DT_OP_SEND, 1, 3, floats, -1);
    push_p2p(plan, 1, DT_OP_RECV, 0, 3, floats, -1);
    assert_close(play(plan), ALPHA + 4.0 * floats / BETA_BPS);
}

/* Ensure that receives match by source and tag whatever the order they are posted in, and
 * that two messages into one node share its NIC: ranks 0 and 2 send n bytes each to rank 1
 * with the same tag; rank 1 posts the receive from 2 first. Both flows cross rank 1's NIC
 * at once, so each gets half of it: alpha + 2 n beta. */
static void test_send_recv_match_by_source(void **state)
{
    (void)state;
    long floats = 1 << 20;
    struct dt_plan *plan = p2p_plan(3, 2);
    push_p2p(plan, 0, DT_OP_SEND, 1, 7, floats, -1);
    push_p2p(plan, 2, DT_OP_SEND, 1, 7, floats, -1);
    push_p2p(plan, 1, DT_OP_RECV, 2, 7, floats, 0);
    push_p2p(plan, 1, DT_OP_RECV, 0, 7, floats, 1);
    push_wait(plan, 1, 0);
    push_wait(plan, 1, 1);
    assert_close(play(plan), ALPHA + 2 * 4.0 * floats / BETA_BPS);
}

/* The mailbox plan: rank 0 sends n floats (tag 1) and rank 2 sends 4n floats (tag 2) to
 * rank 1, which receives tag 2 first, then tag 1. */
static struct dt_plan *mailbox_plan(long floats)
{
    struct dt_plan *plan = p2p_plan(3, 0);
    push_p2p(plan, 0, DT_OP_SEND, 1, 1, floats, -1);
    push_p2p(plan, 2, DT_OP_SEND, 1, 2, 4 * floats, -1);
    push_p2p(plan, 1, DT_OP_RECV, 2, 2, 4 * floats, -1);
    push_p2p(plan, 1, DT_OP_RECV, 0, 1, floats, -1);
    return plan;
}

/* Ensure that an eager message delivered before its RECV is posted waits in the mailbox:
 * with n = 8 KiB and 4n = 32 KiB, both under the 64 KiB eager limit, both flows start at
 * once and share rank 1's NIC: the small one arrives at alpha + 2n beta, while rank 1 still
 * waits for tag 2, which then gets the whole NIC for its last 3n bytes: alpha + 5n beta.
 * The RECV of tag 1 then finds its message delivered: no more time. */
static void test_send_recv_mailbox(void **state)
{
    (void)state;
    long floats = 1 << 11;
    assert_close(play(mailbox_plan(floats)), ALPHA + 5 * 4.0 * floats / BETA_BPS);
}

/* Ensure that a message above the eager limit moves only once its RECV is posted
 * (rendezvous): with n = 1 MiB, rank 0's message waits until rank 1 has received tag 2's
 * 4n bytes alone on its NIC (alpha + 4n beta) and posts the receive of tag 1, which then
 * takes alpha + n beta: 2 alpha + 5n beta, one alpha more than the eager case. */
static void test_send_recv_rendezvous(void **state)
{
    (void)state;
    long floats = 1 << 18;
    assert_close(play(mailbox_plan(floats)), 2 * ALPHA + 5 * 4.0 * floats / BETA_BPS);
}

/* Ensure that each receive releases its own rendezvous send when a rank sends one tag to
 * several ranks: rank 0 sends n = 1 MiB with tag 7 to rank 1 and to rank 2 (non-blocking,
 * then waits for both), and each receives it. Both flows start at once and share rank 0's
 * NIC: alpha + 2n beta. */
static void test_rendezvous_same_tag_two_receivers(void **state)
{
    (void)state;
    long floats = 1 << 18;
    struct dt_plan *plan = p2p_plan(3, 2);
    push_p2p(plan, 0, DT_OP_SEND, 1, 7, floats, 0);
    push_p2p(plan, 0, DT_OP_SEND, 2, 7, floats, 1);
    push_wait(plan, 0, 0);
    push_wait(plan, 0, 1);
    push_p2p(plan, 1, DT_OP_RECV, 0, 7, floats, -1);
    push_p2p(plan, 2, DT_OP_RECV, 0, 7, floats, -1);
    assert_close(play(plan), ALPHA + 2 * 4.0 * floats / BETA_BPS);
}

/* Ensure that a RECV whose message never comes is reported as a deadlock, not a hang. */
static void test_send_recv_tag_mismatch_deadlocks(void **state)
{
    (void)state;
    struct dt_plan *plan = p2p_plan(2, 0);
    push_p2p(plan, 0, DT_OP_SEND, 1, 3, 100, -1);
    push_p2p(plan, 1, DT_OP_RECV, 0, 4, 100, -1);
    double t_iter;
    struct dt_error err;
    assert_int_equal(run_plan(plan, &t_iter, &err), DT_EINTERNAL);
    assert_non_null(strstr(err.msg, "deadlock: rank 1"));
    struct dt_topology *t = (struct dt_topology *)plan->topo;
    dt_plan_destroy(plan);
    dt_topology_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_allreduce_closed_form),
        cmocka_unit_test(test_ring_breakdown_all_comm),
        cmocka_unit_test(test_breakdown_sums_to_iteration),
        cmocka_unit_test(test_recursive_doubling_closed_form),
        cmocka_unit_test(test_rabenseifner_closed_form),
        cmocka_unit_test(test_tree_closed_form),
        cmocka_unit_test(test_rail_ring_closed_form),
        cmocka_unit_test(test_binomial_closed_form),
        cmocka_unit_test(test_linear_reduce_contends_at_root),
        cmocka_unit_test(test_hierarchical_beats_ring_on_slow_network),
        cmocka_unit_test(test_linear_reduce_bcast_slowest_on_4n2p),
        cmocka_unit_test(test_buckets_overlap),
        cmocka_unit_test(test_messages_during_summing),
        cmocka_unit_test(test_single_receive_matches_its_source),
        cmocka_unit_test(test_single_receive_takes_one_message),
        cmocka_unit_test(test_early_messages_wait_their_round),
        cmocka_unit_test(test_send_recv_closed_form),
        cmocka_unit_test(test_send_recv_match_by_source),
        cmocka_unit_test(test_send_recv_mailbox),
        cmocka_unit_test(test_send_recv_rendezvous),
        cmocka_unit_test(test_rendezvous_same_tag_two_receivers),
        cmocka_unit_test(test_send_recv_tag_mismatch_deadlocks),
        cmocka_unit_test(test_compute_reset_and_colocation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

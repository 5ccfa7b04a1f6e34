/* Tests of the pipeline strategies (libdt/pipeline.c) played by dtsim's player: step times
 * against the schedules' closed forms (GPipe: Huang et al. 2019; 1F1B and interleaved 1F1B:
 * Narayanan et al. 2021), activation slots, stage cuts, the balanced partition and the
 * memory of a stage from its buffer table, each worked out by hand in the test's comment.
 *
 * The model is a chain of identical dense layers (64 -> 64, no activation), so every stage
 * of a balanced cut runs the same work; the machine has one node of 8 devices linked at
 * 100 TB/s with 1 ps latency, so a message of a micro-batch's activations (16 rows x 64
 * floats = 4 KiB) takes under 0.05 ns: communication adds at most a few ns to a step of
 * milliseconds, below the relative tolerance COMM_TOL. Costs have no framework overhead and
 * no per-op overhead. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/costmodel.h"
#include "dt/model.h"
#include "dt/partition.h"
#include "dt/plan.h"
#include "dt/topology.h"
#include "player.h"
#include "testdata.h"

#define COMM_TOL 1e-7

/* A chain of n dense layers of 64 units on 64 inputs, 64 classes: layer i has 64 x 64
 * weights + 64 biases = 4,160 parameters. */
static struct dt_model *chain(int n)
{
    struct dt_model *m = test_chain_model(n, 64);
    assert_int_equal(m->n_layers, n);
    return m;
}

/* One node of 8 CPU devices of 1 GFLOP/s and 1 GB/s, on a 100 TB/s crossbar of 1 ps. */
static struct dt_topology *fast_node(void)
{
    const char *text =
        "name: fast\nsource: test\nnodes:\n  - name: n\n    count: 1\n    devices: 8\n"
        "    device: {kind: cpu, name: c, cores: 1, peak: {fp32: 1 GFLOP/s}, memory: 8 GiB,"
        " memory_bw: 1 GB/s}\n"
        "    intra: {kind: nvswitch, bandwidth: 100 TB/s, latency: 1e-12 s, sharing: crossbar}\n";
    struct dt_topology *t;
    struct dt_error err;
    if (dt_topology_load_string("fast.yaml", text, &t, &err) != DT_OK)
        fail_msg("topology: %s", err.msg);
    return t;
}

struct fixture {
    struct dt_model *m8;
    struct dt_topology *t;
};

static int setup(void **state)
{
    struct fixture *f = malloc(sizeof *f);
    f->m8 = chain(8);
    f->t = fast_node();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    dt_model_destroy(f->m8);
    dt_topology_destroy(f->t);
    free(f);
    return 0;
}

/* Options from flags written "flag=value flag=value" (parsed by dt_parallel_set). */
static struct dt_plan_options options(enum dt_strategy s, const char *flags)
{
    return test_options(s, 64, flags);
}

static struct dt_plan *build(const struct dt_model *m, const struct dt_topology *t,
                             enum dt_strategy s, const char *flags)
{
    struct dt_plan_options o = options(s, flags);
    struct dt_plan *plan;
    struct dt_error err;
    if (dt_plan_build(m, t, &o, &plan, &err) != DT_OK)
        fail_msg("%s %s: %s", dt_strategy_name(s), flags, err.msg);
    return plan;
}

/* Cost parameters without framework or per-op overhead. compute_only: memory traffic is free
 * (mem_bw infinite), so an op costs its FLOPs and ZERO, LOAD and sums cost nothing; else the
 * device's 1 GB/s. */
static void costs(struct dt_cost_params *cp, bool compute_only)
{
    dt_cost_defaults(cp, DT_DEV_CPU);
    cp->iter_overhead_s = 0;
    for (int c = 0; c < DT_CLASS_COUNT; c++)
        cp->overhead_s[c] = 0;
    if (compute_only)
        cp->mem_Bps = INFINITY;
}

static double step(const struct dt_plan *plan, const struct dt_cost_params *cp)
{
    struct dt_sim_result res;
    struct dt_error err;
    if (dt_sim_run(plan, cp, NULL, &res, &err) != DT_OK)
        fail_msg("sim %s: %s", dt_strategy_name(plan->strategy), err.msg);
    double t = res.iter_s;
    dt_sim_result_free(&res);
    return t;
}

/* A step that only communication lengthens: want <= got <= want (1 + COMM_TOL). */
static void assert_step(double got, double want, const char *what)
{
    if (!(got >= want * (1 - 1e-12) && got <= want * (1 + COMM_TOL)))
        fail_msg("%s: got %.12g s, want %.12g s (relative %.3g)", what, got, want,
                 (got - want) / want);
}

/* What a plan's ops cost, by dt_cost_op (and dt_cost_reduce for a summing receive):
 *   F, B: forward and backward of micro-batch 0 on the last stage (all its chunks): one whole
 *         stage per micro-batch;
 *   d:    how much shorter stage 0's backward is: its first layer computes no input gradient
 *         (nothing needs it);
 *   Z:    stage 0's ZERO of its gradients at the start of the step;
 *   L:    stage 0's LOAD of one micro-batch;
 *   U:    stage 0's UPDATE at the end of the step;
 *   Zd:   stage 0's ZERO of one micro-batch's output gradient rows (in the pool: at its
 *         backward, before the gradient lands);
 *   R:    summing one received output gradient into them (as it arrives). */
struct parts {
    double F, B, d, Z, L, U, Zd, R;
};

static struct parts parts_of(const struct dt_plan *plan, const struct dt_cost_params *cp)
{
    const struct dt_device_spec *dev = &plan->topo->groups[0].device;
    const struct dt_model *m = plan->model;
    struct parts p = {0};
    const struct dt_rank_plan *last = &plan->ranks[plan->n_ranks - 1], *r0 = &plan->ranks[0];
    double b0 = 0;
    for (int i = 0; i < last->n_ops; i++) {
        const struct dt_op *op = &last->ops[i];
        if (op->kind == DT_OP_COMPUTE && op->micro == 0)
            *(op->phase == DT_PH_FORWARD ? &p.F : &p.B) += dt_cost_op(cp, dev, m, op);
    }
    assert_int_equal(r0->ops[0].kind, DT_OP_ZERO);
    p.Z = dt_cost_op(cp, dev, m, &r0->ops[0]);
    for (int i = 0; i < r0->n_ops; i++) {
        const struct dt_op *op = &r0->ops[i];
        if (op->kind == DT_OP_COMPUTE && op->micro == 0 && op->phase == DT_PH_BACKWARD)
            b0 += dt_cost_op(cp, dev, m, op);
        else if (op->kind == DT_OP_LOAD && op->micro == 0)
            p.L = dt_cost_op(cp, dev, m, op);
        else if (op->kind == DT_OP_UPDATE)
            p.U = dt_cost_op(cp, dev, m, op);
        else if (op->kind == DT_OP_ZERO && op->region.buf == DT_BUF_DACT && p.Zd == 0)
            p.Zd = dt_cost_op(cp, dev, m, op);
        else if (op->kind == DT_OP_RECV && op->sum && p.R == 0)
            p.R = dt_cost_reduce(cp, dev, op->region.count, 4.0);
    }
    p.d = p.B - b0;
    assert_true(p.F > 0 && p.B > 0 && p.d > 0 && p.U > 0);
    return p;
}

/* Ensure a GPipe step takes (M + S - 1)(t_f + t_b) plus its constant parts (Huang et al.
 * 2019): with memory traffic free, stage 0 runs its M forwards back to back, the last one
 * reaches the last stage after S - 1 more forwards, which then runs M backwards, and the last
 * one crosses S - 1 more stages back; stage 0's last backward is d shorter. So
 *   step = Z + M L + (M + S - 1)(F + B) - d + U
 * (Z and L are 0 here: dt_cost_op charges ZERO and LOAD by memory). */
static void test_gpipe_step_time(void **state)
{
    struct fixture *f = *state;
    struct dt_cost_params cp;
    costs(&cp, true);
    static const int SM[][2] = {{2, 1}, {2, 4}, {2, 8}, {4, 4}, {4, 8}, {8, 16}};
    for (size_t k = 0; k < sizeof SM / sizeof SM[0]; k++) {
        int S = SM[k][0], M = SM[k][1];
        char flags[128];
        snprintf(flags, sizeof flags, "pp=%d dp=1 micro-batches=%d", S, M);
        struct dt_plan *plan = build(f->m8, f->t, DT_STRAT_GPIPE, flags);
        struct parts p = parts_of(plan, &cp);
        assert_step(step(plan, &cp), p.Z + M * p.L + (M + S - 1) * (p.F + p.B) - p.d + p.U,
                    flags);
        dt_plan_destroy(plan);
    }
}

/* Ensure the player charges GPipe's memory-bound ops where the schedule puts them, with the
 * device's 1 GB/s. On 2 stages, stage 0's forward unit is L + F and stage 1's is F, shorter,
 * so stage 1 never queues and its last forward ends at Z + M (L + F) + F. Stage 1 then runs
 * M backwards of B; stage 0's backward unit zeroes the pooled rows its output gradient is
 * summed into (Zd) while it waits for that gradient, which is then summed (R) and
 * back-propagated (B - d): Zd + R + B - d is shorter than B (Zd + R < d, checked), so stage
 * 0 never queues either and ends R + B - d after stage 1's last backward:
 *   step = Z + M L + (M + 1)(F + B) + R - d + U.
 * (Dense layers stay FLOP-bound: 16 rows move 24,832 B forward, 25 us at 1 GB/s, against
 * 132,096 FLOP, 377 us at 35 % of 1 GFLOP/s.) */
static void test_gpipe_memory_ops(void **state)
{
    struct fixture *f = *state;
    struct dt_cost_params cp;
    costs(&cp, false);
    for (int M = 2; M <= 8; M *= 2) {
        char flags[128];
        snprintf(flags, sizeof flags, "pp=2 dp=1 micro-batches=%d", M);
        struct dt_plan *plan = build(f->m8, f->t, DT_STRAT_GPIPE, flags);
        struct parts p = parts_of(plan, &cp);
        assert_true(p.Z > 0 && p.L > 0 && p.Zd > 0 && p.R > 0 && p.Zd + p.R < p.d);
        assert_step(step(plan, &cp), p.Z + M * p.L + (M + 1) * (p.F + p.B) + p.R - p.d + p.U,
                    flags);
        dt_plan_destroy(plan);
    }
}

/* Ensure 1F1B (PipeDream-Flush) takes GPipe's time: the same bubble, (S - 1)(t_f + t_b), for
 * identical stages (Narayanan et al. 2021, section 2.2), so the same closed form. */
static void test_1f1b_same_time_as_gpipe(void **state)
{
    struct fixture *f = *state;
    struct dt_cost_params cp;
    costs(&cp, true);
    static const int SM[][2] = {{2, 2}, {2, 4}, {4, 4}, {4, 8}, {4, 2}, {8, 16}};
    for (size_t k = 0; k < sizeof SM / sizeof SM[0]; k++) {
        int S = SM[k][0], M = SM[k][1];
        char flags[128];
        snprintf(flags, sizeof flags, "pp=%d dp=1 micro-batches=%d", S, M);
        struct dt_plan *plan = build(f->m8, f->t, DT_STRAT_1F1B, flags);
        struct parts p = parts_of(plan, &cp);
        assert_step(step(plan, &cp), p.Z + M * p.L + (M + S - 1) * (p.F + p.B) - p.d + p.U,
                    flags);
        dt_plan_destroy(plan);
    }
}

/* Ensure 1F1B keeps at most S - s micro-batches in flight on stage s: its rank plans hold
 * exactly min(M, S - s) activation slots (S = 4: 4, 3, 2, 1 with M = 8; 2, 2, 2, 1 with
 * M = 2), where GPipe holds all M on every stage. */
static void test_1f1b_slots(void **state)
{
    struct fixture *f = *state;
    for (int M = 2; M <= 8; M *= 2) {
        char flags[128];
        snprintf(flags, sizeof flags, "pp=4 dp=1 micro-batches=%d", M);
        struct dt_plan *b = build(f->m8, f->t, DT_STRAT_1F1B, flags);
        struct dt_plan *g = build(f->m8, f->t, DT_STRAT_GPIPE, flags);
        for (int r = 0; r < 4; r++) {
            int s = b->ranks[r].stage;
            assert_int_equal(s, r);
            assert_int_equal(b->ranks[r].slots, M < 4 - s ? M : 4 - s);
            assert_int_equal(g->ranks[r].slots, M);
        }
        dt_plan_destroy(b);
        dt_plan_destroy(g);
    }
}

/* Ensure interleaved 1F1B divides the bubble by V (Narayanan et al. 2021, section 2.2): with
 * F and B one whole stage's forward and backward of a micro-batch (its V chunks),
 *   step = Z + M L + M (F + B) + (S - 1)(F + B) / V - d + U,
 * for S x V chunks of the 8 layers. */
static void test_interleaved_bubble(void **state)
{
    struct fixture *f = *state;
    struct dt_cost_params cp;
    costs(&cp, true);
    static const int SVM[][3] = {{2, 2, 4}, {2, 4, 4}, {2, 2, 8}, {4, 2, 4}, {4, 2, 8}};
    for (size_t k = 0; k < sizeof SVM / sizeof SVM[0]; k++) {
        int S = SVM[k][0], V = SVM[k][1], M = SVM[k][2];
        char flags[128];
        snprintf(flags, sizeof flags, "pp=%d chunks=%d dp=1 micro-batches=%d", S, V, M);
        struct dt_plan *plan = build(f->m8, f->t, DT_STRAT_INTERLEAVED, flags);
        assert_int_equal(plan->chunks, V);
        struct parts p = parts_of(plan, &cp);
        assert_step(step(plan, &cp),
                    p.Z + M * p.L + M * (p.F + p.B) + (S - 1) * (p.F + p.B) / V - p.d + p.U,
                    flags);
        dt_plan_destroy(plan);
    }
}

/* Ensure naive model parallelism runs one micro-batch through the stages one after the other:
 * its step is the sum of the stages' times, Z + L + S (F + B) - d + U, and only the
 * parameters' split makes it shorter than one device running all 8 layers, whose step is
 * Z' + L + 8 layers' forward and backward - d + U' with Z', U' over all parameters. */
static void test_naive_mp_sums_stages(void **state)
{
    struct fixture *f = *state;
    struct dt_cost_params cp;
    costs(&cp, true);
    struct dt_plan *seq = build(f->m8, f->t, DT_STRAT_SEQUENTIAL, "");
    double t_seq = step(seq, &cp);
    for (int S = 2; S <= 8; S *= 2) {
        char flags[64];
        snprintf(flags, sizeof flags, "pp=%d dp=1", S);
        struct dt_plan *plan = build(f->m8, f->t, DT_STRAT_NAIVE_MP, flags);
        assert_int_equal(plan->micro_batches, 1);
        struct parts p = parts_of(plan, &cp);
        double t = step(plan, &cp);
        assert_step(t, p.Z + p.L + S * (p.F + p.B) - p.d + p.U, flags);
        /* the update over 1/S of the parameters is the only saving: U' = S U */
        assert_step(t, t_seq - (S - 1) * p.U, flags);
        dt_plan_destroy(plan);
    }
    dt_plan_destroy(seq);
}

/* Ensure gpipe with --dp 2 runs two replicas of the pipeline on 4 ranks, rank s x 2 + d being
 * stage s of replica d: under strong scaling each replica gets half of the global batch of
 * 128, reads its own shard, and the replicas of a stage allreduce its parameters' gradients
 * (4 layers x 4,160 = 16,640 floats) before updating; the step then takes one pipeline's time
 * at batch 64 (the allreduce moves 66,560 B at 100 TB/s: under 1 ns). */
static void test_gpipe_data_parallel(void **state)
{
    struct fixture *f = *state;
    struct dt_cost_params cp;
    costs(&cp, true);
    struct dt_plan *two = build(f->m8, f->t, DT_STRAT_GPIPE,
                                "pp=2 dp=2 micro-batches=4 scaling=strong batch=128");
    struct dt_plan *one = build(f->m8, f->t, DT_STRAT_GPIPE, "pp=2 dp=1 micro-batches=4");
    assert_int_equal(two->n_ranks, 4);
    assert_int_equal(two->global_batch, 128);
    for (int r = 0; r < 4; r++) {
        const struct dt_rank_plan *rp = &two->ranks[r];
        assert_int_equal(rp->stage, r / 2);
        assert_int_equal(rp->dp_index, r % 2);
        assert_int_equal(rp->dp_count, 2);
        assert_int_equal(rp->batch, 64);
        assert_int_equal(rp->n_params, 16640);
        int colls = 0;
        for (int i = 0; i < rp->n_ops; i++) {
            const struct dt_op *op = &rp->ops[i];
            if (op->kind != DT_OP_COLL)
                continue;
            colls++;
            assert_int_equal(op->coll, DT_COLL_ALLREDUCE);
            assert_int_equal(op->region.count, 16640);
            const struct dt_group *g = &two->groups[op->group];
            assert_int_equal(g->n, 2);
            assert_int_equal(g->ranks[0], r / 2 * 2);
            assert_int_equal(g->ranks[1], r / 2 * 2 + 1);
        }
        assert_int_equal(colls, 1);
    }
    /* each replica's micro-batches are 16 of its 64 rows */
    const struct dt_op *load = &two->ranks[1].ops[1];
    assert_int_equal(load->kind, DT_OP_LOAD);
    assert_int_equal(load->samples, 16);
    assert_step(step(two, &cp), step(one, &cp), "dp 2");
    dt_plan_destroy(two);
    dt_plan_destroy(one);
}

/* Ensure the balanced partition minimises the largest part, worked by hand:
 *   [1 1 1 1] in 2: 2 + 2, first = {0, 2, 4};
 *   [4 1 1 1 1] in 2: {4} {1 1 1 1} has largest part 4, any other cut 5 or more: {0, 1, 5};
 *   [1 ... 9] in 3: the last part must stay <= 17, so {8 9} (17), and 1..7 (28) splits
 *     best as {1..5} (15) {6 7} (13): first = {0, 5, 7, 9} (largest 17; {9} alone would leave
 *     36 for two parts, 21 at best);
 *   [1 1 1] in 2: both cuts give 2, the earliest wins: {0, 1, 3};
 *   n parts of n items: one each; and no partition into 0 parts or more parts than items. */
static void test_partition_balanced(void **state)
{
    (void)state;
    int first[10];
    const double a[] = {1, 1, 1, 1};
    assert_int_equal(dt_partition_balanced(a, 0, 4, 2, first), 0);
    assert_int_equal(first[0], 0);
    assert_int_equal(first[1], 2);
    assert_int_equal(first[2], 4);
    const double b[] = {4, 1, 1, 1, 1};
    assert_int_equal(dt_partition_balanced(b, 0, 5, 2, first), 0);
    assert_int_equal(first[1], 1);
    assert_int_equal(first[2], 5);
    const double c[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    assert_int_equal(dt_partition_balanced(c, 0, 9, 3, first), 0);
    assert_int_equal(first[0], 0);
    assert_int_equal(first[1], 5);
    assert_int_equal(first[2], 7);
    assert_int_equal(first[3], 9);
    const double d[] = {1, 1, 1};
    assert_int_equal(dt_partition_balanced(d, 0, 3, 2, first), 0);
    assert_int_equal(first[1], 1);
    assert_int_equal(dt_partition_balanced(c, 0, 9, 9, first), 0);
    for (int k = 0; k <= 9; k++)
        assert_int_equal(first[k], k);
    assert_int_equal(dt_partition_balanced(c, 0, 9, 0, first), -1);
    assert_int_equal(dt_partition_balanced(c, 0, 9, 10, first), -1);
    /* Each part its own costs (stride 4): items cost 1 in part 0 and 3 in part 1 (a stage on
     * cards three times slower). k items in part 0 cost max(k, 3 (4 - k)): 9, 6, 3 for k = 1,
     * 2, 3, so {0, 3, 4}; the same costs in both parts would cut {0, 2, 4} (above). The other
     * way round, max(3 k, 4 - k): 3, 6, 9, so {0, 1, 4}. */
    const double fast_slow[] = {1, 1, 1, 1, 3, 3, 3, 3};
    assert_int_equal(dt_partition_balanced(fast_slow, 4, 4, 2, first), 0);
    assert_int_equal(first[1], 3);
    assert_int_equal(first[2], 4);
    const double slow_fast[] = {3, 3, 3, 3, 1, 1, 1, 1};
    assert_int_equal(dt_partition_balanced(slow_fast, 4, 4, 2, first), 0);
    assert_int_equal(first[1], 1);
}

/* The exhaustive search the partition's early stop must agree with: the first start j of
 * the last part of least largest part, every j tried. */
static void exhaustive_partition(const double *cost, size_t stride, int n, int parts,
                                 int *first)
{
    double best[49][49], prefix[49][49]; /* prefix[k][i]: items 0..i-1 in part k (1..parts) */
    int cut[49][49];
    for (int k = 1; k <= parts; k++) {
        prefix[k][0] = 0;
        for (int i = 0; i < n; i++)
            prefix[k][i + 1] = prefix[k][i] + cost[(size_t)(k - 1) * stride + (size_t)i];
    }
    for (int i = 1; i <= n; i++) {
        best[1][i] = prefix[1][i];
        cut[1][i] = 0;
    }
    for (int k = 2; k <= parts; k++)
        for (int i = k; i <= n; i++) {
            best[k][i] = -1;
            for (int j = k - 1; j < i; j++) {
                double last = prefix[k][i] - prefix[k][j];
                double worst = best[k - 1][j] > last ? best[k - 1][j] : last;
                if (best[k][i] < 0 || worst < best[k][i]) {
                    best[k][i] = worst;
                    cut[k][i] = j;
                }
            }
        }
    first[parts] = n;
    for (int k = parts, i = n; k >= 1; k--)
        i = first[k - 1] = cut[k][i];
}

/* The bisection for the last part's start (best[k - 1][j] grows with j) cuts where trying
 * every j cuts: 20,000 random costs, small integers (ties, zeros) and fractions, 1 to 12
 * items (every fifth case up to 48) in 1 to n parts, the same costs in every part or (every
 * third case) each part its own. */
static void test_partition_early_stop(void **state)
{
    (void)state;
    srand(7);
    for (int t = 0; t < 20000; t++) {
        int n = 1 + rand() % (t % 5 == 1 ? 48 : 12), parts = 1 + rand() % n, a[49], b[49];
        size_t stride = t % 3 == 2 ? (size_t)n : 0;
        double cost[48 * 48];
        for (int i = 0; i < (stride ? parts * n : n); i++)
            cost[i] = t % 2 ? rand() % 4 : (double)rand() / RAND_MAX * 1e-3;
        assert_int_equal(dt_partition_balanced(cost, stride, n, parts, a), 0);
        exhaustive_partition(cost, stride, n, parts, b);
        for (int k = 0; k <= parts; k++)
            if (a[k] != b[k])
                fail_msg("case %d: %d items, %d parts, stride %zu: cut %d at %d, exhaustive %d",
                         t, n, parts, stride, k, a[k], b[k]);
    }
}

/* Ensure --stages cuts are the plan's chunks: '0-2,3-7' puts layers 0-2 on stage 0
 * (chunk_first {0, 3, 8}, 3 x 4,160 = 12,480 parameters) and 3-7 on stage 1 (20,800);
 * interleaved with '0-1,2-3,4-5,6-7' gives stage 0 chunks 0 and 2 (layers 0, 1, 4, 5). A
 * cut whose last range does not end at the last layer is refused, naming --stages. */
static void test_stage_cuts(void **state)
{
    struct fixture *f = *state;
    struct dt_plan *plan = build(f->m8, f->t, DT_STRAT_GPIPE, "pp=2 dp=1 stages=0-2,3-7");
    assert_int_equal(plan->chunk_first[0], 0);
    assert_int_equal(plan->chunk_first[1], 3);
    assert_int_equal(plan->chunk_first[2], 8);
    assert_int_equal(plan->ranks[0].n_params, 12480);
    assert_int_equal(plan->ranks[1].n_params, 20800);
    for (int l = 0; l < 8; l++) {
        assert_int_equal(plan->views[plan->ranks[0].view][l].runs, l < 3);
        assert_int_equal(plan->views[plan->ranks[1].view][l].runs, l >= 3);
    }
    dt_plan_destroy(plan);

    plan = build(f->m8, f->t, DT_STRAT_INTERLEAVED, "pp=2 dp=1 chunks=2 stages=0-1,2-3,4-5,6-7");
    for (int c = 0; c <= 4; c++)
        assert_int_equal(plan->chunk_first[c], 2 * c);
    const struct dt_layer_view *v0 = plan->views[plan->ranks[0].view];
    for (int l = 0; l < 8; l++)
        assert_int_equal(v0[l].runs, l / 2 % 2 == 0);
    /* stage 0's packed parameters: layers 0, 1, then 4 at 2 x 4,160 */
    assert_int_equal(v0[4].param_offset, 8320);
    dt_plan_destroy(plan);

    struct dt_plan_options o = options(DT_STRAT_GPIPE, "pp=2 dp=1 stages=0-2,3-6");
    struct dt_error err;
    assert_int_equal(dt_plan_build(f->m8, f->t, &o, &plan, &err), DT_EINPUT);
    assert_null(plan);
    assert_non_null(strstr(err.msg, "--stages"));
}

/* Ensure a stage's memory is the sum of its buffers, by hand, for gpipe with S = 2, M = 4,
 * batch 64 (4 slots of 16 rows = 64 rows) on the 8-layer chain, Adam:
 *   stage 0 (layers 0-3): weights 4 x 4,160 = 16,640 floats = 66,560 B, gradients the same,
 *     Adam's two moments 133,120 B; activations: outputs of its 4 layers, 4 x 64 floats x 64
 *     rows = 16,384 floats (layer 3's, only sent, for the eval program's 64 rows); the
 *     gradients of layers 0-3 in one slot's pool (layer 3's is summed there from stage 1's
 *     at its backward): two adjacent ones live at once, 2 x 64 floats x 16 rows = 2,048
 *     floats; 18,432 floats = 73,728 B; input 64 x 64 floats = 16,384 B; receive buffers:
 *     its 4 summing receives of 16 x 64 floats, 16,384 B. Total 372,736 B.
 *   stage 1 (layers 4-7): weights, gradients, moments as stage 0 (266,240 B); activations:
 *     outputs of layers 3 (received) to 7, 5 x 4,096 floats; gradients for every slot of
 *     7 (seeded by each micro-batch's loss, in the forward: GPipe keeps 4 in flight) and 6
 *     (zeroed there: the last layer reads it), 2 x 4,096 floats; 3 (sent back at the end of
 *     its backward), 4 and 5 in the pool, 2,048 floats; 30,720 floats = 122,880 B; and the
 *     last layer's probabilities for its loss, 4,096 floats = 16,384 B; labels 64 ints =
 *     256 B; no receive buffers. Total 405,760 B. */
static void test_stage_memory(void **state)
{
    struct fixture *f = *state;
    struct dt_plan *plan = build(f->m8, f->t, DT_STRAT_GPIPE, "pp=2 dp=1 micro-batches=4");
    struct dt_memory s0, s1;
    dt_plan_rank_memory(plan, 0, &s0);
    dt_plan_rank_memory(plan, 1, &s1);
    assert_true(s0.weights == 66560 && s0.grads == 66560 && s0.optimizer == 133120);
    assert_true(s0.activations == 73728 && s0.input == 16384 && s0.comm == 16384);
    assert_true(s0.state == 0 && s0.total == 372736);
    assert_true(dt_plan_buffer_layer(plan, 0, DT_BUF_DACT, -1) == 2048);
    for (int l = 0; l < 4; l++)
        assert_true(dt_plan_dact_pooled(plan, 0, l));
    assert_true(s1.weights == 66560 && s1.grads == 66560 && s1.optimizer == 133120);
    assert_true(s1.activations == 122880 + 16384 && s1.input == 256 && s1.comm == 0);
    assert_true(s1.total == 405760);
    for (int l = 3; l < 8; l++)
        assert_true(dt_plan_dact_pooled(plan, 1, l) == (l >= 3 && l <= 5));
    dt_plan_destroy(plan);
}

/* Ensure 1F1B needs less activation memory than GPipe when M > S: with S = 2 and M = 8,
 * stage 0 holds min(8, 2) = 2 slots instead of 8, so exactly a quarter of GPipe's
 * activations per slot (and of its input staging); the gradient pool holds one slot in both
 * (2 x 64 floats x 8 rows = 4,096 B), and the output it only sends the rows of one op: a
 * micro-batch's 8 in 1F1B, the eval program's 64 in GPipe (it runs all rows at once). */
static void test_1f1b_less_activation_memory(void **state)
{
    struct fixture *f = *state;
    struct dt_plan *g = build(f->m8, f->t, DT_STRAT_GPIPE, "pp=2 dp=1 micro-batches=8");
    struct dt_plan *b = build(f->m8, f->t, DT_STRAT_1F1B, "pp=2 dp=1 micro-batches=8");
    struct dt_memory mg, mb;
    dt_plan_rank_memory(g, 0, &mg);
    dt_plan_rank_memory(b, 0, &mb);
    double pool = 4 * dt_plan_buffer_layer(g, 0, DT_BUF_DACT, -1);
    assert_true(pool == 4096 && pool == 4 * dt_plan_buffer_layer(b, 0, DT_BUF_DACT, -1));
    double sent_b = 4 * dt_plan_buffer_layer(b, 0, DT_BUF_ACT, 3);
    double sent_g = 4 * dt_plan_buffer_layer(g, 0, DT_BUF_ACT, 3);
    assert_true(sent_b == 4 * 64 * 8 && sent_g == 4 * 64 * 64);
    assert_true((mb.activations - pool - sent_b) * 4 == mg.activations - pool - sent_g);
    assert_true(mb.input * 4 == mg.input);
    assert_true(mb.weights == mg.weights && mb.optimizer == mg.optimizer);
    assert_true(mb.total < mg.total);
    dt_plan_destroy(g);
    dt_plan_destroy(b);
}

/* Ensure the optimizer's state is what it keeps per parameter: Adam two moments (stage 0 of
 * the chain: 2 x 16,640 x 4 B = 133,120 B), momentum one (66,560 B, half), SGD none; nothing
 * else changes. */
static void test_optimizer_memory(void **state)
{
    struct fixture *f = *state;
    const char *names[] = {"adam", "momentum", "sgd"};
    const double want[] = {133120, 66560, 0};
    struct dt_memory adam;
    for (int k = 0; k < 3; k++) {
        char flags[128];
        snprintf(flags, sizeof flags, "pp=2 dp=1 optimizer=%s", names[k]);
        struct dt_plan *plan = build(f->m8, f->t, DT_STRAT_GPIPE, flags);
        struct dt_memory m;
        dt_plan_rank_memory(plan, 0, &m);
        assert_true(m.optimizer == want[k]);
        if (k == 0)
            adam = m;
        assert_true(m.total == adam.total - adam.optimizer + m.optimizer);
        dt_plan_destroy(plan);
    }
}

/* Ensure a layer keeps an output gradient (a DACT buffer) when any of its inputs needs one:
 * in d0 = dense(input), r1 = relu(input), a2 = add(r1, d0), d3 = dense(a2), r1 reads only
 * the input and needs none, but a2 needs one because d0 trains, although its first input
 * r1 does not. Its gradient is in the pool (written by d3's backward, read by its own: live
 * with d3's and then with d0's), which holds two of the 64-float gradients for 64 rows. */
static void test_dact_from_any_input(void **state)
{
    struct fixture *f = *state;
    const char *text = "name: m\nsource: test\ninput: {shape: [64]}\nclasses: 64\nlayers:\n"
                       "  - {kind: dense, name: d0, units: 64}\n"
                       "  - {kind: relu, name: r1, input: input}\n"
                       "  - {kind: add, name: a2, inputs: [r1, d0]}\n"
                       "  - {kind: dense, name: d3, units: 64}\n";
    struct dt_model *m = test_model_text(text);
    assert_true(dt_layer_needs_dact(m, 0));
    assert_false(dt_layer_needs_dact(m, 1));
    assert_true(dt_layer_needs_dact(m, 2));
    assert_true(dt_layer_needs_dact(m, 3));
    struct dt_plan *plan = build(m, f->t, DT_STRAT_SEQUENTIAL, "");
    assert_true(dt_plan_buffer_layer(plan, 0, DT_BUF_DACT, 1) == 0);
    assert_true(dt_plan_dact_pooled(plan, 0, 2) && !dt_plan_dact_pooled(plan, 0, 1));
    assert_true(dt_plan_buffer_layer(plan, 0, DT_BUF_DACT, -1) == 2 * 4096);
    dt_plan_destroy(plan);
    dt_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpipe_step_time),
        cmocka_unit_test(test_gpipe_memory_ops),
        cmocka_unit_test(test_1f1b_same_time_as_gpipe),
        cmocka_unit_test(test_1f1b_slots),
        cmocka_unit_test(test_interleaved_bubble),
        cmocka_unit_test(test_naive_mp_sums_stages),
        cmocka_unit_test(test_gpipe_data_parallel),
        cmocka_unit_test(test_partition_balanced),
        cmocka_unit_test(test_partition_early_stop),
        cmocka_unit_test(test_stage_cuts),
        cmocka_unit_test(test_stage_memory),
        cmocka_unit_test(test_1f1b_less_activation_memory),
        cmocka_unit_test(test_optimizer_memory),
        cmocka_unit_test(test_dact_from_any_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

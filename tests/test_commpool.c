/* Receive buffers by what is in flight (libdt/commpool.c): pools by hand for a chain of
 * blocking allreduces, overlapped buckets and a 1F1B stage's posted receives, and, for every
 * zoo model under several strategies, that no two ops live at once share a range of the pool,
 * which the plan's DT_BUF_COMM holds (the larger of the step's and the eval's). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/commpool.h"
#include "testdata.h"

/* A ring allreduce of n gradients over group g; n a multiple of the group's 8 members: its
 * widest round receives n / 8. */
static struct dt_op ring(int g, long n, bool nonblocking, int handle)
{
    return (struct dt_op){.kind = DT_OP_COLL, .layer = -1, .coll = DT_COLL_ALLREDUCE,
                          .alg = DT_ALG_RING, .group = g, .nonblocking = nonblocking,
                          .handle = handle, .region = {DT_BUF_GRADS, 0, n, -1}};
}

static struct dt_op wait(int handle)
{
    return (struct dt_op){.kind = DT_OP_WAIT, .layer = -1, .handle = handle};
}

/* An 8-rank data-parallel plan and the group of all 8 (the hand-made ops' group). */
static struct dt_plan *world_plan(struct dt_model **m, struct dt_topology **t, int *g)
{
    *m = test_chain_model(2, 16);
    *t = test_zoo_topology("2n4p");
    struct dt_plan *plan = test_plan(*m, *t, DT_STRAT_ALLREDUCE_RING, 4, "");
    *g = -1;
    for (int i = 0; i < plan->n_groups; i++)
        if (plan->groups[i].n == 8)
            *g = i;
    assert_true(*g >= 0);
    return plan;
}

static void destroy(struct dt_plan *plan, struct dt_model *m, struct dt_topology *t)
{
    dt_plan_destroy(plan);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* Ensure blocking allreduces of 800, 1,600 and 400 floats (100, 200, 50 received in their
 * widest round) share one range: the pool is the largest, 200, not the sum, 350. */
static void test_blocking_chain(void **state)
{
    (void)state;
    struct dt_model *m;
    struct dt_topology *t;
    int g;
    struct dt_plan *plan = world_plan(&m, &t, &g);
    struct dt_op ops[] = {ring(g, 800, false, 0), ring(g, 1600, false, 0),
                          ring(g, 400, false, 0)};
    long at[3], peak;
    assert_int_equal(dt_comm_pool(plan, 0, ops, 3, DT_TYPE_F32, at, &peak), 200);
    assert_int_equal(peak, 200);
    assert_int_equal(at[0], 0);
    assert_int_equal(at[1], 0);
    assert_int_equal(at[2], 0);
    assert_int_equal(dt_comm_pool(plan, 0, ops, 3, DT_TYPE_BF16, NULL, NULL), 0);
    destroy(plan, m, t);
}

/* Ensure overlapped buckets add up while in flight: A (800: 100) and B (1,600: 200) started,
 * a blocking C (400: 50) above both at 300; A lands; D (800: 100) takes A's place; B, D land;
 * a blocking E (2,400: 300) then has the pool to itself. Peak: A + B + C = 350. */
static void test_overlapped_buckets(void **state)
{
    (void)state;
    struct dt_model *m;
    struct dt_topology *t;
    int g;
    struct dt_plan *plan = world_plan(&m, &t, &g);
    struct dt_op ops[] = {ring(g, 800, true, 1), ring(g, 1600, true, 2), ring(g, 400, false, 0),
                          wait(1), ring(g, 800, true, 3), wait(2), wait(3),
                          ring(g, 2400, false, 0)};
    long at[8], peak;
    assert_int_equal(dt_comm_pool(plan, 0, ops, 8, DT_TYPE_F32, at, &peak), 350);
    assert_int_equal(peak, 350);
    long want[8] = {0, 100, 300, -1, 0, -1, -1, 0};
    for (int i = 0; i < 8; i++)
        assert_int_equal(at[i], want[i]);
    /* never waited: B stays live to the end, E goes above it */
    struct dt_op open[] = {ring(g, 1600, true, 2), ring(g, 2400, false, 0)};
    assert_int_equal(dt_comm_pool(plan, 0, open, 2, DT_TYPE_F32, at, NULL), 500);
    assert_int_equal(at[1], 200);
    destroy(plan, m, t);
}

/* Ensure a real plan's overlapped gradient buckets are summed: a chain of 4 dense layers of
 * 64 (4,160 parameters each) with a 4-byte bucket is 4 buckets, each a ring allreduce over 8
 * ranks receiving 4,160 / 8 = 520 in its widest round, all in flight until the step's end:
 * 2,080. Without buckets the one blocking allreduce of 16,640 needs the same 2,080. */
static void test_plan_buckets(void **state)
{
    (void)state;
    struct dt_model *m = test_chain_model(4, 64);
    struct dt_topology *t = test_zoo_topology("2n4p");
    struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 4, "bucket=4B");
    assert_int_equal(dt_comm_pool_rank(plan, 0, DT_TYPE_F32), 2080);
    assert_true(dt_plan_buffer_elems(plan, 0, DT_BUF_COMM) == 2080);
    dt_plan_destroy(plan);
    plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 4, "");
    assert_int_equal(dt_comm_pool_rank(plan, 0, DT_TYPE_F32), 2080);
    destroy(plan, m, t);
}

/* Ensure a 1F1B stage holds the posted gradient receives of the micro-batches in flight: 8
 * dense layers of 64 on 2 stages, 8 micro-batches of 8 rows. Stage 0 posts a summing receive
 * of layer 3's gradient (64 x 8 = 512 floats) after each forward and waits before that
 * micro-batch's backward: 1F1B keeps 2 in flight (1,024), GPipe all 8 (4,096). Stage 1
 * receives nothing summing: its pool is empty. */
static void test_1f1b_posted(void **state)
{
    (void)state;
    struct dt_model *m = test_chain_model(8, 64);
    struct dt_topology *t = test_zoo_topology("2n4p");
    struct dt_plan *plan = test_plan(m, t, DT_STRAT_1F1B, 64, "pp=2 dp=1 micro-batches=8");
    long peak;
    const struct dt_rank_plan *rp = &plan->ranks[0];
    assert_int_equal(dt_comm_pool(plan, 0, rp->ops, rp->n_ops, DT_TYPE_F32, NULL, &peak), 1024);
    assert_int_equal(peak, 1024);
    assert_true(dt_plan_buffer_elems(plan, 0, DT_BUF_COMM) == 1024);
    assert_true(dt_plan_buffer_elems(plan, 1, DT_BUF_COMM) == 0);
    dt_plan_destroy(plan);
    plan = test_plan(m, t, DT_STRAT_GPIPE, 64, "pp=2 dp=1 micro-batches=8");
    assert_true(dt_plan_buffer_elems(plan, 0, DT_BUF_COMM) == 4096);
    destroy(plan, m, t);
}

/* ---- no two ops live at once overlap, over the zoo ---- */

static long scratch_of(const struct dt_plan *plan, int r, const struct dt_op *op)
{
    if (op->kind == DT_OP_RECV)
        return dt_coll_scratch_floats(op, 1, 0);
    if (op->kind != DT_OP_COLL)
        return 0;
    const struct dt_group *g = &plan->groups[op->group];
    int me = 0;
    while (g->ranks[me] != r)
        me++;
    return dt_coll_scratch_floats(op, g->n, me);
}

/* The op index of the WAIT for op i's handle (blocking: i itself; never waited: n). */
static int end_of(const struct dt_op *ops, int n, int i)
{
    if (!ops[i].nonblocking)
        return i;
    for (int j = i + 1; j < n; j++)
        if (ops[j].kind == DT_OP_WAIT && ops[j].handle == ops[i].handle)
            return j;
    return n;
}

/* Every pair of ops of one dtype live at once lies apart, inside the pool. Returns the pool
 * (and adds the ops with scratch to *checked). */
static long check_program(const struct dt_plan *plan, int r, const struct dt_op *ops, int n,
                          enum dt_dtype dtype, const char *what, long *checked)
{
    long *at = malloc((size_t)(n ? n : 1) * sizeof *at), peak;
    long *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    int *end = malloc((size_t)(n ? n : 1) * sizeof *end);
    long pool = dt_comm_pool(plan, r, ops, n, dtype, at, &peak);
    assert_true(pool >= peak && peak >= 0);
    for (int i = 0; i < n; i++) {
        bool mine = dt_plan_region_dtype(plan, r, &ops[i].region) == dtype;
        w[i] = mine ? scratch_of(plan, r, &ops[i]) : 0;
        end[i] = end_of(ops, n, i);
        if (w[i] > 0 && (at[i] < 0 || at[i] + w[i] > pool))
            fail_msg("%s rank %d op %d: %ld at %ld outside the pool of %ld", what, r, i, w[i],
                     at[i], pool);
        *checked += w[i] > 0;
    }
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n && b <= end[a] && w[a] > 0; b++)
            if (w[b] > 0 && at[a] < at[b] + w[b] && at[b] < at[a] + w[a])
                fail_msg("%s rank %d: op %d (to %d, %ld+%ld) and op %d (%ld+%ld) live at once",
                         what, r, a, end[a], at[a], w[a], b, at[b], w[b]);
    free(at);
    free(w);
    free(end);
    return pool;
}

static long check_rank(const struct dt_plan *plan, int r, const char *what)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    enum dt_dtype S = dt_buf_dtype(plan->opt.precision, DT_BUF_PARAMS);
    long checked = 0;
    double held = 0;
    for (int k = 0; k < (S == DT_TYPE_F32 ? 1 : 2); k++) {
        enum dt_dtype d = k ? DT_TYPE_F32 : S;
        long step = check_program(plan, r, rp->ops, rp->n_ops, d, what, &checked);
        long eval = check_program(plan, r, rp->eval.ops, rp->eval.n_ops, d, what, &checked);
        held += (double)(step > eval ? step : eval);
    }
    if (dt_plan_buffer_elems(plan, r, DT_BUF_COMM) != held)
        fail_msg("%s rank %d: DT_BUF_COMM holds %.0f, the pools %.0f", what, r,
                 dt_plan_buffer_elems(plan, r, DT_BUF_COMM), held);
    return checked;
}

static void test_zoo_no_overlap(void **state)
{
    (void)state;
    static const struct test_zoo_run runs[] = {
        {DT_STRAT_ALLREDUCE_RING, 2, 0, "bucket=1MB"},
        {DT_STRAT_ALLREDUCE_RABENSEIFNER, 2, 0, "bucket=4MB precision=bf16"},
        {DT_STRAT_ALLREDUCE_RING, 2, 0, "zero=1 bucket=1MB"},
        {DT_STRAT_ALLREDUCE_RING, 2, 0, "zero=3"},
        {DT_STRAT_ALLREDUCE_RING, 2, 0, "tp=2"},
        {DT_STRAT_ALLREDUCE_RING, 2, 0, "tp=2 precision=bf16"},
        {DT_STRAT_ALLREDUCE_RING, 2, 0, "tp=2 sequence-parallel=on"},
        {DT_STRAT_GPIPE, 6, 0, "pp=2 micro-batches=3"},
        {DT_STRAT_1F1B, 8, 0, "pp=4 dp=1 micro-batches=8"},
        {DT_STRAT_INTERLEAVED, 8, 0, "pp=2 chunks=2 micro-batches=4"},
        {DT_STRAT_1F1B, 8, 0, "pp=2 tp=2 micro-batches=4 precision=bf16"},
    };
    struct dt_topology *t = test_zoo_topology("2n2p");
    int models, plans;
    long ops = test_zoo_plans(t, runs, sizeof runs / sizeof runs[0], check_rank, &models, &plans);
    print_message("%d zoo models, %d plans, %ld ops with receive scratch checked\n", models,
                  plans, ops);
    assert_true(models > 20 && plans > 5 * models);
    dt_topology_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocking_chain),
        cmocka_unit_test(test_overlapped_buckets),
        cmocka_unit_test(test_plan_buckets),
        cmocka_unit_test(test_1f1b_posted),
        cmocka_unit_test(test_zoo_no_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Tests of the plan checker (libdt/plan_check.c): it accepts every registered strategy's plan
 * on a few shapes, and rejects hand-broken plans with a message saying what is wrong; and of
 * what only playing a plan shows: blocking sends above the eager limit that wait for each
 * other deadlock in dtsim's player as they would under MPI's rendezvous protocol. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/costmodel.h"
#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"
#include "player.h"
#include "testdata.h"

/* Options of strategy s from "flag=value ..." (dt_parallel_set), batch 32. */
static struct dt_plan_options options(enum dt_strategy s, const char *flags)
{
    return test_options(s, 32, flags);
}

/* Ensure every registered strategy's plan passes the checker, and plays to the end in dtsim
 * (no deadlock under rendezvous), wherever it fits: on 1 node x 2, 2 nodes x 2 and 1 node x 8
 * devices (their costs cut the models differently), for an MLP, a CNN, a ResNet (short skip
 * connections; some layers are read on two other stages) and a U-Net (long skips from the
 * encoder to the decoder, across interleaved chunks), with the pipelines' defaults and with
 * more stages, micro-batches and chunks, and SGD's empty optimizer state. Every strategy must
 * fit at least one of these shapes. */
static void test_accepts_every_strategy(void **state)
{
    (void)state;
    const char *topologies[] = {"1n2p", "2n2p", "1n8p"};
    const char *models[] = {"mlp-fmnist", "cnn690k", "resnet18-cifar10", "unet"};
    const char *variants[] = {"", "micro-batches=4", "pp=4 dp=1 micro-batches=8",
                              "pp=4 dp=1 micro-batches=4 chunks=3", "chunks=2",
                              "optimizer=sgd", "bucket=64KiB"};
    int built[DT_STRAT_COUNT] = {0};
    struct dt_cost_params cp;
    for (size_t ti = 0; ti < sizeof topologies / sizeof topologies[0]; ti++) {
        struct dt_topology *t = test_zoo_topology(topologies[ti]);
        dt_cost_defaults(&cp, t->groups[0].device.kind);
        for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
            struct dt_model *m = test_zoo_model(models[mi]);
            for (int s = 0; s < DT_STRAT_COUNT; s++)
                for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
                    struct dt_plan_options o = options(s, variants[v]);
                    char why[512];
                    if (!dt_strategy_fits_options(&o, m, t, dt_plan_ranks(&o, t), why,
                                                  sizeof why))
                        continue;
                    struct dt_plan *plan;
                    struct dt_error err;
                    if (dt_plan_build(m, t, &o, &plan, &err) != DT_OK)
                        fail_msg("%s %s [%s]: %s", topologies[ti], dt_strategy_name(s),
                                 variants[v], err.msg);
                    assert_int_equal(dt_plan_check(plan, &err), DT_OK);
                    struct dt_sim_result res;
                    if (dt_sim_run(plan, &cp, NULL, &res, &err) != DT_OK)
                        fail_msg("%s %s %s [%s]: %s", topologies[ti], models[mi],
                                 dt_strategy_name(s), variants[v], err.msg);
                    dt_sim_result_free(&res);
                    dt_plan_destroy(plan);
                    built[s]++;
                }
            dt_model_destroy(m);
        }
        dt_topology_destroy(t);
    }
    for (int s = 0; s < DT_STRAT_COUNT; s++)
        if (!built[s])
            fail_msg("no plan of %s was built", dt_strategy_name(s));
}

/* A valid plan to break: gpipe over 2 stages of mlp-fmnist on 1 node x 2 (rank 0 sends
 * activations to rank 1 with non-blocking SENDs it WAITs for; rank 1 sends their gradients
 * back), or ring on the same 2 ranks (one allreduce of the gradients each). */
struct broken {
    struct dt_model *m;
    struct dt_topology *t;
    struct dt_plan *plan;
    struct dt_error err;
};

static struct broken *valid(enum dt_strategy s)
{
    struct broken *b = calloc(1, sizeof *b);
    b->m = test_zoo_model("mlp-fmnist");
    b->t = test_zoo_topology("1n2p");
    struct dt_plan_options o = options(s, "");
    if (dt_plan_build(b->m, b->t, &o, &b->plan, &b->err) != DT_OK)
        fail_msg("%s", b->err.msg);
    assert_int_equal(dt_plan_check(b->plan, &b->err), DT_OK);
    for (int r = 0; r < b->plan->n_ranks; r++) /* private copies: the tests edit ranks */
        assert_int_equal(dt_plan_unshare_rank(b->plan, r), DT_OK);
    return b;
}

/* Checks the broken plan: rejected, with `want` in the message; then frees everything. */
static void assert_rejected(struct broken *b, const char *want)
{
    assert_int_equal(dt_plan_check(b->plan, &b->err), DT_EINTERNAL);
    if (!strstr(b->err.msg, want))
        fail_msg("message '%s' lacks '%s'", b->err.msg, want);
    dt_plan_destroy(b->plan);
    dt_topology_destroy(b->t);
    dt_model_destroy(b->m);
    free(b);
}

/* Index of rank r's first step op of this kind. */
static int find_op(const struct dt_plan *plan, int r, enum dt_op_kind kind)
{
    for (int i = 0; i < plan->ranks[r].n_ops; i++)
        if (plan->ranks[r].ops[i].kind == kind)
            return i;
    fail_msg("rank %d has no op of kind %d", r, (int)kind);
    return -1;
}

static void remove_op(struct dt_plan *plan, int r, int i)
{
    struct dt_rank_plan *rp = &plan->ranks[r];
    memmove(&rp->ops[i], &rp->ops[i + 1], (size_t)(rp->n_ops - i - 1) * sizeof rp->ops[0]);
    rp->n_ops--;
}

/* Ensure a SEND with no RECV on its peer is rejected: rank 0 sends 10 of its gradients to
 * rank 1 with a tag rank 1 never receives. */
static void test_rejects_unmatched_send(void **state)
{
    (void)state;
    struct broken *b = valid(DT_STRAT_GPIPE);
    struct dt_op op = {.kind = DT_OP_SEND, .layer = -1, .peer = 1, .tag = 99999,
                       .region = {DT_BUF_GRADS, 0, 10, -1}};
    assert_int_equal(dt_plan_push(b->plan, 0, &op), DT_OK);
    assert_rejected(b, "no matching receive on its peer");
}

/* Ensure a RECV and its SEND must agree on the size: rank 1's first RECV takes one element
 * less than rank 0 sends. */
static void test_rejects_size_mismatch(void **state)
{
    (void)state;
    struct broken *b = valid(DT_STRAT_GPIPE);
    b->plan->ranks[1].ops[find_op(b->plan, 1, DT_OP_RECV)].region.count--;
    assert_rejected(b, "another size");
}

/* Ensure every non-blocking handle is waited: without rank 0's first WAIT, the SEND it
 * completes is never waited. */
static void test_rejects_unwaited_handle(void **state)
{
    (void)state;
    struct broken *b = valid(DT_STRAT_GPIPE);
    remove_op(b->plan, 0, find_op(b->plan, 0, DT_OP_WAIT));
    assert_rejected(b, "is never waited");
}

/* Ensure a WAIT comes after the op it completes: rank 0's first WAIT moved to the front. */
static void test_rejects_wait_before_start(void **state)
{
    (void)state;
    struct broken *b = valid(DT_STRAT_GPIPE);
    struct dt_rank_plan *rp = &b->plan->ranks[0];
    int w = find_op(b->plan, 0, DT_OP_WAIT);
    struct dt_op wait = rp->ops[w];
    memmove(&rp->ops[1], &rp->ops[0], (size_t)w * sizeof rp->ops[0]);
    rp->ops[0] = wait;
    assert_rejected(b, "a wait before its start");
}

/* Ensure regions stay inside the rank's buffer table: rank 0's ZERO of all its gradients
 * made one element longer than its gradient buffer. */
static void test_rejects_region_outside_buffer(void **state)
{
    (void)state;
    struct broken *b = valid(DT_STRAT_ALLREDUCE_RING);
    struct dt_op *zero = &b->plan->ranks[0].ops[find_op(b->plan, 0, DT_OP_ZERO)];
    assert_true(zero->region.buf == DT_BUF_GRADS &&
                zero->region.count == dt_plan_buffer_elems(b->plan, 0, DT_BUF_GRADS));
    zero->region.count++;
    assert_rejected(b, "a region outside the buffer table");
}

/* Ensure an activation region stays inside its layer's buffer: rank 1's first RECV of
 * activations moved to start where that layer's buffer ends. */
static void test_rejects_activation_outside_layer(void **state)
{
    (void)state;
    struct broken *b = valid(DT_STRAT_GPIPE);
    struct dt_op *recv = &b->plan->ranks[1].ops[find_op(b->plan, 1, DT_OP_RECV)];
    assert_int_equal(recv->region.buf, DT_BUF_ACT);
    recv->region.offset = (long)dt_plan_buffer_layer(b->plan, 1, DT_BUF_ACT, recv->region.layer);
    assert_rejected(b, "a region outside the buffer table");
}

/* Ensure no op writes what a pending non-blocking SEND reads (MPI 4.0 section 3.7.2): a
 * ZERO of the region of rank 0's first SEND of activations, right after it. */
static void test_rejects_write_during_send(void **state)
{
    (void)state;
    struct broken *b = valid(DT_STRAT_GPIPE);
    struct dt_rank_plan *rp = &b->plan->ranks[0];
    int i = find_op(b->plan, 0, DT_OP_SEND);
    assert_true(rp->ops[i].nonblocking && rp->ops[i].region.buf == DT_BUF_ACT);
    struct dt_op zero = {.kind = DT_OP_ZERO, .layer = -1, .region = rp->ops[i].region};
    assert_int_equal(dt_plan_push(b->plan, 0, &zero), DT_OK);
    memmove(&rp->ops[i + 2], &rp->ops[i + 1], (size_t)(rp->n_ops - i - 2) * sizeof rp->ops[0]);
    rp->ops[i + 1] = zero;
    assert_rejected(b, "writes what the pending send of handle");
}

/* Rank r's recomputed forwards that run while a non-blocking SEND of their layer's output
 * (any rows) is pending: the checker's rule seen from the layer alone. */
static int recomputes_during_send(const struct dt_plan *plan, int r)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    int bad = 0, *layer_of = malloc(((size_t)plan->next_handle + 1) * sizeof *layer_of);
    for (int h = 0; h <= plan->next_handle; h++)
        layer_of[h] = -1;
    for (int i = 0; i < rp->n_ops; i++) {
        const struct dt_op *op = &rp->ops[i];
        if (op->kind == DT_OP_SEND && op->nonblocking && op->region.buf == DT_BUF_ACT)
            layer_of[op->handle] = op->region.layer;
        if (op->kind == DT_OP_WAIT)
            layer_of[op->handle] = -1;
        for (int h = 0; op->kind == DT_OP_COMPUTE && op->recompute && h < plan->next_handle; h++)
            bad += layer_of[h] == op->layer;
    }
    free(layer_of);
    return bad;
}

/* Ensure a recomputed forward waits for the pending send of the output it rewrites (issue
 * 12): gpt2-124m's pipelines with stage boundaries inside blocks, where the first stage sends
 * the attention core's output, held until sent, and recomputes that layer before its
 * backward; each plan builds (the checker passes) and no recomputed forward of a layer runs
 * while a send of its output is pending. Control: main before the fix failed both ways. */
static void test_recompute_waits_for_sends(void **state)
{
    (void)state;
    const struct {
        enum dt_strategy s;
        const char *flags;
    } runs[] = {
        {DT_STRAT_1F1B, "pp=2 micro-batches=4 stages=0-3,4-123 recompute=full"},
        {DT_STRAT_1F1B, "pp=2 micro-batches=4 stages=0-13,14-123 recompute=full"},
        {DT_STRAT_GPIPE, "pp=2 micro-batches=2 stages=0-3,4-123 recompute=selective"},
        {DT_STRAT_INTERLEAVED,
         "pp=2 chunks=2 micro-batches=4 stages=0-3,4-13,14-50,51-123 recompute=full"},
        {DT_STRAT_INTERLEAVED,
         "pp=2 chunks=2 micro-batches=4 stages=0-3,4-13,14-50,51-123 recompute=selective"},
    };
    struct dt_model *m = test_zoo_model("gpt2-124m");
    struct dt_topology *t = test_zoo_topology("1n2p");
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        struct dt_plan *plan = test_plan(m, t, runs[k].s, 8, runs[k].flags);
        int recomputes = 0;
        for (int r = 0; r < plan->n_ranks; r++) {
            if (recomputes_during_send(plan, r))
                fail_msg("%s [%s]: rank %d recomputes a layer while its output is sent",
                         dt_strategy_name(runs[k].s), runs[k].flags, r);
            for (int i = 0; i < plan->ranks[r].n_ops; i++)
                recomputes += plan->ranks[r].ops[i].recompute;
        }
        assert_true(recomputes > 0);
        dt_plan_destroy(plan);
    }
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* Ensure the members of a group issue the same collectives in the same order: on ring's two
 * ranks, a broadcast of the parameters after the gradients' allreduce on rank 0 but before it
 * on rank 1. */
static void test_rejects_collectives_out_of_order(void **state)
{
    (void)state;
    struct broken *b = valid(DT_STRAT_ALLREDUCE_RING);
    int c = find_op(b->plan, 0, DT_OP_COLL);
    struct dt_op bcast = b->plan->ranks[0].ops[c];
    bcast.coll = DT_COLL_BCAST;
    bcast.alg = DT_ALG_BINOMIAL;
    bcast.region = (struct dt_region){DT_BUF_PARAMS, 0, b->m->total_params, -1};
    assert_int_equal(dt_plan_push(b->plan, 0, &bcast), DT_OK); /* rank 0: allreduce, bcast */
    struct dt_rank_plan *r1 = &b->plan->ranks[1];
    assert_int_equal(dt_plan_push(b->plan, 1, &bcast), DT_OK);
    int c1 = find_op(b->plan, 1, DT_OP_COLL);
    struct dt_op allreduce = r1->ops[c1];
    r1->ops[c1] = bcast;                                     /* rank 1: bcast, allreduce */
    r1->ops[r1->n_ops - 1] = allreduce;
    assert_rejected(b, "its group's members disagree on this collective");
}

/* Two ranks of 1 node x 2 that each send `floats` to the other with a blocking SEND, then
 * receive; the plan passes the checker (every SEND has its RECV). */
static struct dt_plan *exchange(const struct dt_topology *t, long floats)
{
    struct dt_plan_options o;
    dt_plan_options_init(&o);
    struct dt_plan *plan;
    assert_int_equal(dt_plan_alloc(NULL, t, &o, 2, &plan), DT_OK);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(dt_plan_add_buffer(plan, r, DT_BUF_COMM, DT_TYPE_F32, -1, 2.0 * floats),
                         DT_OK);
        struct dt_op send = {.kind = DT_OP_SEND, .layer = -1, .peer = 1 - r, .tag = 5,
                             .region = {DT_BUF_COMM, 0, floats, -1}};
        struct dt_op recv = send;
        recv.kind = DT_OP_RECV;
        recv.region.offset = floats;
        assert_int_equal(dt_plan_push(plan, r, &send), DT_OK);
        assert_int_equal(dt_plan_push(plan, r, &recv), DT_OK);
    }
    struct dt_error err;
    assert_int_equal(dt_plan_check(plan, &err), DT_OK);
    return plan;
}

/* Ensure blocking sends above the eager limit (64 KiB by default) that wait for each other
 * deadlock, and the error names a rank and its send: 1 MiB each way under rendezvous moves
 * only once the peer's receive is posted, and each peer is still in its send. With 1 KiB
 * (eager) each send completes on its own and the exchange finishes. */
/* dt_group_index against a scan: groups in progressions (consecutive, strided, one member),
 * progressions broken after their first two, descending and scattered ranks; every rank in
 * and around them. */
static int scan_index(const struct dt_group *g, int rank)
{
    for (int i = 0; i < g->n; i++)
        if (g->ranks[i] == rank)
            return i;
    return -1;
}

static void test_group_index(void **state)
{
    (void)state;
    static const int shapes[][6] = {
        {0, 1, 2, 3, 4, 5}, {8, 9, 10, 11, 12, 13}, {3, 11, 19, 27, 35, 43},
        {0, 2, 5, 7, 9, 11}, {4, 6, 8, 9, 10, 12}, {9, 7, 5, 3, 1, 0},
        {5, 1, 4, 0, 3, 2}, {0, 3, 6, 9, 13, 16}};
    int checked = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int n = 0; n <= 6; n++) {
            struct dt_group g = {n, (int *)shapes[s]};
            for (int rank = -2; rank < 50; rank++, checked++)
                assert_int_equal(dt_group_index(&g, rank), scan_index(&g, rank));
        }
    assert_int_equal(checked, 8 * 7 * 52);
}

static void test_rendezvous_deadlock(void **state)
{
    (void)state;
    struct dt_topology *t = test_zoo_topology("1n2p");
    struct dt_cost_params cp;
    dt_cost_defaults(&cp, t->groups[0].device.kind);
    assert_true(cp.eager_bytes == 65536);
    struct dt_sim_result res;
    struct dt_error err;

    struct dt_plan *big = exchange(t, 262144);
    assert_int_equal(dt_sim_run(big, &cp, NULL, &res, &err), DT_EINTERNAL);
    if (!strstr(err.msg, "deadlock: rank ") || !strstr(err.msg, "send"))
        fail_msg("message '%s' does not name a rank and its send", err.msg);
    dt_plan_destroy(big);

    struct dt_plan *small = exchange(t, 256);
    if (dt_sim_run(small, &cp, NULL, &res, &err) != DT_OK)
        fail_msg("eager exchange: %s", err.msg);
    assert_true(res.iter_s > 0);
    assert_true(res.rank[0].bytes_recv == 1024 && res.rank[1].bytes_recv == 1024);
    dt_sim_result_free(&res);
    dt_plan_destroy(small);
    dt_topology_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts_every_strategy),
        cmocka_unit_test(test_rejects_unmatched_send),
        cmocka_unit_test(test_rejects_size_mismatch),
        cmocka_unit_test(test_rejects_unwaited_handle),
        cmocka_unit_test(test_rejects_wait_before_start),
        cmocka_unit_test(test_rejects_region_outside_buffer),
        cmocka_unit_test(test_rejects_activation_outside_layer),
        cmocka_unit_test(test_rejects_collectives_out_of_order),
        cmocka_unit_test(test_rejects_write_during_send),
        cmocka_unit_test(test_recompute_waits_for_sends),
        cmocka_unit_test(test_rendezvous_deadlock),
        cmocka_unit_test(test_group_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

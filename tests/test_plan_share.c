/* Tests of plan sharing (libdt/plan_share.c): ranks with equal programs and buffer tables
 * point at one copy, ranks that differ do not, and a builder's change to a shared rank copies
 * it first (the other ranks keep theirs). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"
#include "testdata.h"

struct fixture {
    struct dt_model *m;
    struct dt_topology *t;
    struct dt_plan *plan;
};

static struct fixture build(const char *model, const char *topo, enum dt_strategy s,
                            const char *flags)
{
    struct fixture f = {test_zoo_model(model), test_zoo_topology(topo), NULL};
    f.plan = test_plan(f.m, f.t, s, 32, flags);
    return f;
}

static void release(struct fixture *f)
{
    dt_plan_destroy(f->plan);
    dt_topology_destroy(f->t);
    dt_model_destroy(f->m);
}

/* Data parallelism by ring: every rank runs the same ops over the same group, so the plan
 * holds one step program and one eval program for its 8 ranks. */
static void test_ring_ranks_share_one_program(void **state)
{
    (void)state;
    struct fixture f = build("cnn690k", "1n8p", DT_STRAT_ALLREDUCE_RING, "");
    const struct dt_rank_plan *r0 = &f.plan->ranks[0];
    assert_int_equal(f.plan->n_ranks, 8);
    assert_int_equal(dt_plan_distinct_programs(f.plan), 2);
    for (int r = 1; r < f.plan->n_ranks; r++) {
        const struct dt_rank_plan *rp = &f.plan->ranks[r];
        assert_true(rp->shared_ops && rp->shared_eval && rp->shared_bufs);
        assert_ptr_equal(rp->ops, r0->ops);
        assert_ptr_equal(rp->eval.ops, r0->eval.ops);
        assert_ptr_equal(rp->bufs, r0->bufs);
    }
    release(&f);
}

/* A pipeline's stages run different layers: ranks of different stages share nothing. */
static void test_pipeline_stages_do_not_share(void **state)
{
    (void)state;
    struct fixture f = build("cnn690k", "1n8p", DT_STRAT_GPIPE, "pp=2");
    int a = -1, b = -1;
    for (int r = 0; r < f.plan->n_ranks; r++)
        *(f.plan->ranks[r].stage == 0 ? &a : &b) = r;
    assert_true(a >= 0 && b >= 0);
    assert_ptr_not_equal(f.plan->ranks[a].ops, f.plan->ranks[b].ops);
    assert_ptr_not_equal(f.plan->ranks[a].bufs, f.plan->ranks[b].bufs);
    assert_true(dt_plan_distinct_programs(f.plan) >= 4);
    assert_int_equal(dt_plan_check(f.plan, &(struct dt_error){0}), DT_OK);
    release(&f);
}

/* A push to a shared rank copies its program first: that rank gains the op, the others keep
 * theirs; the same for the eval program and the buffer table. */
static void test_push_copies_on_write(void **state)
{
    (void)state;
    struct fixture f = build("mlp-fmnist", "1n4p", DT_STRAT_ALLREDUCE_RING, "");
    struct dt_rank_plan *r0 = &f.plan->ranks[0], *r1 = &f.plan->ranks[1];
    int n = r0->n_ops, ne = r0->eval.n_ops, nb = r0->n_bufs;
    const struct dt_op *shared = r0->ops;
    struct dt_op z = {.kind = DT_OP_ZERO, .layer = -1,
                      .region = {.buf = DT_BUF_GRADS, .offset = 0, .count = 1}};
    assert_int_equal(dt_plan_push(f.plan, 1, &z), DT_OK);
    assert_int_equal(dt_plan_push_eval(f.plan, 1, &z), DT_OK);
    assert_int_equal(dt_plan_add_buffer(f.plan, 1, DT_BUF_COMM, DT_TYPE_F32, -1, 1), DT_OK);
    assert_false(r1->shared_ops || r1->shared_eval || r1->shared_bufs);
    assert_int_equal(r1->n_ops, n + 1);
    assert_int_equal(r1->eval.n_ops, ne + 1);
    assert_int_equal(r1->n_bufs, nb + 1);
    assert_int_equal(r1->ops[n].kind, DT_OP_ZERO);
    assert_int_equal(r0->n_ops, n);
    assert_ptr_equal(r0->ops, shared);
    assert_ptr_equal(f.plan->ranks[2].ops, shared);
    assert_int_equal(r1->ops[0].kind, shared[0].kind);
    /* sharing it again finds a new content: a third program in the pool */
    assert_int_equal(dt_plan_share_rank(f.plan, 1), DT_OK);
    assert_int_equal(dt_plan_distinct_programs(f.plan), 4);
    release(&f);
}

/* Programs that differ only in an op's recompute flag (a forward re-run, ZeRO-3's gather
 * again) are not one program: the two ranks keep their own. Ops that differ only in where in
 * the step they run (micro-batch, slot, first row) cost the same (dt_op_same_cost) but are
 * not equal either. */
static void test_recompute_flag_is_compared(void **state)
{
    (void)state;
    struct fixture f = build("mlp-fmnist", "1n4p", DT_STRAT_ALLREDUCE_RING, "");
    struct dt_op fwd = {.kind = DT_OP_COMPUTE, .phase = DT_PH_FORWARD, .layer = 0,
                        .samples = 8};
    struct dt_op again = fwd, later = fwd;
    again.recompute = true;
    later.micro = 1;
    later.slot = 1;
    later.row0 = 8;
    assert_false(dt_op_same_cost(&fwd, &again));
    assert_true(dt_op_same_cost(&fwd, &later));
    assert_int_equal(dt_plan_push(f.plan, 1, &fwd), DT_OK);
    assert_int_equal(dt_plan_push(f.plan, 2, &again), DT_OK);
    assert_int_equal(dt_plan_push(f.plan, 3, &later), DT_OK);
    for (int r = 1; r <= 3; r++)
        assert_int_equal(dt_plan_share_rank(f.plan, r), DT_OK);
    assert_ptr_not_equal(f.plan->ranks[1].ops, f.plan->ranks[2].ops);
    assert_ptr_not_equal(f.plan->ranks[1].ops, f.plan->ranks[3].ops);
    assert_int_equal(dt_plan_distinct_programs(f.plan), 5);
    release(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_ranks_share_one_program),
        cmocka_unit_test(test_pipeline_stages_do_not_share),
        cmocka_unit_test(test_push_copies_on_write),
        cmocka_unit_test(test_recompute_flag_is_compared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

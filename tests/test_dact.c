/* Activation gradients by liveness (libdt/dact.c): the pool's size by hand for a chain, a
 * residual block and a 1F1B stage, and, for every zoo model under several strategies, that no
 * two pooled gradients live at once in the rank's step program share memory (and, on one
 * device, that the greedy layout needs no more than the peak of live gradients). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/tensor.h"
#include "testdata.h"

/* Ensure a chain's pool is its two widest adjacent gradients: d0 100, r1 100, d2 60, r3 60,
 * d4 10 floats per row; layer j's gradient is live from j + 1's backward to its own, so the
 * peak is d0 + r1 = 200 floats per row (the old count: 330), x 8 rows of one slot. */
static void test_chain_peak(void **state)
{
    (void)state;
    struct dt_model *m = test_model_text(
        "name: m\nsource: test\ninput: {shape: [32]}\nclasses: 10\n"
        "layers:\n  - {kind: dense, name: d0, units: 100}\n"
        "  - {kind: relu, name: r1}\n  - {kind: dense, name: d2, units: 60}\n"
        "  - {kind: relu, name: r3}\n  - {kind: dense, name: d4, units: 10}\n");
    struct dt_topology *t = test_zoo_topology("2n4p");
    struct dt_plan *plan = test_plan(m, t, DT_STRAT_SEQUENTIAL, 8, "");
    const struct dt_dact_layout *d = dt_plan_rank_dact(plan, 0);
    assert_non_null(d);
    assert_int_equal(d->peak, 200);
    assert_int_equal(d->pool, 200);
    for (int l = 0; l < 5; l++)
        assert_true(d->at[l] >= 0 && dt_plan_buffer_layer(plan, 0, DT_BUF_DACT, l) == 0);
    assert_true(dt_plan_buffer_layer(plan, 0, DT_BUF_DACT, -1) == 200 * 8);
    dt_plan_destroy(plan);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* Ensure a residual block keeps the skip's gradient live across the branch: x = d0 (32),
 * d1 (64), r2 (64), d3 (32), a4 = add(x, d3) (32), d5 (10). x's gradient is written by a4's
 * backward and read by d0's: at r2's backward x, d1 and r2 are live, 32 + 64 + 64 = 160
 * floats per row (without the skip the peak would be 128). */
static void test_residual_peak(void **state)
{
    (void)state;
    struct dt_model *m = test_model_text(
        "name: m\nsource: test\ninput: {shape: [16]}\nclasses: 10\n"
        "layers:\n  - {kind: dense, name: x, units: 32}\n"
        "  - {kind: dense, name: d1, units: 64}\n  - {kind: relu, name: r2}\n"
        "  - {kind: dense, name: d3, units: 32}\n"
        "  - {kind: add, name: a4, inputs: [x, d3]}\n"
        "  - {kind: dense, name: d5, units: 10}\n");
    struct dt_topology *t = test_zoo_topology("2n4p");
    struct dt_plan *plan = test_plan(m, t, DT_STRAT_SEQUENTIAL, 4, "");
    const struct dt_dact_layout *d = dt_plan_rank_dact(plan, 0);
    assert_int_equal(d->peak, 160);
    assert_int_equal(d->pool, 160);
    /* x overlaps neither d1 nor r2 nor d3 (live together) */
    long x = d->at[0];
    for (int l = 1; l <= 3; l++) {
        long w = dt_layer_act_floats(m, l);
        assert_true(x + 32 <= d->at[l] || d->at[l] + w <= x);
    }
    assert_true(dt_plan_buffer_layer(plan, 0, DT_BUF_DACT, -1) == 160 * 4);
    dt_plan_destroy(plan);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* Ensure a 1F1B stage's pool holds one slot whatever the slots in flight: 8 dense layers of
 * 64 on 2 stages, 8 micro-batches of 8 rows. Stage 0 holds 2 slots (GPipe: 8); layer 3's
 * gradient comes back from stage 1, summed into the pool at its backward; layers 0-3 share
 * a pool of two adjacent gradients, 128 floats x 8 rows = 1,024, under both. Stage 1 holds
 * one slot: there even the last layer's loss-seeded gradient and its input's are pooled, and
 * the received layer 3's, sent back at the end of its backward (layers 3-7: 128 x 8 =
 * 1,024). */
static void test_1f1b_stage(void **state)
{
    (void)state;
    struct dt_model *m = test_chain_model(8, 64);
    struct dt_topology *t = test_zoo_topology("2n4p");
    struct dt_plan *b = test_plan(m, t, DT_STRAT_1F1B, 64, "pp=2 dp=1 micro-batches=8");
    struct dt_plan *g = test_plan(m, t, DT_STRAT_GPIPE, 64, "pp=2 dp=1 micro-batches=8");
    assert_int_equal(b->ranks[0].slots, 2);
    assert_int_equal(g->ranks[0].slots, 8);
    assert_true(dt_plan_buffer_layer(b, 0, DT_BUF_DACT, -1) == 1024);
    assert_true(dt_plan_buffer_layer(g, 0, DT_BUF_DACT, -1) == 1024);
    assert_true(dt_plan_dact_pooled(b, 0, 3) && dt_plan_dact_pooled(g, 0, 3));
    assert_true(dt_plan_buffer_layer(b, 0, DT_BUF_DACT, 3) == 0);
    assert_int_equal(b->ranks[1].slots, 1);
    assert_true(dt_plan_buffer_layer(b, 1, DT_BUF_DACT, -1) == 1024);
    assert_true(dt_plan_dact_pooled(b, 1, 3) && dt_plan_dact_pooled(g, 1, 3));
    for (int l = 4; l < 8; l++) { /* GPipe's last stage holds 8: 6 and 7 their own */
        assert_true(dt_plan_dact_pooled(b, 1, l));
        assert_true(dt_plan_dact_pooled(g, 1, l) == (l < 6));
    }
    dt_plan_destroy(b);
    dt_plan_destroy(g);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* ---- every zoo model: no two live pooled gradients overlap ---- */

/* A pooled gradient of one micro-batch in a slot, live over ops [from, to] of the step
 * program. */
struct span {
    int layer, slot, micro, from, to;
};

struct walk {
    const struct dt_plan *plan;
    int rank;
    int micro;      /* of the latest compute op: a collective after it is of its micro-batch */
    struct span *s;
    int n, cap;
};

/* Records that op i touches layer l's gradient in slot (a pooled one) for w->micro. */
static void touch(struct walk *w, int l, int slot, int i)
{
    l = dt_layer_storage(w->plan->model, l);
    if (l < 0 || !dt_plan_dact_pooled(w->plan, w->rank, l))
        return;
    for (int k = 0; k < w->n; k++)
        if (w->s[k].layer == l && w->s[k].slot == slot && w->s[k].micro == w->micro) {
            w->s[k].to = i;
            return;
        }
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->s = realloc(w->s, (size_t)w->cap * sizeof *w->s);
        assert_non_null(w->s);
    }
    w->s[w->n++] = (struct span){l, slot, w->micro, i, i};
}

/* Index of the WAIT of handle h after op i (the end of a non-blocking op). */
static int wait_of(const struct dt_rank_plan *rp, int i, int h)
{
    for (int j = i + 1; j < rp->n_ops; j++)
        if (rp->ops[j].kind == DT_OP_WAIT && rp->ops[j].handle == h)
            return j;
    return rp->n_ops;
}

/* The micro-batch in slot at op i: that of the slot's latest compute op (a micro-batch holds
 * its slot from its first forward to its backward), else the latest one's. */
static int micro_in_slot(const struct dt_rank_plan *rp, int i, int slot, int latest)
{
    for (int j = i; j >= 0; j--)
        if (rp->ops[j].kind == DT_OP_COMPUTE && rp->ops[j].slot == slot)
            return rp->ops[j].micro;
    return latest;
}

/* What op i touches: a backward reads its layer's gradient and writes its inputs'; the loss
 * seeds the last layer's and zeroes its inputs'; a region of DACT names a layer and a slot.
 * A non-blocking op touches it until its WAIT, a summing receive only there (the executor
 * adds what arrived at the WAIT). */
static void op_touches(struct walk *w, const struct dt_rank_plan *rp, int i)
{
    const struct dt_op *op = &rp->ops[i];
    const struct dt_model *m = w->plan->model;
    if (op->kind == DT_OP_COMPUTE || op->kind == DT_OP_LOSS)
        w->micro = op->micro;
    if ((op->kind == DT_OP_COMPUTE && op->phase == DT_PH_BACKWARD && !op->recompute) ||
        op->kind == DT_OP_LOSS) {
        const struct dt_layer *L = &m->layers[op->layer];
        if (dt_layer_is_view(L))
            return;
        touch(w, op->layer, op->slot, i);
        for (int k = 0; k < L->n_in; k++)
            if (L->in[k] >= 0)
                touch(w, L->in[k], op->slot, i);
        return;
    }
    if (op->kind == DT_OP_COMPUTE || op->kind == DT_OP_WAIT || op->region.buf != DT_BUF_DACT)
        return;
    const struct dt_region *g = &op->region;
    long row = dt_shard_act_floats(m, w->plan->views[rp->view], g->layer);
    int slot = (int)(g->offset / (row * rp->slot_rows)), latest = w->micro;
    w->micro = micro_in_slot(rp, i, slot, latest);
    if (!(op->kind == DT_OP_RECV && op->sum && op->nonblocking))
        touch(w, g->layer, slot, i);
    if (op->nonblocking)
        touch(w, g->layer, slot, wait_of(rp, i, op->handle));
    w->micro = latest;
}

/* Every pair of spans live at once lies apart in the pool; a whole model on one device
 * (sequential, nothing recomputed) has a layout that meets the peak. Returns the spans
 * checked. */
static long check_rank(const struct dt_plan *plan, int r, const char *what)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    const struct dt_dact_layout *d = dt_plan_rank_dact(plan, r);
    const struct dt_layer_view *v = plan->views[rp->view];
    if (!d)
        return 0;
    assert_true(d->pool >= d->peak);
    if (plan->opt.strategy == DT_STRAT_SEQUENTIAL && plan->opt.recompute == DT_RECOMPUTE_NONE &&
        d->pool != d->peak)
        fail_msg("%s: pool %ld, peak %ld", what, d->pool, d->peak);
    struct walk w = {plan, r, 0, NULL, 0, 0};
    for (int i = 0; i < rp->n_ops; i++)
        op_touches(&w, rp, i);
    for (int a = 0; a < w.n; a++)
        for (int b = a + 1; b < w.n; b++) {
            const struct span *x = &w.s[a], *y = &w.s[b];
            long xa = d->at[x->layer], xw = dt_shard_act_floats(plan->model, v, x->layer);
            long ya = d->at[y->layer], yw = dt_shard_act_floats(plan->model, v, y->layer);
            bool time = x->from <= y->to && y->from <= x->to;
            bool space = xa < ya + yw && ya < xa + xw;
            if (time && space)
                fail_msg("%s rank %d: layer %d slot %d (ops %d-%d, pool %ld+%ld) and layer %d "
                         "slot %d (ops %d-%d, pool %ld+%ld) live at once", what, r, x->layer,
                         x->slot, x->from, x->to, xa, xw, y->layer, y->slot, y->from, y->to, ya,
                         yw);
        }
    free(w.s);
    return w.n;
}

static void test_zoo_no_overlap(void **state)
{
    (void)state;
    static const struct test_zoo_run runs[] = {
        {DT_STRAT_SEQUENTIAL, 4, 0, ""},
        {DT_STRAT_SEQUENTIAL, 4, 0, "recompute=full"},
        {DT_STRAT_ALLREDUCE_RING, 4, 2, "tp=2"},
        {DT_STRAT_GPIPE, 6, 0, "pp=2 dp=1 micro-batches=3"},
        {DT_STRAT_1F1B, 8, 0, "pp=4 dp=1 micro-batches=8"},
        {DT_STRAT_INTERLEAVED, 8, 0, "pp=2 dp=1 chunks=2 micro-batches=4"},
        {DT_STRAT_1F1B, 8, 0, "pp=2 dp=1 tp=2 micro-batches=4"},
    };
    struct dt_topology *t = test_zoo_topology("2n4p");
    int models, plans;
    long spans = test_zoo_plans(t, runs, sizeof runs / sizeof runs[0], check_rank, &models,
                                &plans);
    print_message("%d zoo models, %d plans, %ld live gradient spans checked\n", models, plans,
                  spans);
    assert_true(models >= 20 && plans >= 4 * models && spans > 0);
    dt_topology_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_peak),
        cmocka_unit_test(test_residual_peak),
        cmocka_unit_test(test_1f1b_stage),
        cmocka_unit_test(test_zoo_no_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

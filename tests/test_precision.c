/* Mixed precision in the plan: buffer dtypes and memory per parameter (2 + 2 + 12 bytes for
 * mixed-precision Adam, Micikevicius et al. 2018; Rajbhandari et al. 2020), the ops of the
 * mixed-precision optimizer step, what the checker refuses, and dtsim's wire bytes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/collective.h"
#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"
#include "player.h"
#include "testdata.h"

struct fixture {
    struct dt_model *m;
    struct dt_topology *t;  /* 2 nodes x 2 ranks */
};

static int setup(void **state)
{
    struct fixture *f = malloc(sizeof *f);
    f->m = test_zoo_model("mlp-fmnist");
    f->t = test_zoo_topology("2n2p");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    dt_model_destroy(f->m);
    dt_topology_destroy(f->t);
    free(f);
    return 0;
}

/* A plan of the fixture's model: zero (ZeRO stage) and, unless g is the compute precision,
 * --grad-precision g. */
static struct dt_plan *build_with(const struct fixture *f, const char *strategy,
                                  enum dt_precision p, enum dt_optimizer o, enum dt_precision g,
                                  int zero)
{
    struct dt_plan_options po;
    dt_plan_options_init(&po);
    po.strategy = dt_strategy_parse(strategy);
    po.precision = p;
    po.optimizer = o;
    po.batch = 32;
    po.zero = zero;
    po.grad_precision = g;
    po.grad_precision_given = g != p;
    struct dt_plan *plan;
    struct dt_error err;
    if (dt_plan_build(f->m, f->t, &po, &plan, &err) != DT_OK)
        fail_msg("plan %s: %s", strategy, err.msg);
    return plan;
}

static struct dt_plan *build(const struct fixture *f, const char *strategy,
                             enum dt_precision p, enum dt_optimizer o)
{
    return build_with(f, strategy, p, o, p, 0);
}

/* Bytes per parameter of weights, gradients and optimizer (with master weights), exactly. */
static void test_bytes_per_parameter(void **state)
{
    const struct fixture *f = *state;
    const double P = (double)f->m->total_params;
    static const struct {
        enum dt_precision p;
        enum dt_optimizer o;
        double w, g, opt;
    } cases[] = {
        {DT_FP32, DT_OPTIM_ADAM, 4, 4, 8},      {DT_TF32, DT_OPTIM_ADAM, 4, 4, 8},
        {DT_BF16, DT_OPTIM_ADAM, 2, 2, 12},     {DT_FP16, DT_OPTIM_ADAM, 2, 2, 12},
        {DT_FP8, DT_OPTIM_ADAM, 2, 2, 12},      {DT_FP32, DT_OPTIM_SGD, 4, 4, 0},
        {DT_BF16, DT_OPTIM_SGD, 2, 2, 4},       {DT_BF16, DT_OPTIM_MOMENTUM, 2, 2, 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct dt_plan *plan = build(f, "ring", cases[i].p, cases[i].o);
        for (int r = 0; r < plan->n_ranks; r++) {
            struct dt_memory mem;
            dt_plan_rank_memory(plan, r, &mem);
            assert_true(mem.weights == cases[i].w * P);
            assert_true(mem.grads == cases[i].g * P);
            assert_true(mem.optimizer == cases[i].opt * P);
        }
        dt_plan_destroy(plan);
    }
}

/* --grad-precision fp32 under bf16/fp16: 2 + 4 + 12 bytes per parameter with Adam (PyTorch's
 * autocast keeps fp32 gradients; Megatron-LM's --accumulate-allreduce-grads-in-fp32), the
 * GRADS buffer in f32, everything else as plain mixed precision. */
static void test_grads_fp32_memory(void **state)
{
    const struct fixture *f = *state;
    const double P = (double)f->m->total_params;
    static const enum dt_precision half[] = {DT_BF16, DT_FP16};
    for (size_t i = 0; i < 2; i++) {
        struct dt_plan *g32 = build_with(f, "ring", half[i], DT_OPTIM_ADAM, DT_FP32, 0);
        struct dt_plan *g16 = build(f, "ring", half[i], DT_OPTIM_ADAM);
        for (int r = 0; r < g32->n_ranks; r++) {
            struct dt_memory a, b;
            dt_plan_rank_memory(g32, r, &a);
            dt_plan_rank_memory(g16, r, &b);
            assert_true(a.weights == 2 * P);
            assert_true(a.grads == 4 * P);
            assert_true(a.optimizer == 12 * P);
            assert_true(a.activations == b.activations);
            for (int k = 0; k < g32->ranks[r].n_bufs; k++) {
                const struct dt_buffer *B = &g32->ranks[r].bufs[k];
                if (B->kind == DT_BUF_GRADS)
                    assert_int_equal(B->dtype, DT_TYPE_F32);
                if (B->kind == DT_BUF_PARAMS || B->kind == DT_BUF_ACT)
                    assert_int_equal(B->dtype, dt_precision_storage(half[i]));
            }
        }
        dt_plan_destroy(g32);
        dt_plan_destroy(g16);
    }
}

/* Activations, their gradients and kept floats halve; the scaler's three floats are state. */
static void test_activations_halve(void **state)
{
    const struct fixture *f = *state;
    struct dt_plan *full = build(f, "ring", DT_FP32, DT_OPTIM_ADAM);
    struct dt_plan *half = build(f, "ring", DT_BF16, DT_OPTIM_ADAM);
    struct dt_memory a, b;
    dt_plan_rank_memory(full, 0, &a);
    dt_plan_rank_memory(half, 0, &b);
    assert_true(a.activations > 0);
    assert_true(b.activations == a.activations / 2);
    assert_true(b.state == a.state + 4.0 * DT_SCALER_ELEMS);
    assert_true(b.input == a.input); /* loaded samples stay f32 */
    for (int i = 0; i < half->ranks[0].n_bufs; i++) {
        const struct dt_buffer *B = &half->ranks[0].bufs[i];
        if (B->kind == DT_BUF_ACT || B->kind == DT_BUF_DACT || B->kind == DT_BUF_PARAMS)
            assert_int_equal(B->dtype, DT_TYPE_BF16);
        if (B->kind == DT_BUF_MASTER || B->kind == DT_BUF_OPT || B->kind == DT_BUF_SCALER)
            assert_int_equal(B->dtype, DT_TYPE_F32);
    }
    dt_plan_destroy(full);
    dt_plan_destroy(half);
}

static int count_kind(const struct dt_rank_plan *rp, enum dt_op_kind k)
{
    int n = 0;
    for (int i = 0; i < rp->n_ops; i++)
        n += rp->ops[i].kind == k;
    return n;
}

/* The optimizer step's tail: unscale, the flag's MAX over all ranks, update, cast, rescale. */
static void test_step_ops(void **state)
{
    const struct fixture *f = *state;
    struct dt_plan *plan = build(f, "ring", DT_BF16, DT_OPTIM_ADAM);
    static const enum dt_op_kind tail[] = {DT_OP_UNSCALE, DT_OP_COLL, DT_OP_UPDATE, DT_OP_COPY,
                                           DT_OP_RESCALE};
    for (int r = 0; r < plan->n_ranks; r++) {
        const struct dt_rank_plan *rp = &plan->ranks[r];
        const struct dt_op *t = &rp->ops[rp->n_ops - 5];
        for (int i = 0; i < 5; i++)
            assert_int_equal(t[i].kind, tail[i]);
        assert_int_equal(t[1].reduction, DT_RED_MAX);
        assert_int_equal(t[1].region.buf, DT_BUF_SCALER);
        assert_int_equal(t[1].region.offset, DT_SCALER_FLAG);
        assert_int_equal(t[1].region.count, 1);
        assert_int_equal(plan->groups[t[1].group].n, plan->n_ranks);
        assert_int_equal(t[3].region.buf, DT_BUF_MASTER);
        assert_int_equal(t[3].dst.buf, DT_BUF_PARAMS);
        assert_int_equal(t[3].region.count, f->m->total_params);
        assert_int_equal(rp->ops[rp->n_ops - 6].reduction, DT_RED_SUM); /* the gradients' */
    }
    dt_plan_destroy(plan);
    plan = build(f, "ring", DT_FP32, DT_OPTIM_ADAM);
    assert_int_equal(count_kind(&plan->ranks[0], DT_OP_UNSCALE), 0);
    assert_int_equal(count_kind(&plan->ranks[0], DT_OP_RESCALE), 0);
    assert_int_equal(count_kind(&plan->ranks[0], DT_OP_COPY), 0);
    assert_true(dt_plan_buffer_elems(plan, 0, DT_BUF_MASTER) == 0);
    dt_plan_destroy(plan);
}

/* Ranks that update nothing (ps-central's workers) or a shard (ps-sharded) still agree on
 * the flag and rescale; pipelines' stages share one flag over every rank. */
static void test_other_strategies(void **state)
{
    const struct fixture *f = *state;
    struct dt_plan *plan = build(f, "ps-central", DT_BF16, DT_OPTIM_ADAM);
    assert_int_equal(count_kind(&plan->ranks[1], DT_OP_UPDATE), 0);
    assert_int_equal(count_kind(&plan->ranks[1], DT_OP_UNSCALE), 1);
    assert_int_equal(count_kind(&plan->ranks[1], DT_OP_RESCALE), 1);
    assert_true(dt_plan_buffer_elems(plan, 1, DT_BUF_MASTER) == 0);
    assert_true(dt_plan_buffer_elems(plan, 0, DT_BUF_MASTER) == f->m->total_params);
    dt_plan_destroy(plan);
    plan = build(f, "ps-sharded", DT_BF16, DT_OPTIM_ADAM);
    double master = 0;
    for (int r = 0; r < plan->n_ranks; r++)
        master += dt_plan_buffer_elems(plan, r, DT_BUF_MASTER);
    assert_true(master == f->m->total_params);
    dt_plan_destroy(plan);
    plan = build(f, "gpipe", DT_FP16, DT_OPTIM_ADAM);
    for (int r = 0; r < plan->n_ranks; r++) {
        const struct dt_rank_plan *rp = &plan->ranks[r];
        assert_int_equal(count_kind(rp, DT_OP_RESCALE), 1);
        const struct dt_op *max = &rp->ops[rp->n_ops - 4];
        assert_int_equal(max->reduction, DT_RED_MAX);
        assert_int_equal(plan->groups[max->group].n, plan->n_ranks);
        assert_true(dt_plan_buffer_elems(plan, r, DT_BUF_MASTER) == rp->n_params);
    }
    dt_plan_destroy(plan);
}

/* The checker refuses a broken mixed-precision step. */
static void test_check_refuses(void **state)
{
    const struct fixture *f = *state;
    struct dt_error err;
    struct dt_plan *plan = build(f, "ring", DT_BF16, DT_OPTIM_ADAM);
    assert_int_equal(dt_plan_unshare_rank(plan, 1), DT_OK); /* broken on rank 1 only */
    struct dt_rank_plan *rp = &plan->ranks[1];
    struct dt_op *t = &rp->ops[rp->n_ops - 5];
    t[1].reduction = DT_RED_SUM; /* one member sums the flag */
    assert_int_equal(dt_plan_check(plan, &err), DT_EINTERNAL);
    assert_non_null(strstr(err.msg, "disagree"));
    t[1].reduction = DT_RED_MAX;
    t[0].dst.offset = DT_SCALER_SCALE; /* the flag written over the scale */
    assert_int_equal(dt_plan_check(plan, &err), DT_EINTERNAL);
    assert_non_null(strstr(err.msg, "overflow flag"));
    t[0].dst.offset = DT_SCALER_FLAG;
    t[2].dst.offset = 1; /* master weights past their buffer */
    assert_int_equal(dt_plan_check(plan, &err), DT_EINTERNAL);
    assert_non_null(strstr(err.msg, "outside the buffer table"));
    t[2].dst.offset = 0;
    t[4].region.count = 2;
    assert_int_equal(dt_plan_check(plan, &err), DT_EINTERNAL);
    assert_non_null(strstr(err.msg, "scaler"));
    t[4].region.count = DT_SCALER_ELEMS;
    assert_int_equal(dt_plan_check(plan, &err), DT_OK);
    dt_plan_destroy(plan);
}

static double bytes_sent(const struct dt_plan *plan)
{
    struct dt_cost_params cp;
    dt_cost_defaults(&cp, DT_DEV_CPU);
    struct dt_sim_result res;
    struct dt_sim_options so = {0};
    struct dt_error err;
    if (dt_sim_run(plan, &cp, &so, &res, &err) != DT_OK)
        fail_msg("play: %s", err.msg);
    double b = 0;
    for (int r = 0; r < res.n_ranks; r++)
        b += res.rank[r].bytes_sent;
    dt_sim_result_free(&res);
    return b;
}

/* Elements every member of a p-rank library allreduce of one element sends. */
static double flag_elems(int p)
{
    double n = 0;
    for (int me = 0; me < p; me++) {
        struct dt_schedule s;
        dt_schedule_init(&s);
        assert_int_equal(dt_coll_schedule(DT_COLL_ALLREDUCE, DT_ALG_LIBRARY, p, me, 0, 1, &s,
                                          NULL), DT_OK);
        for (int i = 0; i < s.n_xfers; i++)
            n += s.xfers[i].send ? s.xfers[i].count : 0;
        dt_schedule_free(&s);
    }
    return n;
}

/* bf16 halves the gradients' and activations' bytes on the wire; the flag moves as f32. */
static void test_wire_bytes_halve(void **state)
{
    const struct fixture *f = *state;
    static const char *const strategies[] = {"ring", "ps-sharded", "gpipe"};
    for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++) {
        struct dt_plan *full = build(f, strategies[i], DT_FP32, DT_OPTIM_ADAM);
        struct dt_plan *half = build(f, strategies[i], DT_BF16, DT_OPTIM_ADAM);
        double a = bytes_sent(full), b = bytes_sent(half);
        assert_true(a > 0);
        assert_true(b == a / 2 + 4.0 * flag_elems(half->n_ranks));
        dt_plan_destroy(full);
        dt_plan_destroy(half);
    }
}

/* Elements every rank of a p-rank ring allreduce of n elements sends, summed: a reduce-scatter
 * and an allgather of p - 1 steps, each rank sending one of the p chunks per step. */
static double ring_elems(int p, double n)
{
    return 2.0 * (p - 1) * n;
}

/* The gradients' bytes on the wire in closed form: ring's allreduce of P gradients over the
 * 4 ranks is 4 x 2(p-1)P bytes with fp32 gradients (the fp32 run's), 2 x that with bf16 or
 * fp16 ones; ZeRO-2 reduce-scatters the gradients (4 bytes each with fp32 gradients) and
 * allgathers the 2-byte parameters; the overflow flag adds its f32 MAX. */
static void test_wire_bytes_grad_precision(void **state)
{
    const struct fixture *f = *state;
    const double P = (double)f->m->total_params;
    struct dt_plan *full = build(f, "ring", DT_FP32, DT_OPTIM_ADAM);
    const int p = full->n_ranks;
    const double flag = 4.0 * flag_elems(p);
    assert_true(bytes_sent(full) == 4 * ring_elems(p, P));
    static const enum dt_precision half[] = {DT_BF16, DT_FP16};
    for (size_t i = 0; i < 2; i++) {
        struct dt_plan *g32 = build_with(f, "ring", half[i], DT_OPTIM_ADAM, DT_FP32, 0);
        struct dt_plan *g16 = build(f, "ring", half[i], DT_OPTIM_ADAM);
        struct dt_plan *z2 = build_with(f, "ring", half[i], DT_OPTIM_ADAM, DT_FP32, 2);
        assert_true(bytes_sent(g32) == 4 * ring_elems(p, P) + flag);
        assert_true(bytes_sent(g16) == 2 * ring_elems(p, P) + flag);
        assert_true(bytes_sent(z2) == (4 + 2) * (p - 1) * P + flag);
        dt_plan_destroy(g32);
        dt_plan_destroy(g16);
        dt_plan_destroy(z2);
    }
    dt_plan_destroy(full);
}

/* --summary's bytes per parameter and per sample are the buffer table's of one row (fp32,
 * bf16, bf16 with fp32 gradients). */
static void test_summary_matches_plan(void **state)
{
    const struct fixture *f = *state;
    static const enum dt_precision precisions[] = {DT_FP32, DT_BF16, DT_BF16};
    for (size_t i = 0; i < 3; i++) {
        struct dt_plan_options po;
        dt_plan_options_init(&po);
        po.strategy = DT_STRAT_SEQUENTIAL;
        po.precision = precisions[i];
        po.grad_precision_given = i == 2; /* and fp32 gradients (2 + 4 + 12 bytes) */
        po.grad_precision = DT_FP32;
        po.batch = 1;
        struct dt_plan *plan;
        struct dt_error err;
        assert_int_equal(dt_plan_build(f->m, f->t, &po, &plan, &err), DT_OK);
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        dt_precision_print_memory(f->m, &po, out);
        fclose(out);
        const char *eq = strstr(text, " = ");
        assert_non_null(eq);
        long per_param;
        double per_sample;
        assert_int_equal(sscanf(eq, " = %ld bytes per parameter, %lf bytes per sample",
                                &per_param, &per_sample), 2);
        struct dt_memory mem;
        dt_plan_rank_memory(plan, 0, &mem);
        double scaler = dt_plan_mixed(po.precision) ? 4.0 * DT_SCALER_ELEMS : 0;
        assert_true(mem.total == (double)per_param * f->m->total_params + per_sample + scaler);
        free(text);
        dt_plan_destroy(plan);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_per_parameter),
        cmocka_unit_test(test_activations_halve),
        cmocka_unit_test(test_step_ops),
        cmocka_unit_test(test_other_strategies),
        cmocka_unit_test(test_check_refuses),
        cmocka_unit_test(test_wire_bytes_halve),
        cmocka_unit_test(test_summary_matches_plan),
        cmocka_unit_test(test_grads_fp32_memory),
        cmocka_unit_test(test_wire_bytes_grad_precision),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

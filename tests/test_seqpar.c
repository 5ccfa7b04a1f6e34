/* Sequence parallelism (--sequence-parallel on, Korthikanti et al. 2022) against its closed
 * forms, on the plan (the equivalence with one rank is tests/test_exec_seqpar.sh):
 * - per transformer layer, forward: 2 reduce-scatters (after the row-parallel projections) and
 *   2 allgathers (before the column-parallel ones) of B x T x h elements instead of 2
 *   allreduces, and backward their duals; the vocabulary-parallel embedding's sum becomes a
 *   reduce-scatter and the head's input an allgather (and back). A ring moves the same bytes:
 *   reduce-scatter + allgather = allreduce, (t - 1)/t n each way, taken from the schedules;
 * - one allreduce over the tensor group of each layernorm's 2 h gradients;
 * - activation memory: the paper's per-layer bytes sbh(10 + 24/t + 5as/(ht)) without and
 *   sbh(34/t + 5as/(ht)) with sequence parallelism differ by 10 sbh (1 - 1/t): the layernorms'
 *   inputs (4 sbh: our two residual adds' outputs, s b h floats each), the dropout masks (2 sbh:
 *   GPT-2 as llm.c has no dropout) and the QKV / first MLP inputs (4 sbh: our plan keeps the
 *   gathered layernorm outputs whole, as Megatron-LM does not: it gathers them again in
 *   backward). So ours shrinks by (1 - 1/t) b (L (2 T h + 2 x 2 T) + 2 T) floats: per layer the
 *   two adds' outputs and the two layernorms' statistics (mean and 1/std per token), and the
 *   final layernorm's statistics. */
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
#include "dt/tensor.h"
#include "dt/topology.h"
#include "testdata.h"

/* Rank r's step collectives of a kind inside its tensor group (T ranks) on buf (GRADS: those
 * that name their layer, not the replicas' exchange); each must cover want elements. */
static int colls(const struct dt_plan *plan, int r, int T, enum dt_coll_kind kind,
                 enum dt_buf buf, long want)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    int n = 0;
    for (int i = 0; i < rp->n_ops; i++) {
        const struct dt_op *op = &rp->ops[i];
        if (op->kind != DT_OP_COLL || op->coll != kind || plan->groups[op->group].n != T ||
            op->region.buf != buf || (buf == DT_BUF_GRADS && op->region.layer < 0))
            continue;
        if (want >= 0 && op->region.count != want)
            fail_msg("rank %d op %d: %s of %ld elements, want %ld", r, i,
                     dt_coll_kind_name(kind), op->region.count, want);
        n++;
    }
    return n;
}

static void collectives_per_layer(void **state)
{
    (void)state;
    static const struct {
        const char *model, *topology;
        int tp, batch;
    } runs[] = {{"tiny-gpt", "1n2p", 2, 8}, {"tiny-gpt", "1n4p", 4, 8},
                {"tiny-gpt", "1n4p", 2, 4}, {"gpt2-124m", "1n4p", 4, 2}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct dt_model *m = test_zoo_model(runs[i].model);
        struct dt_topology *t = test_zoo_topology(runs[i].topology);
        char flags[96];
        snprintf(flags, sizeof flags, "tp=%d sequence-parallel=on", runs[i].tp);
        struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, runs[i].batch, flags);
        const int L = test_count_layers(m, DT_L_ATTENTION_CORE), T = runs[i].tp;
        const int norms = test_count_layers(m, DT_L_LAYERNORM);
        const long bth = (long)runs[i].batch * m->input.d[0] * m->layers[0].units;
        for (int r = 0; r < plan->n_ranks; r++) {
            int rs_f = colls(plan, r, T, DT_COLL_REDUCE_SCATTER, DT_BUF_ACT, bth);
            int ag_f = colls(plan, r, T, DT_COLL_ALLGATHER, DT_BUF_ACT, bth);
            int rs_b = colls(plan, r, T, DT_COLL_REDUCE_SCATTER, DT_BUF_DACT, bth);
            int ag_b = colls(plan, r, T, DT_COLL_ALLGATHER, DT_BUF_DACT, bth);
            if (rs_f != 2 * L + 1 || ag_f != 2 * L + 1 || rs_b != 2 * L + 1 || ag_b != 2 * L + 1)
                fail_msg("%s %s rank %d: forward %d reduce-scatters, %d allgathers; backward "
                         "%d, %d; want 2 x %d layers + 1 (vocabulary) each", runs[i].model,
                         flags, r, rs_f, ag_f, rs_b, ag_b, L);
            assert_int_equal(colls(plan, r, T, DT_COLL_ALLREDUCE, DT_BUF_ACT, -1), 0);
            assert_int_equal(colls(plan, r, T, DT_COLL_ALLREDUCE, DT_BUF_DACT, -1), 0);
            /* each layernorm's gain and bias gradients: partial sums over the group */
            assert_int_equal(colls(plan, r, T, DT_COLL_ALLREDUCE, DT_BUF_GRADS,
                                   2 * m->layers[0].units), norms);
        }
        dt_plan_destroy(plan);
        dt_topology_destroy(t);
        dt_model_destroy(m);
    }
}

/* Floats member me sends in the ring schedule of a collective on n floats over p members. */
static long ring_sent(enum dt_coll_kind kind, int p, int me, long n)
{
    struct dt_schedule s;
    struct dt_error err;
    dt_schedule_init(&s);
    assert_int_equal(dt_coll_schedule(kind, DT_ALG_RING, p, me, 0, n, &s, &err), DT_OK);
    long sent = 0;
    for (int i = 0; i < s.n_xfers; i++)
        sent += s.xfers[i].send ? s.xfers[i].count : 0;
    dt_schedule_free(&s);
    return sent;
}

static void same_bytes_on_a_ring(void **state)
{
    (void)state;
    const long n = 8L * 16 * 32; /* tiny-gpt, B 8: B x T x h */
    for (int p = 2; p <= 8; p *= 2)
        for (int me = 0; me < p; me++) {
            long ar = ring_sent(DT_COLL_ALLREDUCE, p, me, n);
            long rs = ring_sent(DT_COLL_REDUCE_SCATTER, p, me, n);
            long ag = ring_sent(DT_COLL_ALLGATHER, p, me, n);
            assert_int_equal(rs + ag, ar);
            assert_int_equal(rs, n / p * (p - 1));
        }
}

/* Floats of rank r's activation buffers (outputs and what layers keep), per layer. */
static double act_floats(const struct dt_plan *plan, int r)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    double f = 0;
    for (int i = 0; i < rp->n_bufs; i++)
        if ((rp->bufs[i].kind == DT_BUF_ACT || rp->bufs[i].kind == DT_BUF_KEEP) &&
            rp->bufs[i].layer >= 0 && rp->bufs[i].dtype != DT_TYPE_I32)
            f += rp->bufs[i].elems;
    return f;
}

static void activation_memory(void **state)
{
    (void)state;
    static const struct {
        const char *model, *topology;
        int tp, batch;
    } runs[] = {{"tiny-gpt", "1n2p", 2, 8}, {"tiny-gpt", "1n4p", 4, 4},
                {"gpt2-124m", "1n2p", 2, 1}, {"gpt2-124m", "1n4p", 4, 2}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct dt_model *m = test_zoo_model(runs[i].model);
        struct dt_topology *t = test_zoo_topology(runs[i].topology);
        char off[64], on[96];
        snprintf(off, sizeof off, "tp=%d", runs[i].tp);
        snprintf(on, sizeof on, "tp=%d sequence-parallel=on", runs[i].tp);
        struct dt_plan *a = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, runs[i].batch, off);
        struct dt_plan *b = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, runs[i].batch, on);
        const double L = test_count_layers(m, DT_L_ATTENTION_CORE), tp = runs[i].tp;
        const double T = (double)m->input.d[0], h = (double)m->layers[0].units;
        double want = (1 - 1 / tp) * runs[i].batch * (L * (2 * T * h + 4 * T) + 2 * T);
        double got = act_floats(a, 0) - act_floats(b, 0);
        if (got != want)
            fail_msg("%s tp %d: sequence parallelism saves %.0f activation floats, want %.0f",
                     runs[i].model, runs[i].tp, got, want);
        dt_plan_destroy(a);
        dt_plan_destroy(b);
        dt_topology_destroy(t);
        dt_model_destroy(m);
    }
}

/* Rank r's step sends: how many; each must cover want elements. */
static int sends(const struct dt_plan *plan, int r, long want)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    int n = 0;
    for (int i = 0; i < rp->n_ops; i++) {
        if (rp->ops[i].kind != DT_OP_SEND)
            continue;
        if (rp->ops[i].region.count != want)
            fail_msg("rank %d op %d: a send of %ld elements, want %ld", r, i,
                     rp->ops[i].region.count, want);
        n++;
    }
    return n;
}

/* Layers of a kind that rank r runs. */
static int layers_run(const struct dt_plan *plan, int r, enum dt_layer_kind kind)
{
    const struct dt_layer_view *v = plan->views[plan->ranks[r].view];
    int n = 0;
    for (int l = 0; l < plan->model->n_layers; l++)
        n += v[l].runs && plan->model->layers[l].kind == kind;
    return n;
}

/* Inside pipeline stages (3D with --tp): per stage and micro-batch 2 reduce-scatters and 2
 * allgathers per layer each way; the first stage's embedding is vocabulary-parallel (its
 * partial outputs reduce-scattered to the token chunks, its gradient allgathered), the last
 * stage's LM head reads its input gathered (its partial input gradient reduce-scattered);
 * one send of B/M x T x h / t per micro-batch and stage boundary (the residual stream's chunk, where Megatron-LM ends a stage: against
 * B/M x T x h without, on the same stages); activations per stage shrink by (1 - 1/t) rows
 * (L_s (2 T h + 4 T) + [not first] T h + [last] 2 T): its blocks' adds and layernorm
 * statistics as in activation_memory, the received residual, the final layernorm's
 * statistics; but the last add of a stage that sends it is held for the rows of one op
 * (ws_rows, until sent), not for every slot. */
static void pipelines(void **state)
{
    (void)state;
    static const struct {
        const char *model, *topology;
        enum dt_strategy s;
        int pp, tp, batch, micro;
    } runs[] = {{"tiny-gpt", "1n4p", DT_STRAT_1F1B, 2, 2, 16, 2},
                 {"tiny-gpt", "1n4p", DT_STRAT_GPIPE, 2, 2, 16, 4},
                 {"gpt2-124m", "1n8p", DT_STRAT_1F1B, 2, 4, 4, 2}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct dt_model *m = test_zoo_model(runs[i].model);
        struct dt_topology *t = test_zoo_topology(runs[i].topology);
        const int T = runs[i].tp, M = runs[i].micro;
        char on[128], off[160];
        snprintf(on, sizeof on, "pp=%d tp=%d micro-batches=%d sequence-parallel=on",
                 runs[i].pp, T, M);
        struct dt_plan *b = test_plan(m, t, runs[i].s, runs[i].batch, on);
        int cut = b->chunk_first[1];
        snprintf(off, sizeof off, "pp=%d tp=%d micro-batches=%d stages=0-%d,%d-%d", runs[i].pp,
                 T, M, cut - 1, cut, m->n_layers - 1);
        struct dt_plan *a = test_plan(m, t, runs[i].s, runs[i].batch, off);
        const double tok = (double)m->input.d[0], h = (double)m->layers[0].units;
        const long bth = (long)(runs[i].batch / M) * m->input.d[0] * m->layers[0].units;
        for (int r = 0; r < b->n_ranks; r++) {
            const struct dt_rank_plan *rp = &b->ranks[r];
            int L = layers_run(b, r, DT_L_ATTENTION_CORE), first = rp->first, last = rp->last;
            int rs_f = colls(b, r, T, DT_COLL_REDUCE_SCATTER, DT_BUF_ACT, bth);
            int ag_f = colls(b, r, T, DT_COLL_ALLGATHER, DT_BUF_ACT, bth);
            int rs_b = colls(b, r, T, DT_COLL_REDUCE_SCATTER, DT_BUF_DACT, bth);
            int ag_b = colls(b, r, T, DT_COLL_ALLGATHER, DT_BUF_DACT, bth);
            if (rs_f != (2 * L + first) * M || ag_f != (2 * L + last) * M ||
                rs_b != (2 * L + last) * M || ag_b != (2 * L + first) * M)
                fail_msg("%s %s rank %d (%d layers): forward %d reduce-scatters, %d "
                         "allgathers; backward %d, %d", runs[i].model, on, r, L, rs_f, ag_f,
                         rs_b, ag_b);
            assert_int_equal(colls(b, r, T, DT_COLL_ALLREDUCE, DT_BUF_ACT, -1), 0);
            assert_int_equal(colls(b, r, T, DT_COLL_ALLREDUCE, DT_BUF_GRADS,
                                   2 * m->layers[0].units), layers_run(b, r, DT_L_LAYERNORM));
            assert_int_equal(sends(b, r, bth / T), M);
            assert_int_equal(sends(a, r, bth), M);
            double rows = (double)rp->slots * rp->slot_rows, sent = last ? 0 : tok * h;
            double want = (1 - 1.0 / T) *
                          (rows * (L * (2 * tok * h + 4 * tok) - sent + !first * tok * h +
                                   last * 2 * tok) + rp->ws_rows * sent);
            double got = act_floats(a, r) - act_floats(b, r);
            if (got != want)
                fail_msg("%s %s rank %d: sequence parallelism saves %.0f activation floats, "
                         "want %.0f", runs[i].model, on, r, got, want);
        }
        dt_plan_destroy(a);
        dt_plan_destroy(b);
        dt_topology_destroy(t);
        dt_model_destroy(m);
    }
}

/* The activations a rank keeps (act_floats) under options flags on model m, topology t. */
static double kept(const struct dt_model *m, const struct dt_topology *t, int batch,
                   const char *fmt, int tp, const char *mode, const char *sp)
{
    char flags[128];
    snprintf(flags, sizeof flags, fmt, tp, mode, sp);
    struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, batch, flags);
    double f = act_floats(plan, 0);
    int L = test_count_layers(m, DT_L_ATTENTION_CORE);
    if (!strcmp(mode, "full") && *sp) { /* each block's recomputation gathers again */
        const long bth = (long)batch * m->input.d[0] * m->layers[0].units;
        assert_int_equal(colls(plan, 0, tp, DT_COLL_REDUCE_SCATTER, DT_BUF_ACT, bth),
                         2 * L + 1 + 2 * L);
        assert_int_equal(colls(plan, 0, tp, DT_COLL_ALLGATHER, DT_BUF_ACT, bth), 2 * L + 1 + 2 * L);
    }
    dt_plan_destroy(plan);
    return f;
}

/* With --recompute (Korthikanti et al. 2022, Table 2, per layer: tensor + sequence parallel
 * sbh(34/t + 5as/(ht)), with selective recomputation sbh(34/t), with full 2sbh, its input,
 * here the rank's chunk of it): selective drops the attention core's kept softmax, a/t heads
 * of T x T per sample (the 5as/(ht) term: our transformer has no attention dropout), with or
 * without sequence parallelism; full keeps each block's input, which sequence parallelism
 * splits: it saves (1 - 1/t) B (L T h + 2 T) (and the final layernorm's statistics). The
 * recomputed block re-runs its 2 reduce-scatters and 2 allgathers (section 4: recomputing a
 * sequence-parallel segment gathers its input again). */
static void recompute(void **state)
{
    (void)state;
    static const struct {
        const char *model, *topology;
        int tp, batch;
    } runs[] = {{"tiny-gpt", "1n2p", 2, 2}, {"tiny-gpt", "1n4p", 4, 4},
                 {"gpt2-124m", "1n2p", 2, 1}};
    const char *fmt = "tp=%d recompute=%s%s", *sp = " sequence-parallel=on";
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct dt_model *m = test_zoo_model(runs[i].model);
        struct dt_topology *t = test_zoo_topology(runs[i].topology);
        const int tp = runs[i].tp, B = runs[i].batch;
        const double L = test_count_layers(m, DT_L_ATTENTION_CORE), T = (double)m->input.d[0];
        const double h = (double)m->layers[0].units;
        double heads = 0;
        for (int l = 0; l < m->n_layers; l++)
            heads = m->layers[l].kind == DT_L_ATTENTION_CORE ? m->layers[l].heads : heads;
        double softmax = L * B * heads / tp * T * T;
        assert_true(kept(m, t, B, fmt, tp, "none", sp) - kept(m, t, B, fmt, tp, "selective", sp) ==
                    softmax);
        assert_true(kept(m, t, B, fmt, tp, "none", "") - kept(m, t, B, fmt, tp, "selective", "") ==
                    softmax);
        double got = kept(m, t, B, fmt, tp, "full", "") - kept(m, t, B, fmt, tp, "full", sp);
        double want = (1 - 1.0 / tp) * B * (L * T * h + 2 * T);
        if (got != want)
            fail_msg("%s tp %d full recompute: sequence parallelism saves %.0f floats, want %.0f",
                     runs[i].model, tp, got, want);
        dt_topology_destroy(t);
        dt_model_destroy(m);
    }
}

/* Options it refuses, each with why. */
static void refusals(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("tiny-gpt");
    struct dt_topology *t = test_zoo_topology("1n2p");
    static const struct {
        enum dt_strategy s;
        const char *flags, *why;
    } bad[] = {
        {DT_STRAT_ALLREDUCE_RING, "sequence-parallel=on", "needs --tp 2 or more"},
        {DT_STRAT_GPIPE, "pp=2 sequence-parallel=on", "needs --tp 2 or more"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct dt_plan_options o = test_options(bad[i].s, 8, bad[i].flags);
        char why[256] = "";
        assert_false(dt_strategy_fits_options(&o, m, t, 2, why, sizeof why));
        if (!strstr(why, bad[i].why))
            fail_msg("%s: '%s' does not say '%s'", bad[i].flags, why, bad[i].why);
    }
    /* a model with no per-token layer between its pairs (an MLP on vectors) */
    struct dt_model *mlp = test_zoo_model("mlp-fmnist");
    struct dt_plan_options o = test_options(DT_STRAT_ALLREDUCE_RING, 8,
                                            "tp=2 sequence-parallel=on");
    char why[256] = "";
    assert_false(dt_strategy_fits_options(&o, mlp, t, 2, why, sizeof why));
    assert_non_null(strstr(why, "--sequence-parallel: model"));
    dt_model_destroy(mlp);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(collectives_per_layer),
        cmocka_unit_test(same_bytes_on_a_ring),
        cmocka_unit_test(activation_memory),
        cmocka_unit_test(pipelines),
        cmocka_unit_test(recompute),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Tensor parallelism of transformer blocks (Shoeybi et al. 2019) against the paper's closed
 * form, on the plan: per transformer layer two allreduces of B x T x h elements in forward (g,
 * after the attention's and the MLP's row-parallel projections) and two in backward (f, of the
 * column-parallel q|k|v and first MLP projections' input gradients), each of B T h times the
 * activations' dtype size bytes; the q|k|v projection's shard holds the same heads of q, k and
 * v; where T does not divide the heads, attention stays whole and only the MLP is cut.
 * The vocabulary-parallel embedding and loss (Megatron-LM) add one allreduce of B x T x h
 * each way (the lookups' sum, the head's input gradient) and three of B x T floats for the
 * loss (maximum, target logit, sum of exponentials); a rank holds ceil(V / T) x h of the token
 * table. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/model.h"
#include "dt/plan.h"
#include "dt/tensor.h"
#include "dt/topology.h"
#include "testdata.h"

/* Rank r's step allreduces inside its tensor group (T ranks) on buffer buf: how many, and
 * each one's bytes must be want_bytes. */
static int tp_allreduces(const struct dt_plan *plan, int r, int T, enum dt_buf buf,
                         enum dt_precision prec, double want_bytes)
{
    const struct dt_rank_plan *rp = &plan->ranks[r];
    int n = 0;
    for (int i = 0; i < rp->n_ops; i++) {
        const struct dt_op *op = &rp->ops[i];
        if (op->kind != DT_OP_COLL || op->coll != DT_COLL_ALLREDUCE ||
            plan->groups[op->group].n != T || op->region.buf != buf)
            continue;
        double bytes = (double)op->region.count * (double)dt_dtype_size(dt_buf_dtype(prec, buf));
        if (bytes != want_bytes)
            fail_msg("rank %d op %d: allreduce of %.0f bytes, want B T h x size = %.0f", r, i,
                     bytes, want_bytes);
        n++;
    }
    return n;
}

static void two_allreduces_per_layer_each_way(void **state)
{
    (void)state;
    static const struct {
        const char *model, *topology;
        int tp, batch;
        const char *precision;
    } runs[] = {
        {"tiny-gpt", "1n2p", 2, 8, "fp32"},   {"tiny-gpt", "1n4p", 4, 8, "fp32"},
        {"tiny-gpt", "1n4p", 2, 4, "fp32"},   {"tiny-gpt", "1n2p", 2, 8, "bf16"},
        {"gpt2-124m", "1n4p", 4, 2, "fp32"}, {"gpt2-124m", "1n2p", 2, 1, "bf16"},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct dt_model *m = test_zoo_model(runs[i].model);
        struct dt_topology *t = test_zoo_topology(runs[i].topology);
        char flags[128];
        snprintf(flags, sizeof flags, "tp=%d precision=%s", runs[i].tp, runs[i].precision);
        struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, runs[i].batch, flags);
        const int L = test_count_layers(m, DT_L_ATTENTION_CORE), T = runs[i].tp;
        const long tokens = m->input.d[0], h = m->layers[0].units;
        enum dt_precision prec = plan->opt.precision;
        double bth = (double)runs[i].batch * tokens * h;
        for (int r = 0; r < plan->n_ranks; r++) {
            double want_fw = bth * (double)dt_dtype_size(dt_buf_dtype(prec, DT_BUF_ACT));
            double want_bw = bth * (double)dt_dtype_size(dt_buf_dtype(prec, DT_BUF_DACT));
            int fw = tp_allreduces(plan, r, T, DT_BUF_ACT, prec, want_fw);
            int bw = tp_allreduces(plan, r, T, DT_BUF_DACT, prec, want_bw);
            if (fw != 2 * L + 1 || bw != 2 * L + 1)
                fail_msg("%s %s rank %d: %d forward and %d backward allreduces, want 2 x %d "
                         "layers + 1 (vocabulary) each", runs[i].model, flags, r, fw, bw, L);
        }
        dt_plan_destroy(plan);
        dt_topology_destroy(t);
        dt_model_destroy(m);
    }
}

/* Rank k of the group holds heads [k H/T, (k+1) H/T): the q|k|v projection's shard is
 * those heads' rows of each third, the core's output columns and the output projection's
 * input rows. */
static void attention_split_by_heads(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("tiny-gpt");
    struct dt_topology *t = test_zoo_topology("1n2p");
    struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 4, "tp=2");
    int qkv = dt_model_find_layer(m, "transformer.h.0.attn.c_attn");
    int core = dt_model_find_layer(m, "transformer.h.0.attn.core");
    int proj = dt_model_find_layer(m, "transformer.h.0.attn.c_proj");
    const struct dt_layer *Q = &m->layers[qkv];
    const long D = Q->in_shape.d[1], U = Q->units; /* 32, 96 */
    float *full = malloc((size_t)m->total_params * sizeof *full);
    float *packed = malloc((size_t)m->total_params * sizeof *packed);
    for (long i = 0; i < m->total_params; i++)
        full[i] = (float)i;
    for (int k = 0; k < 2; k++) {
        const struct dt_layer_view *v = plan->views[plan->ranks[k].view];
        assert_int_equal(v[qkv].shard_kind, DT_SHARD_QKV);
        assert_int_equal(v[core].shard_kind, DT_SHARD_COLUMNS);
        assert_int_equal(v[proj].shard_kind, DT_SHARD_ROWS);
        assert_int_equal(v[qkv].shard_index, k);
        assert_int_equal(dt_shard_params(m, v, qkv), Q->params / 2);
        assert_int_equal(dt_shard_act_floats(m, v, core), 16 * 32 / 2);
        dt_shard_copy(m, v, qkv, packed, full, false);
        const float *p = packed + v[qkv].param_offset, *f = full + Q->param_offset;
        long u = U / 3 / 2; /* 16 units: 2 heads of 8 per third */
        for (int part = 0; part < 3; part++) {
            for (long j = 0; j < u * D; j++) /* W rows part x 32 + k x 16 .. */
                assert_true(p[part * u * D + j] == f[(part * U / 3 + k * u) * D + j]);
            for (long j = 0; j < u; j++) /* b */
                assert_true(p[3 * u * D + part * u + j] == f[U * D + part * U / 3 + k * u + j]);
        }
    }
    free(full);
    free(packed);
    dt_plan_destroy(plan);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* tp 8 does not divide tiny-gpt's 4 heads: attention stays whole on every rank and only the
 * MLP is cut (one g and one f allreduce per layer, and the vocabulary's one each way). */
static void heads_not_divisible_keeps_attention_whole(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("tiny-gpt");
    struct dt_topology *t = test_zoo_topology("1n8p");
    struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 2, "tp=8");
    const struct dt_layer_view *v = plan->views[plan->ranks[0].view];
    assert_int_equal(v[dt_model_find_layer(m, "transformer.h.1.attn.c_attn")].shard_kind,
                     DT_SHARD_NONE);
    assert_int_equal(v[dt_model_find_layer(m, "transformer.h.1.mlp.c_fc")].shard_kind,
                     DT_SHARD_COLUMNS);
    double bth = 2.0 * 16 * 32 * 4;
    assert_int_equal(tp_allreduces(plan, 0, 8, DT_BUF_ACT, DT_FP32, bth), 3);
    assert_int_equal(tp_allreduces(plan, 0, 8, DT_BUF_DACT, DT_FP32, bth), 3);
    dt_plan_destroy(plan);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* The loss's allreduces of rank r's program: KEEP regions of B x T floats in the tensor
 * group, the first a maximum, the others sums; how many. */
static int loss_allreduces(const struct dt_plan *plan, const struct dt_op *ops, int n, int T,
                           long bt)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        const struct dt_op *op = &ops[i];
        if (op->kind != DT_OP_COLL || op->region.buf != DT_BUF_KEEP)
            continue;
        assert_int_equal(op->coll, DT_COLL_ALLREDUCE);
        assert_int_equal(plan->groups[op->group].n, T);
        assert_int_equal(op->region.count, bt);
        assert_int_equal(op->reduction, k == 0 ? DT_RED_MAX : DT_RED_SUM);
        k++;
    }
    return k;
}

/* Megatron-LM's vocabulary-parallel embedding, tied head and cross-entropy: per rank
 * ceil(V/T) rows of the token table (the position table whole), the head's and softmax's
 * logits ceil(V/T) per token, three loss allreduces of B x T floats in the step and in the
 * eval program, and the rank's parameters L (12 h^2/T + 7 h/T + 6 h) + ceil(V/T) h + P h + 2 h
 * (the pairs' weights and column biases split, row biases and layernorms whole). gpt2-124m's
 * 50,257 tokens over 4 ranks: 12,565 rows each, 3 of them padding on rank 3. */
static void vocabulary_parallel(void **state)
{
    (void)state;
    static const struct {
        const char *model, *topology;
        int tp, batch;
    } runs[] = {{"tiny-gpt", "1n2p", 2, 4}, {"tiny-gpt", "1n4p", 4, 2},
                {"gpt2-124m", "1n4p", 4, 1}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct dt_model *m = test_zoo_model(runs[i].model);
        struct dt_topology *t = test_zoo_topology(runs[i].topology);
        char flags[32];
        snprintf(flags, sizeof flags, "tp=%d", runs[i].tp);
        struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, runs[i].batch, flags);
        const int T = runs[i].tp, L = test_count_layers(m, DT_L_ATTENTION_CORE);
        const struct dt_layer *E = &m->layers[0];
        const long V = E->vocab, h = E->units, P = E->positions, tokens = m->input.d[0];
        const long Vs = (V + T - 1) / T, head = m->n_layers - 2, soft = m->n_layers - 1;
        for (int r = 0; r < T; r++) {
            const struct dt_rank_plan *rp = &plan->ranks[r];
            const struct dt_layer_view *v = plan->views[rp->view];
            assert_int_equal(v[0].shard_kind, DT_SHARD_VOCAB_TABLE);
            assert_int_equal(v[head].shard_kind, DT_SHARD_VOCAB);
            assert_int_equal(v[soft].shard_kind, DT_SHARD_VOCAB);
            assert_int_equal(dt_shard_params(m, v, 0), Vs * h + P * h);
            assert_int_equal(dt_shard_act_floats(m, v, head), tokens * Vs);
            assert_int_equal(dt_shard_act_floats(m, v, soft), tokens * Vs);
            assert_int_equal(rp->n_params, L * (12 * h * h / T + 7 * h / T + 6 * h) + Vs * h +
                                               P * h + 2 * h);
            assert_int_equal(dt_shard_vocab_valid(V, T, r), r < T - 1 ? Vs : V - (T - 1) * Vs);
            long bt = (long)rp->batch * tokens;
            assert_int_equal(loss_allreduces(plan, rp->ops, rp->n_ops, T, bt), 3);
            assert_int_equal(loss_allreduces(plan, rp->eval.ops, rp->eval.n_ops, T,
                                             (long)rp->eval_rows * tokens), 3);
        }
        dt_plan_destroy(plan);
        dt_topology_destroy(t);
        dt_model_destroy(m);
    }
    assert_int_equal(dt_shard_vocab_valid(50257, 4, 3), 12562);
}

/* Under bf16 the logits shard is 2-byte while the loss's statistics stay float32: the last
 * layer's KEEP buffer is F32 and holds exactly the three planes (3 x rows x tokens), its
 * allreduces move F32 regions (the step's and the eval's, into an F32 receive buffer), the
 * head's logits and the other layers' KEEP are bf16. In fp32 nothing changes. */
static void vocabulary_loss_dtypes(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("tiny-gpt");
    struct dt_topology *t = test_zoo_topology("1n2p");
    struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 4, "tp=2 precision=bf16");
    const int soft = m->n_layers - 1, head = soft - 1;
    const long tokens = m->input.d[0];
    for (int r = 0; r < 2; r++) {
        const struct dt_rank_plan *rp = &plan->ranks[r];
        const double rows = (double)rp->slots * rp->slot_rows;
        int stats = 0, comm32 = 0, keep16 = 0;
        for (int b = 0; b < rp->n_bufs; b++) {
            const struct dt_buffer *B = &rp->bufs[b];
            if (B->kind == DT_BUF_KEEP && B->layer == soft) {
                assert_int_equal(B->dtype, DT_TYPE_F32);
                assert_true(B->elems == 3 * rows * (double)tokens);
                stats++;
            }
            keep16 += B->kind == DT_BUF_KEEP && B->layer != soft && B->dtype == DT_TYPE_BF16;
            comm32 += B->kind == DT_BUF_COMM && B->dtype == DT_TYPE_F32 && B->elems > 0;
            if (B->kind == DT_BUF_ACT && B->layer == head)
                assert_int_equal(B->dtype, DT_TYPE_BF16);
        }
        assert_int_equal(stats, 1);
        assert_int_equal(comm32, 1);
        assert_true(keep16 > 0);
        int colls = 0;
        for (int k = 0; k < rp->n_ops; k++) {
            const struct dt_op *o = &rp->ops[k];
            if (o->kind == DT_OP_COLL && o->region.buf == DT_BUF_KEEP) {
                assert_int_equal(dt_plan_region_dtype(plan, r, &o->region), DT_TYPE_F32);
                colls++;
            }
        }
        assert_int_equal(colls, 3);
        struct dt_region act = {DT_BUF_ACT, 0, 1, head};
        assert_int_equal(dt_plan_region_dtype(plan, r, &act), DT_TYPE_BF16);
    }
    dt_plan_destroy(plan);
    plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 4, "tp=2");
    for (int b = 0; b < plan->ranks[0].n_bufs; b++)
        assert_int_equal(plan->ranks[0].bufs[b].dtype == DT_TYPE_BF16, false);
    dt_plan_destroy(plan);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* A shard's token rows of the table, zero padding after the real ones, the position rows
 * whole after them; copied back, only the real rows land. */
static void vocabulary_shard_copy(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("gpt2-124m");
    const struct dt_layer *E = &m->layers[0];
    const long V = E->vocab, h = E->units, P = E->positions, Vs = (V + 3) / 4;
    struct dt_layer_view v[1] = {{.runs = true, .shard_kind = DT_SHARD_VOCAB_TABLE,
                                  .shard_index = 3, .shard_count = 4}};
    float *full = malloc((size_t)E->params * sizeof *full);
    float *back = calloc((size_t)E->params, sizeof *back);
    float *packed = malloc((size_t)(Vs + P) * h * sizeof *packed);
    for (long i = 0; i < E->params; i++)
        full[i] = (float)(i % 1000 + 1);
    dt_shard_copy(m, v, 0, packed, full, false);
    for (long j = 0; j < (V - 3 * Vs) * h; j++)
        assert_true(packed[j] == full[3 * Vs * h + j]);
    for (long j = (V - 3 * Vs) * h; j < Vs * h; j++)
        assert_true(packed[j] == 0.0f);
    for (long j = 0; j < P * h; j++)
        assert_true(packed[Vs * h + j] == full[V * h + j]);
    dt_shard_copy(m, v, 0, packed, back, true);
    assert_true(back[3 * Vs * h - 1] == 0.0f && back[3 * Vs * h] == full[3 * Vs * h]);
    assert_true(back[V * h - 1] == full[V * h - 1] && back[V * h] == full[V * h]);
    free(full);
    free(back);
    free(packed);
    dt_model_destroy(m);
}

/* Inside pipelines too (Megatron-LM): with pp 2 x tp 2, stage 0's ranks hold ceil(V/T) x h of
 * the token table (the position table whole) and stage 1's ranks their copy of the same shard
 * after the final layernorm; each stage's blocks L_s (12 h^2/T + 7 h/T + 2 h) and layernorms
 * N_s 2 h (wherever the balanced cut puts a block's first one). The buffer
 * table's weights are those parameters; the tied gradient allreduce between a stage-0 rank and
 * the stage-1 rank of its tensor index moves ceil(V/T) x h floats; the last stage's logits are
 * tokens x ceil(V/T) per sample, its loss three allreduces per micro-batch. */
static void vocabulary_parallel_in_pipelines(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("gpt2-124m");
    struct dt_topology *t = test_zoo_topology("1n4p");
    static const enum dt_strategy strategies[] = {DT_STRAT_GPIPE, DT_STRAT_1F1B,
                                                  DT_STRAT_INTERLEAVED};
    const struct dt_layer *E = &m->layers[0];
    const long T = 2, V = E->vocab, h = E->units, P = E->positions, Vs = (V + T - 1) / T;
    const long tokens = m->input.d[0], head = m->n_layers - 2;
    for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++) {
        struct dt_plan *plan = test_plan(m, t, strategies[i], 4, "pp=2 tp=2 micro-batches=2");
        for (int r = 0; r < 4; r++) {
            const struct dt_rank_plan *rp = &plan->ranks[r];
            const struct dt_layer_view *v = plan->views[rp->view];
            long blocks = 0, norms = 0, tied = 0, loss = 0;
            for (int l = 0; l < m->n_layers; l++) {
                blocks += v[l].runs && m->layers[l].kind == DT_L_ATTENTION_CORE;
                norms += v[l].runs && m->layers[l].kind == DT_L_LAYERNORM;
            }
            long want = blocks * (12 * h * h / T + 7 * h / T + 2 * h) + norms * 2 * h + Vs * h +
                        (rp->stage == 0 ? P * h : 0);
            assert_int_equal(v[0].shard_kind, DT_SHARD_VOCAB_TABLE);
            assert_int_equal(v[head].shard_kind, DT_SHARD_VOCAB);
            assert_int_equal(rp->n_params, want);
            assert_true(dt_plan_buffer_layer(plan, r, DT_BUF_PARAMS, -1) == (double)want);
            for (int k = 0; k < rp->n_ops; k++) {
                const struct dt_op *o = &rp->ops[k];
                tied += o->kind == DT_OP_COLL && o->region.buf == DT_BUF_GRADS &&
                        plan->groups[o->group].n == 2 && o->region.count == Vs * h &&
                        plan->groups[o->group].ranks[0] == r % 2 &&
                        plan->groups[o->group].ranks[1] == 2 + r % 2;
                loss += o->kind == DT_OP_COLL && o->region.buf == DT_BUF_KEEP;
            }
            assert_int_equal(tied, 1);
            assert_int_equal(loss, rp->stage == 1 ? 3 * 2 : 0);
            if (rp->stage == 1)
                assert_int_equal(dt_shard_act_floats(m, v, head), tokens * Vs);
        }
        dt_plan_destroy(plan);
    }
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_allreduces_per_layer_each_way),
        cmocka_unit_test(attention_split_by_heads),
        cmocka_unit_test(heads_not_divisible_keeps_attention_whole),
        cmocka_unit_test(vocabulary_parallel),
        cmocka_unit_test(vocabulary_parallel_in_pipelines),
        cmocka_unit_test(vocabulary_shard_copy),
        cmocka_unit_test(vocabulary_loss_dtypes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

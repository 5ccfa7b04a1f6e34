/* Activation recomputation (--recompute) in the plan: under `full` the recomputed layers'
 * outputs and kept state leave the buffer table for one workspace (the largest segment's), a
 * segment's end keeps its output, and each segment's forward runs again before its backward;
 * `selective` moves exactly the attention scores; a model without attention has nothing to
 * select; ZeRO-3 is refused. Checked on tiny-gpt (transformer blocks) and cnn21k (segments of
 * ceil(sqrt(L)) layers), on one rank and under ring, tensor parallelism, gpipe and ZeRO-2. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"
#include "testdata.h"

static int layer(const struct dt_model *m, const char *name)
{
    for (int l = 0; l < m->n_layers; l++)
        if (strcmp(m->layers[l].name, name) == 0)
            return l;
    fail_msg("no layer %s", name);
    return -1;
}

static int count_ops(const struct dt_plan *p, int r, bool recompute)
{
    int n = 0;
    for (int i = 0; i < p->ranks[r].n_ops; i++)
        n += p->ranks[r].ops[i].kind == DT_OP_COMPUTE &&
             p->ranks[r].ops[i].phase == DT_PH_FORWARD && p->ranks[r].ops[i].recompute == recompute;
    return n;
}

/* Every recompute op of micro-batch mb comes after the layer's forward and before the first
 * backward of its segment; returns the recompute ops seen. */
static int check_order(const struct dt_plan *p, int r, const struct dt_recompute_layout *rc)
{
    const struct dt_rank_plan *rp = &p->ranks[r];
    int n = 0;
    for (int i = 0; i < rp->n_ops; i++) {
        const struct dt_op *op = &rp->ops[i];
        if (!op->recompute)
            continue;
        n++;
        bool fwd = false, bwd = false;
        for (int j = 0; j < i; j++)
            fwd |= rp->ops[j].kind == DT_OP_COMPUTE && rp->ops[j].phase == DT_PH_FORWARD &&
                   !rp->ops[j].recompute && rp->ops[j].layer == op->layer &&
                   rp->ops[j].micro == op->micro;
        for (int j = 0; j < i; j++) /* no backward of its segment before it */
            bwd |= rp->ops[j].kind == DT_OP_COMPUTE && rp->ops[j].phase == DT_PH_BACKWARD &&
                   rp->ops[j].micro == op->micro &&
                   rc->segment[rp->ops[j].layer] == rc->segment[op->layer];
        assert_true(fwd);
        assert_false(bwd);
    }
    return n;
}

/* Collectives right after a recompute op (tensor parallelism's g, again). */
static int repeated(const struct dt_plan *p, int r)
{
    const struct dt_rank_plan *rp = &p->ranks[r];
    int n = 0;
    for (int i = 1; i < rp->n_ops; i++)
        for (int j = i; j < rp->n_ops && rp->ops[j].kind == DT_OP_COLL && rp->ops[i - 1].recompute;
             j++, i++)
            n++;
    return n;
}

/* Bytes of the buffer table's ACT and KEEP entries of one layer (-1: the workspace). */
static double kept(const struct dt_plan *p, int r, int l)
{
    const struct dt_rank_plan *rp = &p->ranks[r];
    double b = 0;
    for (int i = 0; i < rp->n_bufs; i++)
        if ((rp->bufs[i].kind == DT_BUF_ACT || rp->bufs[i].kind == DT_BUF_KEEP) &&
            rp->bufs[i].layer == l)
            b += rp->bufs[i].elems * (double)dt_dtype_size(rp->bufs[i].dtype);
    return b;
}

static void full_keeps_block_inputs(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("tiny-gpt");
    struct dt_topology *t = test_zoo_topology("1n1p");
    struct dt_plan *none = test_plan(m, t, DT_STRAT_SEQUENTIAL, 8, "");
    struct dt_plan *full = test_plan(m, t, DT_STRAT_SEQUENTIAL, 8, "recompute=full");
    const struct dt_recompute_layout *rc = dt_plan_rank_recompute(full, 0);
    assert_non_null(rc);
    int end0 = layer(m, "transformer.h.0.mlp.add"), end1 = layer(m, "transformer.h.1.mlp.add");
    double rows = 8, interior = 0, largest = 0, seg = 0;
    for (int l = 0; l < m->n_layers; l++) {
        bool inside = (l > 0 && l < end0) || (l > end0 && l < end1);
        assert_int_equal(rc->segment[l], l == 0 || l > end1 ? -1 : l <= end0 ? 0 : 1);
        assert_int_equal(rc->act_ws[l], inside);
        /* inside a block: nothing kept; the block's end and layers outside: as without */
        assert_true(kept(full, 0, l) == (inside ? 0 : kept(none, 0, l)));
        if (l == end0 + 1)
            seg = 0;
        seg += inside ? kept(none, 0, l) : 0;
        interior += inside ? kept(none, 0, l) : 0;
        largest = seg > largest ? seg : largest;
    }
    /* the blocks' ends keep their outputs only (a residual add keeps nothing else) */
    assert_true(kept(full, 0, end0) == rows * 32 * 16 * 4);
    assert_true(kept(full, 0, -1) == largest); /* one block's interior, the largest */
    struct dt_memory a, b;
    dt_plan_rank_memory(none, 0, &a);
    dt_plan_rank_memory(full, 0, &b);
    assert_true(a.activations - b.activations == interior - largest);
    /* iteration: one more forward of every layer inside a block */
    int in_blocks = 0;
    for (int l = 0; l < m->n_layers; l++)
        in_blocks += rc->act_ws[l];
    assert_int_equal(in_blocks, 18);
    assert_int_equal(count_ops(full, 0, true), in_blocks);
    assert_int_equal(count_ops(full, 0, false), count_ops(none, 0, false));
    assert_int_equal(full->ranks[0].n_ops, none->ranks[0].n_ops + in_blocks);
    assert_int_equal(check_order(full, 0, rc), in_blocks);
    dt_plan_destroy(none);
    dt_plan_destroy(full);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

static void selective_moves_attention_scores(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("tiny-gpt");
    struct dt_topology *t = test_zoo_topology("1n1p");
    struct dt_plan *none = test_plan(m, t, DT_STRAT_SEQUENTIAL, 8, "");
    struct dt_plan *sel = test_plan(m, t, DT_STRAT_SEQUENTIAL, 8, "recompute=selective");
    double scores = 8.0 * 4 * 16 * 16 * 4; /* rows x heads x T x T x 4 bytes */
    int cores = 0;
    for (int l = 0; l < m->n_layers; l++) {
        bool core = m->layers[l].kind == DT_L_ATTENTION_CORE;
        cores += core;
        assert_true(kept(sel, 0, l) == kept(none, 0, l) - (core ? scores : 0));
        assert_true(dt_plan_buffer_layer(sel, 0, DT_BUF_DACT, l) ==
                    dt_plan_buffer_layer(none, 0, DT_BUF_DACT, l));
    }
    assert_int_equal(cores, 2);
    assert_true(kept(sel, 0, -1) == scores); /* one layer's scores at a time */
    assert_int_equal(count_ops(sel, 0, true), cores);
    assert_int_equal(check_order(sel, 0, dt_plan_rank_recompute(sel, 0)), cores);
    dt_plan_destroy(none);
    dt_plan_destroy(sel);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

static void cnn_segments_of_sqrt_layers(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("cnn21k");
    struct dt_topology *t = test_zoo_topology("1n1p");
    struct dt_plan *none = test_plan(m, t, DT_STRAT_SEQUENTIAL, 8, "");
    struct dt_plan *full = test_plan(m, t, DT_STRAT_SEQUENTIAL, 8, "recompute=full");
    struct dt_plan *sel = test_plan(m, t, DT_STRAT_SEQUENTIAL, 8, "recompute=selective");
    const struct dt_recompute_layout *rc = dt_plan_rank_recompute(full, 0);
    /* 13 layers: segments of 4 ending at cuts: conv1..conv2, conv2_drop..flatten, fc1..fc2,
     * fc2_softmax; a kept flatten view keeps relu2, whose output it is */
    static const int seg[13] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3};
    static const bool ws[13] = {1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0};
    assert_int_equal(m->n_layers, 13);
    int n = 0;
    for (int l = 0; l < m->n_layers; l++) {
        assert_int_equal(rc->segment[l], seg[l]);
        assert_int_equal(rc->act_ws[l], ws[l]);
        assert_true(kept(full, 0, l) == (ws[l] ? 0 : kept(none, 0, l)));
        n += ws[l];
    }
    assert_int_equal(count_ops(full, 0, true), n);
    assert_int_equal(check_order(full, 0, rc), n);
    /* no attention: selective recomputes nothing, its plan is none's */
    assert_null(dt_plan_rank_recompute(sel, 0));
    assert_int_equal(sel->ranks[0].n_ops, none->ranks[0].n_ops);
    struct dt_memory a, b;
    dt_plan_rank_memory(none, 0, &a);
    dt_plan_rank_memory(sel, 0, &b);
    assert_true(a.total == b.total);
    dt_plan_destroy(none);
    dt_plan_destroy(full);
    dt_plan_destroy(sel);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

static bool plan_runs(const struct dt_plan *p, int r, int l)
{
    return p->views[p->ranks[r].view][l].runs;
}

static bool rc_keep(const struct dt_plan *p, int r, int l)
{
    const struct dt_recompute_layout *rc = dt_plan_rank_recompute(p, r);
    return rc && rc->keep_ws[l] && !rc->act_ws[l];
}

/* Rank r of plan b (with --recompute) against a (without): its recompute ops in place, one
 * per recomputed layer and micro-batch, and no more activation memory. */
static void check_rank(const struct dt_plan *a, const struct dt_plan *b, int r)
{
    const struct dt_recompute_layout *rc = dt_plan_rank_recompute(b, r);
    int per_micro = 0;
    for (int l = 0; rc && l < b->model->n_layers; l++)
        per_micro += rc->act_ws[l] || rc->keep_ws[l];
    int n = check_order(b, r, rc);
    assert_int_equal(n, per_micro * (b->micro_batches ? b->micro_batches : 1));
    /* and, with tensor parallelism, the g allreduce after each recomputed row-parallel
     * layer */
    assert_int_equal(b->ranks[r].n_ops, a->ranks[r].n_ops + n + repeated(b, r));
    struct dt_memory x, y;
    dt_plan_rank_memory(a, r, &x);
    dt_plan_rank_memory(b, r, &y);
    assert_true(y.activations <= x.activations); /* equal: one segment on the rank */
}

/* Every strategy family compiles with it, its plan checked (dt_plan_build), and runs one more
 * forward per recomputed layer and micro-batch than without. */
static void every_family(void **state)
{
    (void)state;
    struct dt_model *gpt = test_zoo_model("tiny-gpt"), *cnn = test_zoo_model("cnn21k");
    struct dt_topology *t = test_zoo_topology("1n2p");
    static const struct { bool gpt; enum dt_strategy s; const char *flags; } cases[] = {
        {true, DT_STRAT_ALLREDUCE_RING, ""}, {true, DT_STRAT_ALLREDUCE_RING, "tp=2"},
        {true, DT_STRAT_ALLREDUCE_RING, "zero=1"}, {true, DT_STRAT_ALLREDUCE_RING, "accumulate=2"},
        {true, DT_STRAT_PS_CENTRAL, ""}, {false, DT_STRAT_ALLREDUCE_RING, "zero=2"},
        {false, DT_STRAT_GPIPE, "micro-batches=4"}, {false, DT_STRAT_1F1B, "micro-batches=4"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int mode = 1; mode <= 2; mode++) {
            const struct dt_model *m = cases[c].gpt ? gpt : cnn;
            char flags[128];
            snprintf(flags, sizeof flags, "%s recompute=%s", cases[c].flags,
                     dt_recompute_name((enum dt_recompute)mode));
            struct dt_plan *a = test_plan(m, t, cases[c].s, 8, cases[c].flags);
            struct dt_plan *b = test_plan(m, t, cases[c].s, 8, flags);
            for (int r = 0; r < b->n_ranks; r++)
                check_rank(a, b, r);
            dt_plan_destroy(a);
            dt_plan_destroy(b);
        }
    dt_topology_destroy(t);
    dt_model_destroy(gpt);
    dt_model_destroy(cnn);
}

/* A pipeline stage boundary inside a block (1f1b, 2 stages, 4 micro-batches of 2 rows):
 * each stage recomputes its part of the block from what it receives, as Megatron recomputes
 * whole layers from their stage's input. Under full only the layer inputs stay per
 * micro-batch: what a stage receives, the blocks' ends and the layers outside blocks; what
 * it only sends (the attention core's output that ends stage 0) one micro-batch's rows,
 * until sent; the core recomputes its probabilities; and the workspace holds one
 * micro-batch (2 rows), not every slot's. */
static void stage_cut_blocks(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("tiny-gpt");
    struct dt_topology *t = test_zoo_topology("1n2p");
    const char *cut = "pp=2 micro-batches=4 stages=0-3,4-23";
    char flags[128];
    snprintf(flags, sizeof flags, "%s recompute=full", cut);
    struct dt_plan *none = test_plan(m, t, DT_STRAT_1F1B, 8, cut);
    struct dt_plan *full = test_plan(m, t, DT_STRAT_1F1B, 8, flags);
    int core = layer(m, "transformer.h.0.attn.core"), end0 = layer(m, "transformer.h.0.mlp.add");
    int end1 = layer(m, "transformer.h.1.mlp.add");
    for (int r = 0; r < 2; r++) {
        const struct dt_rank_plan *rp = &full->ranks[r];
        const struct dt_recompute_layout *rc = dt_plan_rank_recompute(full, r);
        assert_non_null(rc);
        assert_int_equal(rp->slot_rows, 2);
        assert_int_equal(rp->ws_rows, 2);
        assert_true(kept(full, r, -1) == (double)rc->ws_floats * 2 * 4); /* fp32 */
        for (int l = 1; l < end1; l++) {
            bool input = l == core || l == end0; /* sent by stage 0, or a block's end */
            int slots = l == core ? 1 : rp->slots;
            if (plan_runs(full, r, l))
                assert_true(kept(full, r, l) == (input ? slots * 2 * 4.0 * 16 * 32 : 0));
        }
        check_rank(none, full, r);
    }
    /* stage 0 runs ln_1, c_attn and the core: nothing of them stays per micro-batch but the
     * core's output (sent); before, its probabilities (heads x T x T) stayed too */
    assert_true(kept(none, 0, core) > kept(full, 0, core));
    assert_true(rc_keep(full, 0, core));
    dt_plan_destroy(none);
    dt_plan_destroy(full);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* Whether layer l's output crosses rank r's stage boundary: r holds it and one of l and its
 * readers runs on another stage. */
static bool crosses(const struct dt_model *m, const struct dt_layer_view *v, int l)
{
    if (!v[l].runs)
        return true;
    for (int j = l + 1; j < m->n_layers; j++)
        for (int k = 0; k < m->layers[j].n_in; k++)
            if (m->layers[j].in[k] == l && !v[j].runs)
                return true;
    return false;
}

/* Full recomputation with pipeline stages that cut blocks (gpt3-1.3b, 1f1b on 4 stages, bf16,
 * 2 samples per micro-batch): a stage keeps, per micro-batch in flight, each block's output
 * (the residual add that ends it: the next block's input, Korthikanti et al. 2022's 2 s b h
 * per layer, B x T x h x 2 bytes) and the tensors it receives (B x their width x 2 bytes),
 * what it sends for one micro-batch (until sent: its backward does not read it), and
 * nothing else outside the recomputation workspace: its part of a cut block is recomputed
 * too. */
static void stages_keep_block_outputs(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("gpt3-1.3b");
    struct dt_topology *t = test_zoo_topology("1n4p");
    struct dt_plan *p = test_plan(m, t, DT_STRAT_1F1B, 16,
                                  "pp=4 micro-batches=8 precision=bf16 recompute=full");
    for (int r = 0; r < p->n_ranks; r++) {
        const struct dt_rank_plan *rp = &p->ranks[r];
        const struct dt_layer_view *v = p->views[rp->view];
        int kept = 0, ends = 0;
        double want = 0; /* bytes */
        for (int l = 0; l < m->n_layers; l++) {
            bool ends_block = strstr(m->layers[l].name, "mlp.add") != NULL;
            if (!v[l].holds || !(ends_block || crosses(m, v, l)))
                continue;
            kept++;
            ends += ends_block;
            bool sent = v[l].runs && crosses(m, v, l);
            want += (sent ? 1 : rp->slots) * 2.0 * (double)dt_layer_act_floats(m, l) * 2;
            assert_true(!ends_block || dt_layer_act_floats(m, l) == 2048 * 2048);
        }
        double act = 0, in_blocks = 0;
        for (int i = 0; i < rp->n_bufs; i++) {
            const struct dt_buffer *b = &rp->bufs[i];
            if (b->kind != DT_BUF_ACT)
                continue;
            act += b->elems * 2;
            in_blocks += strstr(m->layers[b->layer].name, ".h.") != NULL;
        }
        if (rp->first || rp->last) /* the embedding's output, ln_f, the head: not in blocks */
            continue;
        assert_true(ends >= 5 && rp->slot_rows == 2);
        if (act != want || in_blocks != kept)
            fail_msg("stage %d: %.0f bytes of kept outputs in %.0f buffers, want %.0f in %d",
                     rp->stage, act, in_blocks, want, kept);
    }
    dt_plan_destroy(p);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* An interleaved pipeline (tiny-gpt on 2 stages x 3 chunks of ~4 layers, cut by hand: the
 * balanced cut keeps blocks whole): a block comes back to its rank two chunks later. The
 * workspace holds one part of a segment at a time, so the backward of a layer that lives
 * there must follow the recomputation of its own part and micro-batch, with no other part's
 * recomputation in between. */
static void interleaved_parts(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("tiny-gpt");
    struct dt_topology *t = test_zoo_topology("1n2p");
    struct dt_plan *p = test_plan(m, t, DT_STRAT_INTERLEAVED, 16,
                                  "pp=2 chunks=3 micro-batches=4 recompute=full "
                                  "stages=0-3,4-7,8-11,12-15,16-19,20-23");
    int parts_apart = 0;
    for (int r = 0; r < p->n_ranks; r++) {
        const struct dt_rank_plan *rp = &p->ranks[r];
        const struct dt_recompute_layout *rc = dt_plan_rank_recompute(p, r);
        assert_non_null(rc);
        const struct dt_op *last = NULL; /* the latest recomputed forward */
        for (int i = 0; i < rp->n_ops; i++) {
            const struct dt_op *op = &rp->ops[i];
            if (op->kind != DT_OP_COMPUTE)
                continue;
            if (op->recompute)
                last = op;
            int l = op->layer;
            if (op->phase != DT_PH_BACKWARD || !(rc->act_ws[l] || rc->keep_ws[l]))
                continue;
            if (!last || last->micro != op->micro ||
                rc->segment[last->layer] != rc->segment[l])
                fail_msg("rank %d op %d: backward of layer %d (micro-batch %d) after the "
                         "recomputation of layer %d (micro-batch %d)", r, i, l, op->micro,
                         last ? last->layer : -1, last ? last->micro : -1);
        }
        /* a rank runs a block in two parts apart (the case this test is about): the later
         * part is a segment of its own, numbered after tiny-gpt's 2 blocks */
        for (int l = 0; l < m->n_layers; l++)
            parts_apart += rc->segment[l] >= 2;
    }
    assert_true(parts_apart > 0);
    dt_plan_destroy(p);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(full_keeps_block_inputs),
        cmocka_unit_test(selective_moves_attention_scores),
        cmocka_unit_test(cnn_segments_of_sqrt_layers),
        cmocka_unit_test(every_family),
        cmocka_unit_test(stages_keep_block_outputs),
        cmocka_unit_test(stage_cut_blocks),
        cmocka_unit_test(interleaved_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

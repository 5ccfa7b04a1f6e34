/* Pipeline stages of transformers hold whole blocks (libdt/pipeline.c's balanced cut, as
 * Megatron-LM's stages do), and what a stage then keeps per micro-batch in flight. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/plan.h"
#include "testdata.h"

/* The block a layer belongs to by its name ("transformer.h.N." in GPT, "encoder.layer.N."
 * in BERT), -1 outside every block: read independently of the compiler's own rule. */
static int block_of_name(const char *name)
{
    const char *keys[] = {".h.", "encoder.layer."};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const char *at = strstr(name, keys[k]);
        if (at && at[strlen(keys[k])] >= '0' && at[strlen(keys[k])] <= '9')
            return atoi(at + strlen(keys[k]));
    }
    return -1;
}

/* Fails unless every chunk boundary of p leaves every block whole. */
static void check_whole(const struct dt_model *m, const struct dt_plan *p, const char *what)
{
    int C = p->stages * p->chunks;
    for (int c = 1; c < C; c++) {
        int b = p->chunk_first[c], before = block_of_name(m->layers[b - 1].name);
        if (before >= 0 && before == block_of_name(m->layers[b].name))
            fail_msg("%s: chunk %d starts at layer %d (%s), inside block %d", what, c, b,
                     m->layers[b].name, before);
    }
}

/* tiny-gpt (2 blocks), tiny-gpt-bytes, gpt2-124m (12), bert-large (24) in every pipeline
 * schedule, with tensor and sequence parallelism (GPT): no boundary inside a block. */
static void boundaries_at_block_ends(void **state)
{
    (void)state;
    const char *models[] = {"tiny-gpt", "tiny-gpt-bytes", "gpt2-124m", "bert-large"};
    const struct {
        enum dt_strategy s;
        const char *flags;
    } runs[] = {
        {DT_STRAT_1F1B, "pp=2 micro-batches=4"},
        {DT_STRAT_GPIPE, "pp=4 dp=1 micro-batches=4"},
        {DT_STRAT_NAIVE_MP, "pp=3 dp=1"},
        {DT_STRAT_INTERLEAVED, "pp=2 chunks=2 micro-batches=4"},
        {DT_STRAT_1F1B, "pp=2 tp=2 micro-batches=4"},
        {DT_STRAT_1F1B, "pp=2 tp=2 micro-batches=4 sequence-parallel=on"},
        {DT_STRAT_1F1B, "pp=2 micro-batches=4 recompute=full"},
    };
    struct dt_topology *t = test_zoo_topology("1n4p");
    int plans = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        struct dt_model *m = test_zoo_model(models[i]);
        for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
            if (strstr(runs[k].flags, "sequence") && !strcmp(models[i], "bert-large"))
                continue; /* post-norm BERT has no sequence-parallel region to cut at */
            char what[160];
            snprintf(what, sizeof what, "%s %s %s", models[i], dt_strategy_name(runs[k].s),
                     runs[k].flags);
            struct dt_plan *p = test_plan(m, t, runs[k].s, 16, runs[k].flags);
            check_whole(m, p, what);
            plans++;
            dt_plan_destroy(p);
        }
        dt_model_destroy(m);
    }
    assert_int_equal(plans, 27);
    dt_topology_destroy(t);
}

/* The balanced cut among block ends: tiny-gpt on 2 stages puts the embedding and block 0 on
 * the first (their cost is about the second block with the cheap final norm and head of a
 * 64-token vocabulary); GPT-3 175B's 96 blocks on 16 stages are Megatron-LM's 6 per stage,
 * the embedding on the first, the final norm, head and loss on the last (10 layers per
 * block). A hand cut (--stages) stays where the user puts it, inside a block too. */
static void balanced_among_block_ends(void **state)
{
    (void)state;
    struct dt_topology *t = test_zoo_topology("1n2p");
    struct dt_model *m = test_zoo_model("tiny-gpt");
    struct dt_plan *p = test_plan(m, t, DT_STRAT_1F1B, 16, "pp=2 micro-batches=4");
    assert_int_equal(p->chunk_first[1], 11);
    assert_string_equal(m->layers[10].name, "transformer.h.0.mlp.add");
    dt_plan_destroy(p);
    p = test_plan(m, t, DT_STRAT_1F1B, 16, "pp=2 micro-batches=4 stages=0-5,6-23");
    assert_int_equal(p->chunk_first[1], 6);
    dt_plan_destroy(p);
    dt_model_destroy(m);
    dt_topology_destroy(t);

    t = test_zoo_topology("h100-128n-fattree");
    m = test_zoo_model("gpt3-175b");
    assert_int_equal(m->n_layers, 1 + 96 * 10 + 3);
    p = test_plan(m, t, DT_STRAT_1F1B, 16, "pp=16 dp=1 micro-batches=16 precision=bf16");
    check_whole(m, p, "gpt3-175b 1f1b pp16");
    for (int c = 1; c < 16; c++)
        assert_int_equal(p->chunk_first[c], 1 + 60 * c);
    dt_plan_destroy(p);
    dt_model_destroy(m);
    dt_topology_destroy(t);
}

/* Bytes of rank r's activation buffers (ACT, DACT, KEEP: dt_memory's activations). */
static double activation_bytes(const struct dt_plan *p, int r)
{
    struct dt_memory mem;
    dt_plan_rank_memory(p, r, &mem);
    return mem.activations;
}

/* How many blocks the rank runs (whole: the cut keeps them so). */
static int blocks_run(const struct dt_model *m, const struct dt_plan *p, int r)
{
    const struct dt_layer_view *v = p->views[p->ranks[r].view];
    int n = 0, last = -1;
    for (int l = 0; l < m->n_layers; l++) {
        int b = block_of_name(m->layers[l].name);
        if (v[l].runs && b >= 0 && b != last) {
            n++;
            last = b;
        }
    }
    return n;
}

/* Full recomputation (Korthikanti et al. 2022, section 4.1, bf16: 2 bytes an element; s
 * tokens, b samples per micro-batch, h wide, a heads): a middle stage of L blocks keeps per
 * micro-batch in flight F each block's input 2sbh (the first one's is what it received).
 * Once: the last block's output, 2sbh, from its forward until it is sent (Megatron-LM frees
 * it then: deallocate_output_tensor; the next micro-batch's forward waits for that send);
 * for the block being recomputed, its activations without dropout, 34 sbh + 2 as^2 b
 * (Korthikanti's 34 sbh + 5 as^2 b less the masks and dropout outputs), and the gradients
 * live at once in its backward, 18 sbh (the MLP's two 4h-wide ones and the residual's): the
 * gradient received for the stage's output and the one sent back for its input live only
 * inside their micro-batch's backward (the first from its WAIT, the second until its send
 * completes, before the next backward), 2sbh each beside at most 6 sbh of others, so among
 * those 18. Total: F L 2sbh + 54 sbh + 2 as^2 b, within 0.5 %. F: 1F1B's S - s, GPipe's M.
 * Control: the three boundary tensors kept per micro-batch in flight, F (L + 3) 2sbh + 52 sbh
 * + 2 as^2 b (the lifetimes before), is out of that tolerance. */
static void check_closed_form(enum dt_strategy s, const char *flags, int M)
{
    struct dt_model *m = test_zoo_model("gpt3-1.3b");
    struct dt_topology *t = test_zoo_topology("1n4p");
    struct dt_plan *p = test_plan(m, t, s, 16, flags);
    const double seq = 2048, b = 16.0 / M, h = 2048, a = 16, sbh = seq * b * h;
    assert_int_equal((int)m->layers[0].units, (int)h);
    int middle = 0;
    for (int r = 0; r < p->n_ranks; r++) {
        const struct dt_rank_plan *rp = &p->ranks[r];
        if (rp->first || rp->last) /* the embedding's and the logits' stages: not the form */
            continue;
        int F = s == DT_STRAT_1F1B ? p->stages - rp->stage : M, L = blocks_run(m, p, r);
        double want = F * L * 2 * sbh + 54 * sbh + 2 * a * seq * seq * b;
        double kept = F * (L + 3) * 2 * sbh + 52 * sbh + 2 * a * seq * seq * b;
        double got = activation_bytes(p, r);
        if (got < want * 0.995 || got > want * 1.005)
            fail_msg("%s stage %d (%d blocks, %d in flight): %.1f MiB of activations, the "
                     "closed form %.1f MiB", flags, rp->stage, L, F, got / 1048576,
                     want / 1048576);
        assert_true(got < kept * 0.995); /* the control */
        middle++;
    }
    assert_int_equal(middle, 2);
    dt_plan_destroy(p);
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

static void recompute_full_closed_form(void **state)
{
    (void)state;
    check_closed_form(DT_STRAT_1F1B, "pp=4 micro-batches=8 precision=bf16 recompute=full", 8);
    check_closed_form(DT_STRAT_GPIPE, "pp=4 micro-batches=4 precision=bf16 recompute=full", 4);
}

/* The last stage's logits (b x s x V, and the softmax's probabilities of the same size): a
 * 1F1B last stage runs each micro-batch's backward right after its forward, so it holds one
 * micro-batch's; GPipe holds all M until the backward starts. */
static void last_stage_logits(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("gpt3-1.3b");
    struct dt_topology *t = test_zoo_topology("1n4p");
    const long V = 50257, seq = 2048;
    int head = m->n_layers - 2;
    assert_string_equal(m->layers[head].name, "lm_head");
    const struct {
        enum dt_strategy s;
        const char *flags;
        int held;
    } runs[] = {
        {DT_STRAT_1F1B, "pp=4 micro-batches=8 precision=bf16 recompute=full", 1},
        {DT_STRAT_1F1B, "pp=4 micro-batches=8 precision=bf16", 1},
        {DT_STRAT_GPIPE, "pp=4 micro-batches=8 precision=bf16", 8},
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        struct dt_plan *p = test_plan(m, t, runs[k].s, 16, runs[k].flags);
        int last = p->n_ranks - 1;
        assert_true(p->ranks[last].last);
        double want = (double)runs[k].held * (16 / 8) * seq * V;
        assert_true(dt_plan_buffer_layer(p, last, DT_BUF_ACT, head) == want);
        assert_true(dt_plan_buffer_layer(p, last, DT_BUF_ACT, head + 1) == want);
        dt_plan_destroy(p);
    }
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(boundaries_at_block_ends),
        cmocka_unit_test(balanced_among_block_ends),
        cmocka_unit_test(recompute_full_closed_form),
        cmocka_unit_test(last_stage_logits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

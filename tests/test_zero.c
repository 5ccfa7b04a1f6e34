/* ZeRO stages 1-3 (Rajbhandari et al. 2020) against the paper's closed forms:
 *   memory per rank, from the buffer table (dt_plan_rank_memory): with P, G bytes per parameter
 *   and gradient and K optimizer bytes per parameter, psi parameters on N ranks,
 *     baseline (P + G + K) psi, stage 1 (P + G) psi + K psi / N,
 *     stage 2 P psi + (G + K) psi / N + G x staging, stage 3 (P + G + K) psi / N + (P + G) x
 *     staging, staging being the largest unit (here the largest layer) that is gathered or
 *     reduced at once: the paper's fp32-equivalent forms; with mixed-precision Adam (2, 2, 12)
 *     they are its 16 psi, 4 psi + 12 psi / N, 2 psi + 14 psi / N and 16 psi / N;
 *   traffic per rank per iteration, as dtsim plays it (bytes_sent of dt_sim_run): stages 1 and 2
 *     move what plain data parallelism moves, 2 (N - 1) / N x 4 psi, stage 3 1.5 times that.
 * The model's layers divide by every N used, so both hold exactly. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/model.h"
#include "dt/plan.h"
#include "dt/tensor.h"
#include "dt/topology.h"
#include "player.h"
#include "testdata.h"

/* 64 -> 64 -> 128 -> 64: 4,160 + 8,320 + 8,256 = 20,736 parameters, each layer's a multiple
 * of 8. */
static struct dt_model *model(void)
{
    const char *text = "name: z\nsource: test\ninput: {shape: [64]}\nclasses: 64\nlayers:\n"
                       "  - {kind: dense, units: 64}\n  - {kind: dense, units: 128}\n"
                       "  - {kind: dense, units: 64}\n";
    struct dt_model *m = test_model_text(text);
    assert_int_equal(m->total_params, 20736);
    return m;
}

/* Nodes of n CPU devices on a crossbar, on one switch. */
static struct dt_topology *nodes(int count, int n)
{
    char text[1024];
    snprintf(text, sizeof text,
             "name: n\nsource: test\nnodes:\n  - name: n\n    count: %d\n    devices: %d\n"
             "    device: {kind: cpu, name: c, cores: 1, peak: {fp32: 1 GFLOP/s}, memory: 8 GiB,"
             " memory_bw: 1 GB/s}\n"
             "    intra: {kind: nvswitch, bandwidth: 100 GB/s, latency: 1 us, sharing: crossbar}\n"
             "    nic: {kind: infiniband, bandwidth: 10 GB/s, latency: 2 us, count: 1}\n"
             "network: {kind: switch, latency: 0.5 us}\n",
             count, n);
    struct dt_topology *t;
    struct dt_error err;
    if (dt_topology_load_string("n.yaml", text, &t, &err) != DT_OK)
        fail_msg("topology: %s", err.msg);
    return t;
}

static double largest_layer(const struct dt_model *m)
{
    long most = 0;
    for (int l = 0; l < m->n_layers; l++)
        most = m->layers[l].params > most ? m->layers[l].params : most;
    return (double)most;
}

/* The paper's bytes of parameters, gradients and optimizer state per rank. */
static double formula(int stage, double psi, int n, double P, double G, double K, double staging)
{
    switch (stage) {
    case 0: return (P + G + K) * psi;
    case 1: return (P + G) * psi + K * psi / n;
    case 2: return P * psi + (G + K) * psi / n + G * staging;
    default: return (P + G + K) * psi / n + (P + G) * staging;
    }
}

/* Rank r's model states in the plan: bytes of weights, gradients and optimizer state. */
static double model_states(const struct dt_plan *plan, int r)
{
    struct dt_memory mem;
    dt_plan_rank_memory(plan, r, &mem);
    return mem.weights + mem.grads + mem.optimizer;
}

/* One row per precision and optimizer: bytes per parameter of weights, gradients and state
 * (mixed precision: 2-byte weights and gradients, fp32 master weights and moments). */
static const struct {
    const char *precision, *optimizer;
    double P, G, K;
} bytes_per_param[] = {
    {"fp32", "adam", 4, 4, 8},
    {"fp32", "momentum", 4, 4, 4},
    {"fp32", "sgd", 4, 4, 0},
    {"bf16", "adam", 2, 2, 12},
    {"fp16", "adam", 2, 2, 12},
    {"bf16", "sgd", 2, 2, 4},
};

static void memory_follows_the_paper(void **state)
{
    (void)state;
    struct dt_model *m = model();
    const double psi = (double)m->total_params, staging = largest_layer(m);
    for (size_t i = 0; i < sizeof bytes_per_param / sizeof bytes_per_param[0]; i++)
        for (int n = 2; n <= 8; n *= 2) {
            struct dt_topology *t = nodes(1, n);
            for (int stage = 0; stage <= 3; stage++) {
                char flags[128];
                snprintf(flags, sizeof flags, "zero=%d precision=%s optimizer=%s", stage,
                         bytes_per_param[i].precision, bytes_per_param[i].optimizer);
                struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 8, flags);
                double want = formula(stage, psi, n, bytes_per_param[i].P, bytes_per_param[i].G,
                                      bytes_per_param[i].K, staging);
                for (int r = 0; r < n; r++) {
                    double got = model_states(plan, r);
                    if (fabs(got - want) > 1e-9 * want)
                        fail_msg("%s, %d ranks, rank %d: %.0f bytes, the paper's form %.0f",
                                 flags, n, r, got, want);
                }
                dt_plan_destroy(plan);
            }
            dt_topology_destroy(t);
        }
    dt_model_destroy(m);
}

/* Mixed-precision Adam (K = 12) on a zoo model, as the paper writes it: 16 psi, 4 psi +
 * 12 psi / N, 2 psi + 14 psi / N, 16 psi / N, plus at stages 2-3 the staging of the largest
 * unit (2 or 4 bytes per element of it: one layer without --bucket). The shards of a layer
 * may differ by one element between ranks, so the ranks' sum is compared, exactly. */
static void mixed_precision_zoo_model(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("mlp-wide");
    const double psi = (double)m->total_params, staging = largest_layer(m);
    const int n = 4;
    struct dt_topology *t = nodes(1, n);
    const double want[4] = {16 * psi, 4 * psi + 12 * psi / n, 2 * psi + 14 * psi / n + 2 * staging,
                            16 * psi / n + 4 * staging};
    for (int stage = 0; stage <= 3; stage++) {
        char flags[64];
        snprintf(flags, sizeof flags, "zero=%d precision=bf16", stage);
        struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 8, flags);
        double got = 0;
        for (int r = 0; r < n; r++)
            got += model_states(plan, r);
        if (got != n * want[stage])
            fail_msg("mlp-wide, %s on %d ranks: %.0f bytes per rank, the paper's form %.0f",
                     flags, n, got / n, want[stage]);
        dt_plan_destroy(plan);
    }
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* A tied table (gpt2-124m's token and position embedding, whose token rows lm_head reads)
 * has a staging of its own at stages 2-3 beside the shared one, which is then the largest
 * other layer: mixed-precision Adam on 8 ranks, 2 psi + 14 psi / N + 2 (staging + table) and
 * 16 psi / N + 4 (staging + table). */
static void tied_table_held_apart(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("gpt2-124m");
    const struct dt_layer *head = &m->layers[m->n_layers - 2]; /* before the loss */
    assert_true(head->tied);
    const double psi = (double)m->total_params;
    const double table = (double)m->layers[head->tied_layer].params; /* wte + wpe */
    assert_int_equal(table, (50257 + 1024) * 768);
    long other = 0;
    for (int l = 0; l < m->n_layers; l++)
        if (l != head->tied_layer && m->layers[l].params > other)
            other = m->layers[l].params;
    assert_int_equal(other, 768 * 3072 + 3072); /* mlp.c_fc */
    const int n = 8;
    struct dt_topology *t = nodes(1, n);
    const double want[2] = {2 * psi + 14 * psi / n + 2 * (other + table),
                            16 * psi / n + 4 * (other + table)};
    for (int stage = 2; stage <= 3; stage++) {
        char flags[64];
        snprintf(flags, sizeof flags, "zero=%d precision=bf16", stage);
        struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 8, flags);
        double got = 0;
        for (int r = 0; r < n; r++)
            got += model_states(plan, r);
        if (got != n * want[stage - 2])
            fail_msg("gpt2-124m, %s on %d ranks: %.0f bytes per rank, want %.0f", flags, n,
                     got / n, want[stage - 2]);
        dt_plan_destroy(plan);
    }
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* Bytes rank r sends in one iteration as dtsim plays the plan. */
static double sent(const struct dt_plan *plan, int r)
{
    struct dt_cost_params cp;
    dt_cost_defaults(&cp, DT_DEV_CPU);
    struct dt_sim_result res;
    struct dt_error err;
    if (dt_sim_run(plan, &cp, NULL, &res, &err) != DT_OK)
        fail_msg("sim: %s", err.msg);
    double b = res.rank[r].bytes_sent;
    dt_sim_result_free(&res);
    return b;
}

static void traffic_follows_the_paper(void **state)
{
    (void)state;
    struct dt_model *m = model();
    const double psi = (double)m->total_params;
    const enum dt_strategy strategies[] = {DT_STRAT_ALLREDUCE_RING, DT_STRAT_ALLREDUCE_LIBRARY};
    for (int n = 2; n <= 8; n *= 2) {
        struct dt_topology *t = nodes(1, n);
        const double allreduce = 2.0 * (n - 1) / n * 4 * psi; /* per rank */
        for (size_t s = 0; s < 2; s++)
            for (int stage = 0; stage <= 3; stage++) {
                const char *buckets[] = {"", " bucket=40kB"};
                for (int b = 0; b < 2; b++) {
                    char flags[64];
                    snprintf(flags, sizeof flags, "zero=%d%s", stage, buckets[b]);
                    struct dt_plan *plan = test_plan(m, t, strategies[s], 8, flags);
                    double want = stage == 3 ? 1.5 * allreduce : allreduce;
                    for (int r = 0; r < n; r++)
                        if (fabs(sent(plan, r) - want) > 1e-9 * want)
                            fail_msg("%s %s, %d ranks, rank %d: %.0f bytes sent, the closed "
                                     "form %.0f", dt_strategy_name(strategies[s]), flags, n,
                                     r, sent(plan, r), want);
                    dt_plan_destroy(plan);
                }
            }
        dt_topology_destroy(t);
    }
    dt_model_destroy(m);
}

/* bf16, as dtsim plays it: stages 1-2 send what plain bf16 data parallelism sends (its
 * 2-byte allreduce and the overflow flag's MAX), stage 3 half as much again of the gradient
 * traffic: the closed forms at 2 bytes per element. */
static void mixed_precision_traffic(void **state)
{
    (void)state;
    struct dt_model *m = model();
    const double psi = (double)m->total_params;
    for (int n = 2; n <= 8; n *= 2) {
        struct dt_topology *t = nodes(1, n);
        const double allreduce = 2.0 * (n - 1) / n * 2 * psi;
        struct dt_plan *plain = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 8, "precision=bf16");
        double flag = sent(plain, 0) - allreduce;
        assert_true(flag > 0 && flag <= 4.0 * n);
        dt_plan_destroy(plain);
        for (int stage = 1; stage <= 3; stage++) {
            char flags[64];
            snprintf(flags, sizeof flags, "zero=%d precision=bf16", stage);
            struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 8, flags);
            double want = (stage == 3 ? 1.5 * allreduce : allreduce) + flag;
            for (int r = 0; r < n; r++)
                if (fabs(sent(plan, r) - want) > 1e-9 * want)
                    fail_msg("%s, %d ranks, rank %d: %.0f bytes sent, the closed form %.0f",
                             flags, n, r, sent(plan, r), want);
            dt_plan_destroy(plan);
        }
        dt_topology_destroy(t);
    }
    dt_model_destroy(m);
}

/* Stage 1 with a pipeline (and with tensor groups inside its stages): a stage's D replicas
 * each hold the stage's psi_s parameters and gradients and 1/D of its optimizer state, so
 * the replicas of one stage hold D (P + G) psi_s + K psi_s bytes of them, exactly. */
static void stage1_with_pipelines(void **state)
{
    (void)state;
    struct dt_model *m = model();
    struct dt_topology *t = nodes(1, 8);
    const char *flags[] = {"pp=2 dp=4 zero=1", "pp=2 dp=2 tp=2 zero=1",
                           "pp=2 dp=4 zero=1 precision=bf16"};
    const double PG[] = {8, 8, 4}, K[] = {8, 8, 12};
    for (int f = 0; f < 3; f++) {
        struct dt_plan *plan = test_plan(m, t, DT_STRAT_GPIPE, 8, flags[f]);
        for (int r0 = 0; r0 < plan->n_ranks; r0++) { /* r0: the first rank of its group */
            const struct dt_rank_plan *rp = &plan->ranks[r0];
            if (rp->dp_index)
                continue;
            double got = 0, psi = (double)rp->n_params;
            for (int r = 0; r < plan->n_ranks; r++)
                if (plan->ranks[r].replicas == rp->replicas)
                    got += model_states(plan, r);
            double want = plan->dp * PG[f] * psi + K[f] * psi;
            if (got != want)
                fail_msg("gpipe %s, replicas of rank %d: %.0f bytes, the form %.0f", flags[f],
                         r0, got, want);
        }
        dt_plan_destroy(plan);
    }
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

/* Calls check on each plan of --tp 2 with --zero 1, 2 and 3 (flags) on n = 4 and 8 ranks of
 * one node, with base: the plan of --tp 2 alone on those ranks. */
static void each_tp_zero(const struct dt_model *m,
                         void (*check)(const struct dt_model *m, const struct dt_plan *base,
                                       const struct dt_plan *plan, int n, int stage,
                                       const char *flags))
{
    for (int n = 4; n <= 8; n *= 2) {
        struct dt_topology *t = nodes(1, n);
        struct dt_plan *base = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 8, "tp=2");
        for (int stage = 1; stage <= 3; stage++) {
            char flags[64];
            snprintf(flags, sizeof flags, "tp=2 zero=%d", stage);
            struct dt_plan *plan = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 8, flags);
            check(m, base, plan, n, stage, flags);
            dt_plan_destroy(plan);
        }
        dt_plan_destroy(base);
        dt_topology_destroy(t);
    }
}

/* --tp T with --zero 1, 2 and 3: each tensor rank's packed parameters (psi_t, its shards: the
 * plan's n_params without ZeRO) are what ZeRO shards over its N = p / T data-parallel peers,
 * so the N ranks of tensor rank k sum to N (P + G) psi_t + K psi_t (stage 1),
 * N P psi_t + (G + K) psi_t + N G staging (stage 2, staging: its largest layer shard) and
 * (P + G + K) psi_t + N (P + G) staging (stage 3). Adam in fp32 (4, 4, 8); a single replica
 * is refused. */
static void check_tp_zero_memory(const struct dt_model *m, const struct dt_plan *base,
                                 const struct dt_plan *plan, int n, int stage, const char *flags)
{
    const int N = n / 2;
    for (int k = 0; k < 2; k++) {
        const struct dt_layer_view *v = base->views[base->ranks[k].view];
        double psi = (double)base->ranks[k].n_params, staging = 0, got = 0;
        for (int l = 0; l < m->n_layers; l++)
            staging = fmax(staging, (double)dt_shard_params(m, v, l));
        for (int r = k; r < n; r += 2)
            got += model_states(plan, r);
        double want = stage == 1   ? N * 8 * psi + 8 * psi
                      : stage == 2 ? N * 4 * psi + 12 * psi + N * 4 * staging
                                   : 16 * psi + N * 8 * staging;
        if (got != want)
            fail_msg("%s on %d ranks, tensor rank %d: %.0f bytes, the form %.0f", flags, n, k,
                     got, want);
    }
}

static void tensor_parallel_zero(void **state)
{
    (void)state;
    struct dt_model *m = model();
    each_tp_zero(m, check_tp_zero_memory);
    static const struct {
        int ranks, zero;
        const char *why;
    } refused[] = {{2, 1, "leaves one"}, {2, 3, "leaves one"}};
    for (int i = 0; i < 2; i++) {
        struct dt_topology *t = nodes(1, refused[i].ranks);
        struct dt_plan_options o;
        dt_plan_options_init(&o);
        o.strategy = DT_STRAT_ALLREDUCE_RING;
        o.tp = 2;
        o.zero = refused[i].zero;
        char why[512] = "";
        assert_false(dt_strategy_fits_options(&o, m, t, refused[i].ranks, why, sizeof why));
        if (!strstr(why, refused[i].why))
            fail_msg("tp 2, zero %d on %d ranks: %s", o.zero, refused[i].ranks, why);
        dt_topology_destroy(t);
    }
    dt_model_destroy(m);
}

/* --tp 2 with ZeRO, as dtsim plays it: the f/g allreduces stay, and the data-parallel traffic
 * of each tensor rank's psi_t over its N peers is plain data parallelism's (2 (N - 1) / N x
 * 4 psi_t) at stages 1-2 and 1.5 times it at stage 3: the plan's bytes minus those of --tp 2
 * without ZeRO are 0, 0 and 0.5 x that, per rank. */
static void check_tp_zero_traffic(const struct dt_model *m, const struct dt_plan *base,
                                  const struct dt_plan *plan, int n, int stage, const char *flags)
{
    (void)m;
    const int N = n / 2;
    for (int r = 0; r < n; r++) {
        double psi = (double)base->ranks[r].n_params;
        double more = stage == 3 ? 0.5 * 2.0 * (N - 1) / N * 4 * psi : 0;
        double got = sent(plan, r) - sent(base, r);
        if (fabs(got - more) > 1e-9 * psi)
            fail_msg("%s on %d ranks, rank %d: %.0f bytes more than --tp 2 alone, the closed "
                     "form %.0f", flags, n, r, got, more);
    }
}

static void tensor_parallel_traffic(void **state)
{
    (void)state;
    struct dt_model *m = model();
    each_tp_zero(m, check_tp_zero_traffic);
    dt_model_destroy(m);
}

/* Stage 3 with --recompute full on tiny-gpt: each block is a checkpoint segment whose layers
 * but the last (the residual add, no parameters) are recomputed, so the recomputation
 * gathers every block parameter once more per micro-batch, as DeepSpeed does: per rank
 * (N - 1) / N x 4 x the blocks' psi_b (12 L h^2 + 13 L h = 25,408 for L = 2, h = 32; without
 * --tp; with --tp 2 the tensor rank's: its psi_t less its table shard and ln_f) x
 * micro-batches more than stage 3 without it, beside what the recomputation sends without
 * ZeRO (with --tp: the g allreduces after the recomputed row-parallel layers). Selective
 * recomputation re-runs the attention cores only, which have no parameters: nothing more. */
static void stage3_recompute_traffic(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("tiny-gpt");
    const int ln_f = m->n_layers - 3; /* before lm_head and the loss */
    static const struct {
        int n;
        const char *flags;
    } cases[] = {{2, ""}, {4, ""}, {2, " accumulate=2"}, {4, " tp=2"}, {8, " tp=2 accumulate=2"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct dt_topology *t = nodes(1, cases[c].n);
        char flags[5][96]; /* stage 3 none, full, selective; no ZeRO none, full */
        const char *mode[5] = {"none", "full", "selective", "none", "full"};
        struct dt_plan *plan[5];
        for (int k = 0; k < 5; k++) {
            snprintf(flags[k], sizeof flags[k], "zero=%d recompute=%s%s", k < 3 ? 3 : 0,
                     mode[k], cases[c].flags);
            plan[k] = test_plan(m, t, DT_STRAT_ALLREDUCE_RING, 8, flags[k]);
        }
        const int N = plan[0]->dp, K = plan[0]->micro_batches;
        for (int r = 0; r < cases[c].n; r++) {
            const struct dt_layer_view *v = plan[0]->views[plan[0]->ranks[r].view];
            double blocks = 0; /* the tensor rank's block parameters */
            for (int l = 1; l < ln_f; l++)
                blocks += (double)dt_shard_params(m, v, l);
            double recompute = sent(plan[4], r) - sent(plan[3], r);
            double want = K * (N - 1.0) / N * 4 * blocks + recompute, base = sent(plan[0], r);
            double full = sent(plan[1], r) - base, sel = sent(plan[2], r) - base;
            bool tp = strstr(cases[c].flags, "tp") != NULL;
            assert_true(tp || blocks == 12 * 2 * 32 * 32 + 13 * 2 * 32);
            if (fabs(full - want) > 1e-9 * want || sel != 0 || (!tp && recompute != 0))
                fail_msg("%s, rank %d: %.0f bytes more than without, selective %.0f; the closed "
                         "form %.0f and 0", flags[1], r, full, sel, want);
        }
        for (int k = 0; k < 5; k++)
            dt_plan_destroy(plan[k]);
        dt_topology_destroy(t);
    }
    dt_model_destroy(m);
}

/* --zero goes with ring, mpi-allreduce and ps-sharded only; the others say why not. */
static void other_strategies_refused(void **state)
{
    (void)state;
    struct dt_model *m = model();
    struct dt_topology *t = nodes(2, 2); /* hierarchical needs 2 */
    for (int s = 0; s < DT_STRAT_COUNT; s++) {
        struct dt_plan_options o;
        dt_plan_options_init(&o);
        o.strategy = s;
        o.zero = 2;
        char why[512] = "";
        bool fits = dt_strategy_fits_options(&o, m, t, dt_plan_ranks(&o, t), why, sizeof why);
        bool ok = s == DT_STRAT_ALLREDUCE_RING || s == DT_STRAT_ALLREDUCE_LIBRARY ||
                  s == DT_STRAT_PS_SHARDED;
        if (fits != ok)
            fail_msg("%s with --zero 2: fits %d (%s)", dt_strategy_name(s), fits, why);
        if (!ok && !strstr(why, "--zero shards over the data-parallel ranks"))
            fail_msg("%s: %s", dt_strategy_name(s), why);
    }
    dt_topology_destroy(t);
    dt_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(memory_follows_the_paper),
        cmocka_unit_test(mixed_precision_zoo_model),
        cmocka_unit_test(traffic_follows_the_paper),
        cmocka_unit_test(mixed_precision_traffic),
        cmocka_unit_test(stage1_with_pipelines),
        cmocka_unit_test(other_strategies_refused),
        cmocka_unit_test(tensor_parallel_zero),
        cmocka_unit_test(tensor_parallel_traffic),
        cmocka_unit_test(stage3_recompute_traffic),
        cmocka_unit_test(tied_table_held_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

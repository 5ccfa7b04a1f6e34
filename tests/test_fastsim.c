/* The fit's cheap prediction (validate/fastsim.c: local prefixes summed over distinct ops, the
 * tail played) against the whole plan played (dt_step_simulate), on every row of NVIDIA's
 * published table (validate/data/gpu-published.csv: ResNet-50 on 1-16 GPUs, BERT with up to
 * 512 accumulation steps on 1-256 GPUs), at the defaults and at parameters a fit may try. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "predict.h"
#include "published.h"
#include "testdata.h"

/* A sum over distinct ops x counts instead of one op after another: rounding only. */
#define TOL 1e-9

/* How a step's time splits into exposed communication and idle: to TOL, but with gradient
 * buckets (the ResNet-50 rows on several GPUs) a bucket's allreduce and the backward ops it
 * overlaps can end within rounding of each other, and which ends first moves a rank's wait
 * between comm and compute (the step's time stays within TOL): measured up to 3e-5 of the
 * step (mxnet DGX-2 x16 fp32). */
static double split_tol(const struct dtv_run *run)
{
    return run->plan->opt.bucket_bytes > 0 ? 1e-4 : TOL;
}

static const char *srcdir(void)
{
    const char *s = getenv("top_srcdir");
    return s && *s ? s : ".";
}

/* The parameters of point k: the defaults, then the GPU model's fitted parameters moved the
 * way a fit moves them (all at once: every op's cost and every link change). */
static void params_at(const struct dtv_run *run, int k, struct dt_cost_params *cp)
{
    dtv_base_params(run, cp);
    static const enum dt_cal_param moved[] = {
        DT_CAL_ITER_OVERHEAD, DT_CAL_EFF_CONV, DT_CAL_EFF_DENSE, DT_CAL_EFF_CONV_HALF,
        DT_CAL_EFF_DENSE_HALF, DT_CAL_EFF_MEM, DT_CAL_INTRA_BW, DT_CAL_NIC_BW};
    static const double factor[3] = {1, 0.61, 1.7};
    for (size_t i = 0; k > 0 && i < sizeof moved / sizeof *moved; i++) {
        double v = dt_cal_param_effective(cp, run->topo, moved[i]) * factor[k];
        if (dt_cal_param_kind(moved[i]) == DT_CAL_FRACTION)
            v = fmin(v, 1);
        dt_cal_param_set(cp, moved[i], v);
    }
}

/* Ensure the cheap step at cp is the whole plan's (what point `what` k names on failure);
 * *tail (or NULL) whether the tail alone was played. */
static void check_step(const struct dtv_fast *fast, const struct dtv_run *run,
                       const struct dt_cost_params *cp, const char *what, int k, bool *tail)
{
    struct dt_error err;
    dt_error_clear(&err);
    struct dt_step full, quick;
    assert_int_equal(dtv_step_simulate(run->plan, cp, &full, &err), DT_OK);
    assert_int_equal(dtv_fast_step(fast, cp, &quick, tail, &err), DT_OK);
    double rel = fabs(quick.iter_s / full.iter_s - 1);
    if (rel > TOL)
        fail_msg("line %d %s, %s %d: %.12g s against %.12g s (%.3g relative)", run->line,
                 run->label, what, k, quick.iter_s, full.iter_s, rel);
    assert_true(fabs(quick.compute_s / full.compute_s - 1) <= TOL);
    assert_true(fabs(quick.comm_s - full.comm_s) <= split_tol(run) * full.iter_s);
    assert_true(fabs(quick.idle_s - full.idle_s) <= split_tol(run) * full.iter_s);
    assert_true(quick.read_s == full.read_s);
}

/* Checks the cheap step against the whole plan's at three points; counts in *tail_only
 * whether the tail alone was played (at the defaults). */
static void check_run(const struct dtv_run *run, int *tail_only)
{
    struct dtv_fast fast;
    struct dt_error err;
    dt_error_clear(&err);
    assert_int_equal(dtv_fast_init(&fast, run, &err), DT_OK);
    for (int k = 0; k < 3; k++) {
        struct dt_cost_params cp;
        params_at(run, k, &cp);
        bool tail;
        check_step(&fast, run, &cp, "point", k, &tail);
        *tail_only += tail && k == 0;
    }
    dtv_fast_free(&fast);
}

/* Moves only the compute parameters a fit moves (the per-iteration overhead and the GEMM
 * efficiencies at every precision) from point 1: the tail's key (fastsim.h) is unchanged
 * when the tail holds no op they cost. */
static void compute_moved(const struct dtv_run *run, struct dt_cost_params *cp)
{
    params_at(run, 1, cp);
    static const enum dt_cal_param moved[] = {
        DT_CAL_ITER_OVERHEAD, DT_CAL_EFF_CONV, DT_CAL_EFF_DENSE, DT_CAL_EFF_CONV_HALF,
        DT_CAL_EFF_DENSE_HALF, DT_CAL_EFF_CONV_TF32, DT_CAL_EFF_DENSE_TF32};
    for (size_t i = 0; i < sizeof moved / sizeof *moved; i++)
        dt_cal_param_set(cp, moved[i],
                         dt_cal_param_effective(cp, run->topo, moved[i]) * 0.77);
}

/* Ensure the tail played once is reused when only compute parameters move, and that the
 * step is still the whole plan's within TOL; and that moving eff_mem (the collectives'
 * summing) or a link plays it again. Returns whether the tail was reused. */
static bool check_reuse(const struct dtv_run *run)
{
    struct dtv_fast fast;
    struct dt_error err;
    dt_error_clear(&err);
    assert_int_equal(dtv_fast_init(&fast, run, &err), DT_OK);
    struct dt_cost_params cp[3];
    params_at(run, 1, &cp[0]);
    compute_moved(run, &cp[1]);
    cp[2] = cp[1];
    dt_cal_param_set(&cp[2], DT_CAL_INTRA_BW,
                     dt_cal_param_effective(&cp[1], run->topo, DT_CAL_INTRA_BW) * 0.9);
    long played[3], reused[3];
    for (int k = 0; k < 3; k++) {
        check_step(&fast, run, &cp[k], "reuse point", k, NULL);
        dtv_fast_tail_counts(&fast, &played[k], &reused[k]);
    }
    assert_int_equal(played[0], 1);
    bool reuse = reused[1] == 1;
    /* a link moved: played again unless the row has no link in its tail (one GPU) */
    assert_true(played[2] == played[1] + 1 || run->plan->n_ranks == 1);
    dtv_fast_free(&fast);
    return reuse;
}

/* Ensure each row's gradient buckets are its framework's documented ones (published.c): PyTorch
 * DDP 25 MiB, Horovod (MXNet, TensorFlow) 64 MiB on ResNet-50 rows of several GPUs; none for
 * BERT (one allreduce after the accumulated step) and on one GPU. */
static void check_buckets(const struct dtv_run *run)
{
    double want = 0;
    if (run->ranks > 1 && !strstr(run->label, " bert-"))
        want = (strncmp(run->label, "pytorch ", 8) == 0 ? 25.0 : 64.0) * 1024 * 1024;
    if (run->plan->opt.bucket_bytes != want)
        fail_msg("line %d %s: buckets of %.0f B, expected %.0f", run->line, run->label,
                 run->plan->opt.bucket_bytes, want);
}

/* One GPU: sequential; on one node: NCCL's ring; on several: every NIC carries a share, as
 * NCCL's channels spread the rings over them (rail-ring; a flat ring crosses each node
 * boundary on one NIC). */
static void check_strategy(const struct dtv_run *run, int *multi_node)
{
    bool several = dt_topology_node_of(run->topo, run->ranks - 1) > 0;
    enum dt_strategy want = run->ranks == 1 ? DT_STRAT_SEQUENTIAL
                            : several   ? DT_STRAT_ALLREDUCE_RAIL_RING
                                        : DT_STRAT_ALLREDUCE_RING;
    *multi_node += several;
    if (run->strategy != want)
        fail_msg("line %d %s: strategy %s, expected %s", run->line, run->label,
                 dt_strategy_name(run->strategy), dt_strategy_name(want));
}

/* Ensure each row's gradients are in its framework's dtype (published.c): fp32 for PyTorch
 * (autocast) and TensorFlow (the AMP graph rewrite) ResNet-50 at amp, whose parameters stay
 * fp32; fp16 for MXNet (the network cast to float16) and BERT (model.half() under
 * --allreduce_post_accumulation_fp16) at amp; fp32 rows fp32. The buffer table's GRADS. */
static void check_grads(const struct dtv_run *run)
{
    bool amp = strstr(run->label, " amp ") != NULL, bert = strstr(run->label, " bert-") != NULL;
    bool fp32_wire = amp && !bert && (strncmp(run->label, "pytorch ", 8) == 0 ||
                                      strncmp(run->label, "tensorflow ", 11) == 0);
    enum dt_dtype want = amp && !fp32_wire ? DT_TYPE_F16 : DT_TYPE_F32;
    const struct dt_rank_plan *rp = &run->plan->ranks[0];
    for (int k = 0; k < rp->n_bufs; k++)
        if (rp->bufs[k].kind == DT_BUF_GRADS && rp->bufs[k].dtype != want)
            fail_msg("line %d %s: gradients in %s, expected %s", run->line, run->label,
                     dt_dtype_name(rp->bufs[k].dtype), dt_dtype_name(want));
}

/* Seconds of rank 0's ReLU ops as kernels of their own, in closed form: forward, its input
 * and output (the same size) at e bytes each, read and written once; backward twice that; at
 * cp's memory bandwidth, plus a launch each. */
static double relu_passes_s(const struct dtv_run *run, const struct dt_cost_params *cp, double e)
{
    const struct dt_model *m = run->plan->model;
    const struct dt_rank_plan *rp = &run->plan->ranks[0];
    double bw = dt_cost_mem_bw(cp, &run->topo->groups[0].device), s = 0;
    for (int i = 0; i < rp->n_ops; i++) {
        const struct dt_op *op = &rp->ops[i];
        if (op->kind != DT_OP_COMPUTE || m->layers[op->layer].kind != DT_L_RELU)
            continue;
        double pass = 2.0 * (double)dt_shape_size(&m->layers[op->layer].out_shape) * e *
                      op->samples;
        s += (op->phase == DT_PH_FORWARD ? pass : 2 * pass) / bw +
             cp->overhead_s[DT_CLASS_ELEMENTWISE];
    }
    return s;
}

/* Ensure each row runs its activations as its framework does (published.c): each ReLU its
 * own kernel for PyTorch ResNet-50 (eager nn.ReLU modules) and MXNet's fp32 ResNet-50 (no
 * --fuse-bn-relu), fused into the kernel before it for MXNet's amp ResNet-50 (the runner's
 * --fuse-bn-relu 1 --fuse-bn-add-relu 1), TensorFlow (XLA) and BERT. On one GPU, where the
 * step is one op after another, unfusing adds exactly each ReLU op's own pass: its bytes
 * (forward in + out, backward twice that, at 2 bytes amp, 4 otherwise) at the memory
 * bandwidth, plus a launch. */
static void check_fusion(const struct dtv_run *run, int *unfused)
{
    bool amp = strstr(run->label, " amp ") != NULL, bert = strstr(run->label, " bert-") != NULL;
    bool want = !bert && (strncmp(run->label, "pytorch ", 8) == 0 ||
                          (strncmp(run->label, "mxnet ", 6) == 0 && !amp));
    struct dt_cost_params cp;
    dtv_base_params(run, &cp);
    if (run->unfused_activations != want || cp.fuse_activations == want)
        fail_msg("line %d %s: activations %s, expected %s", run->line, run->label,
                 cp.fuse_activations ? "fused" : "unfused", want ? "unfused" : "fused");
    *unfused += want;
    if (!want || run->ranks != 1)
        return;
    struct dt_cost_params fused = cp;
    fused.fuse_activations = true;
    double relu_s = relu_passes_s(run, &cp, amp ? 2 : 4);
    struct dt_error err;
    dt_error_clear(&err);
    struct dt_step on, off;
    assert_int_equal(dtv_step_simulate(run->plan, &fused, &on, &err), DT_OK);
    assert_int_equal(dtv_step_simulate(run->plan, &cp, &off, &err), DT_OK);
    if (!(relu_s > 0) || fabs((off.iter_s - on.iter_s) / relu_s - 1) > 1e-9)
        fail_msg("line %d %s: unfused adds %.9g s, its ReLU ops %.9g s", run->line, run->label,
                 off.iter_s - on.iter_s, relu_s);
}

/* Ensure each row keeps ResNet-50's activations in its framework's layout (published.c):
 * NHWC at amp (PyTorch's memory_format nhwc, MXNet's NHWC layouts, XLA's fp16 choice), NCHW
 * at fp32 and tf32, BERT (no convolutions) neither. NCHW slows exactly the rows whose
 * convolutions run on tensor cores (the A100's tf32): the V100's fp32 rows run NCHW on the
 * fp32 units, no transposes, the same step. */
static void check_layout(const struct dtv_run *run, int *transposed)
{
    bool amp = strstr(run->label, " amp ") != NULL, bert = strstr(run->label, " bert-") != NULL;
    bool want = !bert && !amp;
    struct dt_cost_params cp;
    dtv_base_params(run, &cp);
    if (run->conv_nchw != want || cp.conv_nchw != want)
        fail_msg("line %d %s: layout %s, expected %s", run->line, run->label,
                 cp.conv_nchw ? "NCHW" : "NHWC", want ? "NCHW" : "NHWC");
    struct dt_cost_params nhwc = cp;
    nhwc.conv_nchw = false;
    struct dt_error err;
    dt_error_clear(&err);
    struct dt_step with, without;
    assert_int_equal(dtv_step_simulate(run->plan, &cp, &with, &err), DT_OK);
    assert_int_equal(dtv_step_simulate(run->plan, &nhwc, &without, &err), DT_OK);
    bool slower = with.iter_s > without.iter_s;
    bool tf32 = strstr(run->label, " tf32 ") != NULL;
    if (slower != (want && tf32) || (!slower && with.iter_s != without.iter_s))
        fail_msg("line %d %s: NCHW step %.9g s, NHWC %.9g s", run->line, run->label,
                 with.iter_s, without.iter_s);
    *transposed += slower;
}

static void published_rows(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/validate/data/gpu-published.csv", srcdir());
    struct dtv_runset set;
    dtv_runset_init(&set);
    struct dtv_published *pub = calloc(1, sizeof *pub);
    assert_non_null(pub);
    struct dt_error err;
    dt_error_clear(&err);
    if (dtv_published_load(&set, path, pub, &err))
        fail_msg("%s", err.msg);
    assert_true(set.n >= 79);
    int tail_only = 0, bucketed = 0, multi_node = 0, unfused = 0, transposed = 0;
    for (int i = 0; i < set.n; i++) {
        const struct dtv_run *run = &set.runs[i];
        check_run(run, &tail_only);
        check_buckets(run);
        check_strategy(run, &multi_node);
        check_grads(run);
        check_fusion(run, &unfused);
        check_layout(run, &transposed);
        /* a row without buckets has its allreduce and update for tail: reused when compute
         * moves; with buckets the tail holds the backward after the first bucket, reused
         * only where those ops' costs did not move (memory-bound ones) */
        bool buckets = run->plan->opt.bucket_bytes > 0;
        bucketed += buckets;
        if (!check_reuse(run) && !buckets)
            fail_msg("line %d %s: tail played again", run->line, run->label);
    }
    assert_true(bucketed > 0 && bucketed < set.n);
    assert_true(multi_node > 0);
    assert_true(unfused > 0 && unfused < set.n);
    assert_true(transposed > 0 && transposed < set.n);
    /* every row is a symmetric data-parallel step: the shortcut applies to all */
    assert_int_equal(tail_only, set.n);
    dtv_runset_free(&set);
    free(pub);
}

/* Plans whose ranks do not all reach their first communication at once (pipeline stages,
 * a parameter server) are played whole; symmetric ones (ring, tensor parallel, ZeRO) by
 * their tail; both equal to the whole plan played, on CPUs (no fused activations) too. */
static void other_plans(void **state)
{
    (void)state;
    static const struct {
        const char *model, *topo;
        enum dt_strategy s;
        const char *flags;
        bool tail_only;
    } cases[] = {
        {"cnn690k", "2n2p", DT_STRAT_ALLREDUCE_RING, "", true},
        {"cnn690k", "2n2p", DT_STRAT_GPIPE, "pp=2 micro-batches=4", false},
        {"cnn690k", "2n2p", DT_STRAT_PS_CENTRAL, "", true}, /* the server computes too */
        {"tiny-gpt", "2n2p", DT_STRAT_ALLREDUCE_RING, "tp=2", true},
        {"tiny-gpt", "2n2p", DT_STRAT_1F1B, "pp=2 micro-batches=4", false},
        {"mlp-wide", "dgx-a100", DT_STRAT_ALLREDUCE_RING, "zero=1 accumulate=4 precision=bf16", true},
        {"mlp-wide", "dgx-a100", DT_STRAT_ALLREDUCE_RING, "precision=fp16 grad-precision=fp32",
         true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct dt_model *m = test_zoo_model(cases[i].model);
        struct dt_topology *t = test_zoo_topology(cases[i].topo);
        struct dtv_run run = {.model = m, .topo = t, .line = (int)i};
        snprintf(run.label, sizeof run.label, "%s %s %s", cases[i].model, cases[i].topo,
                 cases[i].flags);
        run.plan = test_plan(m, t, cases[i].s, 32, cases[i].flags);
        int tail_only = 0;
        check_run(&run, &tail_only);
        if (tail_only != cases[i].tail_only)
            fail_msg("%s: tail alone %d, expected %d", run.label, tail_only,
                     cases[i].tail_only);
        dt_plan_destroy(run.plan);
        dt_topology_destroy(t);
        dt_model_destroy(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(published_rows),
        cmocka_unit_test(other_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

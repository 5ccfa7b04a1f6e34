/* The executor's communication ops on real MPI ranks (run by test_exec_collectives.sh with 2 and
 * 3 processes): every collective kind with every algorithm the expansion knows, blocking and
 * non-blocking, and point-to-point SEND/RECV, each as a one-op plan walked by dtx_exec.
 *
 * Expected values are closed forms: member r starts with v_r[k] = 1000 (r + 1) + k, so the sum
 * over p members is 1000 p (p + 1) / 2 + p k; every value is an integer below 2^24, so float
 * sums are exact whatever their order and the checks use equality. Floats outside the region
 * must not change. Not CMocka: each rank checks its own buffer and the failures are summed. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/net.h"
#include "dt/collective.h"
#include "dt/model.h"
#include "dt/plan.h"
#include "executor.h"
#include "idle.h"

/* 10 x 10 + 10 = 110 parameters: room for a region with floats on both sides. */
static const char *model_text = "name: comm-test\n"
                                "source: test\n"
                                "input: {shape: [10]}\n"
                                "classes: 10\n"
                                "layers:\n"
                                "  - {kind: dense, units: 10}\n";

#define OFF 3L
#define COUNT 37L /* not a multiple of 2 or 3: uneven chunks */

static int rank, size, failures;
static struct dt_model *model;
static struct dtk_net *net;

static void check(int ok, const char *what, long k, double got, double want)
{
    if (!ok) {
        if (failures < 20)
            fprintf(stderr, "rank %d: %s: float %ld is %g, want %g\n", rank, what, k, got, want);
        failures++;
    }
}

/* A plan of `size` ranks with no ops yet (every rank holds the whole model, one row, the
 * parameters and gradients in its buffer table); group 0 is every rank. */
static struct dt_plan *plan_new(void)
{
    struct dt_plan_options o;
    dt_plan_options_init(&o);
    o.optimizer = DT_OPTIM_SGD;
    struct dt_plan *p;
    if (dt_plan_alloc(model, NULL, &o, size, &p))
        MPI_Abort(MPI_COMM_WORLD, 1);
    int *all = malloc((size_t)size * sizeof *all);
    for (int r = 0; r < size; r++) {
        all[r] = r;
        p->ranks[r].batch = p->ranks[r].slot_rows = 1;
        p->ranks[r].updates = true;
        p->ranks[r].replicas = 0; /* every rank must end with the same parameters */
        dt_plan_add_buffer(p, r, DT_BUF_PARAMS, DT_TYPE_F32, -1, (double)model->total_params);
        dt_plan_add_buffer(p, r, DT_BUF_GRADS, DT_TYPE_F32, -1, (double)model->total_params);
    }
    dt_plan_add_group(p, size, all);
    free(all);
    return p;
}

/* The executor of p (its network becomes `net`), or NULL after counting a failure. */
static struct dtx_exec *start(struct dt_plan *p, const char *what)
{
    struct dtx_optimizer opt = {.kind = DTX_OPT_SGD};
    struct dtx_exec *ex;
    struct dt_error err;
    if (dtx_exec_create(p, MPI_COMM_WORLD, &opt, DTK_INIT_GLOROT, 1, &ex, &err)) {
        char buf[1200];
        dt_error_format(&err, buf, sizeof buf);
        fprintf(stderr, "rank %d: %s: %s\n", rank, what, buf);
        failures++;
        return NULL;
    }
    net = dtx_exec_net(ex);
    return ex;
}

static void step(struct dtx_exec *ex, const char *what)
{
    struct dtx_loss loss;
    struct dt_error err;
    if (dtx_exec_iteration(ex, NULL, NULL, &loss, NULL, MPI_Wtime(), &err)) {
        fprintf(stderr, "rank %d: %s: iteration failed: %s\n", rank, what, err.msg);
        failures++;
    }
}

static float *grads(void) { return dtk_net_grads(net); }

static void fill(void)
{
    float *g = grads();
    for (long k = 0; k < dtk_net_n_params(net); k++)
        g[k] = (float)(1000 * (rank + 1) + k);
}

static double sum_at(long k) { return 1000.0 * size * (size + 1) / 2 + (double)size * k; }
/* The reduction's result at k: the sum, or the largest rank's value under DT_RED_MAX. */
static enum dt_reduction reduction;
static double reduced_at(long k)
{
    return reduction == DT_RED_MAX ? 1000.0 * size + (double)k : sum_at(k);
}

/* Floats outside [OFF, OFF + COUNT) keep this rank's initial values. */
static void check_outside(const char *what)
{
    float *g = grads();
    for (long k = 0; k < dtk_net_n_params(net); k++)
        if (k < OFF || k >= OFF + COUNT)
            check(g[k] == 1000 * (rank + 1) + k, what, k, g[k], 1000 * (rank + 1) + k);
}

static void coll_case(enum dt_coll_kind kind, enum dt_coll_alg alg, int root, bool nonblocking)
{
    char what[128];
    snprintf(what, sizeof what, "%s/%s root %d%s%s", dt_coll_kind_name(kind),
             dt_coll_alg_name(alg), root, nonblocking ? " nonblocking" : "",
             reduction == DT_RED_MAX ? " max" : "");
    struct dt_plan *p = plan_new();
    for (int r = 0; r < size; r++) {
        struct dt_op op = {.kind = DT_OP_COLL, .coll = kind, .alg = alg, .group = 0, .root = root,
                           .region = {DT_BUF_GRADS, OFF, COUNT}, .nonblocking = nonblocking,
                           .reduction = reduction};
        dt_plan_push(p, r, &op);
        if (nonblocking) {
            struct dt_op w = {.kind = DT_OP_WAIT, .handle = 0};
            dt_plan_push(p, r, &w);
        }
    }
    p->next_handle = nonblocking ? 1 : 0;
    struct dtx_exec *ex = start(p, what);
    if (!ex) {
        dt_plan_destroy(p);
        return;
    }
    fill();
    float *g = grads();
    if (kind == DT_COLL_ALLGATHER) /* member i knows only its chunk (value k + 7) */
        for (long k = 0; k < COUNT; k++) {
            long off, len;
            dt_chunk(COUNT, size, rank, &off, &len);
            g[OFF + k] = k >= off && k < off + len ? (float)(k + 7) : -1.0f;
        }
    step(ex, what);
    long mo, ml;
    dt_chunk(COUNT, size, rank, &mo, &ml);
    for (long k = 0; k < COUNT; k++) {
        double got = g[OFF + k], want;
        switch (kind) {
        case DT_COLL_ALLREDUCE: want = reduced_at(OFF + k); break;
        case DT_COLL_REDUCE:
            if (rank != root)
                continue;
            want = reduced_at(OFF + k);
            break;
        case DT_COLL_BCAST: want = 1000.0 * (root + 1) + OFF + k; break;
        case DT_COLL_REDUCE_SCATTER:
            if (k < mo || k >= mo + ml)
                continue;
            want = reduced_at(OFF + k);
            break;
        case DT_COLL_ALLGATHER: want = k + 7; break;
        default: want = -1; break;
        }
        check(got == want, what, OFF + k, got, want);
    }
    check_outside(what);
    dtx_exec_destroy(ex);
    dt_plan_destroy(p);
}

/* Rank 0 sends grads[OFF..] to every other rank, which adds it (sum) or overwrites. */
static void p2p_case(bool sum, bool nonblocking)
{
    char what[64];
    snprintf(what, sizeof what, "send/recv%s%s", sum ? " sum" : "",
             nonblocking ? " nonblocking" : "");
    struct dt_plan *p = plan_new();
    int h = 0;
    for (int r = 1; r < size; r++) {
        struct dt_op s = {.kind = DT_OP_SEND, .peer = r, .tag = 5,
                          .region = {DT_BUF_GRADS, OFF, COUNT}, .nonblocking = nonblocking,
                          .handle = h};
        struct dt_op v = {.kind = DT_OP_RECV, .peer = 0, .tag = 5, .sum = sum,
                          .region = {DT_BUF_GRADS, OFF, COUNT}, .nonblocking = nonblocking,
                          .handle = 0};
        dt_plan_push(p, 0, &s);
        dt_plan_push(p, r, &v);
        if (nonblocking) {
            struct dt_op w0 = {.kind = DT_OP_WAIT, .handle = h}, w1 = {.kind = DT_OP_WAIT};
            dt_plan_push(p, 0, &w0);
            dt_plan_push(p, r, &w1);
        }
        h++;
    }
    p->next_handle = nonblocking ? size - 1 : 0;
    struct dtx_exec *ex = start(p, what);
    if (!ex) {
        dt_plan_destroy(p);
        return;
    }
    fill();
    step(ex, what);
    float *g = grads();
    for (long k = 0; k < COUNT; k++) {
        double mine = 1000.0 * (rank + 1) + OFF + k, from0 = 1000.0 + OFF + k;
        double want = rank == 0 ? mine : sum ? mine + from0 : from0;
        check(g[OFF + k] == want, what, OFF + k, g[OFF + k], want);
    }
    check_outside(what);
    dtx_exec_destroy(ex);
    dt_plan_destroy(p);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dtx_idle_setup(DTX_IDLE_AUTO, size); /* one node: waits as dtexec's */
    struct dt_error err;
    if (dt_model_load_string("comm-test", model_text, &model, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Ensure that every (kind, algorithm) pair the expansion accepts leaves the closed-form
     * result, from a blocking op and from a non-blocking op completed at its WAIT; reduce and
     * bcast from every root, the rail-ring on every node size that divides the ranks (its
     * root: 0, all in one node; 1, one per node; 2 on 4 ranks, 2 nodes of 2). */
    static const struct {
        enum dt_coll_kind kind;
        enum dt_coll_alg alg;
    } cases[] = {
        {DT_COLL_ALLREDUCE, DT_ALG_RING},       {DT_COLL_ALLREDUCE, DT_ALG_RECURSIVE_DOUBLING},
        {DT_COLL_ALLREDUCE, DT_ALG_RABENSEIFNER}, {DT_COLL_ALLREDUCE, DT_ALG_DIRECT},
        {DT_COLL_ALLREDUCE, DT_ALG_LIBRARY},    {DT_COLL_ALLREDUCE, DT_ALG_TREE},
        {DT_COLL_REDUCE, DT_ALG_BINOMIAL},
        {DT_COLL_REDUCE, DT_ALG_LINEAR},        {DT_COLL_REDUCE, DT_ALG_LIBRARY},
        {DT_COLL_BCAST, DT_ALG_BINOMIAL},       {DT_COLL_BCAST, DT_ALG_LINEAR},
        {DT_COLL_BCAST, DT_ALG_LIBRARY},        {DT_COLL_REDUCE_SCATTER, DT_ALG_RING},
        {DT_COLL_REDUCE_SCATTER, DT_ALG_DIRECT}, {DT_COLL_REDUCE_SCATTER, DT_ALG_LIBRARY},
        {DT_COLL_ALLGATHER, DT_ALG_RING},       {DT_COLL_ALLGATHER, DT_ALG_DIRECT},
        {DT_COLL_ALLGATHER, DT_ALG_LIBRARY},    {DT_COLL_ALLREDUCE, DT_ALG_RAIL_RING},
    };
    int n_cases = (int)(sizeof cases / sizeof *cases);
    for (int i = 0; i < n_cases; i++)
        for (int nb = 0; nb < 2; nb++) {
            bool rooted = cases[i].kind == DT_COLL_REDUCE || cases[i].kind == DT_COLL_BCAST ||
                          cases[i].alg == DT_ALG_RAIL_RING;
            for (int root = 0; root < (rooted ? size : 1); root++)
                if (cases[i].alg != DT_ALG_RAIL_RING || root == 0 || size % root == 0)
                    coll_case(cases[i].kind, cases[i].alg, root, nb);
        }
    /* Ensure that a MAX reduction (the vocabulary-parallel loss's largest logit) takes the
     * largest value, not the sum, in every algorithm that reduces. */
    reduction = DT_RED_MAX;
    for (int i = 0; i < n_cases; i++)
        if (cases[i].kind == DT_COLL_ALLREDUCE || cases[i].kind == DT_COLL_REDUCE ||
            cases[i].kind == DT_COLL_REDUCE_SCATTER)
            coll_case(cases[i].kind, cases[i].alg,
                      cases[i].alg == DT_ALG_RAIL_RING ? 1 : 0, false);
    reduction = DT_RED_SUM;
    /* Ensure that point-to-point ops move the region, adding or overwriting, blocking or not. */
    for (int sum = 0; sum < 2; sum++)
        for (int nb = 0; nb < 2; nb++)
            p2p_case(sum, nb);
    /* Ensure that the parameter check sees equal buffers as equal and one flipped bit as not. */
    {
        struct dt_plan *p = plan_new();
        struct dtx_exec *ex = start(p, "hash check");
        if (ex) {
            float *w = dtk_net_params(net);
            for (long k = 0; k < dtk_net_n_params(net); k++)
                w[k] = (float)k;
            check(dtx_exec_params_agree(ex), "agree on equal parameters", 0, 0, 1);
            if (rank == size - 1)
                w[5] = nextafterf(w[5], 100.0f);
            check(!dtx_exec_params_agree(ex), "disagree on one ulp", 5, 1, 0);
            dtx_exec_destroy(ex);
        }
        dt_plan_destroy(p);
    }
    int total;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%d ranks: %d collective cases, 4 point-to-point cases, hash check: %d failure(s)\n",
               size, n_cases * 2, total);
    dt_model_destroy(model);
    MPI_Finalize();
    return total ? 1 : 0;
}

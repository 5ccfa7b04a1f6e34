/* The SimGrid peer of make bench-peer-simgrid: plays the plan dtsim plays, with the same
 * flows, on SimGrid 3.32 (plain alpha-beta CM02 model, max-min sharing), and prints its
 * iteration time and CPU time.
 *
 *   peer_simgrid TOPOLOGY MODEL STRATEGY BATCH DATASET_SIZE
 *
 * Same flows: the platform is dtsim's own network (sim/network.c: every engine link becomes
 * a SimGrid link of the same capacity and latency, an unshared one a FATPIPE; every route a
 * rank pair uses is dtsim's route), every collective is expanded by libdt/collective.c, a
 * mailbox per rank pair has its receiver set so that data moves as soon as it is sent, as in
 * dtsim. Compute ops and the sums after a round take the durations of dtsim's cost model
 * (hosts of 1 flop/s execute their seconds). Plans with point-to-point or nonblocking ops are
 * refused: the benchmark plays data-parallel collectives. */
#include <limits.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>

#include "dt/collective.h"
#include "dt/costmodel.h"
#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"
#include "engine.h"
#include "network.h"

static struct dt_plan *plan;
static struct dt_cost_params cp, *cpr; /* cpr: per rank, with its node's co-located ranks */
static double *end_s;                  /* per rank: when it finished */
static unsigned char *pairs;           /* ranks x ranks bits: (src, dst) carries data */

static bool used(int src, int dst)
{
    long k = (long)src * plan->n_ranks + dst;
    return pairs[k / 8] & (1u << (k % 8));
}

static const struct dt_device_spec *device_of(int r)
{
    return &dt_topology_group_of_node(plan->topo, dt_topology_node_of(plan->topo, r))->device;
}

static int die(const char *what)
{
    fprintf(stderr, "peer_simgrid: %s\n", what);
    exit(2);
}

/* Marks, in a ranks x ranks bit set, the pairs (src, dst) the plan's collectives send over. */
static void mark_pairs(void)
{
    int n = plan->n_ranks;
    struct dt_schedule s;
    dt_schedule_init(&s);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < plan->ranks[r].n_ops; i++) {
            const struct dt_op *op = &plan->ranks[r].ops[i];
            if (op->kind == DT_OP_SEND || op->kind == DT_OP_RECV || op->kind == DT_OP_WAIT ||
                (op->kind == DT_OP_COLL && op->nonblocking))
                die("the plan has point-to-point or nonblocking ops: not played here");
            if (op->kind != DT_OP_COLL)
                continue;
            const struct dt_group *g = &plan->groups[op->group];
            int me = 0;
            while (g->ranks[me] != r)
                me++;
            if (dt_coll_schedule(op->coll, op->alg, g->n, me, op->root, op->region.count, &s,
                                 NULL))
                die("cannot expand a collective");
            for (int x = 0; x < s.n_xfers; x++) {
                long k = (long)r * n + g->ranks[s.xfers[x].peer];
                if (s.xfers[x].send)
                    pairs[k / 8] |= (unsigned char)(1u << (k % 8));
            }
        }
    dt_schedule_free(&s);
}

/* Writes dtsim's network as a SimGrid platform: hosts r0.., links l0.., the used routes. */
static void write_platform(FILE *f, struct dt_sim *sim, const struct dt_simnet *net)
{
    int n = plan->n_ranks;
    fprintf(f, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM "
               "\"https://simgrid.org/simgrid.dtd\">\n<platform version=\"4.1\">\n"
               "<zone id=\"dtsim\" routing=\"Full\">\n");
    for (int r = 0; r < n; r++)
        fprintf(f, "<host id=\"r%d\" speed=\"1f\"/>\n", r);
    for (int l = 0; l < net->n_links; l++) {
        double bw, lat;
        dt_sim_link_params(sim, l, &bw, &lat);
        if (isfinite(bw))
            fprintf(f, "<link id=\"l%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", l, bw,
                    lat);
        else
            fprintf(f, "<link id=\"l%d\" bandwidth=\"1e20Bps\" latency=\"%.17gs\" "
                       "sharing_policy=\"FATPIPE\"/>\n", l, lat);
    }
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            if (!used(a, b))
                continue;
            int route[DT_SIM_MAX_HOPS], hops = dt_simnet_route(net, a, b, route);
            fprintf(f, "<route src=\"r%d\" dst=\"r%d\" symmetrical=\"NO\">", a, b);
            for (int h = 0; h < hops; h++)
                fprintf(f, "<link_ctn id=\"l%d\"/>", route[h]);
            fprintf(f, "</route>\n");
        }
    fprintf(f, "</zone>\n</platform>\n");
}

static sg_mailbox_t pair_box(int src, int dst)
{
    char name[32];
    snprintf(name, sizeof name, "%d>%d", src, dst);
    return sg_mailbox_by_name(name);
}

/* One round of a collective: every transfer posted at once, then the sums of the received
 * floats on the device. */
static void play_round(int r, const struct dt_group *g, const struct dt_schedule *s, int k,
                       const struct dt_device_spec *dev)
{
    static char payload;
    int lo = s->round_start[k], hi = s->round_start[k + 1];
    sg_comm_t *comms = malloc((size_t)(hi - lo + 1) * sizeof *comms);
    void **got = malloc((size_t)(hi - lo + 1) * sizeof *got);
    if (!comms || !got)
        die("out of memory");
    long sum = 0;
    for (int i = lo; i < hi; i++) {
        const struct dt_xfer *x = &s->xfers[i];
        int peer = g->ranks[x->peer];
        comms[i - lo] = x->send ? sg_mailbox_put_async(pair_box(r, peer), &payload, 4 * x->count)
                                : sg_mailbox_get_async(pair_box(peer, r), &got[i - lo]);
        sum += !x->send && x->sum ? x->count : 0;
    }
    sg_comm_wait_all(comms, (size_t)(hi - lo));
    free(comms);
    free(got);
    if (sum > 0)
        sg_actor_execute(dt_cost_reduce(&cpr[r], dev, sum, 4.0)); /* fp32, as its puts */
}

static void rank_main(int argc, char **argv)
{
    (void)argc;
    int r = atoi(argv[1]);
    const struct dt_rank_plan *rp = &plan->ranks[r];
    struct dt_schedule s;
    dt_schedule_init(&s);
    for (int src = 0; src < plan->n_ranks; src++) /* data moves before its receive is posted */
        if (used(src, r)) {
            char name[32];
            snprintf(name, sizeof name, "%d>%d", src, r);
            sg_mailbox_set_receiver(name);
        }
    sg_actor_sleep_for(cp.iter_overhead_s);
    for (int i = 0; i < rp->n_ops; i++) {
        const struct dt_op *op = &rp->ops[i];
        const struct dt_device_spec *dev = device_of(r);
        if (op->kind != DT_OP_COLL) {
            double d = dt_cost_op(&cpr[r], dev, plan->model, op);
            if (d > 0)
                sg_actor_execute(d);
            continue;
        }
        const struct dt_group *g = &plan->groups[op->group];
        int me = 0;
        while (g->ranks[me] != r)
            me++;
        dt_coll_schedule(op->coll, op->alg, g->n, me, op->root, op->region.count, &s, NULL);
        for (int k = 0; k < s.n_rounds; k++)
            play_round(r, g, &s, k, dev);
    }
    dt_schedule_free(&s);
    end_s[r] = simgrid_get_clock();
}

static void load_plan(char **argv)
{
    struct dt_error err;
    struct dt_topology *topo;
    struct dt_model *model;
    struct dt_plan_options po;
    dt_plan_options_init(&po);
    po.strategy = dt_strategy_parse(argv[3]);
    po.batch = atoi(argv[4]);
    (void)argv[5]; /* the dataset size matters to the epoch, not to one iteration */
    if ((int)po.strategy < 0 || po.batch < 1)
        die("usage: peer_simgrid TOPOLOGY MODEL STRATEGY BATCH DATASET_SIZE");
    if (dt_topology_load(argv[1], &topo, &err) || dt_model_load(argv[2], &model, &err) ||
        dt_plan_build(model, topo, &po, &plan, &err)) {
        dt_error_print("peer_simgrid", &err);
        exit(2);
    }
    dt_cost_defaults(&cp, topo->groups[0].device.kind);
}

int main(int argc, char **argv)
{
    if (argc != 6)
        die("usage: peer_simgrid TOPOLOGY MODEL STRATEGY BATCH DATASET_SIZE");
    clock_t c0 = clock();
    load_plan(argv);
    int n = plan->n_ranks;
    pairs = calloc((size_t)n * n / 8 + 1, 1);
    end_s = calloc((size_t)n, sizeof *end_s);
    if (!pairs || !end_s)
        die("out of memory");
    mark_pairs();
    if (!(cpr = dt_cost_rank_params(&cp, NULL, plan->topo, n))) /* as sim/player.c */
        die("out of memory");
    struct dt_sim *sim;
    struct dt_simnet net;
    struct dt_error err;
    if (dt_sim_create(&sim, &err) || dt_simnet_build(&net, sim, plan->topo, n, &cp, &err)) {
        dt_error_print("peer_simgrid", &err);
        return 2;
    }
    char path[] = "/tmp/peer_simgrid_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f)
        die("cannot write the platform file");
    write_platform(f, sim, &net);
    fclose(f);
    dt_simnet_free(&net);
    dt_sim_destroy(sim);
    /* plain alpha-beta, max-min sharing: no correction factors, no TCP window, no
     * cross-traffic; precise enough for 0.1 % */
    char *sg_argv[] = {argv[0], "--cfg=network/model:CM02", "--cfg=network/TCP-gamma:0",
                       "--cfg=network/crosstraffic:0", "--cfg=network/latency-factor:1",
                       "--cfg=network/bandwidth-factor:1", "--cfg=network/weight-S:0",
                       "--cfg=maxmin/precision:1e-12", "--cfg=surf/precision:1e-12",
                       "--log=root.thres:warning", NULL};
    int sg_argc = (int)(sizeof sg_argv / sizeof *sg_argv) - 1;
    simgrid_init(&sg_argc, sg_argv);
    simgrid_load_platform(path);
    remove(path);
    for (int r = 0; r < n; r++) {
        char host[32], rank[32];
        snprintf(host, sizeof host, "r%d", r);
        snprintf(rank, sizeof rank, "%d", r);
        char *aargv[] = {host, rank, NULL};
        sg_actor_create(host, sg_host_by_name(host), rank_main, 2, aargv);
    }
    simgrid_run();
    double iter = 0;
    for (int r = 0; r < n; r++)
        iter = fmax(iter, end_s[r]);
    printf("simgrid iter_s %.9g cpu_s %.3f\n", iter, (double)(clock() - c0) / CLOCKS_PER_SEC);
    return 0;
}

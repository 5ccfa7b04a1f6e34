/* bench_flows: how fast the engine plays flows (a benchmark, not a test).
 *
 * Scenario "ring": a ring allreduce over nodes x ppn ranks, every chunk of every step a flow.
 * Default 128 nodes x 8 devices, 100 MB, 10 iterations: 1024 x 2 x 1023 x 10 = 20,951,040
 * flows. Assumed topology (an H100 DGX-like pod):
 *   - 8 devices per node on an NVSwitch-like crossbar: each device has its own port of
 *     450 GB/s per direction (one up link, one down link), 1 us each; an intra-node flow
 *     crosses src-up -> dst-down (2 hops). With --intra bus the node has instead one shared
 *     450 GB/s bus link, 1 us, crossed by every intra-node flow (1 hop).
 *   - one 400 Gbit/s NIC per node (50 GB/s per direction: an up and a down link, 1 us each);
 *   - one non-blocking switch: an unshared link (infinite capacity), 1 us;
 *   - an inter-node flow crosses src NIC-up -> switch -> dst NIC-down (3 hops, 3 us).
 * Ring semantics (as in dt/collective.h): at step k rank r sends chunk n/p to r+1 and receives
 * one from r-1, and starts step k+1 when both are done; with --compute it also sums the
 * received chunk on its device during the reduce-scatter half (3 x chunk bytes at 3.35 TB/s)
 * before forwarding. The whole run is checked against the alpha-beta estimate of a
 * pipelined ring: 2(p-1) steps of (3 us + chunk / 50 GB/s), the slowest hop.
 *
 * Scenario "grid": the 9 shapes of seed 002 (nodes x ppn up to 8 ranks, see
 * shared/reference/seed002-cascadelake-mpi.csv), one epoch of data-parallel MNIST training of
 * the 690,590-parameter CNN with linear Reduce to rank 0 and Bcast (2,762,360 bytes of fp32
 * gradients), batch 128 per rank, 60,000 samples. Assumed (not calibrated) Cascade Lake
 * cluster: 0.30 s of compute per batch of 128, the root sums each received gradient at
 * 10 GB/s; ranks of a node share one 20 GB/s memory bus link (0.5 us); one 100 Gbit/s EDR
 * NIC per node (12.5 GB/s each way, 1 us); a non-blocking switch (1 us).
 *
 * Prints wall time, events/s, flows/s and peak RSS for each run. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine.h"

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
}

static void die(const struct dt_error *err)
{
    dt_error_print("bench_flows", err);
    exit(1);
}

#define CHECK(call)              \
    do {                         \
        if ((call) != DT_OK)     \
            die(&err);           \
    } while (0)

static void report(const char *name, struct dt_sim *sim, double t0, double sim_s)
{
    double dt = wall() - t0;
    struct dt_sim_counters k;
    dt_sim_get_counters(sim, &k);
    printf("%-28s sim %.6f s | wall %.4f s | %llu flows %.2f M flows/s | %llu events "
           "%.2f M events/s | solves %llu (mean %.1f flows) | peak RSS %.1f MiB\n",
           name, sim_s, dt, (unsigned long long)k.flows_done, 1e-6 * (double)k.flows_done / dt,
           (unsigned long long)k.events, 1e-6 * (double)k.events / dt,
           (unsigned long long)k.solves,
           k.solves ? (double)k.solved_flows / (double)k.solves : 0.0, peak_rss_mib());
}

/* ---- ring allreduce ---- */

struct ring {
    int nodes, ppn, p;
    long steps;             /* 2 (p-1) x iterations */
    double chunk;
    bool compute, bus;
    int *up, *down, *nic_up, *nic_down, sw, *busl;
    long *next, *sent, *recvd;
    double sum_s;           /* reduction of one chunk */
};

#define TAG_COMPUTE (1ULL << 63)

static void ring_try(struct dt_sim *sim, struct ring *R, int r)
{
    long k = R->next[r];
    if (k >= R->steps || R->sent[r] < k || R->recvd[r] < k)
        return;
    int to = (r + 1) % R->p;
    int route[3], hops;
    int na = r / R->ppn, nb = to / R->ppn;
    if (na == nb && R->bus) {
        route[0] = R->busl[na];
        hops = 1;
    } else if (na == nb) {
        route[0] = R->up[r];
        route[1] = R->down[to];
        hops = 2;
    } else {
        route[0] = R->nic_up[na];
        route[1] = R->sw;
        route[2] = R->nic_down[nb];
        hops = 3;
    }
    struct dt_error err;
    CHECK(dt_sim_flow(sim, R->chunk, route, hops, r, to, (uint64_t)r, &err));
    R->next[r]++;
}

static void run_ring(int nodes, int ppn, int iters, double bytes, bool compute, bool bus)
{
    struct dt_error err;
    struct dt_sim *sim;
    double t0 = wall();
    CHECK(dt_sim_create(&sim, &err));
    struct ring R = {0};
    R.nodes = nodes;
    R.ppn = ppn;
    R.p = nodes * ppn;
    R.steps = 2L * (R.p - 1) * iters;
    R.chunk = bytes / R.p;
    R.compute = compute;
    R.bus = bus;
    R.sum_s = 3.0 * R.chunk / 3.35e12;
    const double intra = 450e9, nic = 400e9 / 8, lat = 1e-6;
    R.up = calloc((size_t)R.p, sizeof *R.up);
    R.down = calloc((size_t)R.p, sizeof *R.down);
    R.busl = calloc((size_t)nodes, sizeof *R.busl);
    R.nic_up = calloc((size_t)nodes, sizeof *R.nic_up);
    R.nic_down = calloc((size_t)nodes, sizeof *R.nic_down);
    R.next = calloc((size_t)R.p, sizeof *R.next);
    R.sent = calloc((size_t)R.p, sizeof *R.sent);
    R.recvd = calloc((size_t)R.p, sizeof *R.recvd);
    if (!R.up || !R.down || !R.busl || !R.nic_up || !R.nic_down || !R.next || !R.sent ||
        !R.recvd) {
        fprintf(stderr, "bench_flows: out of memory\n");
        exit(1);
    }
    for (int n = 0; n < nodes; n++) {
        if (bus)
            CHECK(dt_sim_add_link(sim, intra, lat, &R.busl[n], &err));
        CHECK(dt_sim_add_link(sim, nic, lat, &R.nic_up[n], &err));
        CHECK(dt_sim_add_link(sim, nic, lat, &R.nic_down[n], &err));
        for (int d = 0; d < ppn; d++) {
            int r = n * ppn + d, dev;
            CHECK(dt_sim_add_device(sim, &dev, &err));
            if (!bus) {
                CHECK(dt_sim_add_link(sim, intra, lat, &R.up[r], &err));
                CHECK(dt_sim_add_link(sim, intra, lat, &R.down[r], &err));
            }
        }
    }
    CHECK(dt_sim_add_link(sim, INFINITY, lat, &R.sw, &err));
    for (int r = 0; r < R.p; r++)
        ring_try(sim, &R, r);
    struct dt_sim_completion c;
    for (;;) {
        CHECK(dt_sim_next(sim, &c, &err));
        if (c.kind == DT_SIM_END)
            break;
        if (c.kind == DT_SIM_COMPUTE) {
            int r = (int)(c.tag & ~TAG_COMPUTE);
            R.recvd[r]++;
            ring_try(sim, &R, r);
            continue;
        }
        int r = c.src, to = c.dst;
        R.sent[r]++;
        long step = R.sent[r] - 1; /* flows from r complete in order */
        bool reduce = step % (2L * (R.p - 1)) < R.p - 1;
        if (R.compute && reduce)
            CHECK(dt_sim_compute(sim, to, R.sum_s, TAG_COMPUTE | (uint64_t)to, &err));
        else
            R.recvd[to]++;
        ring_try(sim, &R, r);
        ring_try(sim, &R, to);
    }
    double sim_s = dt_sim_now(sim);
    char name[96];
    snprintf(name, sizeof name, "ring %dx%d %s%s", nodes, ppn, bus ? "bus" : "xbar",
             compute ? "+sum" : "");
    report(name, sim, t0, sim_s);
    /* sanity: every rank ran every step; the model against the alpha-beta estimate */
    for (int r = 0; r < R.p; r++)
        if (R.sent[r] != R.steps || R.recvd[r] != R.steps) {
            fprintf(stderr, "bench_flows: rank %d finished %ld/%ld steps\n", r, R.sent[r],
                    R.steps);
            exit(1);
        }
    double est = (double)R.steps * (3 * lat + R.chunk / nic);
    struct dt_sim_link_stats st;
    dt_sim_link_stats(sim, R.nic_up[0], &st);
    printf("%-28s alpha-beta estimate %.6f s (model/estimate %.4f); NIC-up 0 carried %.6g B "
           "(expected %.6g), busy %.1f%%\n", "", est, sim_s / est, st.bytes,
           nodes > 1 ? (double)R.steps * R.chunk : 0.0, 100 * st.busy_s / sim_s);
    dt_sim_destroy(sim);
    free(R.up);
    free(R.down);
    free(R.busl);
    free(R.nic_up);
    free(R.nic_down);
    free(R.next);
    free(R.sent);
    free(R.recvd);
}

/* ---- seed 002 grid: reduce + bcast, linear ---- */

enum phase { PH_COMPUTE, PH_REDUCE, PH_SUM, PH_BCAST };

static void run_grid(void)
{
    /* the (nodes, ppn) shapes of seed 002's table 2 */
    static const int shapes[][2] = {{1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 1},
                                    {2, 2}, {2, 4}, {4, 1}, {4, 2}};
    const double grad_bytes = 690590.0 * 4, compute_s = 0.30, sum_Bps = 10e9;
    const double bus_Bps = 20e9, bus_lat = 0.5e-6, nic_Bps = 100e9 / 8, lat = 1e-6;
    double t_all = wall();
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int nodes = shapes[s][0], ppn = shapes[s][1], p = nodes * ppn;
        struct dt_error err;
        struct dt_sim *sim;
        double t0 = wall();
        CHECK(dt_sim_create(&sim, &err));
        int busl[4], up[4], down[4], sw;
        for (int n = 0; n < nodes; n++) {
            CHECK(dt_sim_add_link(sim, bus_Bps, bus_lat, &busl[n], &err));
            CHECK(dt_sim_add_link(sim, nic_Bps, lat, &up[n], &err));
            CHECK(dt_sim_add_link(sim, nic_Bps, lat, &down[n], &err));
        }
        CHECK(dt_sim_add_link(sim, INFINITY, lat, &sw, &err));
        for (int r = 0; r < p; r++)
            CHECK(dt_sim_add_device(sim, NULL, &err));
        long batches = (60000 + 128L * p - 1) / (128L * p);
        /* per iteration: all compute; ranks != 0 send to 0; 0 sums p-1 gradients; 0 sends to
         * all; the next iteration starts on a rank when it has the new parameters */
        int pending = 0;
        long iter = 0;
        for (int r = 0; r < p; r++)
            CHECK(dt_sim_compute(sim, r, compute_s, (uint64_t)r, &err));
        pending = p;
        enum phase ph = PH_COMPUTE;
        struct dt_sim_completion c;
        for (;;) {
            CHECK(dt_sim_next(sim, &c, &err));
            if (c.kind == DT_SIM_END)
                break;
            if (--pending > 0)
                continue;
            /* the phase is over on every rank: start the next one (a barrier is what
             * Reduce-then-Bcast with one root amounts to here) */
            if (ph == PH_COMPUTE && p > 1) {
                for (int r = 1; r < p; r++) {
                    int route[3], hops, na = r / ppn;
                    if (na == 0) {
                        route[0] = busl[0];
                        hops = 1;
                    } else {
                        route[0] = up[na];
                        route[1] = sw;
                        route[2] = down[0];
                        hops = 3;
                    }
                    CHECK(dt_sim_flow(sim, grad_bytes, route, hops, r, 0, 0, &err));
                }
                pending = p - 1;
                ph = PH_REDUCE;
            } else if (ph == PH_REDUCE) {
                CHECK(dt_sim_compute(sim, 0, (p - 1) * 3 * grad_bytes / sum_Bps, 0, &err));
                pending = 1;
                ph = PH_SUM;
            } else if (ph == PH_SUM) {
                for (int r = 1; r < p; r++) {
                    int route[3], hops, nb = r / ppn;
                    if (nb == 0) {
                        route[0] = busl[0];
                        hops = 1;
                    } else {
                        route[0] = up[0];
                        route[1] = sw;
                        route[2] = down[nb];
                        hops = 3;
                    }
                    CHECK(dt_sim_flow(sim, grad_bytes, route, hops, 0, r, 0, &err));
                }
                pending = p - 1;
                ph = PH_BCAST;
            } else if (++iter < batches) {
                for (int r = 0; r < p; r++)
                    CHECK(dt_sim_compute(sim, r, compute_s, (uint64_t)r, &err));
                pending = p;
                ph = PH_COMPUTE;
            }
        }
        char name[64];
        snprintf(name, sizeof name, "grid %dx%d (%ld batches)", nodes, ppn, batches);
        report(name, sim, t0, dt_sim_now(sim));
        dt_sim_destroy(sim);
    }
    printf("grid total wall %.4f s\n", wall() - t_all);
}

static long parse_long(const char *s, const char *what, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "bench_flows: %s: '%s' is not an integer in [%ld, %ld]\n", what, s, lo,
                hi);
        exit(2);
    }
    return v;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: bench_flows [--scenario ring|grid|all] [--nodes N] [--ppn P] [--iters I]\n"
            "                   [--mbytes MB] [--intra xbar|bus] [--compute]\n"
            "defaults: all, 128 nodes x 8, 10 iterations of a 100 MB ring allreduce, xbar\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"scenario", required_argument, NULL, 's'}, {"nodes", required_argument, NULL, 'n'},
        {"ppn", required_argument, NULL, 'p'},      {"iters", required_argument, NULL, 'i'},
        {"mbytes", required_argument, NULL, 'm'},   {"intra", required_argument, NULL, 'x'},
        {"compute", no_argument, NULL, 'c'},        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *scenario = "all";
    int nodes = 128, ppn = 8, iters = 10;
    double mbytes = 100;
    bool compute = false, bus = false;
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's': scenario = optarg; break;
        case 'n': nodes = (int)parse_long(optarg, "--nodes", 1, 1 << 20); break;
        case 'p': ppn = (int)parse_long(optarg, "--ppn", 1, 1 << 10); break;
        case 'i': iters = (int)parse_long(optarg, "--iters", 1, 1 << 20); break;
        case 'm': mbytes = (double)parse_long(optarg, "--mbytes", 1, 1L << 30); break;
        case 'x':
            if (strcmp(optarg, "bus") && strcmp(optarg, "xbar")) {
                fprintf(stderr, "bench_flows: --intra: xbar or bus\n");
                return 2;
            }
            bus = !strcmp(optarg, "bus");
            break;
        case 'c': compute = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || (strcmp(scenario, "ring") && strcmp(scenario, "grid") &&
                          strcmp(scenario, "all"))) {
        usage(stderr);
        return 2;
    }
    if ((long)nodes * ppn < 2) {
        fprintf(stderr, "bench_flows: a ring needs at least 2 ranks\n");
        return 2;
    }
    if (strcmp(scenario, "ring"))
        run_grid();
    if (strcmp(scenario, "grid"))
        run_ring(nodes, ppn, iters, mbytes * 1e6, compute, bus);
    return 0;
}

/* dtsim's simulation engine: discrete events, serial devices and a flow-level network.
 *
 * The caller builds the resources (links, devices), starts work (flows, computes, timers) and
 * then pulls completions one at a time with dt_sim_next; on each completion it may start more
 * work at the current time. That loop is all a plan player needs:
 *
 *     while ((rc = dt_sim_next(sim, &c, &err)) == DT_OK && c.kind != DT_SIM_END)
 *         react to c (c.tag says which op), maybe dt_sim_flow / dt_sim_compute;
 *
 * Devices. A compute op occupies its device for its duration; the ops of one device run one
 * after another in the order they were submitted (a device free at t0 runs an op submitted at
 * t >= t0 from t, otherwise from when the device frees up).
 *
 * Network. A link has a capacity in bytes/s for ONE direction and a latency; a full-duplex
 * wire is two links. A link of capacity INFINITY is not shared (a non-blocking switch's
 * backplane, say): it only adds latency and counts bytes. A flow of B bytes over a route
 * (a list of links) first waits the sum of its links' latencies (every hop adds its latency),
 * then moves its bytes at the max-min fair rate among all flows in their transfer phase
 * (see maxmin.h); rates are re-solved whenever flows start or end, once per timestamp for all
 * the changes at that timestamp, and only over the connected component of flows and shared
 * links touched by a change. A flow's remaining bytes are brought up to date only when its
 * rate changes.
 *
 * Determinism: equal inputs give equal outputs, bit for bit; completions at the same time come
 * in the order their events were scheduled. DTSIM_LONE_PATH=off in the environment when a
 * simulator is created sends every flow through the solve (engine.c's lone path off): the
 * same outputs, for checking.
 *
 * Units: seconds, bytes, bytes/s. Memory: linear in links + devices + work in progress. */
#ifndef DT_SIM_ENGINE_H
#define DT_SIM_ENGINE_H

#include <stdint.h>

#include "dt/error.h"

/* From this many links (their records alone 1 MiB, a core's L2 on the machines measured) a
 * flow's lines are cold when its event comes up, and the engine asks for the next flow's lines
 * ahead (prefetch): it saves more than its instructions cost (about 7 % more on the 128 x 8
 * ring, whose 4,099 links stay cached). Only loads move: nothing computed changes. */
#define DT_SIM_PREFETCH_LINKS 16384
#define DT_SIM_MAX_HOPS 25 /* longest route a flow may take: a torus of DT_TOPO_MAX_TORUS_HOPS
                           * router hops plus NIC-up, first router and NIC-down */

struct dt_sim; /* opaque; dt_sim_create/dt_sim_destroy */

enum dt_sim_kind {
    DT_SIM_END = 0,   /* nothing left to do: the simulation is over */
    DT_SIM_FLOW,      /* a flow delivered its last byte */
    DT_SIM_COMPUTE,   /* a compute op ended */
    DT_SIM_TIMER      /* a timer fired */
};

/* What dt_sim_next hands back. */
struct dt_sim_completion {
    enum dt_sim_kind kind;
    uint64_t tag;      /* the caller's tag given when the work was started */
    double t_start;    /* flow: when started (before latency); compute: when the device began */
    double t_end;      /* = the current time */
    double bytes;      /* flow */
    int src, dst;      /* flow: the endpoints given at start */
    int device;        /* compute */
};

struct dt_sim_link_stats {
    double bytes;      /* bytes carried so far (transfer phase, integrated over rates) */
    double busy_s;     /* time with at least one flow in its transfer phase on the link */
    int max_flows;     /* most flows at once in their transfer phase */
};

/* Engine-wide counters (for benchmarks and sanity checks). */
struct dt_sim_counters {
    uint64_t events;          /* events popped */
    uint64_t flows_started;
    uint64_t flows_done;
    uint64_t computes;
    uint64_t timers;
    uint64_t solves;          /* connected components solved */
    uint64_t solved_flows;    /* sum of the sizes of the solved components */
    uint64_t rate_changes;    /* flows whose rate changed in a solve */
    uint64_t max_active_flows;
    uint64_t lone_ends;       /* ends written as a flow's transfer began (the lone path) */
    uint64_t lone_taken_back; /* of them, taken back to the solve (something came between) */
};

int dt_sim_create(struct dt_sim **out, struct dt_error *err);
void dt_sim_destroy(struct dt_sim *sim);
/* Back to the state the links and devices were added in: no flow, op or event, the clock
 * and every count at 0, as a new simulator with the same links; the memory kept. */
int dt_sim_restart(struct dt_sim *sim, struct dt_error *err);

/* Adds a one-direction link: bw_Bps > 0 (INFINITY: not shared), lat_s >= 0. *id gets its id
 * (0, 1, 2... in order of creation). */
int dt_sim_add_link(struct dt_sim *sim, double bw_Bps, double lat_s, int *id,
                    struct dt_error *err);
/* Adds a device (0, 1, 2...). */
int dt_sim_add_device(struct dt_sim *sim, int *id, struct dt_error *err);

/* Runs a compute op of duration_s >= 0 on device dev after the ops already submitted there. */
int dt_sim_compute(struct dt_sim *sim, int dev, double duration_s, uint64_t tag,
                   struct dt_error *err);
/* Starts a flow of bytes >= 0 over route[0..n_hops-1] (0 <= n_hops <= DT_SIM_MAX_HOPS; no hop:
 * delivered at once). src/dst are endpoint numbers >= 0 for the byte counts, or -1. */
int dt_sim_flow(struct dt_sim *sim, double bytes, const int *route, int n_hops, int src,
                int dst, uint64_t tag, struct dt_error *err);
/* As dt_sim_flow, sent at time t0 >= now rather than now (its latency runs from t0). */
int dt_sim_flow_at(struct dt_sim *sim, double t0, double bytes, const int *route, int n_hops,
                   int src, int dst, uint64_t tag, struct dt_error *err);
/* A route checked once for many flows (a ring sends to one peer round after round): its
 * links, their summed latency and how many have a finite capacity. */
#define DT_SIM_ROUTE_KEPT 8 /* the longest route a dt_sim_route holds (fat-trees: 7 hops) */
struct dt_sim_route {
    double lat_s;
    int n_hops, n_shared;
    int link[DT_SIM_ROUTE_KEPT];
};
/* Checks route[0..n_hops-1] (n_hops <= DT_SIM_ROUTE_KEPT) into *out, as dt_sim_flow would. */
int dt_sim_route_check(const struct dt_sim *sim, const int *route, int n_hops,
                       struct dt_sim_route *out, struct dt_error *err);
/* As dt_sim_flow_at, over a route already checked by dt_sim_route_check. */
int dt_sim_flow_route(struct dt_sim *sim, double t0, double bytes, const struct dt_sim_route *r,
                      int src, int dst, uint64_t tag, struct dt_error *err);
/* As dt_sim_compute, with no completion: the caller knows what follows the op and does it
 * itself. *t_start and *t_end get the op's start and the time its completion would have had.
 * Counted as a compute and an event. */
int dt_sim_compute_silent(struct dt_sim *sim, int dev, double duration_s, double *t_start,
                          double *t_end, struct dt_error *err);
/* A timer that fires delay_s >= 0 from now (DT_EINPUT for a negative delay: no past events). */
int dt_sim_timer(struct dt_sim *sim, double delay_s, uint64_t tag, struct dt_error *err);

/* Advances to the next completion and fills *c; c->kind == DT_SIM_END when nothing is left. */
int dt_sim_next(struct dt_sim *sim, struct dt_sim_completion *c, struct dt_error *err);

/* The current time, s. */
double dt_sim_now(const struct dt_sim *sim);
int dt_sim_n_links(const struct dt_sim *sim);
/* A link's capacity (bytes/s, INFINITY: not shared) and latency (s). */
void dt_sim_link_params(const struct dt_sim *sim, int link, double *bw_Bps, double *lat_s);
int dt_sim_n_devices(const struct dt_sim *sim);
/* Flows started and not yet delivered (latency or transfer phase). */
int dt_sim_active_flows(const struct dt_sim *sim);

/* Statistics up to now (flows in flight included pro rata). */
void dt_sim_link_stats(const struct dt_sim *sim, int link, struct dt_sim_link_stats *out);
double dt_sim_device_busy(const struct dt_sim *sim, int dev);   /* s of compute run so far */
double dt_sim_endpoint_sent(const struct dt_sim *sim, int ep);  /* bytes of flows started */
double dt_sim_endpoint_received(const struct dt_sim *sim, int ep); /* bytes delivered */
int dt_sim_n_endpoints(const struct dt_sim *sim);               /* 1 + largest endpoint seen */
void dt_sim_get_counters(const struct dt_sim *sim, struct dt_sim_counters *out);

#endif

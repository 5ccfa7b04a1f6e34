/* The engine: an event queue, devices, and the flow network with incremental max-min.
 *
 * A flow's life: dt_sim_flow schedules EV_FLOW_START after the route's latency; at that event
 * the flow enters its shared links' lists (an unshared link only counts it) and marks one
 * shared link dirty. An end event takes it out of its links and marks the shared ones that
 * still carry flows dirty. When the next event lies after the current time (every change at
 * this timestamp is in), each dirty link's connected component (shared links and the flows in
 * transfer on them) is gathered breadth-first and solved once: one flow alone gets its slowest
 * link, flows on a single link equal shares, and anything else goes to the progressive-filling
 * solver. A flow whose rate changed has its remaining bytes brought up to date and its end
 * event moved; the others are not touched.
 * Work per event is thus proportional to the component it touches, never to all flows.
 * A flow whose transfer begins alone on its shared links, with nothing yet waiting for the
 * solve, gets the rate and end event that solve would give at once (the lone path, below);
 * they are taken back to the solve if anything else is written or joins its links first.
 * A flow's start or end event written right after one of the same kind and time, with nothing
 * written in between, joins that one's batch instead of the queue (batch.h): the ends of a
 * ring step's flows share a few times, and each batch costs one queued event. */
#include "engine.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "eventq.h"
#include "grow.h"
#include "maxmin.h"

enum ev_kind { EV_FLOW_START, EV_FLOW_END, EV_COMPUTE, EV_TIMER };

#define NONE UINT32_MAX
#define BATCHED (UINT32_MAX - 1) /* a flow's end event: in the batch of an earlier one */

/* A flow in a link's list: which flow, and which hop of its route this link is. */
struct lref {
    uint32_t flow;
    uint32_t hop;
};

/* A link's record: what a flow event touches, in one cache line. Its first flow is kept in
 * the record itself (most links carry one flow at a time), more go to a separate list. */
struct link {
    double bw_Bps;
    double bytes;         /* carried by flows up to their last update */
    double busy_s, busy_since;
    union {
        struct lref one;  /* capf <= 1: the list is this one entry */
        struct lref *many; /* capf > 1 */
    } fl;                 /* flows in their transfer phase on this link; an unshared link keeps
                           * no list, only their count (nothing reads its flows but the
                           * statistics, which find them among all flows) */
    int nf, capf, max_flows;
    uint32_t stamp;       /* component search: visited in search number stamp */
    int local;            /* index in the current component's problem */
    bool shared;          /* finite capacity: takes part in max-min */
    bool dirty;           /* its set of flows changed since the last solve */
};
_Static_assert(sizeof(struct link) <= 64, "a link's record fits one cache line");

/* What a flow's start reads of a link, apart from the records the events touch. */
struct link_route {
    double lat_s;
    bool shared;
};

enum flow_state { FL_FREE, FL_LATENCY, FL_ACTIVE };

/* A flow's record is two cache lines: a route of up to INLINE_HOPS hops lives in it (routes
 * are 2 to 7 hops but on tori), a longer one in a side table (xhops, DT_SIM_MAX_HOPS per
 * flow) made when a longer route first comes: either way a flow's hops are one array. */
#define INLINE_HOPS 7

struct hop {
    int32_t link;
    int32_t pos;          /* index of this flow in the link's list (a shared link's) */
};

struct flow {
    double bytes, remaining, rate, t_upd, t_start;
    uint64_t tag;
    int src, dst;
    uint32_t ev;          /* pending end event (FL_ACTIVE with a rate): its id, or BATCHED
                           * (batch.h), else NONE; when free: the next free record */
    uint32_t stamp;
    uint8_t state, n_hops, n_shared;
    uint8_t early;        /* its end written at its start, in this phase's list (lone path) */
    struct hop hop[INLINE_HOPS];
};
_Static_assert(sizeof(struct flow) <= 128, "a flow's record fits two cache lines");

struct op {               /* a compute op or a timer in flight */
    uint64_t tag;
    double t_start;
    int dev;
    uint32_t next_free;
};

struct device {
    double free_at;
    double busy_s;
};

struct dt_sim {
    struct dt_eventq *q;
    uint64_t writes;      /* events written to q (scheduled or moved), for dt_batch_joins */
    struct dt_batch batch; /* flow events that follow the last written one (batch.h) */
    double now;           /* the queue's clock, the time of the last event popped (only
                           * dt_sim_next pops): read for every flow and compute */
    struct dt_maxmin *mm;

    struct link *links;   /* 64-byte aligned: one line each */
    struct link_route *lroute; /* per link, what a flow's start reads */
    int n_links, cap_links, cap_lroute;
    struct device *devs;
    int n_devs, cap_devs;

    struct flow *flows;   /* 64-byte aligned: two lines each */
    struct hop *xhops;    /* the hops of flow i's long route at i * DT_SIM_MAX_HOPS; NULL until a
                           * route that long */
    uint32_t n_flows, cap_flows, cap_xhops, flow_free;
    int active_flows, transferring;
    struct op *ops;
    uint32_t n_ops, cap_ops, op_free;

    double *sent, *recvd;
    int n_eps, cap_eps;

    int *dirty;           /* links whose flow set changed at the current time */
    int n_dirty, cap_dirty;
    uint32_t stamp;

    /* the lone path: flows alone on their links whose end was written when their transfer
     * began, in this phase (the events between two solves), in that order */
    bool lone_off;        /* DTSIM_LONE_PATH=off: every flow through the solve */
    bool prefetch;        /* DT_SIM_PREFETCH_LINKS links or more: prefetch_next pays */
    bool early_spoiled;   /* a write or a join since: they go back to the solve */
    uint32_t *early;
    int n_early, cap_early;
    uint64_t early_writes; /* sim->writes just after the last early end */

    /* scratch for one component's problem */
    uint32_t *cflows;
    int cap_cflows;
    int *clinks;
    int cap_clinks;
    double *ccap, *crate;
    int *cstart, *cidx;
    int cap_ccap, cap_crate, cap_cstart, cap_cidx;

    struct dt_sim_counters cnt;
};

static int oom(struct dt_error *err, const char *what)
{
    return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory (%s)", what);
}

/* A link's record as when added: no flow, nothing carried; many: a list of capf > 1 entries
 * kept (empty) from an earlier run, or NULL with capf 1 (the record's own entry). */
static void link_init(struct link *l, double bw_Bps, int capf, struct lref *many)
{
    memset(l, 0, sizeof *l);
    l->bw_Bps = bw_Bps;
    l->shared = isfinite(bw_Bps);
    l->capf = capf;
    if (capf > 1)
        l->fl.many = many;
}

/* What a run changes, as in a new simulator: no flow, op or event but those the (new, empty)
 * queue will hold, the clock and every count at 0. The links and devices are the caller's. */
static void run_state_clear(struct dt_sim *sim)
{
    dt_batch_clear(&sim->batch);
    sim->now = 0;
    sim->n_flows = sim->n_ops = 0; /* records taken again from the first, as when new */
    sim->flow_free = sim->op_free = NONE;
    sim->active_flows = sim->transferring = 0;
    sim->n_eps = sim->n_dirty = 0;
    sim->stamp = 0;
    sim->n_early = 0;
    sim->early_spoiled = false;
    sim->early_writes = 0;
    sim->cnt = (struct dt_sim_counters){0};
}

int dt_sim_create(struct dt_sim **out, struct dt_error *err)
{
    struct dt_sim *sim = calloc(1, sizeof *sim);
    if (!sim)
        return oom(err, "simulator");
    dt_batch_init(&sim->batch);
    run_state_clear(sim);
    const char *lone = getenv("DTSIM_LONE_PATH");
    if (lone && *lone && strcmp(lone, "on") && strcmp(lone, "off")) {
        dt_sim_destroy(sim);
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "DTSIM_LONE_PATH: '%s' is neither on nor off", lone);
    }
    sim->lone_off = lone && strcmp(lone, "off") == 0;
    int rc = dt_eventq_create(&sim->q, err);
    if (!rc)
        rc = dt_maxmin_create(&sim->mm, err);
    if (rc) {
        dt_sim_destroy(sim);
        return rc;
    }
    *out = sim;
    return DT_OK;
}

void dt_sim_destroy(struct dt_sim *sim)
{
    if (!sim)
        return;
    dt_eventq_destroy(sim->q);
    dt_maxmin_destroy(sim->mm);
    dt_batch_free(&sim->batch);
    for (int l = 0; l < sim->n_links; l++)
        if (sim->links[l].capf > 1)
            free(sim->links[l].fl.many);
    free(sim->links);
    free(sim->lroute);
    free(sim->xhops);
    free(sim->devs);
    free(sim->flows);
    free(sim->ops);
    free(sim->sent);
    free(sim->recvd);
    free(sim->dirty);
    free(sim->early);
    free(sim->cflows);
    free(sim->clinks);
    free(sim->ccap);
    free(sim->crate);
    free(sim->cstart);
    free(sim->cidx);
    free(sim);
}

int dt_sim_restart(struct dt_sim *sim, struct dt_error *err)
{
    struct dt_eventq *q;
    int rc = dt_eventq_create(&q, err);
    if (rc)
        return rc;
    dt_eventq_destroy(sim->q);
    sim->q = q;
    run_state_clear(sim);
    for (int l = 0; l < sim->n_links; l++) {
        struct link *k = &sim->links[l];
        link_init(k, k->bw_Bps, k->capf, k->capf > 1 ? k->fl.many : NULL);
    }
    for (int d = 0; d < sim->n_devs; d++)
        sim->devs[d] = (struct device){0, 0};
    return DT_OK;
}

int dt_sim_add_link(struct dt_sim *sim, double bw_Bps, double lat_s, int *id,
                    struct dt_error *err)
{
    if (!(bw_Bps > 0))
        return dt_fail(err, DT_EINPUT, "", 0, 0, "link bandwidth %g B/s: must be > 0", bw_Bps);
    if (!(lat_s >= 0) || !isfinite(lat_s))
        return dt_fail(err, DT_EINPUT, "", 0, 0, "link latency %g s: must be finite and >= 0",
                       lat_s);
    if (dt_grow_aligned((void **)&sim->links, &sim->cap_links, sim->n_links + 1,
                     sizeof *sim->links) ||
        dt_grow((void **)&sim->lroute, &sim->cap_lroute, sim->n_links + 1, sizeof *sim->lroute))
        return oom(err, "links");
    struct link *l = &sim->links[sim->n_links];
    link_init(l, bw_Bps, 1, NULL); /* its first flow goes in the record itself */
    sim->lroute[sim->n_links] = (struct link_route){lat_s, l->shared};
    if (id)
        *id = sim->n_links;
    sim->n_links++;
    sim->prefetch = sim->n_links >= DT_SIM_PREFETCH_LINKS;
    return DT_OK;
}

int dt_sim_add_device(struct dt_sim *sim, int *id, struct dt_error *err)
{
    if (dt_grow((void **)&sim->devs, &sim->cap_devs, sim->n_devs + 1, sizeof *sim->devs))
        return oom(err, "devices");
    sim->devs[sim->n_devs] = (struct device){0, 0};
    if (id)
        *id = sim->n_devs;
    sim->n_devs++;
    return DT_OK;
}

static int endpoint(struct dt_sim *sim, int ep, struct dt_error *err)
{
    if (ep < -1)
        return dt_fail(err, DT_EINPUT, "", 0, 0, "endpoint %d: must be >= 0 (or -1: none)", ep);
    if (ep >= sim->n_eps) {
        int c1 = sim->cap_eps, c2 = sim->cap_eps;
        if (dt_grow((void **)&sim->sent, &c1, ep + 1, sizeof *sim->sent) ||
            dt_grow((void **)&sim->recvd, &c2, ep + 1, sizeof *sim->recvd))
            return oom(err, "endpoints");
        sim->cap_eps = c1 < c2 ? c1 : c2;
        for (int e = sim->n_eps; e <= ep; e++)
            sim->sent[e] = sim->recvd[e] = 0;
        sim->n_eps = ep + 1;
    }
    return DT_OK;
}

static int new_op(struct dt_sim *sim, uint32_t *out, struct dt_error *err)
{
    uint32_t i = sim->op_free;
    if (i != NONE) {
        sim->op_free = sim->ops[i].next_free;
    } else {
        int c = (int)sim->cap_ops;
        if (dt_grow((void **)&sim->ops, &c, (int)sim->n_ops + 1, sizeof *sim->ops))
            return oom(err, "ops");
        sim->cap_ops = (uint32_t)c;
        i = sim->n_ops++;
    }
    *out = i;
    return DT_OK;
}

static void free_op(struct dt_sim *sim, uint32_t i)
{
    sim->ops[i].next_free = sim->op_free;
    sim->op_free = i;
}

/* Checks a compute op and books its device: it runs from *start to *end (the device's ops
 * run one after another). */
static int occupy(struct dt_sim *sim, int dev, double duration_s, double *start, double *end,
                  struct dt_error *err)
{
    if (dev < 0 || dev >= sim->n_devs)
        return dt_fail(err, DT_EINPUT, "", 0, 0, "device %d does not exist", dev);
    if (!(duration_s >= 0) || !isfinite(duration_s))
        return dt_fail(err, DT_EINPUT, "", 0, 0, "compute duration %g s: must be finite and "
                       ">= 0", duration_s);
    double now = sim->now;
    struct device *d = &sim->devs[dev];
    *start = d->free_at > now ? d->free_at : now;
    *end = *start + duration_s;
    return DT_OK;
}

static void book(struct dt_sim *sim, int dev, double end, double duration_s)
{
    sim->devs[dev].free_at = end;
    sim->devs[dev].busy_s += duration_s;
}

int dt_sim_compute(struct dt_sim *sim, int dev, double duration_s, uint64_t tag,
                   struct dt_error *err)
{
    double start = 0, end = 0, now = sim->now;
    uint32_t i = NONE;
    int rc = occupy(sim, dev, duration_s, &start, &end, err);
    if (rc || (rc = new_op(sim, &i, err)))
        return rc;
    rc = dt_eventq_schedule(sim->q, end - now, EV_COMPUTE, i, NULL, err);
    sim->writes++;
    if (rc) {
        free_op(sim, i);
        return rc;
    }
    sim->ops[i] = (struct op){tag, start, dev, NONE};
    book(sim, dev, end, duration_s);
    return DT_OK;
}

int dt_sim_compute_silent(struct dt_sim *sim, int dev, double duration_s, double *t_start,
                          double *t_end, struct dt_error *err)
{
    double end = 0, now = sim->now;
    int rc = occupy(sim, dev, duration_s, t_start, &end, err);
    if (rc)
        return rc;
    *t_end = now + (end - now) + 0.0; /* the time dt_sim_compute's event would have */
    book(sim, dev, end, duration_s);
    sim->cnt.events++; /* it is an event of the simulation, only not queued */
    sim->cnt.computes++;
    return DT_OK;
}

int dt_sim_timer(struct dt_sim *sim, double delay_s, uint64_t tag, struct dt_error *err)
{
    uint32_t i = NONE;
    int rc = new_op(sim, &i, err);
    if (rc)
        return rc;
    rc = dt_eventq_schedule(sim->q, delay_s, EV_TIMER, i, NULL, err);
    sim->writes++;
    if (rc) {
        free_op(sim, i);
        return rc;
    }
    sim->ops[i] = (struct op){tag, sim->now, -1, NONE};
    return DT_OK;
}

/* Flow i's hops: in its record, or for a route longer than INLINE_HOPS in xhops. */
static inline struct hop *hops_of(const struct dt_sim *sim, uint32_t i)
{
    struct flow *f = &sim->flows[i];
    return f->n_hops <= INLINE_HOPS ? f->hop : &sim->xhops[(size_t)i * DT_SIM_MAX_HOPS];
}

/* The flows in a link's list (writable when the link is: as strchr, one function for both). */
static inline struct lref *refs(const struct link *l)
{
    return l->capf <= 1 ? (struct lref *)&l->fl.one : l->fl.many;
}

/* Puts flow record i back on the free list (its ev links the list while it is free). */
static void free_flow(struct dt_sim *sim, uint32_t i)
{
    struct flow *f = &sim->flows[i];
    f->state = FL_FREE;
    f->ev = sim->flow_free;
    sim->flow_free = i;
}

/* A free flow record (and room for its hops in xhops when they are more than INLINE_HOPS). */
static int new_flow(struct dt_sim *sim, int n_hops, uint32_t *out, struct dt_error *err)
{
    uint32_t i = sim->flow_free;
    if (i != NONE) {
        sim->flow_free = sim->flows[i].ev;
    } else {
        int c = (int)sim->cap_flows;
        if (dt_grow_aligned((void **)&sim->flows, &c, (int)sim->n_flows + 1, sizeof *sim->flows))
            return oom(err, "flows");
        sim->cap_flows = (uint32_t)c;
        if (dt_batch_reserve(&sim->batch, sim->cap_flows))
            return oom(err, "flows");
        i = sim->n_flows++;
    }
    if (n_hops > INLINE_HOPS && sim->cap_xhops < sim->cap_flows) {
        struct hop *x = realloc(sim->xhops,
                                (size_t)sim->cap_flows * DT_SIM_MAX_HOPS * sizeof *x);
        if (!x) {
            free_flow(sim, i);
            return oom(err, "flow routes");
        }
        sim->xhops = x;
        sim->cap_xhops = sim->cap_flows;
    }
    *out = i;
    return DT_OK;
}

int dt_sim_flow(struct dt_sim *sim, double bytes, const int *route, int n_hops, int src,
                int dst, uint64_t tag, struct dt_error *err)
{
    return dt_sim_flow_at(sim, sim->now, bytes, route, n_hops, src, dst, tag, err);
}

/* Checks a route's links; *lat the sum of their latencies (in route order), *n_shared those of
 * finite capacity. */
static int check_route(const struct dt_sim *sim, const int *route, int n_hops, double *lat,
                       int *n_shared, struct dt_error *err)
{
    if (n_hops < 0 || n_hops > DT_SIM_MAX_HOPS)
        return dt_fail(err, DT_EINPUT, "", 0, 0, "flow route of %d hops: at most %d", n_hops,
                       DT_SIM_MAX_HOPS);
    *lat = 0;
    *n_shared = 0;
    for (int h = 0; h < n_hops; h++) {
        if (route[h] < 0 || route[h] >= sim->n_links)
            return dt_fail(err, DT_EINPUT, "", 0, 0, "flow route: link %d does not exist",
                           route[h]);
        *lat += sim->lroute[route[h]].lat_s;
        *n_shared += sim->lroute[route[h]].shared;
    }
    return DT_OK;
}

int dt_sim_route_check(const struct dt_sim *sim, const int *route, int n_hops,
                       struct dt_sim_route *out, struct dt_error *err)
{
    if (n_hops > DT_SIM_ROUTE_KEPT)
        return dt_fail(err, DT_EINPUT, "", 0, 0, "route of %d hops: a kept route has at most %d",
                       n_hops, DT_SIM_ROUTE_KEPT);
    int rc = check_route(sim, route, n_hops, &out->lat_s, &out->n_shared, err);
    if (rc)
        return rc;
    out->n_hops = n_hops;
    memcpy(out->link, route, (size_t)n_hops * sizeof *route);
    return DT_OK;
}

/* Writes flow i's event of kind at time t >= now as dt_eventq_schedule_at would, or, when it
 * would come right after the last event written (same kind and time), lets it join that
 * one's batch. *ev gets its id in the queue, or BATCHED. */
static int flow_event(struct dt_sim *sim, uint32_t i, int kind, double t, uint32_t *ev,
                      struct dt_error *err)
{
    double key = t + 0.0; /* the queue's: -0 and +0 are one time */
    if (dt_batch_joins(&sim->batch, kind, key, sim->writes)) {
        dt_batch_join(&sim->batch, i);
        *ev = BATCHED;
        return DT_OK;
    }
    int rc = dt_eventq_schedule_at(sim->q, t, kind, i, ev, err);
    if (rc)
        return rc;
    sim->writes++;
    dt_batch_queued(&sim->batch, i, kind, key, sim->writes);
    return DT_OK;
}

/* Starts a flow over a checked route (lat, n_shared from check_route). */
static int start_checked(struct dt_sim *sim, double t0, double bytes, const int *route,
                         int n_hops, double lat, int n_shared, int src, int dst, uint64_t tag,
                         struct dt_error *err)
{
    if (!(t0 >= sim->now) || !isfinite(t0))
        return dt_fail(err, DT_EINPUT, "", 0, 0, "flow sent at %g s: not before now (%g s)", t0,
                       sim->now);
    if (!(bytes >= 0) || !isfinite(bytes))
        return dt_fail(err, DT_EINPUT, "", 0, 0, "flow of %g bytes: must be finite and >= 0",
                       bytes);
    int rc = DT_OK;
    if (src >= sim->n_eps || dst >= sim->n_eps || src < -1 || dst < -1) /* rarely: a new one */
        if ((rc = endpoint(sim, src, err)) || (rc = endpoint(sim, dst, err)))
            return rc;
    uint32_t i = NONE, ev;
    if ((rc = new_flow(sim, n_hops, &i, err)))
        return rc;
    rc = flow_event(sim, i, EV_FLOW_START, t0 + lat, &ev, err);
    if (rc) {
        free_flow(sim, i);
        return rc;
    }
    struct flow *f = &sim->flows[i];
    f->bytes = f->remaining = bytes;
    f->rate = 0;
    f->t_upd = f->t_start = t0;
    f->tag = tag;
    f->src = src;
    f->dst = dst;
    f->ev = NONE;
    f->stamp = 0;
    f->early = 0;
    f->state = FL_LATENCY;
    f->n_hops = (uint8_t)n_hops;
    f->n_shared = (uint8_t)n_shared;
    struct hop *hops = hops_of(sim, i);
    for (int h = 0; h < n_hops; h++)
        hops[h].link = route[h];
    if (src >= 0)
        sim->sent[src] += bytes;
    sim->active_flows++;
    sim->cnt.flows_started++;
    return DT_OK;
}

int dt_sim_flow_at(struct dt_sim *sim, double t0, double bytes, const int *route, int n_hops,
                   int src, int dst, uint64_t tag, struct dt_error *err)
{
    double lat;
    int n_shared;
    int rc = check_route(sim, route, n_hops, &lat, &n_shared, err);
    return rc ? rc : start_checked(sim, t0, bytes, route, n_hops, lat, n_shared, src, dst, tag,
                                   err);
}

int dt_sim_flow_route(struct dt_sim *sim, double t0, double bytes, const struct dt_sim_route *r,
                      int src, int dst, uint64_t tag, struct dt_error *err)
{
    return start_checked(sim, t0, bytes, r->link, r->n_hops, r->lat_s, r->n_shared, src, dst,
                         tag, err);
}

static int mark_dirty(struct dt_sim *sim, int l, struct dt_error *err)
{
    if (sim->links[l].dirty)
        return DT_OK;
    if (dt_grow((void **)&sim->dirty, &sim->cap_dirty, sim->n_dirty + 1, sizeof *sim->dirty))
        return oom(err, "dirty links");
    sim->links[l].dirty = true;
    sim->dirty[sim->n_dirty++] = l;
    return DT_OK;
}

/* Brings a transferring flow's remaining bytes (and its links' byte counts) up to now. */
static void settle(struct dt_sim *sim, uint32_t i, double now)
{
    struct flow *f = &sim->flows[i];
    double moved = f->rate * (now - f->t_upd);
    if (moved > f->remaining)
        moved = f->remaining;
    if (moved > 0) {
        f->remaining -= moved;
        const struct hop *hops = hops_of(sim, i);
        for (int h = 0; h < f->n_hops; h++)
            sim->links[hops[h].link].bytes += moved;
    }
    f->t_upd = now;
}

/* Makes room for one more flow in a link's list: the record's own entry, then 4, 8, ... */
static int grow_list(struct link *l)
{
    int cap = l->capf < 2 ? 4 : 2 * l->capf;
    if (l->capf > INT32_MAX / 2)
        return -1;
    struct lref *m = l->capf > 1 ? realloc(l->fl.many, (size_t)cap * sizeof *m)
                                 : malloc((size_t)cap * sizeof *m);
    if (!m)
        return -1;
    if (l->capf <= 1 && l->nf == 1)
        m[0] = l->fl.one;
    l->fl.many = m;
    l->capf = cap;
    return 0;
}

static bool end_early(struct dt_sim *sim, uint32_t i, double r, double now, int *rc,
                      struct dt_error *err);

/* The flow's latency is over: it joins its links' lists and waits for the next solve, or,
 * alone on them, gets its end at once (end_early). */
static int flow_begin_transfer(struct dt_sim *sim, uint32_t i, double now, bool *done,
                               struct dt_error *err)
{
    struct flow *f = &sim->flows[i];
    f->t_upd = now;
    if (f->bytes == 0 || f->n_shared == 0) {
        /* nothing to share: delivered at once (unshared links carry it instantly) */
        const struct hop *hops = hops_of(sim, i);
        for (int h = 0; h < f->n_hops; h++)
            sim->links[hops[h].link].bytes += f->bytes;
        f->remaining = 0;
        *done = true;
        return DT_OK;
    }
    *done = false;
    f->state = FL_ACTIVE;
    int seed = -1;
    bool alone = true;
    double r = INFINITY; /* its slowest shared link's capacity: its rate when alone */
    struct hop *hops = hops_of(sim, i);
    for (int h = 0; h < f->n_hops; h++) {
        struct hop *hp = &hops[h];
        struct link *l = &sim->links[hp->link];
        if (l->shared) {
            if (l->nf > 0) {
                alone = false;
                if (l->nf == 1 && sim->flows[refs(l)->flow].early)
                    sim->early_spoiled = true; /* joins an early flow: the solve decides */
            }
            if (l->bw_Bps < r)
                r = l->bw_Bps;
            if (l->nf == l->capf && grow_list(l))
                return oom(err, "link flow list");
            hp->pos = l->nf;
            refs(l)[l->nf] = (struct lref){i, (uint32_t)h};
            if (seed < 0)
                seed = hp->link;
        }
        if (l->nf++ == 0)
            l->busy_since = now;
        if (l->nf > l->max_flows)
            l->max_flows = l->nf;
    }
    int rc;
    if (alone && end_early(sim, i, r, now, &rc, err))
        return rc;
    /* one shared link suffices: the search from it finds the whole component */
    return seed >= 0 ? mark_dirty(sim, seed, err) : DT_OK;
}

/* The flow delivered its last byte: it leaves its links; what remains may share anew. */
static int flow_end_transfer(struct dt_sim *sim, uint32_t i, double now, struct dt_error *err)
{
    struct flow *f = &sim->flows[i];
    const struct hop *hops = hops_of(sim, i);
    for (int h = 0; h < f->n_hops; h++) {
        const struct hop *hp = &hops[h];
        struct link *l = &sim->links[hp->link];
        l->bytes += f->remaining; /* the exact rest, not rate * dt: conservation stays exact */
        if (!l->shared) {
            if (--l->nf == 0)
                l->busy_s += now - l->busy_since;
            continue;
        }
        int p = hp->pos;
        struct lref *fl = refs(l), last = fl[--l->nf];
        if (p != l->nf) {
            fl[p] = last;
            hops_of(sim, last.flow)[last.hop].pos = p;
        }
        if (l->nf == 0)
            l->busy_s += now - l->busy_since;
        else if (l->shared) {
            int rc = mark_dirty(sim, hp->link, err);
            if (rc)
                return rc;
        }
    }
    f->remaining = 0;
    f->ev = NONE;
    return DT_OK;
}

#define RESERVE(arr, capv, n, what)                                                 \
    do {                                                                            \
        if (dt_grow((void **)&sim->arr, &sim->capv, (n), sizeof *sim->arr))            \
            return oom(err, what);                                                  \
    } while (0)

static int solve_general(struct dt_sim *sim, int n_links, int n_flows, int nnz,
                         struct dt_error *err);

/* Flow fi's end event, batched or queued with others behind it, leaves its batch: a queued
 * one passes to the next flow of the batch, which keeps the others' place in the order. */
static int leave_batch(struct dt_sim *sim, uint32_t fi, struct dt_error *err)
{
    struct flow *f = &sim->flows[fi];
    uint32_t heir = dt_batch_leave(&sim->batch, fi);
    if (f->ev != BATCHED && heir != NONE) {
        int rc = dt_eventq_set_data(sim->q, f->ev, heir, err);
        if (rc)
            return rc;
        sim->flows[heir].ev = f->ev;
    }
    f->ev = NONE;
    return DT_OK;
}

/* Flow fi's new rate r: its remaining bytes brought up to now and its end event (re)written,
 * unless the rate did not change. */
static int apply_rate(struct dt_sim *sim, uint32_t fi, double r, double now,
                      struct dt_error *err)
{
    struct flow *f = &sim->flows[fi];
    if (r == f->rate && f->ev != NONE)
        return DT_OK; /* same rate: the end event already stands */
    settle(sim, fi, now);
    f->rate = r;
    double dt = f->remaining / r;
    int rc;
    if (!(dt >= 0) || !isfinite(dt)) { /* refused by the queue: its error */
        rc = dt_eventq_schedule(sim->q, dt, EV_FLOW_END, fi, NULL, err);
    } else if (f->ev != NONE && f->ev != BATCHED && sim->batch.next[fi] == NONE) {
        rc = dt_eventq_reschedule(sim->q, f->ev, dt, err); /* queued alone: moved */
        if (!rc)
            dt_batch_queued(&sim->batch, fi, EV_FLOW_END, now + dt + 0.0, ++sim->writes);
    } else {
        rc = f->ev != NONE ? leave_batch(sim, fi, err) : DT_OK;
        if (!rc)
            rc = flow_event(sim, fi, EV_FLOW_END, now + dt, &f->ev, err);
    }
    if (!rc)
        sim->cnt.rate_changes++;
    return rc;
}

/* The component of shared link `seed` when it is one flow alone on each of its shared links
 * (a ring step's flow): marked as the search would mark it and given its slowest link's
 * capacity, the rate solve_component finds, without the search. False (nothing changed)
 * when the component is anything else. */
static bool solve_alone(struct dt_sim *sim, int seed, double now, int *rc,
                        struct dt_error *err)
{
    const struct link *l = &sim->links[seed];
    if (l->nf != 1)
        return false;
    uint32_t fi = refs(l)->flow;
    struct flow *f = &sim->flows[fi];
    double r = INFINITY;
    const struct hop *hops = hops_of(sim, fi);
    for (int h = 0; h < f->n_hops; h++) {
        const struct link *m = &sim->links[hops[h].link];
        if (m->shared && m->nf != 1)
            return false; /* another flow, or this one twice */
        if (m->shared && m->bw_Bps < r)
            r = m->bw_Bps;
    }
    for (int h = 0; h < f->n_hops; h++) {
        struct link *m = &sim->links[hops[h].link];
        if (m->shared)
            m->stamp = sim->stamp;
    }
    f->stamp = sim->stamp;
    sim->cnt.solves++;
    sim->cnt.solved_flows++;
    *rc = apply_rate(sim, fi, r, now, err);
    return true;
}

/* Solves the component that contains shared link `seed` and applies the new rates. */
static int solve_component(struct dt_sim *sim, int seed, double now, struct dt_error *err)
{
    int rc_alone;
    if (solve_alone(sim, seed, now, &rc_alone, err))
        return rc_alone;
    uint32_t stamp = sim->stamp;
    int n_links = 0, n_flows = 0, nnz = 0;
    RESERVE(clinks, cap_clinks, 1, "component");
    sim->links[seed].stamp = stamp;
    sim->links[seed].local = 0;
    sim->clinks[n_links++] = seed;
    /* breadth-first over shared links; clinks doubles as the queue */
    for (int qi = 0; qi < n_links; qi++) {
        struct link *l = &sim->links[sim->clinks[qi]];
        const struct lref *fl = refs(l);
        for (int k = 0; k < l->nf; k++) {
            uint32_t fi = fl[k].flow;
            struct flow *f = &sim->flows[fi];
            if (f->stamp == stamp)
                continue;
            f->stamp = stamp;
            RESERVE(cflows, cap_cflows, n_flows + 1, "component");
            sim->cflows[n_flows++] = fi;
            nnz += f->n_shared;
            const struct hop *hops = hops_of(sim, fi);
            for (int h = 0; h < f->n_hops; h++) {
                int link = hops[h].link;
                struct link *m = &sim->links[link];
                if (!m->shared || m->stamp == stamp)
                    continue;
                m->stamp = stamp;
                RESERVE(clinks, cap_clinks, n_links + 1, "component");
                m->local = n_links;
                sim->clinks[n_links++] = link;
            }
        }
    }
    if (n_flows == 0)
        return DT_OK;
    RESERVE(crate, cap_crate, n_flows, "component");
    if (n_flows == 1 && sim->flows[sim->cflows[0]].n_shared == n_links) {
        /* one flow over distinct links (the common case of a ring step): the slowest one */
        double r = INFINITY;
        for (int k = 0; k < n_links; k++)
            if (sim->links[sim->clinks[k]].bw_Bps < r)
                r = sim->links[sim->clinks[k]].bw_Bps;
        sim->crate[0] = r;
    } else if (n_links == 1 && nnz == n_flows) {
        /* flows that share just one link, once each: equal shares */
        double r = sim->links[seed].bw_Bps / n_flows;
        for (int j = 0; j < n_flows; j++)
            sim->crate[j] = r;
    } else {
        int rc = solve_general(sim, n_links, n_flows, nnz, err);
        if (rc)
            return rc;
    }
    sim->cnt.solves++;
    sim->cnt.solved_flows += (uint64_t)n_flows;
    for (int j = 0; j < n_flows; j++) {
        int rc = apply_rate(sim, sim->cflows[j], sim->crate[j], now, err);
        if (rc)
            return rc;
    }
    return DT_OK;
}

/* The component gathered in cflows/clinks, handed to the max-min solver. */
static int solve_general(struct dt_sim *sim, int n_links, int n_flows, int nnz,
                         struct dt_error *err)
{
    RESERVE(ccap, cap_ccap, n_links, "component");
    RESERVE(cstart, cap_cstart, n_flows + 1, "component");
    RESERVE(cidx, cap_cidx, nnz, "component");
    for (int k = 0; k < n_links; k++)
        sim->ccap[k] = sim->links[sim->clinks[k]].bw_Bps;
    int w = 0;
    for (int j = 0; j < n_flows; j++) {
        uint32_t fi = sim->cflows[j];
        const struct flow *f = &sim->flows[fi];
        sim->cstart[j] = w;
        const struct hop *hops = hops_of(sim, fi);
        for (int h = 0; h < f->n_hops; h++) {
            const struct link *m = &sim->links[hops[h].link];
            if (m->shared)
                sim->cidx[w++] = m->local;
        }
    }
    sim->cstart[n_flows] = w;
    return dt_maxmin_solve(sim->mm, n_links, sim->ccap, n_flows, sim->cstart, sim->cidx,
                           sim->crate, err);
}

/* One solve per timestamp: every component touched since the last one. */
static int solve_dirty(struct dt_sim *sim, double now, struct dt_error *err)
{
    sim->stamp++;
    if (sim->stamp == 0) { /* wrapped: clear the marks so that none looks current */
        for (int l = 0; l < sim->n_links; l++)
            sim->links[l].stamp = 0;
        for (uint32_t i = 0; i < sim->n_flows; i++)
            sim->flows[i].stamp = 0;
        sim->stamp = 1;
    }
    for (int k = 0; k < sim->n_dirty; k++) {
        int l = sim->dirty[k];
        sim->links[l].dirty = false;
        if (sim->links[l].stamp == sim->stamp)
            continue; /* already solved with an earlier component */
        int rc = solve_component(sim, l, now, err);
        if (rc)
            return rc;
    }
    sim->n_dirty = 0;
    return DT_OK;
}

/* ---- the lone path ----
 * A flow whose transfer begins alone on each of its shared links would be solved by
 * solve_alone at the phase's solve (the next time the clock moves): rate its slowest link's
 * capacity, end event written then. When nothing waits for that solve yet (no dirty link), it
 * gets that rate and that end event at once: the solve would write it first, and writes in
 * between are the phase's other early ends, in the same order. That stands at the solve
 * unless something else was written since (a compute, a start: it would come first) or a flow
 * joined an early one's link (the solve would share them): then every early end of the phase
 * is taken back and their flows go to the solve first, in order, as without this path. */

/* Flow i, alone on its shared links (r: the slowest one's capacity), gets its end now if
 * the lone path may take it: true when taken (*rc the outcome), false to go to the solve. */
static bool end_early(struct dt_sim *sim, uint32_t i, double r, double now, int *rc,
                      struct dt_error *err)
{
    if (sim->lone_off || sim->n_dirty > 0 || sim->early_spoiled)
        return false;
    if (sim->n_early > 0 && sim->writes != sim->early_writes) {
        sim->early_spoiled = true; /* written in between: the solve's order is another */
        return false;
    }
    struct flow *f = &sim->flows[i];
    double dt = f->remaining / r;
    if (!(dt >= 0) || !isfinite(dt) || !(now + dt > now))
        return false; /* an end at this very time would pop before the solve */
    *rc = DT_OK;
    if (dt_grow((void **)&sim->early, &sim->cap_early, sim->n_early + 1, sizeof *sim->early)) {
        *rc = oom(err, "early ends");
        return true;
    }
    f->rate = r;
    if ((*rc = flow_event(sim, i, EV_FLOW_END, now + dt, &f->ev, err)))
        return true;
    f->early = 1;
    sim->cnt.lone_ends++;
    sim->early[sim->n_early++] = i;
    sim->early_writes = sim->writes;
    sim->cnt.solves++; /* as solve_alone counts it */
    sim->cnt.solved_flows++;
    sim->cnt.rate_changes++;
    return true;
}

/* Takes early flow fi's end event back: as before its transfer's solve. */
static int unwrite_end(struct dt_sim *sim, uint32_t fi, struct dt_error *err)
{
    struct flow *f = &sim->flows[fi];
    uint32_t ev = f->ev, heir = dt_batch_leave(&sim->batch, fi);
    int rc = DT_OK;
    if (ev != BATCHED && heir != NONE) { /* its queued event carries the rest of its batch */
        rc = dt_eventq_set_data(sim->q, ev, heir, err);
        sim->flows[heir].ev = ev;
    } else if (ev != BATCHED) {
        rc = dt_eventq_cancel(sim->q, ev, err);
    }
    f->ev = NONE;
    f->rate = 0;
    sim->cnt.lone_taken_back++;
    sim->cnt.solves--;
    sim->cnt.solved_flows--;
    sim->cnt.rate_changes--;
    return rc;
}

/* Flow i's first shared link: where its start would have marked the solve. */
static int seed_link(const struct dt_sim *sim, uint32_t i)
{
    const struct hop *hops = hops_of(sim, i);
    int h = 0;
    while (!sim->links[hops[h].link].shared)
        h++;
    return hops[h].link;
}

/* Every early end of the phase taken back (the last first, so that a batch's first goes
 * last), their flows' links put first in the dirty list, in their order: the solve's list
 * without the lone path. */
static int take_back_early(struct dt_sim *sim, struct dt_error *err)
{
    int n = sim->n_early;
    for (int k = n - 1; k >= 0; k--) {
        int rc = unwrite_end(sim, sim->early[k], err);
        if (rc)
            return rc;
    }
    if (dt_grow((void **)&sim->dirty, &sim->cap_dirty, sim->n_dirty + n, sizeof *sim->dirty))
        return oom(err, "dirty links");
    memmove(sim->dirty + n, sim->dirty, (size_t)sim->n_dirty * sizeof *sim->dirty);
    for (int k = 0; k < n; k++) {
        int l = seed_link(sim, sim->early[k]);
        sim->dirty[k] = l; /* a later copy of it is skipped: solved with this one */
        sim->links[l].dirty = true;
    }
    sim->n_dirty += n;
    return DT_OK;
}

/* The phase is over (the clock moves next): its early ends stand or are taken back, then
 * what is dirty is solved. */
static int close_phase(struct dt_sim *sim, double now, struct dt_error *err)
{
    if (sim->n_early > 0) {
        bool back = sim->early_spoiled || sim->writes != sim->early_writes;
        int rc = back ? take_back_early(sim, err) : DT_OK;
        for (int k = 0; k < sim->n_early; k++)
            sim->flows[sim->early[k]].early = 0;
        sim->n_early = 0;
        sim->early_spoiled = false;
        if (rc)
            return rc;
    }
    return sim->n_dirty > 0 ? solve_dirty(sim, now, err) : DT_OK;
}

static void flow_completion(struct dt_sim *sim, uint32_t i, double now,
                            struct dt_sim_completion *c)
{
    struct flow *f = &sim->flows[i];
    *c = (struct dt_sim_completion){DT_SIM_FLOW, f->tag, f->t_start, now, f->bytes, f->src,
                                    f->dst, -1};
    if (f->dst >= 0)
        sim->recvd[f->dst] += f->bytes;
    sim->cnt.flows_done++;
    sim->active_flows--;
    free_flow(sim, i);
}

/* Event kind of data at now (popped, or the next of a popped batch): true when it completes
 * work for the caller (*c filled), false when the engine goes on. */
static bool handle_event(struct dt_sim *sim, int kind, uint32_t data, double now,
                         struct dt_sim_completion *c, int *rc, struct dt_error *err)
{
    *rc = DT_OK;
    switch ((enum ev_kind)kind) {
    case EV_FLOW_START: {
        bool done;
        if ((*rc = flow_begin_transfer(sim, data, now, &done, err)))
            return true;
        if ((uint64_t)(sim->active_flows) > sim->cnt.max_active_flows)
            sim->cnt.max_active_flows = (uint64_t)sim->active_flows;
        if (done)
            flow_completion(sim, data, now, c);
        return done;
    }
    case EV_FLOW_END:
        if (!(*rc = flow_end_transfer(sim, data, now, err)))
            flow_completion(sim, data, now, c);
        return true;
    case EV_COMPUTE:
    case EV_TIMER: {
        struct op *o = &sim->ops[data];
        bool compute = kind == EV_COMPUTE;
        *c = (struct dt_sim_completion){compute ? DT_SIM_COMPUTE : DT_SIM_TIMER, o->tag,
                                        o->t_start, now, 0, -1, -1, o->dev};
        if (compute)
            sim->cnt.computes++;
        else
            sim->cnt.timers++;
        free_op(sim, data);
        return true;
    }
    }
    return false;
}

/* The popped batch's next flows come up one per call, and the caller's work in between (every
 * other rank's round at scale) evicts their lines: ask for the record of the flow after next
 * and the link records (and, for an end, the receiver's count) of the next one, whose record
 * was asked for a call earlier. With no batch, the queue's next event: its flow's record
 * (most starts are queued one by one, a compute written between them). Only loads are moved:
 * nothing computed changes. */
static inline void prefetch_flow(const struct dt_sim *sim, uint32_t i)
{
    __builtin_prefetch(&sim->flows[i], 1); /* its two lines */
    __builtin_prefetch((const char *)&sim->flows[i] + 64, 1);
}

static inline void prefetch_next(struct dt_sim *sim)
{
    uint32_t j = sim->batch.pending;
    if (j == NONE) {
        int kind;
        if (dt_eventq_peek_event(sim->q, &kind, &j) &&
            (kind == EV_FLOW_START || kind == EV_FLOW_END))
            prefetch_flow(sim, j);
        return;
    }
    uint32_t k = sim->batch.next[j];
    if (k != NONE)
        prefetch_flow(sim, k);
    const struct flow *f = &sim->flows[j];
    const struct hop *hops = hops_of(sim, j);
    for (int h = 0; h < f->n_hops; h++)
        __builtin_prefetch(&sim->links[hops[h].link], 1);
    if (sim->batch.pending_kind == EV_FLOW_END && f->dst >= 0)
        __builtin_prefetch(&sim->recvd[f->dst], 1);
}

int dt_sim_next(struct dt_sim *sim, struct dt_sim_completion *c, struct dt_error *err)
{
    for (;;) {
        double now = sim->now, t;
        int kind;
        uint32_t data = dt_batch_take(&sim->batch, &kind); /* a popped batch's next first */
        if (data == NONE) {
            if ((sim->n_dirty > 0 || sim->n_early > 0) &&
                (!dt_eventq_peek(sim->q, &t) || t > now)) {
                /* every change at this timestamp is in: share the links anew */
                int rc = close_phase(sim, now, err);
                if (rc)
                    return rc;
                continue;
            }
            struct dt_event ev;
            if (!dt_eventq_pop(sim->q, &ev)) {
                memset(c, 0, sizeof *c);
                c->kind = DT_SIM_END;
                c->t_end = now;
                return DT_OK;
            }
            now = sim->now = ev.t;
            kind = ev.kind;
            data = ev.data;
            if (kind == EV_FLOW_START || kind == EV_FLOW_END)
                dt_batch_popped(&sim->batch, data, kind, now);
        }
        sim->cnt.events++;
        if (sim->prefetch && (kind == EV_FLOW_START || kind == EV_FLOW_END))
            prefetch_next(sim);
        int rc;
        if (handle_event(sim, kind, data, now, c, &rc, err))
            return rc;
    }
}

double dt_sim_now(const struct dt_sim *sim)
{
    return sim->now;
}

int dt_sim_n_links(const struct dt_sim *sim)
{
    return sim->n_links;
}

void dt_sim_link_params(const struct dt_sim *sim, int link, double *bw_Bps, double *lat_s)
{
    *bw_Bps = sim->links[link].bw_Bps;
    *lat_s = sim->lroute[link].lat_s;
}

int dt_sim_n_devices(const struct dt_sim *sim)
{
    return sim->n_devs;
}

int dt_sim_active_flows(const struct dt_sim *sim)
{
    return sim->active_flows;
}

/* Bytes flow i (in transfer) moved since its last update. */
static double in_flight(const struct dt_sim *sim, uint32_t i)
{
    const struct flow *f = &sim->flows[i];
    double moved = f->rate * (sim->now - f->t_upd);
    return moved < f->remaining ? moved : f->remaining;
}

void dt_sim_link_stats(const struct dt_sim *sim, int link, struct dt_sim_link_stats *out)
{
    memset(out, 0, sizeof *out);
    if (link < 0 || link >= sim->n_links)
        return;
    const struct link *l = &sim->links[link];
    out->bytes = l->bytes;
    if (l->shared) {
        const struct lref *fl = refs(l);
        for (int k = 0; k < l->nf; k++)
            out->bytes += in_flight(sim, fl[k].flow);
    } else if (l->nf > 0) { /* no list: its flows among all, once per crossing */
        for (uint32_t i = 0; i < sim->n_flows; i++) {
            const struct hop *hops = hops_of(sim, i);
            for (int h = 0; sim->flows[i].state == FL_ACTIVE && h < sim->flows[i].n_hops; h++)
                if (hops[h].link == link)
                    out->bytes += in_flight(sim, i);
        }
    }
    double now = sim->now;
    out->busy_s = l->busy_s + (l->nf > 0 ? now - l->busy_since : 0);
    out->max_flows = l->max_flows;
}

double dt_sim_device_busy(const struct dt_sim *sim, int dev)
{
    if (dev < 0 || dev >= sim->n_devs)
        return 0;
    const struct device *d = &sim->devs[dev];
    double now = sim->now;
    /* ops are back to back up to free_at; the part after now has not run yet */
    double ahead = d->free_at > now ? d->free_at - now : 0;
    return d->busy_s - ahead;
}

double dt_sim_endpoint_sent(const struct dt_sim *sim, int ep)
{
    return ep >= 0 && ep < sim->n_eps ? sim->sent[ep] : 0;
}

double dt_sim_endpoint_received(const struct dt_sim *sim, int ep)
{
    return ep >= 0 && ep < sim->n_eps ? sim->recvd[ep] : 0;
}

int dt_sim_n_endpoints(const struct dt_sim *sim)
{
    return sim->n_eps;
}

void dt_sim_get_counters(const struct dt_sim *sim, struct dt_sim_counters *out)
{
    *out = sim->cnt;
}

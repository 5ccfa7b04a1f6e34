/* A collective's time from its rounds solved on the fabric (see symround.h). */
#include "symround.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "dt/collective.h"
#include "engine.h"
#include "evenform.h"
#include "evenshare.h"
#include "grow.h"
#include "memo.h"
#include "network.h"

struct transfer {
    int src, dst;
    long count;
};

struct dt_symround {
    const struct dt_topology *topo;
    struct dt_cost_params cp;
    struct dt_memo rounds, colls, latencies; /* latencies: by the rounds' pairs alone */
    struct dt_memo form_of;  /* a round's pairs -> its form's index in forms */
    struct dt_memo direct_of, direct_rounds; /* a direct collective's group -> its pairs'
                                                index in direct_pairs; its rounds' times */
    struct dt_memo_key *direct_pairs;
    int n_direct, cap_direct;
    struct dt_evenform *forms; /* of rounds whose transfers all carry one count */
    int n_forms, cap_forms;
    struct transfer *t;      /* the round being built */
    int n_t, cap_t;
    long solves, collectives, by_form;
    struct dt_sim *sim;      /* the fabric, built at the first solve */
    struct dt_simnet net;
    struct dt_evenshare *even; /* a round's time by classes, the engine where it must */
};

int dt_symround_create(const struct dt_topology *topo, const struct dt_cost_params *cp,
                       struct dt_symround **out, struct dt_error *err)
{
    struct dt_symround *sr = calloc(1, sizeof *sr);
    if (!sr)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    sr->topo = topo;
    sr->cp = *cp;
    int rc = dt_evenshare_create(&sr->even, err);
    if (rc) {
        free(sr);
        return rc;
    }
    *out = sr;
    return DT_OK;
}

static void drop_fabric(struct dt_symround *sr)
{
    if (sr->net.topo)
        dt_simnet_free(&sr->net);
    sr->net = (struct dt_simnet){0};
    dt_sim_destroy(sr->sim);
    sr->sim = NULL;
}

/* The fabric: built the first time, kept after (the links and routes of a topology do not
 * change; dt_evenshare_time restarts it when it plays flows on it). */
static int fabric(struct dt_symround *sr, struct dt_error *err)
{
    if (sr->sim)
        return DT_OK;
    int rc = dt_sim_create(&sr->sim, err);
    if (!rc)
        rc = dt_simnet_build(&sr->net, sr->sim, sr->topo, sr->topo->n_ranks, &sr->cp, err);
    if (rc)
        drop_fabric(sr);
    return rc;
}

void dt_symround_destroy(struct dt_symround *sr)
{
    if (!sr)
        return;
    dt_memo_free(&sr->rounds);
    dt_memo_free(&sr->colls);
    dt_memo_free(&sr->latencies);
    dt_memo_free(&sr->form_of);
    dt_memo_free(&sr->direct_of);
    dt_memo_free(&sr->direct_rounds);
    free(sr->direct_pairs);
    for (int i = 0; i < sr->n_forms; i++)
        dt_evenform_free(&sr->forms[i]);
    free(sr->forms);
    free(sr->t);
    drop_fabric(sr);
    dt_evenshare_destroy(sr->even);
    free(sr);
}

void dt_symround_counts(const struct dt_symround *sr, long *solves, long *by_form,
                        long *collectives)
{
    *solves = sr->solves;
    *by_form = sr->by_form;
    *collectives = sr->collectives;
}

/* Seconds until the last of the round's transfers ends, every one started at 0 (at
 * elem_bytes per float; 0: the latencies alone) on a fabric with no other flow: a clock
 * started at 0 every time, so that a round's time does not depend on what was solved before
 * (the processes of a split search solve different rounds first). The engine's time for
 * them, by classes where the fabric shares evenly (evenshare.h). */
static int solve(struct dt_symround *sr, double elem_bytes, double *s, struct dt_error *err)
{
    int rc = fabric(sr, err);
    if (rc)
        return rc;
    dt_evenshare_clear(sr->even);
    for (int i = 0; i < sr->n_t && !rc; i++) {
        int route[DT_SIM_MAX_HOPS];
        int hops = dt_simnet_route(&sr->net, sr->t[i].src, sr->t[i].dst, route);
        rc = dt_evenshare_flow(sr->even, sr->sim, elem_bytes * (double)sr->t[i].count, route,
                               hops, err);
    }
    if (!rc)
        rc = dt_evenshare_time(sr->even, sr->sim, s, err);
    sr->solves++;
    if (rc)
        drop_fabric(sr); /* left mid-run: the next solve builds anew */
    return rc;
}

/* The count every transfer of the round carries; 0 where they differ. */
static long one_count(const struct dt_symround *sr)
{
    for (int i = 1; i < sr->n_t; i++)
        if (sr->t[i].count != sr->t[0].count)
            return 0;
    return sr->n_t > 0 ? sr->t[0].count : 0;
}

/* Keeps (or adds to) the form of the round just solved under its pairs' key. */
static int keep_form(struct dt_symround *sr, struct dt_memo_key pairs)
{
    const struct dt_evenform *f = dt_evenshare_form(sr->even);
    double at, unused;
    if (!f)
        return 0;
    if (dt_memo_recall(&sr->form_of, pairs, &at, &unused))
        return dt_evenform_merge(&sr->forms[(int)at], f);
    if (dt_grow((void **)&sr->forms, &sr->cap_forms, sr->n_forms + 1, sizeof *sr->forms))
        return -1;
    struct dt_evenform *copy = &sr->forms[sr->n_forms];
    *copy = (struct dt_evenform){0};
    int rc = dt_evenform_copy(copy, f);
    if (!rc)
        rc = dt_memo_remember(&sr->form_of, pairs, sr->n_forms, 0);
    if (rc) {
        dt_evenform_free(copy);
        return -1;
    }
    sr->n_forms++;
    return 0;
}

/* The round's time (solve), from the form of a round on the same pairs where its transfers
 * all carry one count and the form has seen what this size reaches: the flows' routes,
 * components and classes are the same whatever that count (evenform.h). */
static int solve_by_form(struct dt_symround *sr, struct dt_memo_key pairs, double elem_bytes,
                         double *s, struct dt_error *err)
{
    long count = one_count(sr);
    double at, unused;
    bool uniform = count > 0 && elem_bytes > 0;
    if (uniform && dt_memo_recall(&sr->form_of, pairs, &at, &unused) &&
        dt_evenshare_form_time(&sr->forms[(int)at], elem_bytes * (double)count, s)) {
        sr->by_form++;
        return DT_OK;
    }
    int rc = solve(sr, elem_bytes, s, err);
    if (!rc && uniform && keep_form(sr, pairs))
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    return rc;
}

static int add_transfer(struct dt_symround *sr, int src, int dst, long count)
{
    if (dt_grow((void **)&sr->t, &sr->cap_t, sr->n_t + 1, sizeof *sr->t))
        return -1;
    sr->t[sr->n_t++] = (struct transfer){src, dst, count};
    return 0;
}

/* Round r of every member (and of the shifted groups): sr->t, the largest sum (floats) a
 * member runs after it in *summed, and whether any member has that round. */
static int build_round(struct dt_symround *sr, const struct dt_op *op, const struct dt_group *g,
                       const int *shifts, int n_shifts, int r, long *summed, bool *any,
                       struct dt_error *err)
{
    struct dt_schedule sch;
    dt_schedule_init(&sch);
    int rc = DT_OK;
    sr->n_t = 0;
    *summed = 0;
    *any = false;
    for (int me = 0; me < g->n && !rc; me++) {
        int total;
        rc = dt_coll_schedule_rounds(op->coll, op->alg, g->n, me, op->root, op->region.count,
                                     r, 1, &sch, &total, err);
        if (rc || r >= total)
            continue;
        *any = true;
        long sum = 0;
        int lo, hi;
        dt_schedule_round(&sch, 0, &lo, &hi);
        for (int i = lo; i < hi && !rc; i++) {
            const struct dt_xfer *x = &sch.xfers[i];
            sum += !x->send && x->sum ? x->count : 0;
            if (!x->send || x->count <= 0)
                continue;
            rc = add_transfer(sr, g->ranks[me], g->ranks[x->peer], x->count) ? DT_ENOMEM : 0;
            for (int k = 0; k < n_shifts && !rc; k++)
                rc = add_transfer(sr, g->ranks[me] + shifts[k], g->ranks[x->peer] + shifts[k],
                                  x->count) ? DT_ENOMEM : 0;
        }
        *summed = sum > *summed ? sum : *summed;
    }
    dt_schedule_free(&sch);
    return rc == DT_ENOMEM ? dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory") : rc;
}

/* The round's key: its transfers, counts one float below the largest taken as the largest
 * (chunks of a region split unevenly). */
static struct dt_memo_key round_key(struct dt_symround *sr)
{
    long widest = 0;
    for (int i = 0; i < sr->n_t; i++)
        widest = sr->t[i].count > widest ? sr->t[i].count : widest;
    struct dt_memo_key h = dt_memo_start();
    for (int i = 0; i < sr->n_t; i++) {
        if (sr->t[i].count >= widest - 1)
            sr->t[i].count = widest;
        h = dt_memo_mix(dt_memo_mix(dt_memo_mix(h, (uint64_t)sr->t[i].src),
                                    (uint64_t)sr->t[i].dst),
                        (uint64_t)sr->t[i].count);
    }
    return h;
}

/* The round's time with no bytes (its latencies alone): a solve at 0 bytes per float, which
 * depends on its transfers' pairs only, so rounds of any counts and bytes on the same pairs
 * (a ring's collectives of every size) share it. */
static struct dt_memo_key pairs_key(const struct dt_symround *sr)
{
    struct dt_memo_key key = dt_memo_start();
    for (int i = 0; i < sr->n_t; i++)
        key = dt_memo_mix(dt_memo_mix(key, (uint64_t)sr->t[i].src), (uint64_t)sr->t[i].dst);
    return key;
}

static int latencies(struct dt_symround *sr, struct dt_memo_key key, double *lat,
                     struct dt_error *err)
{
    double unused;
    if (dt_memo_recall(&sr->latencies, key, lat, &unused))
        return DT_OK;
    int rc = solve(sr, 0, lat, err);
    if (!rc && dt_memo_remember(&sr->latencies, key, *lat, 0))
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    return rc;
}

/* The rounds after r of a ring phase that have r's key unbuilt: each is r but for which chunk
 * a member sends (dt_coll_ring_repeats), and where no chunk is empty every count is within
 * one float of the widest, which round_key takes as the widest. */
static int ring_repeats(const struct dt_op *op, const struct dt_group *g, int r)
{
    if (op->region.count < g->n)
        return 0;
    return dt_coll_ring_repeats(op->coll, op->alg, g->n, op->region.count, r);
}

static struct dt_memo_key coll_key(const struct dt_op *op, const struct dt_group *g,
                                   const int *shifts, int n_shifts, double elem_bytes)
{
    enum dt_coll_alg alg = op->alg == DT_ALG_LIBRARY /* the same schedule as its choice's */
                               ? dt_coll_library_choice(op->coll, g->n, op->region.count)
                               : op->alg;
    const uint64_t shape[] = {(uint64_t)op->coll, (uint64_t)alg, (uint64_t)op->root,
                              (uint64_t)op->region.count, (uint64_t)elem_bytes, (uint64_t)g->n};
    struct dt_memo_key h = dt_memo_start();
    for (size_t i = 0; i < sizeof shape / sizeof *shape; i++)
        h = dt_memo_mix(h, shape[i]);
    for (int i = 0; i < g->n; i++)
        h = dt_memo_mix(h, (uint64_t)g->ranks[i]);
    for (int k = 0; k < n_shifts; k++)
        h = dt_memo_mix(h, (uint64_t)shifts[k]);
    return h;
}

/* The round just built (sr->t): *t its time, *link the part its links are busy. */
static int built_round_time(struct dt_symround *sr, double elem_bytes, double *t, double *link,
                            struct dt_error *err)
{
    /* keyed by its transfers alone: a reduce-scatter's round and an allgather's on the same
     * pairs and counts differ only in the sums, added after */
    struct dt_memo_key rk = dt_memo_mix(round_key(sr), (uint64_t)elem_bytes);
    double lat = 0; /* the round's latencies alone */
    if (dt_memo_recall(&sr->rounds, rk, t, link))
        return DT_OK;
    struct dt_memo_key pairs = pairs_key(sr);
    int rc = solve_by_form(sr, pairs, elem_bytes, t, err);
    if (!rc)
        rc = latencies(sr, pairs, &lat, err);
    *link = *t - lat;
    if (!rc && dt_memo_remember(&sr->rounds, rk, *t, *link))
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    return rc;
}

/* A direct collective's group with its shifted copies: what its rounds' pairs depend on. */
static struct dt_memo_key group_key(const struct dt_group *g, const int *shifts, int n_shifts)
{
    struct dt_memo_key h = dt_memo_mix(dt_memo_start(), (uint64_t)g->n);
    for (int i = 0; i < g->n; i++)
        h = dt_memo_mix(h, (uint64_t)g->ranks[i]);
    for (int k = 0; k < n_shifts; k++)
        h = dt_memo_mix(h, (uint64_t)shifts[k]);
    return h;
}

/* Remembers the pairs of the direct round just built under its group's key. */
static int remember_direct_pairs(struct dt_symround *sr, struct dt_memo_key group)
{
    double at, unused;
    if (dt_memo_recall(&sr->direct_of, group, &at, &unused))
        return 0;
    if (dt_grow((void **)&sr->direct_pairs, &sr->cap_direct, sr->n_direct + 1,
                sizeof *sr->direct_pairs))
        return -1;
    sr->direct_pairs[sr->n_direct] = pairs_key(sr);
    if (dt_memo_remember(&sr->direct_of, group, sr->n_direct, 0))
        return -1;
    sr->n_direct++;
    return 0;
}

/* A round of a direct collective (dt_coll_direct_rounds: every member sends every other one
 * chunk, all within a float of `widest`) timed unbuilt, where an earlier round of its group
 * was built: its pairs are that round's, its counts all `widest` as round_key takes them, so
 * its time is the pairs' form's at widest floats (with their latencies known). False: build
 * it. */
static bool direct_round_time(struct dt_symround *sr, struct dt_memo_key group, long widest,
                              double elem_bytes, double *t, double *link)
{
    double at, fi, lat, unused;
    if (!dt_memo_recall(&sr->direct_of, group, &at, &unused))
        return false;
    struct dt_memo_key pairs = sr->direct_pairs[(int)at];
    struct dt_memo_key rk = dt_memo_mix(dt_memo_mix(pairs, (uint64_t)widest), (uint64_t)elem_bytes);
    if (dt_memo_recall(&sr->direct_rounds, rk, t, link))
        return true;
    if (!dt_memo_recall(&sr->latencies, pairs, &lat, &unused) ||
        !dt_memo_recall(&sr->form_of, pairs, &fi, &unused) ||
        !dt_evenshare_form_time(&sr->forms[(int)fi], elem_bytes * (double)widest, t))
        return false;
    sr->by_form++;
    *link = *t - lat;
    return dt_memo_remember(&sr->direct_rounds, rk, *t, *link) == 0;
}

int dt_symround_time(struct dt_symround *sr, const struct dt_plan *plan, const struct dt_op *op,
                     const int *shifts, int n_shifts, double elem_bytes,
                     const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                     double *s, double *busy_s, struct dt_error *err)
{
    const struct dt_group *g = &plan->groups[op->group];
    struct dt_memo_key key = coll_key(op, g, shifts, n_shifts, elem_bytes);
    if (dt_memo_recall(&sr->colls, key, s, busy_s))
        return DT_OK;
    long widest, direct_sums[2];
    int direct = dt_coll_direct_rounds(op->coll, op->alg, g->n, op->region.count, &widest,
                                       direct_sums);
    struct dt_memo_key group = direct ? group_key(g, shifts, n_shifts) : dt_memo_start();
    int rc = DT_OK;
    double total = 0, busy = 0;
    bool any = true;
    for (int r = 0; any && !rc && (!direct || r < direct); r++) {
        long summed = direct ? direct_sums[r] : 0;
        double t = 0, link = 0; /* the round, its links busy */
        if (!direct || !direct_round_time(sr, group, widest, elem_bytes, &t, &link)) {
            rc = build_round(sr, op, g, shifts, n_shifts, r, &summed, &any, err);
            if (rc || !any)
                break;
            rc = built_round_time(sr, elem_bytes, &t, &link, err);
            if (!rc && direct && remember_direct_pairs(sr, group))
                rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        }
        if (!rc && summed > 0)
            t += dt_cost_reduce(cp, dev, summed, elem_bytes);
        busy += link;
        total += t;
        for (int k = ring_repeats(op, g, r); k > 0; k--, r++) { /* their keys are r's */
            busy += link;
            total += t;
        }
    }
    if (!rc && dt_memo_remember(&sr->colls, key, total, busy))
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    sr->collectives += !rc;
    *s = total;
    *busy_s = busy;
    return rc;
}

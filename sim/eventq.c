/* Event queue: events grouped by exact time into buckets; lanes and a radix heap order the
 * buckets.
 *
 * Simulations of collectives put many events at one instant (a ring step starts every flow at
 * the same time; symmetric nodes finish together). So the heap holds one entry per bucket,
 * not per event; an event joins the bucket made last when that one has its time (events
 * written one after another at one time: the engine batches most of the others), else a new
 * bucket, so that a time may have several buckets, each made after every event of the ones
 * before it: the heap orders buckets by time, then by their first event's sequence number.
 * Inside a bucket the events form a FIFO list, which is sequence order because sequence
 * numbers only grow and a moved event goes to the tail with a fresh one. A push into the last
 * bucket is O(1), a pop O(1) unless it empties its bucket (then the next one is found in the
 * radix heap). A new bucket goes first to a lane (a list kept in order) whose last bucket
 * is not later than it, as most do: a simulation writes its events at now plus a few
 * recurring delays (a route's latency, a transfer's duration), so each delay's times come in
 * order and a lane takes them at its tail; a pop takes the earliest of the lanes' heads and
 * the radix heap's minimum. Only a bucket no lane can take goes to the radix heap. */
#include "eventq.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX

struct slot {               /* one event */
    uint64_t seq;
    uint32_t bucket;        /* NIL when the slot is free */
    uint32_t prev, next;    /* in the bucket's list; next doubles as the free list */
    int32_t kind;
    uint32_t data;
};

struct bucket {             /* all pending events at one time */
    double t;
    uint32_t head, tail;
    uint32_t prev, next;    /* in its bin's or lane's list; next doubles as the free list */
    uint32_t bin;           /* its radix-heap bin, or LANE0 + its lane */
};

#define LANES 4             /* in-order lists of buckets; a pop compares their heads */
#define LANE0 64            /* bucket.bin of lane 0: bins are 0..63 */

struct dt_eventq {
    double now;
    uint64_t next_seq;
    size_t n;               /* pending events */

    struct slot *slots;
    uint32_t n_slots, cap_slots, free_slot;

    struct bucket *buckets;
    uint32_t n_buckets, cap_buckets, free_bucket;

    /* radix heap of the distinct pending times (see "times" below) */
    uint32_t bins[64];      /* list heads, NIL when empty */
    uint64_t nonempty;      /* bit i: bins[i] holds a time */
    uint64_t last;          /* bits of the clock: no pending time is earlier */
    uint32_t bin_min[64];   /* each bin's first bucket (time, then sequence), or NIL when
                             * not known or empty */

    uint32_t hint;          /* the bucket last made, or NIL: events written one after
                             * another often share a time (a ring step's flows) */

    /* lanes: lists of buckets in order (time, then sequence), see "lanes" below */
    uint32_t lane_head[LANES], lane_tail[LANES];
    double head_t[LANES];   /* the head's time, INFINITY when the lane is empty */
    double tail_t[LANES];   /* the tail's time, -INFINITY when the lane is empty */
};

/* ---- times: a radix heap ----
 *
 * Time only moves forward and no event is written before now, so the distinct pending times
 * form a monotone priority queue. A non-negative double's bits order as the double does; a
 * time goes to bin 0 when it equals the clock, else to the bin of the highest bit where it
 * differs from the clock. Every time in bin i is earlier than every time in a higher bin, so
 * the earliest is found in the first bin that holds any, and when the clock moves to it that
 * bin's times fall into lower bins. Each time moves at most 63 times, a few in practice:
 * cheaper than the binary heap this replaces, whose comparisons of near-equal times
 * mispredicted (a ring's end times are many, a few ulps apart). Bins are lists through the
 * buckets, so moving a time needs no memory. Each bin keeps its first bucket, set as buckets
 * come in (moved or new), so that the earliest needs a scan of its bin only when the bin's
 * first left it before its turn (its last event moved away). */

static inline uint64_t tbits(double t)
{
    uint64_t b;
    memcpy(&b, &t, sizeof b);
    return b;
}

static inline uint32_t bin_of(uint64_t last, uint64_t key)
{
    return key == last ? 0 : 64 - (uint32_t)__builtin_clzll(key ^ last);
}

static void bin_push(struct dt_eventq *q, uint32_t i, uint32_t b)
{
    struct bucket *bk = &q->buckets[b];
    bk->bin = i;
    bk->prev = NIL;
    bk->next = q->bins[i];
    if (bk->next != NIL)
        q->buckets[bk->next].prev = b;
    q->bins[i] = b;
    q->nonempty |= UINT64_C(1) << i;
}

/* A new bucket (no event yet): on a tie of times the bin's first stays first, its events
 * were written before. */
static void time_insert(struct dt_eventq *q, uint32_t b)
{
    uint32_t i = bin_of(q->last, tbits(q->buckets[b].t)), m = q->bin_min[i];
    if (q->bins[i] == NIL || (m != NIL && q->buckets[b].t < q->buckets[m].t))
        q->bin_min[i] = b;
    bin_push(q, i, b);
}

static void time_remove(struct dt_eventq *q, uint32_t b)
{
    struct bucket *bk = &q->buckets[b];
    if (bk->prev != NIL)
        q->buckets[bk->prev].next = bk->next;
    else if ((q->bins[bk->bin] = bk->next) == NIL)
        q->nonempty &= ~(UINT64_C(1) << bk->bin);
    if (bk->next != NIL)
        q->buckets[bk->next].prev = bk->prev;
    if (q->bin_min[bk->bin] == b)
        q->bin_min[bk->bin] = NIL;
}

/* Whether bucket a comes before bucket b: an earlier time, or the same time made earlier (its
 * events were all written before b's: a time's events go to the bucket last made for it). */
static bool before(const struct dt_eventq *q, uint32_t a, uint32_t b)
{
    const struct bucket *x = &q->buckets[a], *y = &q->buckets[b];
    return x->t < y->t || (x->t == y->t && q->slots[x->head].seq < q->slots[y->head].seq);
}

/* The bucket of the earliest pending time, or NIL: the first bin's first, found by a scan
 * of that bin when not known (its first left it). */
static uint32_t time_min(struct dt_eventq *q)
{
    if (!q->nonempty)
        return NIL;
    uint32_t i = (uint32_t)__builtin_ctzll(q->nonempty);
    if (q->bin_min[i] != NIL)
        return q->bin_min[i];
    uint32_t best = q->bins[i];
    for (uint32_t b = q->buckets[best].next; b != NIL; b = q->buckets[b].next)
        if (before(q, b, best))
            best = b;
    return q->bin_min[i] = best;
}

/* The clock moves to the earliest time (bucket b): the times of its bin fall into lower
 * bins, b itself into bin 0. */
static void time_advance(struct dt_eventq *q, uint32_t b)
{
    uint64_t key = tbits(q->buckets[b].t);
    if (key == q->last)
        return;
    uint32_t i = q->buckets[b].bin, m = q->bins[i];
    q->bins[i] = q->bin_min[i] = NIL;
    q->nonempty &= ~(UINT64_C(1) << i);
    q->last = key;
    /* the bins below i are empty: each one's first is found as it fills */
    while (m != NIL) {
        uint32_t next = q->buckets[m].next, j = bin_of(key, tbits(q->buckets[m].t));
        if (q->bins[j] == NIL || before(q, m, q->bin_min[j]))
            q->bin_min[j] = m;
        bin_push(q, j, m);
        m = next;
    }
}

/* ---- times: lanes ----
 *
 * A lane is a list of buckets in order. A new bucket is the latest made, so that it comes
 * after every bucket of its time or earlier: it may go at the tail of any lane whose tail is
 * not later, and goes to the one whose tail is latest (best fit: a lane then follows one
 * stream of times, say the ends of one kind of transfer), an empty lane when none fits, the
 * radix heap when every lane's tail is later. Removing a bucket keeps a lane in order, and the
 * buckets of one time keep the order they were made in (each was made after every event of
 * the ones before), so a lane needs no other upkeep. */

/* Appends new bucket b to a lane, or false when every lane's tail is later than it. */
static bool lane_insert(struct dt_eventq *q, uint32_t b)
{
    double t = q->buckets[b].t;
    int best = -1;
    for (int k = 0; k < LANES; k++)
        if (q->tail_t[k] <= t && (best < 0 || q->tail_t[k] > q->tail_t[best]))
            best = k;
    if (best < 0)
        return false;
    struct bucket *bk = &q->buckets[b];
    bk->bin = LANE0 + (uint32_t)best;
    bk->next = NIL;
    bk->prev = q->lane_tail[best];
    if (bk->prev != NIL) {
        q->buckets[bk->prev].next = b;
    } else {
        q->lane_head[best] = b;
        q->head_t[best] = t;
    }
    q->lane_tail[best] = b;
    q->tail_t[best] = t;
    return true;
}

static void lane_remove(struct dt_eventq *q, uint32_t b)
{
    struct bucket *bk = &q->buckets[b];
    uint32_t k = bk->bin - LANE0;
    if (bk->prev != NIL) {
        q->buckets[bk->prev].next = bk->next;
    } else {
        q->lane_head[k] = bk->next;
        q->head_t[k] = bk->next != NIL ? q->buckets[bk->next].t : INFINITY;
    }
    if (bk->next != NIL) {
        q->buckets[bk->next].prev = bk->prev;
    } else {
        q->lane_tail[k] = bk->prev;
        q->tail_t[k] = bk->prev != NIL ? q->buckets[bk->prev].t : -INFINITY;
    }
}

/* The earliest of the lanes' heads, or NIL when every lane is empty. */
static uint32_t lane_min(const struct dt_eventq *q)
{
    int best = 0;
    for (int k = 1; k < LANES; k++)
        if (q->head_t[k] < q->head_t[best] ||
            (q->head_t[k] == q->head_t[best] && q->lane_head[k] != NIL &&
             before(q, q->lane_head[k], q->lane_head[best])))
            best = k;
    return q->lane_head[best];
}

/* The bucket of the earliest pending time, or NIL when none is pending. */
static uint32_t earliest(struct dt_eventq *q)
{
    uint32_t r = time_min(q), l = lane_min(q);
    if (l == NIL)
        return r;
    return r != NIL && before(q, r, l) ? r : l;
}

/* ---- buckets ---- */

/* The bucket an event at time t goes to: the last one made when it has that time, else a new
 * one (a time may have several buckets, each made after the events of the one before). NIL
 * when out of memory. */
static uint32_t bucket_at(struct dt_eventq *q, double t)
{
    if (q->hint != NIL && q->buckets[q->hint].t == t)
        return q->hint;
    uint32_t b = q->free_bucket;
    if (b != NIL) {
        q->free_bucket = q->buckets[b].next;
    } else {
        if (q->n_buckets == q->cap_buckets) {
            if (q->cap_buckets >= UINT32_MAX / 4)
                return NIL;
            uint32_t cap = q->cap_buckets ? 2 * q->cap_buckets : 64;
            struct bucket *nb = realloc(q->buckets, (size_t)cap * sizeof *nb);
            if (!nb)
                return NIL;
            q->buckets = nb;
            q->cap_buckets = cap;
        }
        b = q->n_buckets++;
    }
    q->buckets[b] = (struct bucket){t, NIL, NIL, NIL, NIL, 0};
    if (!lane_insert(q, b))
        time_insert(q, b);
    return q->hint = b;
}

static void bucket_free(struct dt_eventq *q, uint32_t b)
{
    if (q->hint == b)
        q->hint = NIL;
    if (q->buckets[b].bin >= LANE0)
        lane_remove(q, b);
    else
        time_remove(q, b);
    q->buckets[b].next = q->free_bucket;
    q->free_bucket = b;
}

/* Appends slot s (sequence number already set) to bucket b's list. */
static void link_tail(struct dt_eventq *q, uint32_t b, uint32_t s)
{
    struct bucket *bk = &q->buckets[b];
    q->slots[s].bucket = b;
    q->slots[s].prev = bk->tail;
    q->slots[s].next = NIL;
    if (bk->tail != NIL)
        q->slots[bk->tail].next = s;
    else
        bk->head = s;
    bk->tail = s;
}

/* Takes slot s out of its bucket's list (the bucket may be left empty). */
static void list_remove(struct dt_eventq *q, uint32_t s)
{
    struct slot *sl = &q->slots[s];
    struct bucket *bk = &q->buckets[sl->bucket];
    if (sl->prev != NIL)
        q->slots[sl->prev].next = sl->next;
    else
        bk->head = sl->next;
    if (sl->next != NIL)
        q->slots[sl->next].prev = sl->prev;
    else
        bk->tail = sl->prev;
}

/* Takes slot s out of its bucket, freeing the bucket when it empties. */
static void unlink_slot(struct dt_eventq *q, uint32_t s)
{
    uint32_t b = q->slots[s].bucket;
    list_remove(q, s);
    if (q->buckets[b].head == NIL)
        bucket_free(q, b);
    q->slots[s].bucket = NIL;
}

/* Takes slot s, the head of bucket b's list, out of it (a pop), freeing the bucket when it
 * empties: unlink_slot for the head, which has no previous slot. */
static void unlink_head(struct dt_eventq *q, uint32_t b, uint32_t s)
{
    struct bucket *bk = &q->buckets[b];
    uint32_t next = q->slots[s].next;
    bk->head = next;
    if (next != NIL)
        q->slots[next].prev = NIL;
    else
        bucket_free(q, b);
    q->slots[s].bucket = NIL;
}

/* ---- the interface ---- */

int dt_eventq_create(struct dt_eventq **out, struct dt_error *err)
{
    struct dt_eventq *q = calloc(1, sizeof *q);
    if (!q)
        return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory (event queue)");
    q->free_slot = NIL;
    q->free_bucket = NIL;
    q->hint = NIL;
    for (int i = 0; i < 64; i++)
        q->bins[i] = q->bin_min[i] = NIL;
    for (int k = 0; k < LANES; k++) {
        q->lane_head[k] = q->lane_tail[k] = NIL;
        q->head_t[k] = INFINITY;
        q->tail_t[k] = -INFINITY;
    }
    *out = q;
    return DT_OK;
}

void dt_eventq_destroy(struct dt_eventq *q)
{
    if (!q)
        return;
    free(q->slots);
    free(q->buckets);
    free(q);
}

double dt_eventq_now(const struct dt_eventq *q)
{
    return q->now;
}

size_t dt_eventq_size(const struct dt_eventq *q)
{
    return q->n;
}

static int check_delay(double delay_s, struct dt_error *err)
{
    if (!(delay_s >= 0) || !isfinite(delay_s))
        return dt_fail(err, DT_EINPUT, "", 0, 0,
                       "event offset %g s: events are scheduled at a finite, non-negative "
                       "offset from now (no event in the past)", delay_s);
    return DT_OK;
}

static int no_memory(struct dt_error *err)
{
    return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory (event queue)");
}

/* Writes an event at absolute time t (checked by the caller: finite, not before now). */
static int schedule_time(struct dt_eventq *q, double t, int kind, uint32_t data, uint32_t *id,
                         struct dt_error *err)
{
    uint32_t s = q->free_slot;
    if (s == NIL) {
        if (q->n_slots == q->cap_slots) {
            if (q->cap_slots >= UINT32_MAX / 4)
                return no_memory(err);
            uint32_t cap = q->cap_slots ? 2 * q->cap_slots : 256;
            struct slot *sl = realloc(q->slots, (size_t)cap * sizeof *sl);
            if (!sl)
                return no_memory(err);
            q->slots = sl;
            q->cap_slots = cap;
        }
        s = q->n_slots++;
        q->slots[s].bucket = NIL;
        q->slots[s].next = q->free_slot;
        q->free_slot = s; /* so that a failure below leaves it free */
    }
    uint32_t b = bucket_at(q, t + 0.0); /* + 0.0: -0 and +0 are one time */
    if (b == NIL)
        return no_memory(err);
    q->free_slot = q->slots[s].next;
    q->slots[s].kind = kind;
    q->slots[s].data = data;
    q->slots[s].seq = q->next_seq++;
    link_tail(q, b, s);
    q->n++;
    if (id)
        *id = s;
    return DT_OK;
}

int dt_eventq_schedule(struct dt_eventq *q, double delay_s, int kind, uint32_t data,
                       uint32_t *id, struct dt_error *err)
{
    int rc = check_delay(delay_s, err);
    return rc ? rc : schedule_time(q, q->now + delay_s, kind, data, id, err);
}

int dt_eventq_schedule_at(struct dt_eventq *q, double t, int kind, uint32_t data,
                          uint32_t *id, struct dt_error *err)
{
    if (!(t >= q->now) || !isfinite(t))
        return dt_fail(err, DT_EINPUT, "", 0, 0,
                       "event at %g s: not before now (%g s) and finite", t, q->now);
    return schedule_time(q, t, kind, data, id, err);
}

static bool pending(const struct dt_eventq *q, uint32_t id)
{
    return id < q->n_slots && q->slots[id].bucket != NIL;
}

int dt_eventq_reschedule(struct dt_eventq *q, uint32_t id, double delay_s,
                         struct dt_error *err)
{
    int rc = check_delay(delay_s, err);
    if (rc)
        return rc;
    if (!pending(q, id))
        return dt_fail(err, DT_EINPUT, "", 0, 0, "event %u is not pending", id);
    double t = q->now + delay_s + 0.0;
    /* find or make the new bucket before leaving the old one, so that failure changes
     * nothing (the old bucket cannot vanish meanwhile: it holds this event) */
    uint32_t b = bucket_at(q, t);
    if (b == NIL)
        return no_memory(err);
    if (b == q->slots[id].bucket)
        list_remove(q, id); /* same time: only its place in the order changes */
    else
        unlink_slot(q, id);
    q->slots[id].seq = q->next_seq++;
    link_tail(q, b, id);
    return DT_OK;
}

int dt_eventq_set_data(struct dt_eventq *q, uint32_t id, uint32_t data, struct dt_error *err)
{
    if (!pending(q, id))
        return dt_fail(err, DT_EINPUT, "", 0, 0, "event %u is not pending", id);
    q->slots[id].data = data;
    return DT_OK;
}

int dt_eventq_cancel(struct dt_eventq *q, uint32_t id, struct dt_error *err)
{
    if (!pending(q, id))
        return dt_fail(err, DT_EINPUT, "", 0, 0, "event %u is not pending", id);
    unlink_slot(q, id);
    q->slots[id].next = q->free_slot;
    q->free_slot = id;
    q->n--;
    return DT_OK;
}

int dt_eventq_peek(struct dt_eventq *q, double *t)
{
    uint32_t b = earliest(q); /* the radix heap keeps what it found for the pop */
    if (b == NIL)
        return 0;
    *t = q->buckets[b].t;
    return 1;
}

int dt_eventq_peek_event(struct dt_eventq *q, int *kind, uint32_t *data)
{
    uint32_t b = earliest(q);
    if (b == NIL)
        return 0;
    const struct slot *sl = &q->slots[q->buckets[b].head];
    *kind = sl->kind;
    *data = sl->data;
    return 1;
}

int dt_eventq_pop(struct dt_eventq *q, struct dt_event *ev)
{
    uint32_t b = earliest(q);
    if (b == NIL)
        return 0;
    if (q->buckets[b].bin < LANE0)
        time_advance(q, b);
    double t = q->buckets[b].t;
    uint32_t s = q->buckets[b].head;
    struct slot *sl = &q->slots[s];
    ev->t = t;
    ev->seq = sl->seq;
    ev->kind = sl->kind;
    ev->data = sl->data;
    ev->id = s;
    unlink_head(q, b, s);
    sl->next = q->free_slot;
    q->free_slot = s;
    q->n--;
    q->now = t;
    return 1;
}

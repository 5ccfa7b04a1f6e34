/* Event queue: an indexed 4-ary heap keyed on (time, sequence). */
#include "eventq.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

/* A heap entry: 16 bytes, so that the four children of a node share one cache line. The
 * sequence number and the slot are packed in one word, sequence high: comparing the words
 * compares the sequence numbers (they are unique). */
#define SLOT_BITS 24
#define SLOT_MASK ((UINT64_C(1) << SLOT_BITS) - 1)
#define MAX_SLOTS (UINT32_C(1) << SLOT_BITS)          /* pending events at once */
#define MAX_SEQ (UINT64_C(1) << (64 - SLOT_BITS))     /* events scheduled in a run */

struct entry {
    double t;
    uint64_t key; /* seq << SLOT_BITS | slot */
};

struct slot {
    int32_t pos;     /* index in the heap; -1 when the slot is free */
    int32_t kind;
    uint32_t data;
    uint32_t next;   /* free list */
};

struct dt_eventq {
    double now;
    uint64_t next_seq;
    struct entry *heap;
    size_t n, cap;
    struct slot *slots;
    uint32_t n_slots, cap_slots;
    uint32_t free_head; /* UINT32_MAX when empty */
};

#define ARITY 4 /* a 4-ary heap: half the levels of a binary one, same cache lines per level */

static inline bool before(const struct entry *a, const struct entry *b)
{
    return a->t < b->t || (a->t == b->t && a->key < b->key);
}

static inline uint32_t slot_of(const struct entry *e)
{
    return (uint32_t)(e->key & SLOT_MASK);
}

static inline void place(struct dt_eventq *q, size_t i, struct entry e)
{
    q->heap[i] = e;
    q->slots[slot_of(&e)].pos = (int32_t)i;
}

static void sift_up(struct dt_eventq *q, size_t i)
{
    struct entry e = q->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / ARITY;
        if (!before(&e, &q->heap[parent]))
            break;
        place(q, i, q->heap[parent]);
        i = parent;
    }
    place(q, i, e);
}

static void sift_down(struct dt_eventq *q, size_t i)
{
    struct entry e = q->heap[i];
    size_t n = q->n;
    for (;;) {
        size_t first = ARITY * i + 1;
        if (first >= n)
            break;
        size_t last = first + ARITY < n ? first + ARITY : n;
        size_t c = first;
        for (size_t k = first + 1; k < last; k++)
            if (before(&q->heap[k], &q->heap[c]))
                c = k;
        if (!before(&q->heap[c], &e))
            break;
        place(q, i, q->heap[c]);
        i = c;
    }
    place(q, i, e);
}

static int next_key(struct dt_eventq *q, uint32_t slot, uint64_t *key, struct dt_error *err)
{
    if (q->next_seq >= MAX_SEQ)
        return dt_fail(err, DT_EINTERNAL, "", 0, 0, "event sequence numbers exhausted "
                       "(%llu events scheduled)", (unsigned long long)q->next_seq);
    *key = q->next_seq++ << SLOT_BITS | slot;
    return DT_OK;
}

int dt_eventq_create(struct dt_eventq **out, struct dt_error *err)
{
    struct dt_eventq *q = calloc(1, sizeof *q);
    if (!q)
        return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory (event queue)");
    q->free_head = UINT32_MAX;
    *out = q;
    return DT_OK;
}

void dt_eventq_destroy(struct dt_eventq *q)
{
    if (!q)
        return;
    free(q->heap);
    free(q->slots);
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

int dt_eventq_schedule(struct dt_eventq *q, double delay_s, int kind, uint32_t data,
                       uint32_t *id, struct dt_error *err)
{
    int rc = check_delay(delay_s, err);
    if (rc)
        return rc;
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 256;
        struct entry *h = realloc(q->heap, cap * sizeof *h);
        if (!h)
            return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory (event heap)");
        q->heap = h;
        q->cap = cap;
    }
    uint32_t s = q->free_head;
    if (s == UINT32_MAX) {
        if (q->n_slots == q->cap_slots) {
            if (q->cap_slots >= MAX_SLOTS)
                return dt_fail(err, DT_ENOMEM, "", 0, 0, "more than %lu events pending",
                               (unsigned long)MAX_SLOTS);
            uint32_t cap = q->cap_slots ? 2 * q->cap_slots : 256;
            struct slot *sl = realloc(q->slots, (size_t)cap * sizeof *sl);
            if (!sl)
                return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory (event slots)");
            q->slots = sl;
            q->cap_slots = cap;
        }
        s = q->n_slots++;
    } else {
        q->free_head = q->slots[s].next;
    }
    uint64_t key = 0;
    rc = next_key(q, s, &key, err);
    if (rc) {
        q->slots[s].pos = -1;
        q->slots[s].next = q->free_head;
        q->free_head = s;
        return rc;
    }
    q->slots[s].kind = kind;
    q->slots[s].data = data;
    q->heap[q->n] = (struct entry){q->now + delay_s, key};
    q->slots[s].pos = (int32_t)q->n;
    q->n++;
    sift_up(q, q->n - 1);
    if (id)
        *id = s;
    return DT_OK;
}

static bool pending(const struct dt_eventq *q, uint32_t id)
{
    return id < q->n_slots && q->slots[id].pos >= 0;
}

int dt_eventq_reschedule(struct dt_eventq *q, uint32_t id, double delay_s,
                         struct dt_error *err)
{
    int rc = check_delay(delay_s, err);
    if (rc)
        return rc;
    if (!pending(q, id))
        return dt_fail(err, DT_EINPUT, "", 0, 0, "event %u is not pending", id);
    size_t i = (size_t)q->slots[id].pos;
    struct entry old = q->heap[i];
    rc = next_key(q, id, &q->heap[i].key, err);
    if (rc)
        return rc;
    q->heap[i].t = q->now + delay_s;
    /* the new key is larger in seq, so it can only move down unless its time dropped */
    if (before(&q->heap[i], &old))
        sift_up(q, i);
    else
        sift_down(q, i);
    return DT_OK;
}

/* Takes the entry at heap index i out, filling the hole with the last entry. */
static void remove_at(struct dt_eventq *q, size_t i)
{
    uint32_t s = slot_of(&q->heap[i]);
    q->n--;
    if (i != q->n) {
        struct entry last = q->heap[q->n];
        struct entry gone = q->heap[i];
        place(q, i, last);
        if (before(&last, &gone))
            sift_up(q, i);
        else
            sift_down(q, i);
    }
    q->slots[s].pos = -1;
    q->slots[s].next = q->free_head;
    q->free_head = s;
}

int dt_eventq_cancel(struct dt_eventq *q, uint32_t id, struct dt_error *err)
{
    if (!pending(q, id))
        return dt_fail(err, DT_EINPUT, "", 0, 0, "event %u is not pending", id);
    remove_at(q, (size_t)q->slots[id].pos);
    return DT_OK;
}

int dt_eventq_peek(const struct dt_eventq *q, double *t)
{
    if (q->n == 0)
        return 0;
    *t = q->heap[0].t;
    return 1;
}

int dt_eventq_pop(struct dt_eventq *q, struct dt_event *ev)
{
    if (q->n == 0)
        return 0;
    struct entry top = q->heap[0];
    uint32_t s = slot_of(&top);
    ev->t = top.t;
    ev->seq = top.key >> SLOT_BITS;
    ev->kind = q->slots[s].kind;
    ev->data = q->slots[s].data;
    ev->id = s;
    remove_at(q, 0);
    q->now = top.t;
    return 1;
}

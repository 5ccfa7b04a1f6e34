/* Batches of flow events: flows whose events would be written one right after another at the
 * same time and of the same kind, kept behind one queued event (the first flow's).
 *
 * A ring step starts its flows, and ends them, a few at a time at equal times: every start or
 * end event written straight after one of the same kind at the same time, with nothing written
 * in between, would sit right behind it in the queue and pop right after it. Such a flow joins
 * the last written event's batch instead of the queue; when that event pops, its batch's flows
 * come next, one per call, in the order they joined: the order their own events would have
 * popped in. A batched end that must move (its rate changed) leaves its batch, and a batch's
 * first flow that moves hands its queued event to the next one, so that the others keep their
 * place. The engine owns the queue and counts what it writes there; this file keeps the lists.
 * Memory: two indices per flow record. */
#ifndef DT_SIM_BATCH_H
#define DT_SIM_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#define DT_BATCH_NONE UINT32_MAX

struct dt_batch {
    uint32_t *next, *prev; /* per flow record: its neighbours in its batch, or NONE */
    uint32_t cap;          /* flow records the arrays hold */
    uint32_t last;         /* the last flow written (queued or joined), or NONE */
    int last_kind;         /* its event's kind */
    double last_t;         /* its event's time */
    uint64_t last_writes;  /* the engine's count of queue writes just after it */
    uint32_t pending;      /* the next flow of the batch whose event popped, or NONE */
    int pending_kind;
};

void dt_batch_init(struct dt_batch *b);
void dt_batch_free(struct dt_batch *b);
/* Forgets every batch (the flow records are free again). */
void dt_batch_clear(struct dt_batch *b);
/* Room for flow records 0..n-1; -1 when out of memory. */
int dt_batch_reserve(struct dt_batch *b, uint32_t n);

/* Whether an event of kind at time t, written now (the engine's writes so far: writes), would
 * come right after the last written one: then it can join that one's batch. */
static inline bool dt_batch_joins(const struct dt_batch *b, int kind, double t, uint64_t writes)
{
    return b->last != DT_BATCH_NONE && writes == b->last_writes && kind == b->last_kind &&
           t == b->last_t;
}
/* Flow i joins the last written event's batch, at its end. */
void dt_batch_join(struct dt_batch *b, uint32_t i);
/* Flow i's event of kind at time t was just queued (writes: the engine's count after it): a
 * batch of its own that later events may join. */
void dt_batch_queued(struct dt_batch *b, uint32_t i, int kind, double t, uint64_t writes);
/* Takes flow i out of its batch; returns the flow that follows it when i was the batch's first
 * (the heir of its queued event), else NONE. */
uint32_t dt_batch_leave(struct dt_batch *b, uint32_t i);
/* The event of flow i (kind, at time t) popped: the rest of its batch comes next. Nothing
 * written before the pop at that time is joined after it (it may be that batch); a later
 * time's batch still may be: what joins it pops right after it, as if queued there. */
void dt_batch_popped(struct dt_batch *b, uint32_t i, int kind, double t);
/* The next flow of the popped batch (*kind its event's), or NONE when it is over. */
static inline uint32_t dt_batch_take(struct dt_batch *b, int *kind)
{
    uint32_t i = b->pending;
    if (i != DT_BATCH_NONE) {
        b->pending = b->next[i];
        *kind = b->pending_kind;
    }
    return i;
}

#endif

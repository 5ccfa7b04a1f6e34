/* The discrete-event core: a clock and a queue of future events.
 *
 * Order is total and deterministic: by time, then by the sequence number an event got when it
 * was (re)scheduled, so two events at the same time come out in the order they were written.
 * Events are written at a relative, non-negative offset from now: an event in the past cannot
 * be written (dt_eventq_schedule refuses a negative or non-finite offset).
 *
 * An event can be moved (rescheduled) or cancelled through its id: the network uses this for a
 * flow's finish time, which moves whenever the flow's rate changes. Ids are recycled once the
 * event has been popped or cancelled.
 *
 * Implementation: events written one after another at the same time share a bucket (a FIFO
 * list, which is sequence order); buckets are ordered by time, then by sequence, in a few
 * lanes (lists in order, each taking new buckets not earlier than its tail: a simulation's
 * recurring delays write most times in order) and, for a bucket no lane takes, a radix heap
 * (time never goes back). Scheduling and popping are O(1) but for the radix heap's moves of a
 * bucket into lower bins as the clock nears its time (at most 63 per bucket, a few in
 * practice). Memory is linear in the number of pending events. */
#ifndef DT_SIM_EVENTQ_H
#define DT_SIM_EVENTQ_H

#include <stddef.h>
#include <stdint.h>

#include "dt/error.h"

struct dt_eventq; /* opaque; owned by whoever created it */

/* What an event carries back to its owner: a kind (the owner's enum) and an index. */
struct dt_event {
    double t;      /* absolute time, s */
    uint64_t seq;  /* insertion sequence: ties at equal t go in increasing seq */
    int kind;
    uint32_t data;
    uint32_t id;   /* the id it was scheduled under (already recycled when popped) */
};

int dt_eventq_create(struct dt_eventq **out, struct dt_error *err);
void dt_eventq_destroy(struct dt_eventq *q);

/* The clock: the time of the last popped event (0 at the start). */
double dt_eventq_now(const struct dt_eventq *q);
/* Pending events. */
size_t dt_eventq_size(const struct dt_eventq *q);

/* Schedules an event at now + delay_s. DT_EINPUT when delay_s is negative, NaN or infinite
 * (the queue is then unchanged); DT_ENOMEM when memory runs out. id may be NULL. */
int dt_eventq_schedule(struct dt_eventq *q, double delay_s, int kind, uint32_t data,
                       uint32_t *id, struct dt_error *err);
/* Schedules an event at absolute time t >= now, exactly as dt_eventq_schedule would from a
 * clock at t0 with offset t - t0 when t was computed as t0 + offset. DT_EINPUT for t before
 * now or not finite. */
int dt_eventq_schedule_at(struct dt_eventq *q, double t, int kind, uint32_t data,
                          uint32_t *id, struct dt_error *err);
/* Moves pending event id to now + delay_s with a fresh sequence number (as if written now).
 * DT_EINPUT for a bad delay or an id that is not pending. */
int dt_eventq_reschedule(struct dt_eventq *q, uint32_t id, double delay_s,
                         struct dt_error *err);
/* Pending event id carries data from now on (its time and place in the order stay). DT_EINPUT
 * if it is not pending. */
int dt_eventq_set_data(struct dt_eventq *q, uint32_t id, uint32_t data, struct dt_error *err);
/* Removes pending event id; DT_EINPUT if it is not pending. */
int dt_eventq_cancel(struct dt_eventq *q, uint32_t id, struct dt_error *err);

/* Time of the next event; 0 (false) when the queue is empty. Not const: it keeps what it found
 * for the next pop. */
int dt_eventq_peek(struct dt_eventq *q, double *t);
/* The kind and data of the next event (as dt_eventq_peek finds it), not removed; 0 when the
 * queue is empty. */
int dt_eventq_peek_event(struct dt_eventq *q, int *kind, uint32_t *data);
/* Removes the next event into *ev and advances the clock to its time; 0 when empty. */
int dt_eventq_pop(struct dt_eventq *q, struct dt_event *ev);

#endif

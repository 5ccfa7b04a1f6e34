/* Batches of flow events: see batch.h. */
#include "batch.h"

#include <stdlib.h>

void dt_batch_init(struct dt_batch *b)
{
    *b = (struct dt_batch){.last = DT_BATCH_NONE, .pending = DT_BATCH_NONE};
}

void dt_batch_free(struct dt_batch *b)
{
    free(b->next);
    free(b->prev);
    dt_batch_init(b);
}

void dt_batch_clear(struct dt_batch *b)
{
    b->last = b->pending = DT_BATCH_NONE;
}

int dt_batch_reserve(struct dt_batch *b, uint32_t n)
{
    if (n <= b->cap)
        return 0;
    uint32_t *next = realloc(b->next, (size_t)n * sizeof *next);
    if (next)
        b->next = next;
    uint32_t *prev = next ? realloc(b->prev, (size_t)n * sizeof *prev) : NULL;
    if (!prev)
        return -1;
    b->prev = prev;
    b->cap = n;
    return 0;
}

void dt_batch_join(struct dt_batch *b, uint32_t i)
{
    b->next[b->last] = i;
    b->prev[i] = b->last;
    b->next[i] = DT_BATCH_NONE;
    b->last = i;
}

void dt_batch_queued(struct dt_batch *b, uint32_t i, int kind, double t, uint64_t writes)
{
    b->next[i] = b->prev[i] = DT_BATCH_NONE;
    b->last = i;
    b->last_kind = kind;
    b->last_t = t;
    b->last_writes = writes;
}

uint32_t dt_batch_leave(struct dt_batch *b, uint32_t i)
{
    uint32_t next = b->next[i], prev = b->prev[i];
    if (next != DT_BATCH_NONE)
        b->prev[next] = prev;
    if (prev != DT_BATCH_NONE)
        b->next[prev] = next;
    if (b->last == i) /* joining after it would no longer follow the batch */
        b->last = DT_BATCH_NONE;
    b->next[i] = b->prev[i] = DT_BATCH_NONE;
    return prev == DT_BATCH_NONE ? next : DT_BATCH_NONE;
}

void dt_batch_popped(struct dt_batch *b, uint32_t i, int kind, double t)
{
    b->pending = b->next[i];
    b->pending_kind = kind;
    if (t == b->last_t)
        b->last = DT_BATCH_NONE;
}

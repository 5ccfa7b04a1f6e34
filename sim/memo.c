/* Times by key in an open-addressing table (see memo.h). */
#include "memo.h"

#include <stdint.h>
#include <stdlib.h>

struct dt_memo_key dt_memo_start(void)
{
    return (struct dt_memo_key){1469598103934665603ULL, 0x9e3779b97f4a7c15ULL};
}

static bool same(struct dt_memo_key x, struct dt_memo_key y)
{
    return x.a == y.a && x.b == y.b;
}

/* The slot of k, or the free one where it would go. */
static int slot(const struct dt_memo *m, struct dt_memo_key k)
{
    int mask = m->cap - 1, i = (int)(k.a & (uint64_t)mask);
    while (m->e[i].used && !same(m->e[i].key, k))
        i = (i + 1) & mask;
    return i;
}

bool dt_memo_recall(const struct dt_memo *m, struct dt_memo_key k, double *s, double *busy)
{
    if (m->n == 0)
        return false;
    const struct dt_memo_entry *e = &m->e[slot(m, k)];
    if (!e->used)
        return false;
    *s = e->s;
    *busy = e->busy;
    return true;
}

/* Twice the slots, the entries put back. */
static int grow(struct dt_memo *m)
{
    if (m->cap > INT32_MAX / 2)
        return -1;
    int cap = m->cap ? 2 * m->cap : 64;
    struct dt_memo old = *m;
    m->e = calloc((size_t)cap, sizeof *m->e);
    if (!m->e) {
        *m = old;
        return -1;
    }
    m->cap = cap;
    for (int i = 0; i < old.cap; i++)
        if (old.e[i].used)
            m->e[slot(m, old.e[i].key)] = old.e[i];
    free(old.e);
    return 0;
}

int dt_memo_remember(struct dt_memo *m, struct dt_memo_key k, double s, double busy)
{
    if (2 * (m->n + 1) > m->cap && grow(m))
        return -1;
    struct dt_memo_entry *e = &m->e[slot(m, k)];
    m->n += !e->used;
    *e = (struct dt_memo_entry){k, s, busy, true};
    return 0;
}

void dt_memo_free(struct dt_memo *m)
{
    free(m->e);
    *m = (struct dt_memo){0};
}

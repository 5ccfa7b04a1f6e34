/* The matching index: see matchindex.h. */
#include "matchindex.h"

#include <stdint.h>
#include <stdlib.h>

void dt_match_init(struct dt_match_index *ix)
{
    ix->slots = NULL;
    ix->cap = ix->n = 0;
}

void dt_match_free(struct dt_match_index *ix)
{
    free(ix->slots);
    dt_match_init(ix);
}

static uint64_t hash(int rank, int group, int seq, int dst)
{
    uint64_t h = (uint32_t)rank * 0x9E3779B97F4A7C15ull;
    h ^= (uint32_t)group * 0xC2B2AE3D27D4EB4Full + (h << 6) + (h >> 2);
    h ^= (uint32_t)seq * 0x165667B19E3779F9ull + (h << 6) + (h >> 2);
    h ^= (uint32_t)dst * 0x27D4EB2F165667C5ull + (h << 6) + (h >> 2);
    return h ^ (h >> 31);
}

static struct dt_match_entry *probe(const struct dt_match_index *ix, int rank, int group,
                                    int seq, int dst)
{
    long i = (long)(hash(rank, group, seq, dst) & (uint64_t)(ix->cap - 1));
    for (;; i = (i + 1) & (ix->cap - 1)) {
        struct dt_match_entry *e = &ix->slots[i];
        if (e->rank == -1 ||
            (e->rank == rank && e->group == group && e->seq == seq && e->dst == dst))
            return e;
    }
}

static int grow(struct dt_match_index *ix)
{
    long cap = ix->cap ? 2 * ix->cap : 1024;
    struct dt_match_entry *old = ix->slots, *s = malloc((size_t)cap * sizeof *s);
    if (!s)
        return -1;
    for (long i = 0; i < cap; i++)
        s[i].rank = -1;
    long old_cap = ix->cap;
    ix->slots = s;
    ix->cap = cap;
    for (long i = 0; i < old_cap; i++)
        if (old[i].rank != -1)
            *probe(ix, old[i].rank, old[i].group, old[i].seq, old[i].dst) = old[i];
    free(old);
    return 0;
}

struct dt_match_entry *dt_match_get(struct dt_match_index *ix, int rank, int group, int seq,
                                    int dst)
{
    if (2 * (ix->n + 1) > ix->cap && grow(ix))
        return NULL;
    struct dt_match_entry *e = probe(ix, rank, group, seq, dst);
    if (e->rank == -1) {
        *e = (struct dt_match_entry){rank, group, seq, dst, -1, -1, -1};
        ix->n++;
    }
    return e;
}

struct dt_match_entry *dt_match_find(const struct dt_match_index *ix, int rank, int group,
                                     int seq, int dst)
{
    if (!ix->cap)
        return NULL;
    struct dt_match_entry *e = probe(ix, rank, group, seq, dst);
    return e->rank == -1 ? NULL : e;
}

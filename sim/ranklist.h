/* --trace-ranks LIST: ranks and ranges ("0-7,1024,4096-4103"), parsed once and asked per
 * rank. */
#ifndef DT_SIM_RANKLIST_H
#define DT_SIM_RANKLIST_H

#include <stdbool.h>

#define DT_RANKLIST_MAX 64 /* ranges in one list */

struct dt_ranklist {
    int n;
    int lo[DT_RANKLIST_MAX], hi[DT_RANKLIST_MAX]; /* inclusive */
};

/* Parses text; on error prints "PROG: FLAG: message" to stderr and returns 2. */
int dt_ranklist_parse(const char *prog, const char *flag, const char *text,
                      struct dt_ranklist *out);
/* Inline: the player (also compiled into dtvalidate and tests) asks without linking this. */
static inline bool dt_ranklist_has(const struct dt_ranklist *l, int rank)
{
    for (int i = 0; i < l->n; i++)
        if (rank >= l->lo[i] && rank <= l->hi[i])
            return true;
    return false;
}
/* The largest rank listed. */
int dt_ranklist_max(const struct dt_ranklist *l);

#endif

/* Rank lists: see ranklist.h. */
#include "ranklist.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(const char *prog, const char *flag, const char *what, const char *text)
{
    fprintf(stderr, "%s: %s: %s in '%s' (expected ranks and ranges: 0-7,1024)\n", prog, flag,
            what, text);
    return 2;
}

/* A rank >= 0 at *s; advances *s. */
static bool rank_at(const char **s, int *out)
{
    if (!isdigit((unsigned char)**s))
        return false;
    char *end;
    errno = 0;
    long v = strtol(*s, &end, 10);
    if (errno || v > INT_MAX)
        return false;
    *out = (int)v;
    *s = end;
    return true;
}

int dt_ranklist_parse(const char *prog, const char *flag, const char *text,
                      struct dt_ranklist *out)
{
    out->n = 0;
    const char *s = text;
    for (;;) {
        int lo, hi;
        if (!rank_at(&s, &lo))
            return fail(prog, flag, "not a rank", text);
        hi = lo;
        if (*s == '-') {
            s++;
            if (!rank_at(&s, &hi))
                return fail(prog, flag, "a range without its end", text);
            if (hi < lo)
                return fail(prog, flag, "a range that ends before it starts", text);
        }
        if (out->n == DT_RANKLIST_MAX)
            return fail(prog, flag, "more than 64 ranges", text);
        out->lo[out->n] = lo;
        out->hi[out->n] = hi;
        out->n++;
        if (*s == '\0')
            return 0;
        if (*s++ != ',')
            return fail(prog, flag, "unexpected character", text);
    }
}

int dt_ranklist_max(const struct dt_ranklist *l)
{
    int m = -1;
    for (int i = 0; i < l->n; i++)
        m = l->hi[i] > m ? l->hi[i] : m;
    return m;
}

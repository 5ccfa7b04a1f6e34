/* Progressive filling; see maxmin.h for the maths. */
#include "maxmin.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "grow.h"

struct dt_maxmin {
    int cap_links, cap_flows, cap_nnz;
    double *rem;       /* capacity not yet given to frozen flows */
    int *cnt;          /* unfrozen flows on the link (with multiplicity) */
    int *lstart;       /* link -> flows, CSR (n_links + 1) */
    int *lflows;
    int *fill;         /* scratch while building the CSR */
    int *active;       /* links that still carry unfrozen flows */
    bool *frozen;
    int rounds;
};

int dt_maxmin_create(struct dt_maxmin **out, struct dt_error *err)
{
    struct dt_maxmin *mm = calloc(1, sizeof *mm);
    if (!mm)
        return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory (max-min workspace)");
    *out = mm;
    return DT_OK;
}

void dt_maxmin_destroy(struct dt_maxmin *mm)
{
    if (!mm)
        return;
    free(mm->rem);
    free(mm->cnt);
    free(mm->lstart);
    free(mm->lflows);
    free(mm->fill);
    free(mm->active);
    free(mm->frozen);
    free(mm);
}

static int reserve(struct dt_maxmin *mm, int n_links, int n_flows, int nnz)
{
    int cl = mm->cap_links, cf = mm->cap_flows, cn = mm->cap_nnz;
    if (n_links + 1 > cl) {
        int c = cl;
        if (dt_grow((void **)&mm->rem, &c, n_links + 1, sizeof *mm->rem))
            return -1;
        c = cl;
        if (dt_grow((void **)&mm->cnt, &c, n_links + 1, sizeof *mm->cnt))
            return -1;
        c = cl;
        if (dt_grow((void **)&mm->lstart, &c, n_links + 1, sizeof *mm->lstart))
            return -1;
        c = cl;
        if (dt_grow((void **)&mm->fill, &c, n_links + 1, sizeof *mm->fill))
            return -1;
        c = cl;
        if (dt_grow((void **)&mm->active, &c, n_links + 1, sizeof *mm->active))
            return -1;
        mm->cap_links = c;
    }
    if (n_flows > cf) {
        if (dt_grow((void **)&mm->frozen, &cf, n_flows, sizeof *mm->frozen))
            return -1;
        mm->cap_flows = cf;
    }
    if (nnz > cn) {
        if (dt_grow((void **)&mm->lflows, &cn, nnz, sizeof *mm->lflows))
            return -1;
        mm->cap_nnz = cn;
    }
    return 0;
}

int dt_maxmin_solve(struct dt_maxmin *mm, int n_links, const double *cap, int n_flows,
                    const int *start, const int *links, double *rate, struct dt_error *err)
{
    mm->rounds = 0;
    if (n_links < 0 || n_flows < 0)
        return dt_fail(err, DT_EINPUT, "", 0, 0, "max-min: negative problem size");
    int nnz = n_flows ? start[n_flows] : 0;
    if (reserve(mm, n_links, n_flows, nnz))
        return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory (max-min workspace)");
    for (int l = 0; l < n_links; l++) {
        if (!(cap[l] > 0) || !isfinite(cap[l]))
            return dt_fail(err, DT_EINPUT, "", 0, 0,
                           "max-min: link %d has capacity %g (must be finite and > 0)", l,
                           cap[l]);
        mm->rem[l] = cap[l];
        mm->cnt[l] = 0;
    }
    for (int f = 0; f < n_flows; f++) {
        mm->frozen[f] = false;
        for (int k = start[f]; k < start[f + 1]; k++) {
            int l = links[k];
            if (l < 0 || l >= n_links)
                return dt_fail(err, DT_EINPUT, "", 0, 0, "max-min: flow %d crosses link %d "
                               "of %d", f, l, n_links);
            mm->cnt[l]++;
        }
        if (start[f] == start[f + 1]) {
            rate[f] = INFINITY;
            mm->frozen[f] = true;
        }
    }
    /* link -> flows adjacency, by counting sort */
    mm->lstart[0] = 0;
    for (int l = 0; l < n_links; l++) {
        mm->lstart[l + 1] = mm->lstart[l] + mm->cnt[l];
        mm->fill[l] = mm->lstart[l];
    }
    for (int f = 0; f < n_flows; f++)
        for (int k = start[f]; k < start[f + 1]; k++)
            mm->lflows[mm->fill[links[k]]++] = f;
    int n_active = 0;
    for (int l = 0; l < n_links; l++)
        if (mm->cnt[l] > 0)
            mm->active[n_active++] = l;

    double level = 0; /* frozen rates never decrease from round to round */
    while (n_active > 0) {
        /* the bottleneck: smallest share; ties go to the lowest link index (deterministic) */
        int best = mm->active[0];
        double best_share = mm->rem[best] / mm->cnt[best];
        for (int i = 1; i < n_active; i++) {
            int l = mm->active[i];
            double s = mm->rem[l] / mm->cnt[l];
            if (s < best_share) {
                best_share = s;
                best = l;
            }
        }
        /* rounding can leave a share a hair below the previous level; the exact one is not */
        if (best_share < level)
            best_share = level;
        level = best_share;
        for (int k = mm->lstart[best]; k < mm->lstart[best + 1]; k++) {
            int f = mm->lflows[k];
            if (mm->frozen[f])
                continue;
            mm->frozen[f] = true;
            rate[f] = best_share;
            for (int j = start[f]; j < start[f + 1]; j++) {
                int l = links[j];
                mm->rem[l] -= best_share;
                mm->cnt[l]--;
            }
        }
        mm->rounds++;
        int w = 0;
        for (int i = 0; i < n_active; i++)
            if (mm->cnt[mm->active[i]] > 0)
                mm->active[w++] = mm->active[i];
        n_active = w;
    }
    return DT_OK;
}

int dt_maxmin_rounds(const struct dt_maxmin *mm)
{
    return mm->rounds;
}

/* Balanced contiguous partition by dynamic programming: best[k][i] is the smallest possible
 * largest part when items 0..i-1 form k parts. With the same non-negative costs in every
 * part, best[k][i] grows with i (prefix sums and their differences round monotonically)
 * while the last part's cost falls as its start j grows, so the largest part over j falls
 * until the first j where best[k - 1][j] reaches the last part and grows from there: the
 * earliest best start is found by bisection (earliest_start) instead of trying every j. */
#include "dt/partition.h"

#include <stdbool.h>
#include <stdlib.h>

/* prefix[k][i]: the cost of items 0..i-1 in part k (one row when every part costs alike) */
static double *prefix_sums(const double *cost, size_t stride, int n, int rows)
{
    double *prefix = malloc((size_t)rows * (size_t)(n + 1) * sizeof *prefix);
    for (int k = 0; prefix && k < rows; k++) {
        double *p = prefix + (size_t)k * (size_t)(n + 1);
        p[0] = 0;
        for (int i = 0; i < n; i++)
            p[i + 1] = p[i] + cost[(size_t)k * stride + (size_t)i];
    }
    return prefix;
}

/* The items' costs in one part: before (items 0..j-1 in k - 1 parts, nondecreasing in j)
 * and prefix (prefix sums); the last part, items j..i-1, costs prefix[i] - prefix[j]. */
struct last_part {
    const double *before, *prefix;
    int i;
};

static double last_cost(const struct last_part *p, int j)
{
    return p->prefix[p->i] - p->prefix[j];
}

/* The first j in [lo, hi) where ahead(p, j) holds, hi if none; ahead must hold from some j
 * on and for every later one. */
static int first_where(const struct last_part *p, int lo, int hi,
                       bool (*ahead)(const struct last_part *, int, double), double v)
{
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (ahead(p, mid, v))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static bool before_reaches_last(const struct last_part *p, int j, double v)
{
    (void)v;
    return p->before[j] >= last_cost(p, j);
}

static bool last_at_most(const struct last_part *p, int j, double v)
{
    return last_cost(p, j) <= v;
}

/* The earliest start j in [lo, i) of the last part that minimises the larger of before[j]
 * and the last part's cost (*worst: that least), as trying every j finds it: below the
 * crossing x the last part is the larger and falls with j, from x on before[j] is and grows. */
static int earliest_start(const struct last_part *p, int lo, double *worst)
{
    int x = first_where(p, lo, p->i, before_reaches_last, 0);
    if (x < p->i && (x == lo || p->before[x] < last_cost(p, x - 1))) {
        *worst = p->before[x];
        return x;
    }
    *worst = last_cost(p, x - 1); /* the last part's least left of x: its first j */
    return first_where(p, lo, x - 1, last_at_most, *worst);
}

int dt_partition_balanced(const double *cost, size_t stride, int n, int parts, int *first)
{
    if (parts < 1 || parts > n)
        return -1;
    int rows = stride ? parts : 1;
    double *prefix = prefix_sums(cost, stride, n, rows);
    double *best = malloc((size_t)(parts + 1) * (size_t)(n + 1) * sizeof *best);
    int *cut = malloc((size_t)(parts + 1) * (size_t)(n + 1) * sizeof *cut);
    if (!prefix || !best || !cut) {
        free(prefix);
        free(best);
        free(cut);
        return -1;
    }
#define AT(a, k, i) a[(size_t)(k) * (size_t)(n + 1) + (size_t)(i)]
#define SUM(k, i) AT(prefix, stride ? (k) - 1 : 0, i) /* part k of 1..parts */
    /* per-part costs can make best[k][i] fall as i grows (item i - 1 may cost more alone in
     * part k than the items part k - 1 held in its own): search every start then */
    bool full_search = stride > 0;
    for (int i = 0; i < n; i++)
        full_search |= cost[i] < 0;
    for (int i = 1; i <= n; i++) {
        AT(best, 1, i) = SUM(1, i);
        AT(cut, 1, i) = 0;
    }
    for (int k = 2; k <= parts; k++)
        for (int i = k; i <= n; i++) {
            /* the last part is items j..i-1, with j >= k-1 items before it */
            double b = -1;
            int at = k - 1;
            if (!full_search) {
                struct last_part lp = {&AT(best, k - 1, 0), prefix, i};
                at = earliest_start(&lp, k - 1, &b);
            }
            for (int j = k - 1; j < i && full_search; j++) {
                double last = SUM(k, i) - SUM(k, j);
                double worst = AT(best, k - 1, j) > last ? AT(best, k - 1, j) : last;
                if (b < 0 || worst < b) {
                    b = worst;
                    at = j;
                }
            }
            AT(best, k, i) = b;
            AT(cut, k, i) = at;
        }
    first[parts] = n;
    for (int k = parts, i = n; k >= 1; k--) {
        first[k - 1] = AT(cut, k, i);
        i = first[k - 1];
    }
#undef SUM
#undef AT
    free(prefix);
    free(best);
    free(cut);
    return 0;
}

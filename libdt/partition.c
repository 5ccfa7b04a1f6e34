/* Balanced contiguous partition by dynamic programming: best[k][i] is the smallest possible
 * largest part when items 0..i-1 form k parts. With the same non-negative costs in every
 * part, best[k][i] grows with i (prefix sums and their differences round monotonically), so
 * the search for the last part's start stops at the first j whose best[k - 1][j] alone is no
 * better. */
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
            for (int j = k - 1; j < i && (full_search || b < 0 || AT(best, k - 1, j) < b); j++) {
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

/* Balanced contiguous partition by dynamic programming: best[k][i] is the smallest possible
 * largest part when items 0..i-1 form k parts. With no negative cost, best[k][i] grows with
 * i (prefix sums and their differences round monotonically), so the search for the last
 * part's start stops at the first j whose best[k - 1][j] alone is no better. */
#include "dt/partition.h"

#include <stdbool.h>
#include <stdlib.h>

int dt_partition_balanced(const double *cost, int n, int parts, int *first)
{
    if (parts < 1 || parts > n)
        return -1;
    double *prefix = malloc((size_t)(n + 1) * sizeof *prefix);
    double *best = malloc((size_t)(parts + 1) * (size_t)(n + 1) * sizeof *best);
    int *cut = malloc((size_t)(parts + 1) * (size_t)(n + 1) * sizeof *cut);
    if (!prefix || !best || !cut) {
        free(prefix);
        free(best);
        free(cut);
        return -1;
    }
#define AT(a, k, i) a[(size_t)(k) * (size_t)(n + 1) + (size_t)(i)]
    prefix[0] = 0;
    bool signed_costs = false;
    for (int i = 0; i < n; i++) {
        prefix[i + 1] = prefix[i] + cost[i];
        signed_costs |= cost[i] < 0;
    }
    for (int i = 1; i <= n; i++) {
        AT(best, 1, i) = prefix[i];
        AT(cut, 1, i) = 0;
    }
    for (int k = 2; k <= parts; k++)
        for (int i = k; i <= n; i++) {
            /* the last part is items j..i-1, with j >= k-1 items before it */
            double b = -1;
            int at = k - 1;
            for (int j = k - 1; j < i && (signed_costs || b < 0 || AT(best, k - 1, j) < b); j++) {
                double last = prefix[i] - prefix[j];
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
#undef AT
    free(prefix);
    free(best);
    free(cut);
    return 0;
}

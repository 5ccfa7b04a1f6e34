/* The exact Mann-Whitney U distribution. */
#include "ranktest.h"

#include <math.h>
#include <stdlib.h>

double dtv_mwu_u(const double *a, int na, const double *b, int nb)
{
    double u = 0;
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++)
            u += a[i] < b[j] ? 1 : a[i] == b[j] ? 0.5 : 0;
    return u;
}

/* count[m][n][u]: orderings of m a's and n b's with statistic u, by the last element:
 * count(m, n, u) = count(m - 1, n, u - n) + count(m, n - 1, u), the a last adding n pairs. */
double dtv_mwu_p_two_sided(double u, int na, int nb)
{
    if (na < 1 || nb < 1 || na > 64 || nb > 64 || !(u >= 0) || u > (double)na * nb)
        return NAN;
    int umax = na * nb;
    /* rows n = 0..nb for the current m, each umax + 1 long */
    size_t row = (size_t)umax + 1;
    double *prev = calloc((size_t)(nb + 1) * row, sizeof *prev);
    double *cur = calloc((size_t)(nb + 1) * row, sizeof *cur);
    if (!prev || !cur) {
        free(prev);
        free(cur);
        return NAN;
    }
    for (int n = 0; n <= nb; n++) /* m = 0: one ordering, u = 0 */
        prev[n * row] = 1;
    for (int m = 1; m <= na; m++) {
        for (int n = 0; n <= nb; n++)
            for (int k = 0; k <= umax; k++) {
                double c = k >= n ? prev[n * row + (size_t)(k - n)] : 0;
                if (n > 0)
                    c += cur[(n - 1) * row + (size_t)k];
                cur[n * row + (size_t)k] = c;
            }
        double *t = prev;
        prev = cur;
        cur = t;
    }
    const double *dist = prev + (size_t)nb * row;
    double total = 0, tail = 0;
    /* the tail of the smaller side; a half-integer U (a tie) counts as its less extreme
     * neighbour, so a tie never makes a pair look resolved */
    double lo = fmin(u, umax - u);
    int cut = (int)ceil(lo);
    for (int k = 0; k <= umax; k++) {
        total += dist[k];
        if (k <= cut)
            tail += dist[k];
    }
    free(prev);
    free(cur);
    double p = 2 * tail / total;
    return p > 1 ? 1 : p;
}

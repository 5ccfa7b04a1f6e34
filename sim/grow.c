/* Growing arrays (see grow.h). */
#include "grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int dt_grow_capacity(int capacity, int n)
{
    int c = capacity ? capacity : 64;
    while (c < n) {
        if (c > INT32_MAX / 2)
            return -1;
        c *= 2;
    }
    return c;
}

int dt_grow_slow(void **p, int *capacity, int n, size_t sz)
{
    int c = dt_grow_capacity(*capacity, n);
    void *q = c < 0 ? NULL : realloc(*p, (size_t)c * sz);
    if (!q)
        return -1;
    *p = q;
    *capacity = c;
    return 0;
}

int dt_grow_aligned(void **p, int *capacity, int n, size_t sz)
{
    if (n <= *capacity)
        return 0;
    int c = dt_grow_capacity(*capacity, n);
    void *q = c < 0 ? NULL : aligned_alloc(64, ((size_t)c * sz + 63) / 64 * 64);
    if (!q)
        return -1;
    if (*capacity)
        memcpy(q, *p, (size_t)*capacity * sz);
    free(*p);
    *p = q;
    *capacity = c;
    return 0;
}

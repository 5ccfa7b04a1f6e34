/* Splitting a chain of layers into contiguous parts of balanced cost (pipeline stages). */
#ifndef DT_PARTITION_H
#define DT_PARTITION_H

/* Splits items 0..n-1 with costs cost[] into `parts` non-empty contiguous parts minimising the
 * largest part's cost (dynamic programming, O(parts n^2)); first[k] is the first item of part
 * k, first[parts] = n. Ties go to the earliest cut, so the result is deterministic. Returns 0,
 * or -1 when parts < 1, parts > n or out of memory. */
int dt_partition_balanced(const double *cost, int n, int parts, int *first);

#endif

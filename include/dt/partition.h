/* Splitting a chain of layers into contiguous parts of balanced cost (pipeline stages). */
#ifndef DT_PARTITION_H
#define DT_PARTITION_H

#include <stddef.h>

/* Splits items 0..n-1 into `parts` non-empty contiguous parts minimising the largest part's
 * cost, item i costing cost[k * stride + i] in part k: stride n gives each part its own costs
 * (a pipeline's stages on different devices), stride 0 the same costs in every part (dynamic
 * programming, O(parts n^2)). first[k] is the first item of part k, first[parts] = n. Ties go
 * to the earliest cut, so the result is deterministic. Returns 0, or -1 when parts < 1,
 * parts > n or out of memory. */
int dt_partition_balanced(const double *cost, size_t stride, int n, int parts, int *first);

#endif

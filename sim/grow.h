/* Growing arrays for the engine and the player: capacity doubles, int counts. */
#ifndef DT_SIM_GROW_H
#define DT_SIM_GROW_H

#include <stddef.h>

/* The capacity that holds n elements, doubling from capacity (64 when 0); -1 on overflow. */
int dt_grow_capacity(int capacity, int n);

/* Reallocates *p to dt_grow_capacity elements of sz bytes; 0, or -1 out of memory. */
int dt_grow_slow(void **p, int *capacity, int n, size_t sz);

/* Makes *p hold n elements of sz bytes (kept inline: the common case is a comparison). */
static inline int dt_grow(void **p, int *capacity, int n, size_t sz)
{
    return n <= *capacity ? 0 : dt_grow_slow(p, capacity, n, sz);
}

/* As dt_grow, the array 64-byte aligned (records laid out on cache lines; the engine's links
 * and flows, the player's activities). */
int dt_grow_aligned(void **p, int *capacity, int n, size_t sz);

#endif

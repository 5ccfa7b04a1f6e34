/* The heap kept once freed (see heap.h). glibc hands a free block at the heap's top above
 * 128 KiB back to the kernel and maps a large block afresh for each allocation (its
 * thresholds then grow only as far as the largest block freed), so a search that compiles
 * plans of hundreds of MB one after another faulted their pages in again for each one: the
 * 175B bench took 571,515 minor page faults, 150,185 with both thresholds at 1 GiB. */
#include "heap.h"

#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

void dt_heap_keep_freed(void)
{
#if defined(__GLIBC__)
    /* glibc before 2.36 refuses a threshold above 32 MiB; and the trim threshold, once set,
     * stops the mmap threshold's growth, so that one is set first */
    if (!mallopt(M_MMAP_THRESHOLD, 1 << 30))
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

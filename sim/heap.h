/* The C library's heap kept by the process once freed, for a run that builds and frees large
 * things one after another (--recommend compiles a plan per candidate and frees it). */
#ifndef DT_SIM_HEAP_H
#define DT_SIM_HEAP_H

/* Freed memory stays in the heap for the next allocation, and large blocks come from it too
 * (glibc: mallopt's mmap and trim thresholds; nothing elsewhere). */
void dt_heap_keep_freed(void);

#endif

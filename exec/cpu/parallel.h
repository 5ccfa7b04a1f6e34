/* Optional OpenMP threading of the kernels' own loops (im2col, pooling, elementwise, norms,
 * optimizer). Without OpenMP in the compiler flags the macros expand to nothing and the
 * kernels are single-threaded; GEMMs thread through OpenBLAS either way.
 * Every parallel loop writes disjoint outputs, so results do not depend on the thread count. */
#ifndef DTK_PARALLEL_H
#define DTK_PARALLEL_H

#ifdef _OPENMP
#define DTK_PRAGMA_(x) _Pragma(#x)
/* The next for loop runs in parallel when cond holds (enough work to pay for the threads). */
#define DTK_PARALLEL_FOR(cond) DTK_PRAGMA_(omp parallel for schedule(static) if (cond))
#else
#define DTK_PARALLEL_FOR(cond)
#endif

/* Elements below which an elementwise loop stays on one thread, and the chunk it is cut in. */
#define DTK_PAR_MIN 32768L
#define DTK_PAR_CHUNK 8192L

#endif

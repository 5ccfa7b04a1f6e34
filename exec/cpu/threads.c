/* Thread count of the CPU backend: OpenMP (when built with it) and OpenBLAS together. */
#include "layers.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void dtk_set_num_threads(int n)
{
    if (n < 1)
        n = 1;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    openblas_set_num_threads(n);
}

int dtk_num_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

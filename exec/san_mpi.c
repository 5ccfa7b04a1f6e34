/* AddressSanitizer's options in a program that always starts MPI (dtexec, the collectives
 * test). MPICH's UCX modules can leak at exit; tests/lsan.supp names those modules, and only
 * the slow unwinder gives their allocations stacks the suppressions can match (the fast one
 * stops in a module already unloaded). The slow unwinder makes every allocation 3-5x dearer
 * (dtsim --recommend under ASan), so the programs that do not always start MPI keep the fast
 * one: it is no longer set in ASAN_OPTIONS for the whole test suite. (dtsim starts MPI only
 * for a split search under mpiexec; a default chosen by its environment cannot be: this
 * function runs before getenv can read it.) */
#ifdef __SANITIZE_ADDRESS__
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "fast_unwind_on_malloc=0";
}
#else
typedef int dtx_san_mpi_unused; /* ISO C: a translation unit declares something */
#endif

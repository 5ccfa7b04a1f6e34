/* finalize_hang: preloaded after exec/finalize_guard.so in tests, an MPI_Finalize that never
 * returns, as MPICH/UCX's does in the TCP disconnect race (exec/CLUSTER.md, item 4): the
 * guard's call to PMPI_Finalize lands here, so that its alarm fires every time. */
#include <unistd.h>

int PMPI_Finalize(void);

int PMPI_Finalize(void)
{
    for (;;)
        pause(); /* until the guard's SIGALRM handler exits the process */
}

/* finalize_return: preloaded after exec/finalize_guard.so in tests, an MPI_Finalize that
 * returns at once without finalizing (the process then exits): the guard's call to
 * PMPI_Finalize lands here and its alarm never fires, whatever MPICH/UCX's own finalize would
 * do (its TCP disconnect race hangs some runs: exec/CLUSTER.md, item 4). */
int PMPI_Finalize(void);

int PMPI_Finalize(void)
{
    return 0; /* MPI_SUCCESS */
}

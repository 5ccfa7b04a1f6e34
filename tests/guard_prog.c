/* guard_prog: the smallest MPI program for tests/test_finalize_guard.sh and test_cluster.sh.
 * usage: guard_prog STATUS [--declare]
 * Returns STATUS after MPI_Finalize; with --declare it first declares it to the finalize
 * guard (exec/exit_status.c), as dtexec does. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exit_status.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--declare") != 0)) {
        fprintf(stderr, "usage: guard_prog STATUS [--declare]\n");
        MPI_Finalize();
        return 2;
    }
    int status = atoi(argv[1]);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("guard_prog: rank %d done, status %d\n", rank, status);
    if (argc == 3)
        dtx_declare_exit_status(status);
    MPI_Finalize();
    return status;
}

/* MPI for dtsim's split searches (see split.h); dtsim alone never initialises MPI. */
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>

#include <mpi.h>

#include "split.h"

static bool joined;

static int env_size(void)
{
    const char *names[] = {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE"};
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(names[i]);
        if (v && atoi(v) > 1)
            return atoi(v);
    }
    return 1;
}

int dt_split_init(int *argc, char ***argv, int *part, int *parts)
{
    *part = 0;
    *parts = 1;
    if (env_size() <= 1)
        return 0;
    if (MPI_Init(argc, argv) != MPI_SUCCESS)
        return -1;
    joined = true;
    MPI_Comm_rank(MPI_COMM_WORLD, part);
    MPI_Comm_size(MPI_COMM_WORLD, parts);
    return 0;
}

/* MPI_Allreduce in place over n elements of elem bytes, in pieces an int can count. */
static int allreduce(void *buf, size_t n, size_t elem, MPI_Datatype type, MPI_Op op)
{
    if (!joined)
        return 0;
    const size_t most = INT_MAX / 2;
    for (size_t done = 0; done < n; done += most) {
        size_t k = n - done < most ? n - done : most;
        if (MPI_Allreduce(MPI_IN_PLACE, (char *)buf + done * elem, (int)k, type, op,
                          MPI_COMM_WORLD) != MPI_SUCCESS)
            return -1;
    }
    return 0;
}

int dt_split_sum(double *values, long n)
{
    return allreduce(values, (size_t)n, sizeof *values, MPI_DOUBLE, MPI_SUM);
}

int dt_split_or(void *bytes, size_t n)
{
    return allreduce(bytes, n, 1, MPI_BYTE, MPI_BOR);
}

void dt_split_finalize(void)
{
    if (joined)
        MPI_Finalize();
    joined = false;
}

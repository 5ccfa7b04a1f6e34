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

int dt_split_sum(double *values, long n)
{
    if (!joined)
        return 0;
    for (long done = 0; done < n; done += INT_MAX / 2) {
        long k = n - done < INT_MAX / 2 ? n - done : INT_MAX / 2;
        if (MPI_Allreduce(MPI_IN_PLACE, values + done, (int)k, MPI_DOUBLE, MPI_SUM,
                          MPI_COMM_WORLD) != MPI_SUCCESS)
            return -1;
    }
    return 0;
}

int dt_split_or(void *bytes, size_t n)
{
    if (!joined)
        return 0;
    for (size_t done = 0; done < n; done += INT_MAX / 2) {
        size_t k = n - done < INT_MAX / 2 ? n - done : INT_MAX / 2;
        if (MPI_Allreduce(MPI_IN_PLACE, (char *)bytes + done, (int)k, MPI_BYTE, MPI_BOR,
                          MPI_COMM_WORLD) != MPI_SUCCESS)
            return -1;
    }
    return 0;
}

void dt_split_finalize(void)
{
    if (joined)
        MPI_Finalize();
    joined = false;
}

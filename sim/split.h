/* Splitting dtsim's searches over MPI processes: `mpiexec -n K dtsim --recommend ...`. */
#ifndef DT_SIM_SPLIT_H
#define DT_SIM_SPLIT_H

#include <stddef.h>

/* Joins MPI when started by mpiexec with more than one process (PMI_SIZE or
 * OMPI_COMM_WORLD_SIZE above 1); alone, MPI is never touched. Sets this process's part and
 * the number of parts (0 and 1 alone). Returns 0, or -1 when MPI cannot start. */
int dt_split_init(int *argc, char ***argv, int *part, int *parts);
/* Sums n doubles over the processes in place (every process gets the sums). */
int dt_split_sum(double *values, long n);
/* Bitwise OR of n bytes over the processes in place: each process fills what it owns and
 * leaves zeros elsewhere, and every process gets every byte exactly. */
int dt_split_or(void *bytes, size_t n);
void dt_split_finalize(void);

#endif

/* Pinning a rank to its own cores (dtexec --bind). On a small or virtual machine an unpinned
 * rank migrates between CPUs and whole runs land in a slow mode (measured here: the same
 * 2-rank configuration at 0.61 or 0.85 ms per iteration from one run to the next); pinned,
 * repeats agree within a few per cent. Independent of the MPI launcher's own binding. */
#ifndef DTX_BIND_H
#define DTX_BIND_H

#include <stddef.h>

/* Pins every thread of this process to the CPUs of local rank `local` of `local_size` ranks
 * on this node: the CPUs this process may use, in order, cut into local_size equal blocks
 * (one CPU each when there are fewer CPUs than ranks, cycling). Writes the CPUs chosen, as
 * "0-3" or "5", into desc. Returns 0, or -1 with errno when the kernel refused. */
int dtx_bind_local_rank(int local, int local_size, char *desc, size_t len);

/* The block of CPUs local rank `local` gets from n_cpus usable ones: first index and count. */
void dtx_bind_block(int local, int local_size, int n_cpus, int *first, int *count);

#endif

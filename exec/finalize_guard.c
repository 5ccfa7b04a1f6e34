/* finalize_guard: a PMPI shim that dtcluster preloads into every rank (LD_PRELOAD) so that a
 * rank which hangs in MPI_Finalize exits instead of holding the whole job until a timeout.
 *
 * Why: with MPICH 4.0.2 (ch4:ucx) and UCX 1.13 over TCP, MPI_Finalize hangs in ~10 % of
 * 2 x 1 runs and half of 2 x 2 runs (exec/CLUSTER.md): one rank spins closing its UCX
 * endpoints, whose flush needs an answer from a peer that has already closed its own and
 * waits in a PMI barrier (the symptom of openucx/ucx#8738). Every result is out by then,
 * so the guard makes MPI_Finalize:
 *   1. MPI_Barrier(MPI_COMM_WORLD): all ranks have finished their work;
 *   2. flush stdio, arm a SIGALRM of DTC_FINALIZE_GRACE seconds (default 5);
 *   3. PMPI_Finalize. If the alarm fires first, say so on stderr and _exit(0).
 * Programs need no change; without the preload nothing is different.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char guard_msg[160];
static size_t guard_msg_len;

static void on_alarm(int sig)
{
    (void)sig;
    /* write(2) and _exit(2) only: this runs inside a signal handler. */
    ssize_t w = write(STDERR_FILENO, guard_msg, guard_msg_len);
    (void)w;
    _exit(0);
}

int MPI_Finalize(void)
{
    int rank = -1;
    unsigned grace_s = 5;
    const char *env = getenv("DTC_FINALIZE_GRACE");
    if (env != NULL) {
        char *end;
        unsigned long v = strtoul(env, &end, 10);
        if (end != env && *end == '\0' && v > 0 && v < 3600)
            grace_s = (unsigned)v;
    }
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Barrier(MPI_COMM_WORLD);
    snprintf(guard_msg, sizeof guard_msg,
             "finalize_guard: rank %d: MPI_Finalize did not return within %u s "
             "(MPICH/UCX TCP disconnect race); exiting with status 0\n", rank, grace_s);
    guard_msg_len = strlen(guard_msg);
    fflush(NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(grace_s);
    int rc = PMPI_Finalize();
    alarm(0);
    return rc;
}

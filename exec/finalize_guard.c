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
 *   3. PMPI_Finalize. If the alarm fires first, say so on stderr, leave the marker and
 *      _exit with the status the program declared (0 if it declared none).
 *
 * The status: a program that returns a status after MPI_Finalize declares it beforehand by
 * calling finalize_guard_declare_status(), which it finds with dlsym (exec/exit_status.c):
 * a shared object's functions are always in the dynamic symbol table, an executable's only
 * when it is linked with --export-dynamic, so the lookup goes from the program to the guard.
 *
 * The marker: with DTC_GUARD_DIR set (dtcluster sets it), each rank writes
 * DIR/rank.R = "rank=R fired=0|1 status=S" once MPI_Finalize returned or the guard fired,
 * so that dtcluster can tell a hydra error after every rank's guard fired with status 0
 * from a failed run.
 *
 * A bad DTC_FINALIZE_GRACE (not a whole number of seconds in 1..3600) stops the program
 * before main, with exit status 2 and a message naming the variable.
 * Programs need no change; without the preload nothing is different.
 */
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GRACE_DEFAULT_S 5u
#define GRACE_MAX_S 3600ul

void finalize_guard_declare_status(int status);

static unsigned grace_s = GRACE_DEFAULT_S;
static volatile sig_atomic_t declared_status; /* 0 unless the program declared one */
static volatile sig_atomic_t declared;
/* What the alarm handler writes: formatted beforehand (it may only call write, open...). */
static char guard_msg[224];
static size_t guard_msg_len;
static char marker_path[PATH_MAX];
static char marker_fired[80];
static size_t marker_fired_len;

/* Exported for programs (found with dlsym): the status main will return after finalizing. */
void finalize_guard_declare_status(int status)
{
    declared_status = status & 0xff; /* what the parent of an exit(status) sees */
    declared = 1;
}

/* Checks DTC_FINALIZE_GRACE once, at load time: a bad value stops the program before main. */
__attribute__((constructor)) static void read_grace(void)
{
    const char *env = getenv("DTC_FINALIZE_GRACE");
    if (env == NULL)
        return;
    char *end;
    unsigned long v = strtoul(env, &end, 10);
    /* digits only: strtoul alone would take " 5", "+5" and "-1" (as ULONG_MAX) */
    if (env[0] < '0' || env[0] > '9' || *end != '\0' || v < 1 || v > GRACE_MAX_S) {
        fprintf(stderr, "finalize_guard: DTC_FINALIZE_GRACE='%s' is not a whole number of "
                "seconds in 1..%lu\n", env, GRACE_MAX_S);
        _exit(2);
    }
    grace_s = (unsigned)v;
}

/* write(2) of a whole buffer to a new file; async-signal-safe. */
static void write_file(const char *path, const char *text, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return;
    ssize_t w = write(fd, text, len);
    (void)w;
    close(fd);
}

static void on_alarm(int sig)
{
    (void)sig;
    /* write, open, close and _exit only: this runs inside a signal handler. */
    ssize_t w = write(STDERR_FILENO, guard_msg, guard_msg_len);
    (void)w;
    if (marker_path[0] != '\0')
        write_file(marker_path, marker_fired, marker_fired_len);
    _exit(declared_status);
}

/* The message and the marker of this rank, formatted before the alarm is armed. */
static void prepare(int rank)
{
    int status = declared_status;
    snprintf(guard_msg, sizeof guard_msg,
             "finalize_guard: rank %d: MPI_Finalize did not return within %u s "
             "(MPICH/UCX TCP disconnect race); exiting with status %d (%s)\n", rank, grace_s,
             status, declared ? "declared by the program" : "the program declared none");
    guard_msg_len = strlen(guard_msg);
    snprintf(marker_fired, sizeof marker_fired, "rank=%d fired=1 status=%d\n", rank, status);
    marker_fired_len = strlen(marker_fired);
    const char *dir = getenv("DTC_GUARD_DIR");
    marker_path[0] = '\0';
    if (dir != NULL && dir[0] != '\0') {
        int n = snprintf(marker_path, sizeof marker_path, "%s/rank.%d", dir, rank);
        if (n < 0 || (size_t)n >= sizeof marker_path)
            marker_path[0] = '\0'; /* no marker: dtcluster keeps a failed mpiexec's status */
    }
}

int MPI_Finalize(void)
{
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Barrier(MPI_COMM_WORLD);
    prepare(rank);
    fflush(NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(grace_s);
    int rc = PMPI_Finalize();
    alarm(0);
    if (marker_path[0] != '\0') {
        char text[80];
        int n = snprintf(text, sizeof text, "rank=%d fired=0 status=%d\n", rank,
                         (int)declared_status);
        write_file(marker_path, text, (size_t)n);
    }
    return rc;
}

/* dtexec's progress watchdog: a rank that waits on MPI for longer than the limit without
 * progress names the ranks that are silent and ends the job.
 *
 * Waits poll (MPI_Test on non-blocking requests) and ask dtx_watchdog_expired whether their
 * time is up. The rank that times out calls dtx_watchdog_fire: it sends a heartbeat to every
 * other rank on the watchdog's own communicator (a duplicate of the job's) and collects theirs
 * for a grace period; a live rank that is polling sees the heartbeat (dtx_watchdog_expired
 * answers true there too), fires in turn and answers. Ranks never heard from are the silent
 * ones. Every rank that fired prints one line, e.g.
 *   dtexec: rank 0: no progress for 30 s in allreduce/ring 2 of group 0 (op 37 of step 14);
 *   silent: rank 1
 * and calls MPI_Abort, so that mpiexec kills every process, a stopped one included.
 *
 * The limit: a fixed timeout, or (auto) DTX_WATCHDOG_FIRST_S until the first training step
 * completes, then max(DTX_WATCHDOG_FLOOR_S, DTX_WATCHDOG_STEPS x the slowest step so far).
 */
#ifndef DTX_WATCHDOG_H
#define DTX_WATCHDOG_H

#include <mpi.h>
#include <stdbool.h>

#define DTX_WATCHDOG_AUTO (-1.0)      /* timeout_s: the limit scales with the step time */
#define DTX_WATCHDOG_FIRST_S 300.0    /* auto: before the first step completes */
#define DTX_WATCHDOG_FLOOR_S 60.0     /* auto: the least limit after it */
#define DTX_WATCHDOG_STEPS 10.0       /* auto: this many slowest steps */
#define DTX_WATCHDOG_STATUS 6         /* the MPI_Abort code, mpiexec's exit status */

struct dtx_watchdog;

/* One wait under the watchdog: when it started. */
struct dtx_wait {
    double start_s, next_hb_s;
};

/* Starts the watchdog of this rank: timeout_s > 0 a fixed limit, DTX_WATCHDOG_AUTO the scaled
 * one, 0 none (*out = NULL: every function below accepts NULL and then waits unwatched).
 * Collective over comm (duplicates it). name: the program, for the message. */
int dtx_watchdog_create(MPI_Comm comm, double timeout_s, const char *name,
                        struct dtx_watchdog **out);
void dtx_watchdog_destroy(struct dtx_watchdog *wd);

/* The limit now, in seconds (0: off). */
double dtx_watchdog_limit(const struct dtx_watchdog *wd);
/* A training step took seconds: scales the auto limit. */
void dtx_watchdog_step_done(struct dtx_watchdog *wd, double seconds);

void dtx_watchdog_begin(const struct dtx_watchdog *wd, struct dtx_wait *w);
/* Whether the wait w (NULL: not waiting, between ops) must end the job: its time is up, or
 * another rank's heartbeat arrived. Cheap enough to call on every poll. */
bool dtx_watchdog_expired(struct dtx_watchdog *wd, const struct dtx_wait *w);
/* Names the silent ranks (the heartbeat exchange), prints one line and aborts the job.
 * what: where this rank waited ("allreduce/ring 2 of group 0 (op 37 of step 14)"). */
_Noreturn void dtx_watchdog_fire(struct dtx_watchdog *wd, const struct dtx_wait *w,
                                 const char *what);

/* Completes a request, polling under the watchdog (MPI_Wait without one). */
void dtx_watchdog_wait(struct dtx_watchdog *wd, MPI_Request *req, const char *what);
/* MPI_Barrier and MPI_Allreduce whose wait is watched. */
void dtx_watchdog_barrier(struct dtx_watchdog *wd, MPI_Comm comm, const char *what);
void dtx_watchdog_allreduce(struct dtx_watchdog *wd, const void *send, void *recv, int count,
                            MPI_Datatype type, MPI_Op op, MPI_Comm comm, const char *what);

#endif

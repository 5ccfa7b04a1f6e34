/* The progress watchdog: see watchdog.h. */
#include "watchdog.h"

#include "idle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How often a poll looks for another rank's heartbeat: a live rank answers within this. */
#define HEARTBEAT_POLL_S 0.02
/* The grace period of the heartbeat exchange, between these bounds (and the limit). */
#define GRACE_MIN_S 1.0
#define GRACE_MAX_S 5.0
/* How long a rank that printed waits for the others' lines before it aborts the job. */
#define PRINTED_WAIT_S 1.0
/* A pause between the line and MPI_Abort: mpiexec (MPICH's hydra) drops what it has not read yet
 * of a process's standard error when it handles the abort (seen now and then under load). */
#define FORWARD_PAUSE_NS 500000000L
#define HEARTBEAT_TAG 1
#define PRINTED_TAG 2

struct dtx_watchdog {
    MPI_Comm comm;          /* heartbeats only: never mixed up with the job's messages */
    int rank, size;
    const char *name;
    double fixed_s;         /* > 0: the user's limit; 0: auto */
    double slowest_s;       /* auto: the slowest step so far */
    bool stepped;           /* auto: a step has completed */
    double next_poll_s;     /* when to look for a heartbeat next */
    int hb_in, hb_out;
    MPI_Request hb_req;     /* a receive of any rank's heartbeat, always posted */
    int alert_from;         /* the rank whose heartbeat arrived, or -1 */
};

static void post_heartbeat_recv(struct dtx_watchdog *wd)
{
    MPI_Irecv(&wd->hb_in, 1, MPI_INT, MPI_ANY_SOURCE, HEARTBEAT_TAG, wd->comm, &wd->hb_req);
}

int dtx_watchdog_create(MPI_Comm comm, double timeout_s, const char *name,
                        struct dtx_watchdog **out)
{
    *out = NULL;
    if (timeout_s == 0)
        return 0;
    struct dtx_watchdog *wd = calloc(1, sizeof *wd);
    if (!wd)
        return -1;
    MPI_Comm_dup(comm, &wd->comm);
    MPI_Comm_rank(wd->comm, &wd->rank);
    MPI_Comm_size(wd->comm, &wd->size);
    wd->name = name;
    wd->fixed_s = timeout_s > 0 ? timeout_s : 0;
    wd->alert_from = -1;
    post_heartbeat_recv(wd);
    *out = wd;
    return 0;
}

void dtx_watchdog_destroy(struct dtx_watchdog *wd)
{
    if (!wd)
        return;
    MPI_Cancel(&wd->hb_req);
    MPI_Wait(&wd->hb_req, MPI_STATUS_IGNORE);
    MPI_Comm_free(&wd->comm);
    free(wd);
}

double dtx_watchdog_limit(const struct dtx_watchdog *wd)
{
    if (!wd)
        return 0;
    if (wd->fixed_s > 0)
        return wd->fixed_s;
    if (!wd->stepped)
        return DTX_WATCHDOG_FIRST_S;
    double scaled = DTX_WATCHDOG_STEPS * wd->slowest_s;
    return scaled > DTX_WATCHDOG_FLOOR_S ? scaled : DTX_WATCHDOG_FLOOR_S;
}

void dtx_watchdog_step_done(struct dtx_watchdog *wd, double seconds)
{
    if (!wd)
        return;
    wd->stepped = true;
    if (seconds > wd->slowest_s)
        wd->slowest_s = seconds;
}

void dtx_watchdog_begin(const struct dtx_watchdog *wd, struct dtx_wait *w)
{
    w->start_s = wd ? MPI_Wtime() : 0;
}

bool dtx_watchdog_expired(struct dtx_watchdog *wd, const struct dtx_wait *w)
{
    if (!wd)
        return false;
    double now = MPI_Wtime();
    if (now >= wd->next_poll_s) {
        wd->next_poll_s = now + HEARTBEAT_POLL_S;
        int got = 0;
        MPI_Status st;
        MPI_Test(&wd->hb_req, &got, &st);
        if (got) {
            wd->alert_from = st.MPI_SOURCE;
            post_heartbeat_recv(wd);
            return true;
        }
    }
    return w && now - w->start_s > dtx_watchdog_limit(wd);
}

/* Sends this rank's heartbeat to every other rank, then collects theirs for the grace
 * period or until every rank answered; heard[r] tells who did. */
static void exchange_heartbeats(struct dtx_watchdog *wd, bool *heard)
{
    MPI_Request *sends = malloc((size_t)wd->size * sizeof *sends);
    wd->hb_out = wd->rank;
    for (int r = 0; sends && r < wd->size; r++)
        if (r != wd->rank)
            MPI_Isend(&wd->hb_out, 1, MPI_INT, r, HEARTBEAT_TAG, wd->comm, &sends[r]);
    double grace = dtx_watchdog_limit(wd);
    grace = grace < GRACE_MIN_S ? GRACE_MIN_S : grace > GRACE_MAX_S ? GRACE_MAX_S : grace;
    double end = MPI_Wtime() + grace;
    int missing = 0;
    for (int r = 0; r < wd->size; r++)
        missing += !heard[r];
    while (missing > 0 && MPI_Wtime() < end) {
        int got = 0;
        MPI_Status st;
        MPI_Test(&wd->hb_req, &got, &st);
        if (!got)
            continue;
        missing -= !heard[st.MPI_SOURCE];
        heard[st.MPI_SOURCE] = true;
        post_heartbeat_recv(wd);
    }
    /* the sends stay in flight: the job ends now, and a silent rank never receives */
    free(sends);
}

/* "rank 1", "ranks 1, 3", or none: into buf. */
static void format_silent(const bool *heard, int size, char *buf, size_t len)
{
    int n = 0;
    for (int r = 0; r < size; r++)
        n += !heard[r];
    size_t at = (size_t)snprintf(buf, len, n == 0 ? "none (every rank answered: they wait on "
                                                    "each other)"
                                                  : n == 1 ? "rank" : "ranks");
    for (int r = 0, k = 0; r < size && at < len; r++)
        if (!heard[r])
            at += (size_t)snprintf(buf + at, len - at, "%s %d", k++ ? "," : "", r);
}

/* Tells every rank that answered that this rank printed its line, and waits (a short while)
 * until they printed theirs: the first MPI_Abort would kill them mid-way. */
static void await_printed(struct dtx_watchdog *wd, const bool *heard)
{
    int n = wd->size;
    MPI_Request *req = malloc(2 * (size_t)n * sizeof *req);
    MPI_Status *st = malloc(2 * (size_t)n * sizeof *st); /* GCC rejects MPI_STATUSES_IGNORE */
    int *in = calloc((size_t)n, sizeof *in);
    if (!req || !st || !in) {
        free(req);
        free(st);
        free(in);
        return;
    }
    int k = 0;
    for (int r = 0; r < n; r++)
        if (heard[r] && r != wd->rank) {
            MPI_Irecv(&in[r], 1, MPI_INT, r, PRINTED_TAG, wd->comm, &req[k++]);
            MPI_Isend(&wd->hb_out, 1, MPI_INT, r, PRINTED_TAG, wd->comm, &req[k++]);
        }
    double end = MPI_Wtime() + PRINTED_WAIT_S;
    int done = 0;
    while (!done && MPI_Wtime() < end)
        MPI_Testall(k, req, &done, st);
    free(req); /* what is left in flight ends with the job */
    free(st);
    free(in);
}

_Noreturn void dtx_watchdog_fire(struct dtx_watchdog *wd, const struct dtx_wait *w,
                                 const char *what)
{
    double waited = w ? MPI_Wtime() - w->start_s : 0;
    bool *heard = calloc((size_t)wd->size, sizeof *heard);
    char silent[256] = "unknown (out of memory)";
    if (heard) {
        heard[wd->rank] = true;
        if (wd->alert_from >= 0)
            heard[wd->alert_from] = true;
        exchange_heartbeats(wd, heard);
        format_silent(heard, wd->size, silent, sizeof silent);
    }
    if (wd->alert_from >= 0)
        fprintf(stderr, "%s: rank %d: rank %d saw no progress for the watchdog's %.3g s; "
                "this rank was in %s; silent: %s\n", wd->name, wd->rank, wd->alert_from,
                dtx_watchdog_limit(wd), what, silent);
    else
        fprintf(stderr, "%s: rank %d: no progress for %.3g s in %s; silent: %s\n", wd->name,
                wd->rank, waited, what, silent);
    fflush(stderr);
    if (heard)
        await_printed(wd, heard);
    free(heard);
    nanosleep(&(struct timespec){0, FORWARD_PAUSE_NS}, NULL);
    MPI_Abort(MPI_COMM_WORLD, DTX_WATCHDOG_STATUS);
    _exit(DTX_WATCHDOG_STATUS); /* MPI_Abort does not return */
}

void dtx_watchdog_wait(struct dtx_watchdog *wd, MPI_Request *req, const char *what)
{
    MPI_Status st;
    if (!wd) {
        MPI_Wait(req, &st);
        return;
    }
    struct dtx_wait w;
    unsigned polls = 0;
    dtx_watchdog_begin(wd, &w);
    for (;;) {
        int done = 0;
        MPI_Test(req, &done, &st);
        if (done)
            return;
        if (dtx_watchdog_expired(wd, &w))
            dtx_watchdog_fire(wd, &w, what);
        dtx_idle_poll(&polls);
    }
}

void dtx_watchdog_barrier(struct dtx_watchdog *wd, MPI_Comm comm, const char *what)
{
    MPI_Request r;
    MPI_Ibarrier(comm, &r);
    dtx_watchdog_wait(wd, &r, what);
}

void dtx_watchdog_allreduce(struct dtx_watchdog *wd, const void *send, void *recv, int count,
                            MPI_Datatype type, MPI_Op op, MPI_Comm comm, const char *what)
{
    MPI_Request r;
    MPI_Iallreduce(send, recv, count, type, op, comm, &r);
    dtx_watchdog_wait(wd, &r, what);
}

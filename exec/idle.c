/* What a waiting rank does with its CPU: see idle.h. */
#define _GNU_SOURCE
#include "idle.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool sleeping; /* this process's waits sleep between polls */

int dtx_idle_parse(const char *value, enum dtx_idle_mode *mode, char *msg, size_t len)
{
    if (!value || !*value || !strcmp(value, "auto"))
        *mode = DTX_IDLE_AUTO;
    else if (!strcmp(value, "poll"))
        *mode = DTX_IDLE_POLL;
    else if (!strcmp(value, "sleep"))
        *mode = DTX_IDLE_SLEEP;
    else {
        snprintf(msg, len, "DTEXEC_WAIT: '%s' is not one of auto, poll, sleep", value);
        return 2;
    }
    return 0;
}

/* The CPUs this process may run on (its affinity mask; all online ones if that fails). */
static int usable_cpus(void)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        return CPU_COUNT(&allowed);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

bool dtx_idle_setup(enum dtx_idle_mode mode, int local_size)
{
    sleeping = mode == DTX_IDLE_SLEEP || (mode == DTX_IDLE_AUTO && usable_cpus() < local_size);
    return sleeping;
}

void dtx_idle_poll(unsigned *polls)
{
    if (!sleeping)
        return;
    if (*polls < DTX_IDLE_POLLS) {
        ++*polls;
        return;
    }
    nanosleep(&(struct timespec){0, DTX_IDLE_SLEEP_NS}, NULL);
}

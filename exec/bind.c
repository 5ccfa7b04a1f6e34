/* Pinning ranks to cores. */
#define _GNU_SOURCE
#include "bind.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

void dtx_bind_block(int local, int local_size, int n_cpus, int *first, int *count)
{
    if (local_size < 1)
        local_size = 1;
    if (n_cpus < local_size) { /* oversubscribed: one CPU each, shared in turn */
        *first = n_cpus > 0 ? local % n_cpus : 0;
        *count = 1;
        return;
    }
    *count = n_cpus / local_size;
    *first = local * *count;
}

/* Every thread already running (OpenBLAS starts its pool before main): a thread started
 * later inherits the mask of the thread that starts it. */
static int set_all_threads(const cpu_set_t *set)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return sched_setaffinity(0, sizeof *set, set);
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (*end || tid <= 0)
            continue;
        if (sched_setaffinity((pid_t)tid, sizeof *set, set) != 0 && errno != ESRCH)
            rc = -1;
    }
    int saved = errno;
    closedir(d);
    errno = saved;
    return rc;
}

int dtx_bind_local_rank(int local, int local_size, char *desc, size_t len)
{
    cpu_set_t allowed, mine;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return -1;
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;
    int first, count;
    dtx_bind_block(local, local_size, n, &first, &count);
    CPU_ZERO(&mine);
    for (int k = 0; k < count; k++)
        CPU_SET(cpus[first + k], &mine);
    if (count == 1 || cpus[first + count - 1] - cpus[first] == count - 1)
        snprintf(desc, len, count == 1 ? "%d" : "%d-%d", cpus[first], cpus[first + count - 1]);
    else
        snprintf(desc, len, "%d..%d (%d CPUs)", cpus[first], cpus[first + count - 1], count);
    return set_all_threads(&mine);
}

/* What a waiting rank does with its CPU. dtexec's waits poll MPI (MPI_Test) so that the
 * watchdog and the other ops in flight are served while they wait. On a node that runs more
 * ranks than it has CPUs, a polling rank holds a CPU the rank it waits for needs: a 4-rank
 * tiny-gpt run (tp 2 x dp 2, ZeRO 3, 8 steps) on 2 CPUs took 6.4 CPU s polling, 0.8 s
 * sleeping between polls. So there (or when DTEXEC_WAIT=sleep asks) a wait that found nothing
 * in DTX_IDLE_POLLS polls sleeps between the next ones; with a CPU per rank it polls on (a
 * sleep's wake-up would delay every message it waits for, and the timings). */
#ifndef DTX_IDLE_H
#define DTX_IDLE_H

#include <stdbool.h>
#include <stddef.h>

#define DTX_IDLE_POLLS 100        /* polls in a row that found nothing before the first sleep */
#define DTX_IDLE_SLEEP_NS 20000L  /* one sleep (the kernel's timer slack adds ~50 us) */

enum dtx_idle_mode {
    DTX_IDLE_AUTO,  /* sleep when the node has fewer CPUs than ranks */
    DTX_IDLE_POLL,  /* never sleep */
    DTX_IDLE_SLEEP  /* always sleep after DTX_IDLE_POLLS */
};

/* The mode named by value (DTEXEC_WAIT's: "auto", "poll" or "sleep"; NULL or "": auto).
 * Returns 0, or 2 (bad input) with the reason in msg. */
int dtx_idle_parse(const char *value, enum dtx_idle_mode *mode, char *msg, size_t len);

/* Decides for this process, where local_size ranks share its node. Returns whether its waits
 * will sleep. */
bool dtx_idle_setup(enum dtx_idle_mode mode, int local_size);

/* A poll of a wait found nothing; *polls counts them (0 when the wait starts). */
void dtx_idle_poll(unsigned *polls);

#endif

/* dtexec --bind (exec/bind.c): how the CPUs are cut into blocks, and that a thread started
 * before the call (as OpenBLAS starts its pool) is pinned too, read back from the kernel. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "bind.h"

/* Local rank `local` of `size` on n_cpus CPUs gets CPUs first .. first + count - 1. */
static void assert_block(int local, int size, int n_cpus, int first, int count)
{
    int f, c;
    dtx_bind_block(local, size, n_cpus, &f, &c);
    assert_int_equal(f, first);
    assert_int_equal(c, count);
}

static void test_blocks(void **state)
{
    (void)state;
    assert_block(0, 2, 8, 0, 4); /* 8 CPUs, 2 ranks: 0-3 and 4-7 */
    assert_block(1, 2, 8, 4, 4);
    assert_block(2, 3, 7, 4, 2); /* 7 CPUs, 3 ranks: two each, the last CPU unused */
    assert_block(2, 3, 2, 0, 1); /* oversubscribed: 2 CPUs, 3 ranks: 0, 1, 0 */
    assert_block(1, 3, 2, 1, 1);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done;

static void *waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!done)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static int first_cpu(const cpu_set_t *s)
{
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, s))
            return c;
    return -1;
}

static void test_pins_running_threads(void **state)
{
    (void)state;
    cpu_set_t before;
    assert_int_equal(sched_getaffinity(0, sizeof before, &before), 0);
    int n = CPU_COUNT(&before);
    if (n < 2) { /* pinned or not, a thread on a single usable CPU looks the same */
        print_message("one usable CPU: pinning cannot be observed, skipped\n");
        skip();
    }
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter, NULL), 0);
    /* the last local rank of n gets the last usable CPU */
    char desc[64];
    assert_int_equal(dtx_bind_local_rank(n - 1, n, desc, sizeof desc), 0);
    cpu_set_t main_set, thread_set;
    assert_int_equal(sched_getaffinity(0, sizeof main_set, &main_set), 0);
    assert_int_equal(pthread_getaffinity_np(t, sizeof thread_set, &thread_set), 0);
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &before))
            last = c;
    assert_int_equal(CPU_COUNT(&main_set), 1);
    assert_int_equal(first_cpu(&main_set), last);
    assert_int_equal(CPU_COUNT(&thread_set), 1);
    assert_int_equal(first_cpu(&thread_set), last);
    char want[16];
    snprintf(want, sizeof want, "%d", last);
    assert_string_equal(desc, want);
    pthread_mutex_lock(&mu);
    done = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    sched_setaffinity(0, sizeof before, &before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_pins_running_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* exec/idle.c: DTEXEC_WAIT's values, and when a waiting rank sleeps between its polls (auto:
 * only when its node has more ranks than the CPUs it may use). Deterministic: the CPU time
 * this saves is a figure for benchmarks, not a test. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "idle.h"

/* Ensure the three names and the empty/unset value parse, and another is refused naming it. */
static void test_parse(void **state)
{
    (void)state;
    enum dtx_idle_mode m;
    char msg[128] = "";
    assert_int_equal(dtx_idle_parse(NULL, &m, msg, sizeof msg), 0);
    assert_int_equal(m, DTX_IDLE_AUTO);
    assert_int_equal(dtx_idle_parse("", &m, msg, sizeof msg), 0);
    assert_int_equal(m, DTX_IDLE_AUTO);
    assert_int_equal(dtx_idle_parse("poll", &m, msg, sizeof msg), 0);
    assert_int_equal(m, DTX_IDLE_POLL);
    assert_int_equal(dtx_idle_parse("sleep", &m, msg, sizeof msg), 0);
    assert_int_equal(m, DTX_IDLE_SLEEP);
    assert_int_equal(dtx_idle_parse("spin", &m, msg, sizeof msg), 2);
    assert_non_null(strstr(msg, "'spin' is not one of auto, poll, sleep"));
}

/* Ensure sleep always sleeps, poll never, and auto only with more ranks on the node than any
 * machine's CPUs (one rank: never). */
static void test_setup(void **state)
{
    (void)state;
    assert_true(dtx_idle_setup(DTX_IDLE_SLEEP, 1));
    assert_false(dtx_idle_setup(DTX_IDLE_POLL, 1 << 20));
    assert_false(dtx_idle_setup(DTX_IDLE_AUTO, 1));
    assert_true(dtx_idle_setup(DTX_IDLE_AUTO, 1 << 20));
    unsigned polls = 0;
    for (int i = 0; i < DTX_IDLE_POLLS; i++)
        dtx_idle_poll(&polls);
    assert_int_equal(polls, DTX_IDLE_POLLS); /* the polls before it sleeps are counted */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

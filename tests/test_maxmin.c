/* The max-min solver on problems whose answer is known in closed form. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "maxmin.h"

#define REL_TOL 1e-9 /* rates are sums and quotients of a few doubles */

static void assert_close(double got, double want)
{
    double tol = REL_TOL * fabs(want);
    if (!(fabs(got - want) <= tol))
        fail_msg("got %.17g, want %.17g (relative tolerance %g)", got, want, REL_TOL);
}

static struct dt_maxmin *mm;

static int setup(void **state)
{
    (void)state;
    return dt_maxmin_create(&mm, NULL);
}

static int teardown(void **state)
{
    (void)state;
    dt_maxmin_destroy(mm);
    return 0;
}

/* Ensure that two flows on one link get half its capacity each. */
static void test_two_flows_one_link(void **state)
{
    (void)state;
    /* one link of 100 B/s, two flows: 100 / 2 = 50 each */
    double cap[] = {100};
    int start[] = {0, 1, 2}, links[] = {0, 0};
    double rate[2];
    assert_int_equal(dt_maxmin_solve(mm, 1, cap, 2, start, links, rate, NULL), DT_OK);
    assert_close(rate[0], 50);
    assert_close(rate[1], 50);
}

/* Ensure that a flow crossing a fast and a slow link gets the slow link's capacity. */
static void test_fast_then_slow(void **state)
{
    (void)state;
    /* links 1e9 and 1e6 B/s, one flow over both: min(1e9, 1e6) = 1e6 */
    double cap[] = {1e9, 1e6};
    int start[] = {0, 2}, links[] = {0, 1};
    double rate[1];
    assert_int_equal(dt_maxmin_solve(mm, 2, cap, 1, start, links, rate, NULL), DT_OK);
    assert_close(rate[0], 1e6);
}

/* Ensure that the classic line network (one long flow over three links, one short flow on
 * each link) gets its max-min rates, three distinct levels. */
static void test_three_links_four_flows(void **state)
{
    (void)state;
    /* Links L0, L1, L2 of capacity 1, 2, 3. F0 crosses all three; F1, F2, F3 cross only L0,
     * L1, L2 (the textbook line network of max-min flow control, here with unequal
     * capacities so that the three rounds give three levels). Hand derivation:
     * Round 1: shares L0 1/2, L1 2/2 = 1, L2 3/2 -> L0 saturates: F0 = F1 = 1/2.
     * Round 2: L1 has 2 - 1/2 = 3/2 left for F2 alone, L2 has 3 - 1/2 = 5/2 for F3 alone;
     *          L1 saturates first: F2 = 3/2.
     * Round 3: F3 = 5/2.
     * Check: every link is saturated (1/2+1/2 = 1, 1/2+3/2 = 2, 1/2+5/2 = 3). */
    double cap[] = {1, 2, 3};
    int start[] = {0, 3, 4, 5, 6};
    int links[] = {0, 1, 2, 0, 1, 2};
    double rate[4];
    assert_int_equal(dt_maxmin_solve(mm, 3, cap, 4, start, links, rate, NULL), DT_OK);
    assert_close(rate[0], 0.5);
    assert_close(rate[1], 0.5);
    assert_close(rate[2], 1.5);
    assert_close(rate[3], 2.5);
    assert_int_equal(dt_maxmin_rounds(mm), 3);
}

/* Ensure that capacity left over by a flow bottlenecked elsewhere goes to the others. */
static void test_leftover_redistributed(void **state)
{
    (void)state;
    /* L0 = 10 shared by A, B, C; C also crosses L1 = 1. Fair share on L0 would be 10/3,
     * but C is held to 1 by L1, so A and B split 10 - 1 = 9: 4.5 each. */
    double cap[] = {10, 1};
    int start[] = {0, 1, 2, 4};
    int links[] = {0, 0, 0, 1};
    double rate[3];
    assert_int_equal(dt_maxmin_solve(mm, 2, cap, 3, start, links, rate, NULL), DT_OK);
    assert_close(rate[0], 4.5);
    assert_close(rate[1], 4.5);
    assert_close(rate[2], 1.0);
}

/* Ensure that a flow that crosses no link is not limited, and that a bad capacity or link
 * index is refused. */
static void test_edges(void **state)
{
    (void)state;
    double cap[] = {5};
    int start[] = {0, 0, 1};
    int links[] = {0};
    double rate[2];
    assert_int_equal(dt_maxmin_solve(mm, 1, cap, 2, start, links, rate, NULL), DT_OK);
    assert_true(isinf(rate[0]));
    assert_close(rate[1], 5);
    double bad[] = {0};
    struct dt_error err;
    assert_int_equal(dt_maxmin_solve(mm, 1, bad, 2, start, links, rate, &err), DT_EINPUT);
    int out_of_range[] = {1};
    assert_int_equal(dt_maxmin_solve(mm, 1, cap, 2, start, out_of_range, rate, &err),
                     DT_EINPUT);
}

/* Ensure that on a larger pseudo-random problem the answer has the defining properties of
 * max-min fairness: feasible, and every flow has a saturated link where its rate is the
 * largest (so no rate can grow without lowering a smaller one). */
static void test_random_is_maxmin(void **state)
{
    (void)state;
    enum { L = 40, F = 300, H = 4 };
    static double cap[L], rate[F], load[L], top[L];
    static int start[F + 1], links[F * H];
    uint64_t x = 42;
#define NEXT() (x = x * 6364136223846793005ULL + 1442695040888963407ULL, x >> 33)
    for (int l = 0; l < L; l++)
        cap[l] = 1.0 + (double)(NEXT() % 1000);
    int w = 0;
    for (int f = 0; f < F; f++) {
        start[f] = w;
        int hops = 1 + (int)(NEXT() % H);
        for (int h = 0; h < hops; h++)
            links[w++] = (int)(NEXT() % L);
    }
    start[F] = w;
#undef NEXT
    assert_int_equal(dt_maxmin_solve(mm, L, cap, F, start, links, rate, NULL), DT_OK);
    for (int l = 0; l < L; l++)
        load[l] = top[l] = 0;
    for (int f = 0; f < F; f++)
        for (int k = start[f]; k < start[f + 1]; k++) {
            load[links[k]] += rate[f];
            if (rate[f] > top[links[k]])
                top[links[k]] = rate[f];
        }
    for (int l = 0; l < L; l++)
        assert_true(load[l] <= cap[l] * (1 + REL_TOL));
    for (int f = 0; f < F; f++) {
        assert_true(rate[f] > 0);
        int has_bottleneck = 0;
        for (int k = start[f]; k < start[f + 1]; k++) {
            int l = links[k];
            if (load[l] >= cap[l] * (1 - REL_TOL) && rate[f] >= top[l] * (1 - REL_TOL))
                has_bottleneck = 1;
        }
        assert_true(has_bottleneck);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_flows_one_link),
        cmocka_unit_test(test_fast_then_slow),
        cmocka_unit_test(test_three_links_four_flows),
        cmocka_unit_test(test_leftover_redistributed),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_random_is_maxmin),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

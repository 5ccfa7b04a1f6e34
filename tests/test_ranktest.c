/* The exact Mann-Whitney U test (validate/ranktest.c). Expected values are counted by hand:
 * with m a's and n b's, the orderings with U = u are the partitions of u into at most m parts
 * none larger than n, out of C(m + n, m) orderings in all. m = n = 5: u = 0, 1, 2, 3 have
 * 1, 1, 2, 3 partitions of 252; m = n = 3: u = 0 has 1 of 20. Published tables agree: the
 * two-sided 5% critical value for 5 and 5 is U = 2. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ranktest.h"

static void test_u(void **state)
{
    (void)state;
    const double a[] = {1, 2, 3}, b[] = {4, 5, 6};
    assert_true(dtv_mwu_u(a, 3, b, 3) == 9);   /* every a below every b */
    assert_true(dtv_mwu_u(b, 3, a, 3) == 0);
    const double c[] = {1, 2}, d[] = {2, 3};   /* (1,2) (1,3) (2,3) and the tie (2,2) */
    assert_true(dtv_mwu_u(c, 2, d, 2) == 3.5);
}

static void test_exact_p(void **state)
{
    (void)state;
    assert_true(fabs(dtv_mwu_p_two_sided(0, 5, 5) - 2.0 / 252) < 1e-12);
    assert_true(fabs(dtv_mwu_p_two_sided(25, 5, 5) - 2.0 / 252) < 1e-12); /* other side */
    assert_true(fabs(dtv_mwu_p_two_sided(2, 5, 5) - 8.0 / 252) < 1e-12);
    assert_true(fabs(dtv_mwu_p_two_sided(3, 5, 5) - 14.0 / 252) < 1e-12);
    assert_true(dtv_mwu_p_two_sided(2, 5, 5) < 0.05 && dtv_mwu_p_two_sided(3, 5, 5) > 0.05);
    /* three repeats cannot resolve anything at 5%: the best is 2 / 20 */
    assert_true(fabs(dtv_mwu_p_two_sided(0, 3, 3) - 0.1) < 1e-12);
    /* the centre is p = 1 */
    assert_true(dtv_mwu_p_two_sided(3, 2, 3) == 1);
    /* a tie (U = 2.5) counts as U = 3, the less extreme neighbour */
    assert_true(fabs(dtv_mwu_p_two_sided(2.5, 5, 5) - 14.0 / 252) < 1e-12);
    /* unequal sizes: 2 and 4, u = 0 is 1 of C(6, 2) = 15 */
    assert_true(fabs(dtv_mwu_p_two_sided(0, 2, 4) - 2.0 / 15) < 1e-12);
    /* the recursion at the size limit stays a probability */
    double p = dtv_mwu_p_two_sided(2000, 64, 64);
    assert_true(p > 0 && p <= 1);
    assert_true(isnan(dtv_mwu_p_two_sided(1, 0, 5)));
    assert_true(isnan(dtv_mwu_p_two_sided(26, 5, 5)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u),
        cmocka_unit_test(test_exact_p),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

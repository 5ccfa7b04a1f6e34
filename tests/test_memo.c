/* The memo table (sim/memo.c): what is kept is found again through the table's growth, what
 * was not is not, and keys alike in one hash but not the other stay apart. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "memo.h"

static struct dt_memo_key key_of(uint64_t i)
{
    return dt_memo_mix(dt_memo_mix(dt_memo_start(), i), i * 7);
}

/* Ensure that 10,000 times kept are found again, with their busy parts, after the table grew
 * from 64 slots, and that keys never kept are not found. */
static void kept_and_found(void **state)
{
    (void)state;
    struct dt_memo m = {0};
    double s, busy;
    assert_false(dt_memo_recall(&m, key_of(1), &s, &busy));
    for (uint64_t i = 0; i < 10000; i++)
        assert_int_equal(dt_memo_remember(&m, key_of(i), (double)i, 0.5 * (double)i), 0);
    assert_int_equal(m.n, 10000);
    assert_true(m.cap >= 2 * m.n);
    for (uint64_t i = 0; i < 10000; i++) {
        assert_true(dt_memo_recall(&m, key_of(i), &s, &busy));
        assert_true(s == (double)i && busy == 0.5 * (double)i);
    }
    for (uint64_t i = 10000; i < 20000; i++)
        assert_false(dt_memo_recall(&m, key_of(i), &s, &busy));
    dt_memo_free(&m);
}

/* Ensure that two keys with the same first hash and different second ones are two entries,
 * and that keeping a key again replaces its time. */
static void both_hashes_count(void **state)
{
    (void)state;
    struct dt_memo m = {0};
    struct dt_memo_key x = {42, 1}, y = {42, 2};
    double s, busy;
    assert_int_equal(dt_memo_remember(&m, x, 1, 0), 0);
    assert_false(dt_memo_recall(&m, y, &s, &busy));
    assert_int_equal(dt_memo_remember(&m, y, 2, 0), 0);
    assert_true(dt_memo_recall(&m, x, &s, &busy) && s == 1);
    assert_true(dt_memo_recall(&m, y, &s, &busy) && s == 2);
    assert_int_equal(dt_memo_remember(&m, x, 3, 0), 0);
    assert_true(dt_memo_recall(&m, x, &s, &busy) && s == 3);
    assert_int_equal(m.n, 2);
    dt_memo_free(&m);
}

/* Ensure that the order of what is mixed in changes both hashes. */
static void order_changes_the_key(void **state)
{
    (void)state;
    struct dt_memo_key ab = dt_memo_mix(dt_memo_mix(dt_memo_start(), 1), 2);
    struct dt_memo_key ba = dt_memo_mix(dt_memo_mix(dt_memo_start(), 2), 1);
    assert_true(ab.a != ba.a && ab.b != ba.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(kept_and_found),
                                       cmocka_unit_test(both_hashes_count),
                                       cmocka_unit_test(order_changes_the_key)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

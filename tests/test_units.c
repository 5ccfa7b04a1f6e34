/* Tests of libdt/units.c: quantities written with their unit, parsed strictly into SI.
 * Expected values are the SI definitions (k = 1e3, Ki = 1024, 1 B = 8 bit, 1 min = 60 s)
 * worked by hand; REL is the tolerance for decimal fractions that binary doubles round. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "dt/units.h"

#define REL 1e-12

static double parse_ok(const char *text, enum dt_unit unit)
{
    double v = -1;
    char why[256] = "";
    int rc = dt_parse_quantity(text, unit, &v, why, sizeof why);
    if (rc != 0)
        print_error("unexpected error for '%s': %s\n", text, why);
    assert_int_equal(rc, 0);
    return v;
}

static void assert_close(double got, double want)
{
    if (fabs(got - want) > REL * fabs(want)) {
        print_error("got %.17g, want %.17g\n", got, want);
        fail();
    }
}

/* Returns the reason, after checking that parsing failed and left *out alone. */
static const char *parse_bad(const char *text, enum dt_unit unit)
{
    static char why[256];
    double v = 42;
    why[0] = '\0';
    int rc = dt_parse_quantity(text, unit, &v, why, sizeof why);
    if (rc == 0)
        print_error("'%s' was accepted as %g\n", text, v);
    assert_int_equal(rc, -1);
    assert_true(v == 42);
    assert_true(why[0] != '\0');
    return why;
}

/* Ensure that k is the SI prefix (1e3) and Ki the binary one (1024). */
static void test_k_vs_ki(void **state)
{
    (void)state;
    assert_close(parse_ok("1 kB", DT_UNIT_BYTES), 1000.0);
    assert_close(parse_ok("1 KiB", DT_UNIT_BYTES), 1024.0);
    assert_close(parse_ok("512 kB", DT_UNIT_BYTES), 512000.0);
}

/* Ensure that every SI and binary prefix has its value: M G T P and Mi Gi Ti Pi. */
static void test_all_prefixes(void **state)
{
    (void)state;
    assert_close(parse_ok("1 MB", DT_UNIT_BYTES), 1e6);
    assert_close(parse_ok("32 GB", DT_UNIT_BYTES), 32e9);
    assert_close(parse_ok("1 TB", DT_UNIT_BYTES), 1e12);
    assert_close(parse_ok("1 PB", DT_UNIT_BYTES), 1e15);
    assert_close(parse_ok("1.5 MiB", DT_UNIT_BYTES), 1.5 * 1048576.0);
    assert_close(parse_ok("16 GiB", DT_UNIT_BYTES), 17179869184.0);  /* 16 x 2^30 */
    assert_close(parse_ok("1 TiB", DT_UNIT_BYTES), 1099511627776.0); /* 2^40 */
    assert_close(parse_ok("1 PiB", DT_UNIT_BYTES), 1125899906842624.0); /* 2^50 */
    assert_close(parse_ok("64 B", DT_UNIT_BYTES), 64.0);
}

/* Ensure that bits are an eighth of a byte, for sizes and for bandwidths. */
static void test_bit_vs_byte(void **state)
{
    (void)state;
    assert_close(parse_ok("8 bit", DT_UNIT_BYTES), 1.0);
    assert_close(parse_ok("1 kbit", DT_UNIT_BYTES), 125.0);
    /* 100 Gbit/s = 1e11 / 8 B/s = 12.5 GB/s: the same rate written two ways. */
    assert_close(parse_ok("100 Gbit/s", DT_UNIT_BANDWIDTH), 12.5e9);
    assert_close(parse_ok("12.5 GB/s", DT_UNIT_BANDWIDTH), 12.5e9);
    assert_close(parse_ok("1 Gibit/s", DT_UNIT_BANDWIDTH), 1073741824.0 / 8);
    assert_close(parse_ok("12.5 GiB/s", DT_UNIT_BANDWIDTH), 12.5 * 1073741824.0);
}

/* Ensure that every time unit converts to seconds, micro written three ways. */
static void test_time_units(void **state)
{
    (void)state;
    assert_close(parse_ok("500 ns", DT_UNIT_TIME), 500e-9);
    assert_close(parse_ok("1.5 us", DT_UNIT_TIME), 1.5e-6);
    assert_close(parse_ok("1.5 \xc2\xb5s", DT_UNIT_TIME), 1.5e-6); /* micro sign U+00B5 */
    assert_close(parse_ok("1.5 \xce\xbcs", DT_UNIT_TIME), 1.5e-6); /* Greek mu U+03BC */
    assert_close(parse_ok("2 ms", DT_UNIT_TIME), 2e-3);
    assert_close(parse_ok("0.3 s", DT_UNIT_TIME), 0.3);
    assert_close(parse_ok("1 min", DT_UNIT_TIME), 60.0);
    assert_close(parse_ok("2 h", DT_UNIT_TIME), 7200.0);
}

/* Ensure that time units take no SI prefix ("ks" is not a unit here). */
static void test_time_has_no_prefix(void **state)
{
    (void)state;
    parse_bad("1 ks", DT_UNIT_TIME);
    parse_bad("1 Ms", DT_UNIT_TIME);
}

/* Ensure that FLOP rates, FLOP counts, prices and frequencies convert. */
static void test_other_kinds(void **state)
{
    (void)state;
    assert_close(parse_ok("2 TFLOP/s", DT_UNIT_FLOP_RATE), 2e12);
    assert_close(parse_ok("989 TFLOP/s", DT_UNIT_FLOP_RATE), 989e12);
    assert_close(parse_ok("150 GFLOP/s", DT_UNIT_FLOP_RATE), 150e9);
    assert_close(parse_ok("1.2 GFLOP", DT_UNIT_FLOPS), 1.2e9);
    assert_close(parse_ok("3.06 USD/h", DT_UNIT_PRICE), 3.06);
    assert_close(parse_ok("2.5 GHz", DT_UNIT_FREQUENCY), 2.5e9);
    assert_close(parse_ok("1725 MHz", DT_UNIT_FREQUENCY), 1.725e9);
}

/* Ensure that each kind's own example parses as that kind and as no other. */
static void test_examples_round_trip(void **state)
{
    (void)state;
    for (int k = DT_UNIT_BYTES; k <= DT_UNIT_FREQUENCY; k++) {
        const char *ex = dt_unit_example((enum dt_unit)k);
        assert_true(parse_ok(ex, (enum dt_unit)k) > 0);
        for (int other = DT_UNIT_BYTES; other <= DT_UNIT_FREQUENCY; other++)
            if (other != k)
                parse_bad(ex, (enum dt_unit)other);
    }
}

/* Ensure that a unit of another kind is refused and the message names both kinds. */
static void test_wrong_kind(void **state)
{
    (void)state;
    const char *why = parse_bad("2 us", DT_UNIT_BANDWIDTH);
    assert_non_null(strstr(why, "is a time"));
    assert_non_null(strstr(why, "bandwidth"));
    why = parse_bad("10 GB/s", DT_UNIT_BYTES);
    assert_non_null(strstr(why, "is a bandwidth"));
    why = parse_bad("16 GiB", DT_UNIT_TIME);
    assert_non_null(strstr(why, "size in bytes"));
}

/* Ensure that a bare number is refused: units are never assumed. */
static void test_no_unit(void **state)
{
    (void)state;
    const char *why = parse_bad("100", DT_UNIT_BANDWIDTH);
    assert_non_null(strstr(why, "no unit"));
    parse_bad("0.5", DT_UNIT_TIME);
    parse_bad("100   ", DT_UNIT_BYTES);
}

/* Ensure that empty and blank text is refused. */
static void test_empty(void **state)
{
    (void)state;
    assert_non_null(strstr(parse_bad("", DT_UNIT_BYTES), "empty"));
    assert_non_null(strstr(parse_bad("   ", DT_UNIT_TIME), "empty"));
}

/* Ensure that NaN is refused however it is spelt. */
static void test_nan(void **state)
{
    (void)state;
    parse_bad("nan GB/s", DT_UNIT_BANDWIDTH);
    parse_bad("NaN s", DT_UNIT_TIME);
    parse_bad("-nan B", DT_UNIT_BYTES);
    parse_bad("+nan B", DT_UNIT_BYTES);
}

/* Ensure that infinities, written or reached by overflow, are refused. */
static void test_inf(void **state)
{
    (void)state;
    parse_bad("inf B/s", DT_UNIT_BANDWIDTH);
    parse_bad("+inf B/s", DT_UNIT_BANDWIDTH);
    parse_bad("-infinity s", DT_UNIT_TIME);
    parse_bad("1e999 B", DT_UNIT_BYTES);                                 /* strtod: ERANGE */
    assert_non_null(strstr(parse_bad("1e300 PB", DT_UNIT_BYTES), "too large")); /* 1e315 */
}

/* Ensure that hexadecimal numbers (which strtod would take) are refused, signed or not. */
static void test_hex(void **state)
{
    (void)state;
    parse_bad("0x10 GB/s", DT_UNIT_BANDWIDTH);
    parse_bad("0X10 B", DT_UNIT_BYTES);
    parse_bad("+0x10 B", DT_UNIT_BYTES);
    parse_bad("-0x1p4 s", DT_UNIT_TIME);
}

/* Ensure that anything after the unit is refused. */
static void test_trailing_garbage(void **state)
{
    (void)state;
    parse_bad("10 GB/s x", DT_UNIT_BANDWIDTH);
    parse_bad("10 GB/sec", DT_UNIT_BANDWIDTH);
    parse_bad("10 GB/s/s", DT_UNIT_BANDWIDTH);
    parse_bad("1.5.3 s", DT_UNIT_TIME);
    parse_bad("10 G B/s", DT_UNIT_BANDWIDTH);
    parse_bad("10 a-very-long-unit-name-that-fills-the-buffer-and-more", DT_UNIT_BYTES);
}

/* Ensure that an upper-case K is refused with a hint about k and Ki. */
static void test_capital_k(void **state)
{
    (void)state;
    const char *why = parse_bad("1 KB", DT_UNIT_BYTES);
    assert_non_null(strstr(why, "lower-case k"));
    parse_bad("1 KB/s", DT_UNIT_BANDWIDTH);
    parse_bad("1 KHz", DT_UNIT_FREQUENCY);
}

/* Ensure that "Gb/s" and "Gbps", ambiguous between bits and bytes, are refused with a hint. */
static void test_ambiguous_bits(void **state)
{
    (void)state;
    assert_non_null(strstr(parse_bad("100 Gb/s", DT_UNIT_BANDWIDTH), "bit/s"));
    assert_non_null(strstr(parse_bad("100 Gbps", DT_UNIT_BANDWIDTH), "bit/s"));
    assert_non_null(strstr(parse_bad("2 TFLOPS", DT_UNIT_FLOP_RATE), "FLOP/s"));
    assert_non_null(strstr(parse_bad("16 Gb", DT_UNIT_BYTES), "bit"));
}

/* Ensure that a negative quantity parses (range checks are the caller's, e.g. yamldoc's
 * "must be above" check) and keeps its sign. */
static void test_negative(void **state)
{
    (void)state;
    assert_close(parse_ok("-5 GB/s", DT_UNIT_BANDWIDTH), -5e9);
    assert_close(parse_ok("-1.5 us", DT_UNIT_TIME), -1.5e-6);
}

/* Ensure that spaces around and between number and unit are allowed, and none needed. */
static void test_spacing(void **state)
{
    (void)state;
    assert_close(parse_ok("  10GB/s  ", DT_UNIT_BANDWIDTH), 10e9);
    assert_close(parse_ok("10\tGB/s", DT_UNIT_BANDWIDTH), 10e9);
    assert_close(parse_ok(".5 s", DT_UNIT_TIME), 0.5);
    assert_close(parse_ok("1e3 B", DT_UNIT_BYTES), 1000.0);
}

/* Ensure that a tiny reason buffer is filled safely (truncated, terminated). */
static void test_small_reason_buffer(void **state)
{
    (void)state;
    char why[8];
    double v;
    memset(why, 'x', sizeof why);
    assert_int_equal(dt_parse_quantity("10 parsecs", DT_UNIT_TIME, &v, why, sizeof why), -1);
    assert_int_equal(strlen(why), sizeof why - 1);
}

/* Ensure that values print with a suitable prefix and unit. */
static void test_format(void **state)
{
    (void)state;
    char buf[64];
    dt_format_quantity(1.5e-6, DT_UNIT_TIME, buf, sizeof buf);
    assert_string_equal(buf, "1.5 us");
    dt_format_quantity(2e-3, DT_UNIT_TIME, buf, sizeof buf);
    assert_string_equal(buf, "2 ms");
    dt_format_quantity(12.5e9, DT_UNIT_BANDWIDTH, buf, sizeof buf);
    assert_string_equal(buf, "12.5 GB/s");
    dt_format_quantity(989e12, DT_UNIT_FLOP_RATE, buf, sizeof buf);
    assert_string_equal(buf, "989 TFLOP/s");
    dt_format_quantity(3.06, DT_UNIT_PRICE, buf, sizeof buf);
    assert_string_equal(buf, "3.06 USD/h");
    dt_format_quantity(0, DT_UNIT_TIME, buf, sizeof buf);
    assert_string_equal(buf, "0 s");
}

/* Ensure that the kind names used in messages are the documented ones. */
static void test_kind_names(void **state)
{
    (void)state;
    assert_string_equal(dt_unit_kind_name(DT_UNIT_BANDWIDTH), "bandwidth");
    assert_string_equal(dt_unit_kind_name(DT_UNIT_TIME), "time");
    assert_string_equal(dt_unit_example(DT_UNIT_BANDWIDTH), "10 GB/s");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_k_vs_ki),
        cmocka_unit_test(test_all_prefixes),
        cmocka_unit_test(test_bit_vs_byte),
        cmocka_unit_test(test_time_units),
        cmocka_unit_test(test_time_has_no_prefix),
        cmocka_unit_test(test_other_kinds),
        cmocka_unit_test(test_examples_round_trip),
        cmocka_unit_test(test_wrong_kind),
        cmocka_unit_test(test_no_unit),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_nan),
        cmocka_unit_test(test_inf),
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_trailing_garbage),
        cmocka_unit_test(test_capital_k),
        cmocka_unit_test(test_ambiguous_bits),
        cmocka_unit_test(test_negative),
        cmocka_unit_test(test_spacing),
        cmocka_unit_test(test_small_reason_buffer),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_kind_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

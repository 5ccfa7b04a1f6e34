/* Tests of the bf16 / fp16 conversions (exec/cpu/half.h): expected bit patterns worked out by
 * hand from the formats (bf16: 1+8+7 bits, fp16: 1+5+10 bits with subnormals of 2^-24). */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "half.h"

static void test_bf16_exact_and_special(void **state)
{
    (void)state;
    assert_int_equal(dtk_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(dtk_f32_to_bf16(-2.0f), 0xc000);
    assert_int_equal(dtk_f32_to_bf16(0.0f), 0x0000);
    assert_int_equal(dtk_f32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(dtk_f32_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(dtk_f32_to_bf16(-INFINITY), 0xff80);
    assert_true(isnan(dtk_bf16_to_f32(dtk_f32_to_bf16(NAN))));
    assert_true(isnan(dtk_bf16_to_f32(dtk_f32_to_bf16(-NAN))));
    /* a NaN whose payload lies in the low 16 bits only must not become inf */
    uint32_t u = 0x7f800001u;
    float snan;
    memcpy(&snan, &u, sizeof snan);
    assert_true(isnan(dtk_bf16_to_f32(dtk_f32_to_bf16(snan))));
    assert_float_equal(dtk_bf16_to_f32(0x3f80), 1.0f, 0.0f);
    assert_float_equal(dtk_bf16_to_f32(0x4049), 3.140625f, 0.0f);
}

static void test_bf16_rounding(void **state)
{
    (void)state;
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even 1 */
    assert_int_equal(dtk_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    /* 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up to even */
    assert_int_equal(dtk_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    /* just above a tie rounds up, just below down */
    assert_int_equal(dtk_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    assert_int_equal(dtk_f32_to_bf16(1.0f + 0x1p-8f - 0x1p-20f), 0x3f80);
    /* the largest float rounds to inf; bf16's largest finite stays */
    assert_int_equal(dtk_f32_to_bf16(3.4028235e38f), 0x7f80);
    assert_int_equal(dtk_f32_to_bf16(dtk_bf16_to_f32(0x7f7f)), 0x7f7f);
    /* float subnormals keep their bits' top half (bf16 has the same exponent range) */
    assert_int_equal(dtk_f32_to_bf16(0x1p-133f), 0x0001);
}

static void test_f16_exact_and_special(void **state)
{
    (void)state;
    assert_int_equal(dtk_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(dtk_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(dtk_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(dtk_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(dtk_f32_to_f16(INFINITY), 0x7c00);
    assert_int_equal(dtk_f32_to_f16(-INFINITY), 0xfc00);
    uint16_t n = dtk_f32_to_f16(NAN);
    assert_true((n & 0x7c00) == 0x7c00 && (n & 0x3ff));
    assert_true(isnan(dtk_f16_to_f32(n)));
    assert_float_equal(dtk_f16_to_f32(0x7bff), 65504.0f, 0.0f);
    assert_true(isinf(dtk_f16_to_f32(0xfc00)) && dtk_f16_to_f32(0xfc00) < 0);
    assert_float_equal(dtk_f16_to_f32(0x3555), 0.333251953125f, 0.0f);
}

static void test_f16_overflow_and_rounding(void **state)
{
    (void)state;
    /* 65520 is halfway between 65504 (odd mantissa) and 65536: up, which is inf */
    assert_int_equal(dtk_f32_to_f16(65519.0f), 0x7bff);
    assert_int_equal(dtk_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(dtk_f32_to_f16(1e6f), 0x7c00);
    assert_int_equal(dtk_f32_to_f16(-1e6f), 0xfc00);
    /* 1 + 2^-11 ties to 1 (even); 1 + 3 * 2^-11 ties up to 1 + 2^-9 */
    assert_int_equal(dtk_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    assert_int_equal(dtk_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    assert_int_equal(dtk_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
}

static void test_f16_subnormals(void **state)
{
    (void)state;
    assert_int_equal(dtk_f32_to_f16(0x1p-24f), 0x0001);      /* smallest subnormal */
    assert_int_equal(dtk_f32_to_f16(0x1p-14f), 0x0400);      /* smallest normal */
    assert_int_equal(dtk_f32_to_f16(0x1p-15f), 0x0200);
    assert_int_equal(dtk_f32_to_f16(0x1p-25f), 0x0000);      /* tie with 0: even */
    assert_int_equal(dtk_f32_to_f16(-0x1p-25f), 0x8000);
    assert_int_equal(dtk_f32_to_f16(0x1.8p-24f), 0x0002);    /* 1.5 units: tie, to even 2 */
    assert_int_equal(dtk_f32_to_f16(0x1.8p-23f), 0x0003);    /* 3 units exactly */
    assert_int_equal(dtk_f32_to_f16(0x1.4p-24f), 0x0001);    /* 1.25 units: down */
    assert_int_equal(dtk_f32_to_f16(0x1p-26f), 0x0000);
    /* the largest subnormal plus half a unit ties to the smallest normal (even) */
    assert_int_equal(dtk_f32_to_f16(1023.5f * 0x1p-24f), 0x0400);
    assert_float_equal(dtk_f16_to_f32(0x0001), 0x1p-24f, 0.0f);
    assert_float_equal(dtk_f16_to_f32(0x83ff), -1023.0f * 0x1p-24f, 0.0f);
}

/* Every fp16 and every finite bf16 survives the round trip through float32. */
static void test_round_trips(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = dtk_f16_to_f32((uint16_t)h);
        if (!isnan(f))
            assert_int_equal(dtk_f32_to_f16(f), h);
        float b = dtk_bf16_to_f32((uint16_t)h);
        if (!isnan(b))
            assert_int_equal(dtk_f32_to_bf16(b), h);
    }
}

static void test_vectors_and_add(void **state)
{
    (void)state;
    const float in[4] = {1.0f, -0.5f, 3.0f, 1e-3f};
    uint16_t h[4], g[4];
    float out[4];
    for (int t = DT_TYPE_BF16; t <= DT_TYPE_F16; t++) {
        dtk_f32_to_half((enum dt_dtype)t, in, h, 4);
        dtk_half_to_f32((enum dt_dtype)t, h, out, 4);
        for (int i = 0; i < 3; i++)
            assert_float_equal(out[i], in[i], 0.0f);
        assert_float_equal(out[3], in[3], 1e-3f * (t == DT_TYPE_BF16 ? 0x1p-8f : 0x1p-11f));
        dtk_f32_to_half((enum dt_dtype)t, in, g, 4);
        dtk_half_add((enum dt_dtype)t, h, g, 4);
        dtk_half_to_f32((enum dt_dtype)t, h, out, 4);
        assert_float_equal(out[0], 2.0f, 0.0f);
        assert_float_equal(out[1], -1.0f, 0.0f);
        assert_float_equal(out[2], 6.0f, 0.0f);
        assert_false(dtk_half_nonfinite((enum dt_dtype)t, h, 4));
        h[2] = t == DT_TYPE_BF16 ? dtk_f32_to_bf16(INFINITY) : dtk_f32_to_f16(-1e6f);
        assert_true(dtk_half_nonfinite((enum dt_dtype)t, h, 4));
        h[2] = t == DT_TYPE_BF16 ? dtk_f32_to_bf16(NAN) : dtk_f32_to_f16(NAN);
        assert_true(dtk_half_nonfinite((enum dt_dtype)t, h, 4));
        assert_false(dtk_half_nonfinite((enum dt_dtype)t, h, 2));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_exact_and_special),
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_f16_exact_and_special),
        cmocka_unit_test(test_f16_overflow_and_rounding),
        cmocka_unit_test(test_f16_subnormals),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_vectors_and_add),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

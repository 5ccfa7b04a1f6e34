/* Tests of dtexec's output formatting: the Keras-like progress bar, the median, JSON strings
 * and the run record. Expected texts are written out by hand from Keras' format
 * ("469/469 [==============================] - 4s 9ms/step - loss: ... - accuracy: ..."). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "progress.h"
#include "record.h"

/* Ensure that a finished epoch shows a full bar, the elapsed time and the time per step. */
static void test_bar_done(void **state)
{
    (void)state;
    char buf[256];
    dtx_progress_format(buf, sizeof buf, 469, 469, 4.2, 0.291, 0.8921);
    /* 4.2 s / 469 steps = 8.96 ms, printed as 9ms */
    assert_string_equal(buf, "469/469 [==============================] - 4s 9ms/step - loss: 0.2910 "
                             "- accuracy: 0.8921");
}

/* Ensure that an epoch in progress shows the head of the bar and the ETA. */
static void test_bar_running(void **state)
{
    (void)state;
    char buf[256];
    /* 47 of 470 steps: 30 * 47 / 470 = 3 cells done, the head in the fourth; 1 s so far, so
     * 423 steps left take 9 s more */
    dtx_progress_format(buf, sizeof buf, 47, 470, 1.0, 0.5, 0.75);
    assert_string_equal(buf, " 47/470 [===>..........................] - ETA: 9s - loss: 0.5000 - "
                             "accuracy: 0.7500");
}

/* Ensure that a rank that sees no loss (a pipeline's first stage: NaN) shows the bar alone. */
static void test_bar_no_loss(void **state)
{
    (void)state;
    char buf[256];
    dtx_progress_format(buf, sizeof buf, 469, 469, 4.2, NAN, NAN);
    assert_string_equal(buf, "469/469 [==============================] - 4s 9ms/step");
}

/* Ensure that an 80-column terminal gets a line of at most 79 characters: the bar shrinks (the
 * full line is 87), nothing else changes. */
static void test_bar_fits_80_columns(void **state)
{
    (void)state;
    char buf[256];
    dtx_progress_fit(buf, sizeof buf, 469, 469, 4.2, 0.291, 0.8921, 80);
    assert_string_equal(buf, "469/469 [=====================] - 4s 9ms/step - loss: 0.2910 "
                             "- accuracy: 0.8921");
    assert_int_equal(strlen(buf), 79);
}

/* Ensure that a wide terminal keeps Keras's 30-cell bar, and a narrow one gets the smallest
 * bar and a line cut one column short of the edge. */
static void test_bar_wide_and_narrow(void **state)
{
    (void)state;
    char buf[256], full[256];
    dtx_progress_format(full, sizeof full, 47, 470, 1.0, 0.5, 0.75);
    dtx_progress_fit(buf, sizeof buf, 47, 470, 1.0, 0.5, 0.75, 200);
    assert_string_equal(buf, full);
    dtx_progress_fit(buf, sizeof buf, 47, 470, 1.0, 0.5, 0.75, 40);
    assert_string_equal(buf, " 47/470 [>.......] - ETA: 9s - loss: 0.");
    assert_int_equal(strlen(buf), 39);
}

/* Ensure the median of odd and even counts (the middle value; the mean of the middle two). */
static void test_median(void **state)
{
    (void)state;
    double a[] = {5, 1, 3};
    double b[] = {4, 1, 3, 2};
    assert_float_equal(dtx_median(a, 3), 3, 0);
    assert_float_equal(dtx_median(b, 4), 2.5, 0);
    assert_true(isnan(dtx_median(a, 0)));
}

static char *capture(void (*fn)(FILE *, const void *), const void *arg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    fn(f, arg);
    fclose(f);
    return text;
}

static void write_string(FILE *f, const void *s) { dtx_json_string(f, s); }

/* Ensure that JSON strings escape quotes, backslashes and control characters (RFC 8259). */
static void test_json_string(void **state)
{
    (void)state;
    char *t = capture(write_string, "a\"b\\c\nd\x01");
    assert_string_equal(t, "\"a\\\"b\\\\c\\nd\\u0001\"");
    free(t);
}

static void write_record(FILE *f, const void *r) { dtx_record_write(f, r); }

/* Ensure that the record is one line holding the configuration and the measurements, with
 * non-finite numbers written as null (JSON has no NaN). */
static void test_record_line(void **state)
{
    (void)state;
    double ep[] = {1.5, 2.5}, loss[] = {0.5, 0.4}, acc[] = {0.8, NAN};
    struct dtx_record r = {.model_name = "cnn690k", .strategy = "ring", .ranks = 2, .epochs = 2,
                           .epoch_s = ep, .train_loss = loss, .train_accuracy = acc,
                           .test_loss = loss, .test_accuracy = acc, .samples_per_s = 1000,
                           .seed = 3};
    char *t = capture(write_record, &r);
    assert_non_null(strstr(t, "\"model\": \"cnn690k\""));
    assert_non_null(strstr(t, "\"strategy\": \"ring\""));
    assert_non_null(strstr(t, "\"epoch_s\": [1.5, 2.5]"));
    assert_non_null(strstr(t, "\"test_accuracy\": [0.8, null]"));
    assert_non_null(strstr(t, "\"topology_path\": null"));
    /* exactly one newline, at the end */
    assert_ptr_equal(strchr(t, '\n'), t + strlen(t) - 1);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bar_done),
        cmocka_unit_test(test_bar_running),
        cmocka_unit_test(test_bar_no_loss),
        cmocka_unit_test(test_bar_fits_80_columns),
        cmocka_unit_test(test_bar_wide_and_narrow),
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_json_string),
        cmocka_unit_test(test_record_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

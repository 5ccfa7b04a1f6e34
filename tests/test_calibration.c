/* Calibration files (libdt/calibration.c): what dtvalidate writes and dtsim reads. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dt/calibration.h"

/* The writer prints 9 significant digits. */
#define TOL_ROUNDTRIP 1e-8

static void fill(struct dt_calibration *cal)
{
    dt_calibration_init(cal);
    snprintf(cal->created, sizeof cal->created, "2026-01-02T03:04:05Z");
    snprintf(cal->host, sizeof cal->host, "host \"with\" quotes");
    snprintf(cal->tool, sizeof cal->tool, "test");
    cal->n_obs = 9;
    cal->dof = 6;
    cal->resid_sd = 0.05;
    cal->t95 = 2.446911851;
    cal->mape_pct = 4.2;
    cal->n_data = 1;
    snprintf(cal->data[0].file, sizeof cal->data[0].file, "runs.jsonl");
    snprintf(cal->data[0].rows, sizeof cal->data[0].rows, "line 1; line 2");
    struct dt_cal_entry *e = dt_calibration_set(cal, DT_CAL_ITER_OVERHEAD, 0.3123456789);
    e->fitted = true;
    e->se = 0.0101;
    e->lo = 0.29;
    e->hi = 0.337;
    e = dt_calibration_set(cal, DT_CAL_NIC_BW, 821.312306e6);
    e->fitted = true;
    e->se = 476e6;
    e->lo = 208e6;
    e->hi = 3.236e9;
    e = dt_calibration_set(cal, DT_CAL_EFF_POOL, 0.125);
    snprintf(e->source, sizeof e->source, "set by hand");
    cal->n_cov = 2;
    cal->cov_param[0] = DT_CAL_ITER_OVERHEAD;
    cal->cov_param[1] = DT_CAL_NIC_BW;
    cal->cov[0] = 1.06e-3;
    cal->cov[1] = cal->cov[DT_CAL_COUNT] = 1.19e-2;
    cal->cov[DT_CAL_COUNT + 1] = 0.336;
}

static bool close_to(double a, double b) { return fabs(a - b) <= TOL_ROUNDTRIP * fabs(b); }

/* Writes a to a temporary file and reads it back into b; both must succeed. */
static void save_and_load(const struct dt_calibration *a, struct dt_calibration *b)
{
    char path[] = "/tmp/test_calibration_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct dt_error err;
    dt_error_clear(&err);
    assert_int_equal(dt_calibration_save(path, a, &err), DT_OK);
    int rc = dt_calibration_load(path, b, &err);
    if (rc)
        fprintf(stderr, "%s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
    remove(path);
    assert_int_equal(rc, DT_OK);
}

/* Ensure that what the writer writes the loader reads back: values, intervals, covariance,
 * provenance and statistics. */
static void test_roundtrip(void **state)
{
    (void)state;
    struct dt_calibration a, b;
    fill(&a);
    save_and_load(&a, &b);
    assert_int_equal(b.n_entries, 3);
    for (int i = 0; i < a.n_entries; i++) {
        const struct dt_cal_entry *x = &a.entry[i], *y = dt_calibration_find(&b, x->param);
        assert_non_null(y);
        assert_true(close_to(y->value, x->value));
        assert_int_equal(y->fitted, x->fitted);
        if (x->fitted) {
            assert_true(close_to(y->se, x->se));
            assert_true(close_to(y->lo, x->lo));
            assert_true(close_to(y->hi, x->hi));
        }
    }
    assert_string_equal(b.entry[2].source, "set by hand");
    assert_string_equal(b.host, a.host);
    assert_string_equal(b.data[0].rows, "line 1; line 2");
    assert_int_equal(b.dof, 6);
    assert_int_equal(b.n_cov, 2);
    assert_true(close_to(b.cov[1], 1.19e-2) && close_to(b.cov[DT_CAL_COUNT + 1], 0.336));
    assert_true(close_to(b.t95, a.t95) && close_to(b.resid_sd, 0.05));
    assert_true(dt_calibration_has_interval(&b));
}

/* Ensure that a calibration of no parameters (a file that gives only `parameters: {}`, as
 * the loader accepts) is written so that it loads again: found by fuzz_calibration. */
static void test_roundtrip_no_parameters(void **state)
{
    (void)state;
    struct dt_calibration a, b;
    dt_calibration_init(&a);
    save_and_load(&a, &b);
    assert_int_equal(b.n_entries, 0);
}

/* Ensure that every parameter of the table (the ties apart: eff_gemm stands for eff_conv
 * and eff_dense together, eff_gemm_half for eff_conv_half and eff_dense_half, eff_gemm_tf32
 * for eff_conv_tf32 and eff_dense_tf32) goes through
 * the file and into the cost parameters with its value: a distinct value each, of its kind
 * (fractions k/100, times k us, bandwidths k GB/s). */
static void test_every_parameter_roundtrips(void **state)
{
    (void)state;
    struct dt_calibration a, b;
    fill(&a); /* the provenance; its parameters and covariance replaced */
    a.n_entries = 0;
    a.n_cov = 0;
    for (int p = 0; p < DT_CAL_COUNT; p++) {
        if (p == DT_CAL_EFF_GEMM || p == DT_CAL_EFF_GEMM_HALF || p == DT_CAL_EFF_GEMM_TF32)
            continue;
        double k = p + 1;
        enum dt_cal_kind kind = dt_cal_param_kind(p);
        dt_calibration_set(&a, p, kind == DT_CAL_FRACTION ? k / 100 : kind == DT_CAL_TIME
                                                                       ? k * 1e-6
                                                                       : k * 1e9);
    }
    save_and_load(&a, &b);
    struct dt_cost_params cp;
    dt_cost_defaults(&cp, DT_DEV_CPU);
    dt_calibration_apply(&b, &cp);
    for (int p = 0; p < DT_CAL_COUNT; p++) {
        if (p == DT_CAL_EFF_GEMM || p == DT_CAL_EFF_GEMM_HALF || p == DT_CAL_EFF_GEMM_TF32)
            continue;
        const struct dt_cal_entry *e = dt_calibration_find(&a, p);
        double got = dt_cal_param_get(&cp, p);
        if (!close_to(got, e->value))
            fail_msg("%s: got %g, want %g", dt_cal_param_name(p), got, e->value);
    }
}

/* Ensure that applying a calibration sets exactly its parameters: eff_gemm both GEMM classes
 * (an explicit eff_conv beside it wins), the others untouched. */
static void test_apply(void **state)
{
    (void)state;
    struct dt_calibration cal;
    dt_calibration_init(&cal);
    dt_calibration_set(&cal, DT_CAL_EFF_CONV, 0.5);
    dt_calibration_set(&cal, DT_CAL_EFF_GEMM, 0.25);
    dt_calibration_set(&cal, DT_CAL_OP_OVERHEAD, 3e-6);
    struct dt_cost_params cp;
    dt_cost_defaults(&cp, DT_DEV_CPU);
    double pool = cp.eff[DT_CLASS_POOL];
    dt_calibration_apply(&cal, &cp);
    assert_true(cp.eff[DT_CLASS_CONV] == 0.5);
    assert_true(cp.eff[DT_CLASS_DENSE] == 0.25);
    assert_true(cp.eff[DT_CLASS_POOL] == pool);
    for (int c = 0; c < DT_CLASS_COUNT; c++)
        assert_true(cp.overhead_s[c] == 3e-6);
    assert_true(cp.nic_bw_Bps == 0); /* 0: the topology's value */
}

/* Ensure that eff_gemm_half sets both 16-bit GEMM efficiencies and an explicit
 * eff_dense_half beside it wins, whatever their order in the file. */
static void test_apply_half(void **state)
{
    (void)state;
    struct dt_calibration cal;
    dt_calibration_init(&cal);
    dt_calibration_set(&cal, DT_CAL_EFF_DENSE_HALF, 0.6);
    dt_calibration_set(&cal, DT_CAL_EFF_GEMM_HALF, 0.4);
    struct dt_cost_params cp;
    dt_cost_defaults(&cp, DT_DEV_GPU);
    dt_calibration_apply(&cal, &cp);
    assert_true(cp.eff_conv_half == 0.4);
    assert_true(cp.eff_dense_half == 0.6);
    assert_true(dt_cal_param_get(&cp, DT_CAL_EFF_CONV_HALF) == 0.4);
    assert_true(dt_cal_param_get(&cp, DT_CAL_EFF_DENSE_HALF) == 0.6);
}

/* A prediction that is 2 x the per-iteration overhead: d log y / d log theta = 1. */
static int twice_overhead(void *ctx, const struct dt_cost_params *cp, double *value,
                          struct dt_error *err)
{
    (void)ctx;
    (void)err;
    *value = 2 * cp->iter_overhead_s;
    return 0;
}

/* Ensure that the delta-method interval matches its closed form: for y = 2 theta,
 * var log y = C (log-variance of theta), plus s^2 for a prediction interval, and
 * [lo, hi] = y exp(-/+ t95 sqrt(var)). */
static void test_interval_closed_form(void **state)
{
    (void)state;
    struct dt_calibration cal;
    dt_calibration_init(&cal);
    struct dt_cal_entry *e = dt_calibration_set(&cal, DT_CAL_ITER_OVERHEAD, 0.1);
    e->fitted = true;
    cal.n_cov = 1;
    cal.cov_param[0] = DT_CAL_ITER_OVERHEAD;
    cal.cov[0] = 0.01; /* se(log theta) = 0.1 */
    cal.dof = 5;
    cal.t95 = 2.570581836; /* t(0.975, 5) */
    cal.resid_sd = 0.05;
    struct dt_cost_params base;
    dt_cost_defaults(&base, DT_DEV_CPU);
    double y, lo, hi;
    struct dt_error err;
    assert_int_equal(dt_calibration_interval(&cal, &base, DT_CAL_CONFIDENCE, twice_overhead,
                                             NULL, &y, &lo, &hi, &err), DT_OK);
    /* the forward difference of log(2 theta) in log theta is exact: g = 1 */
    assert_true(fabs(y - 0.2) < 1e-15);
    assert_true(fabs(lo - 0.2 * exp(-cal.t95 * 0.1)) < 1e-12);
    assert_true(fabs(hi - 0.2 * exp(cal.t95 * 0.1)) < 1e-12);
    assert_int_equal(dt_calibration_interval(&cal, &base, DT_CAL_PREDICTION, twice_overhead,
                                             NULL, &y, &lo, &hi, &err), DT_OK);
    double half = cal.t95 * sqrt(0.01 + 0.05 * 0.05);
    assert_true(fabs(hi - 0.2 * exp(half)) < 1e-12);
}

/* Loads text and expects DT_EINPUT at line:col with the words in the message. */
static void expect_error(const char *text, int line, int col, const char *words)
{
    struct dt_calibration cal;
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dt_calibration_load_string("cal.yaml", text, &cal, &err);
    if (rc != DT_EINPUT || err.line != line || err.col != col || !strstr(err.msg, words))
        fprintf(stderr, "got rc %d at %d:%d: %s\n", rc, err.line, err.col, err.msg);
    assert_int_equal(rc, DT_EINPUT);
    assert_string_equal(err.file, "cal.yaml");
    assert_int_equal(err.line, line);
    assert_int_equal(err.col, col);
    assert_non_null(strstr(err.msg, words));
    assert_int_equal(cal.n_entries, 0); /* nothing half-loaded */
}

#define HEAD "format: dtsim-calibration/1\n"

/* Ensure that an unknown parameter is reported at its name, with the known ones listed. */
static void test_error_unknown_parameter(void **state)
{
    (void)state;
    expect_error(HEAD "parameters:\n  iter_overhed: {value: 1 s}\n", 3, 3,
                 "unknown parameter 'iter_overhed' (known: iter_overhead");
}

/* Ensure that a value in the wrong unit is reported at the value. */
static void test_error_wrong_unit(void **state)
{
    (void)state;
    expect_error(HEAD "parameters:\n  nic_bw:\n    value: 2 ms\n", 4, 12,
                 "'2 ms' is a time, expected a bandwidth");
}

/* Ensure that a number without its unit is refused (units are never assumed). */
static void test_error_missing_unit(void **state)
{
    (void)state;
    expect_error(HEAD "parameters:\n  iter_overhead: {value: 0.3}\n", 3, 26, "has no unit");
}

/* Ensure that NaN is refused, for efficiencies too. */
static void test_error_nan(void **state)
{
    (void)state;
    expect_error(HEAD "parameters:\n  eff_conv: {value: nan}\n", 3, 21, "expected a plain number");
}

/* Ensure that an interval that does not contain its value is refused. */
static void test_error_interval(void **state)
{
    (void)state;
    expect_error(HEAD "parameters:\n  eff_conv: {value: 0.5, fitted: true, stderr: 0.1, "
                      "ci95: [0.6, 0.9]}\n", 3, 59, "does not contain its value");
}

/* Ensure that a fitted parameter without its uncertainty is refused. */
static void test_error_fitted_without_stderr(void **state)
{
    (void)state;
    expect_error(HEAD "parameters:\n  eff_conv: {value: 0.5, fitted: true}\n", 3, 13,
                 "needs 'stderr' and 'ci95'");
}

/* Ensure that a covariance over a parameter that was not fitted is refused at its name. */
static void test_error_covariance_name(void **state)
{
    (void)state;
    expect_error(HEAD "fit: {dof: 3, t95: 3.18}\nparameters:\n  eff_conv: {value: 0.5}\n"
                      "covariance:\n  parameters: [eff_conv]\n  log_matrix:\n    - [0.1]\n",
                 6, 16, "not a fitted parameter");
}

/* Ensure that an asymmetric covariance matrix is refused at the offending element. */
static void test_error_asymmetric(void **state)
{
    (void)state;
    expect_error(HEAD "fit: {dof: 3, t95: 3.18}\nparameters:\n"
                      "  eff_conv: {value: 0.5, fitted: true, stderr: 0.1, ci95: [0.3, 0.7]}\n"
                      "  eff_dense: {value: 0.5, fitted: true, stderr: 0.1, ci95: [0.3, 0.7]}\n"
                      "covariance:\n  parameters: [eff_conv, eff_dense]\n  log_matrix:\n"
                      "    - [0.1, 0.01]\n    - [0.02, 0.1]\n",
                 10, 8, "not symmetric");
}

/* Ensure that another file (a topology, say) is refused by its format line, and a file
 * without one at the top. */
static void test_error_format(void **state)
{
    (void)state;
    expect_error("format: topology\nparameters: {}\n", 1, 9, "is not 'dtsim-calibration/1'");
    expect_error("parameters: {}\n", 1, 1, "missing required key 'format'");
}

/* Ensure that an unknown top-level key is reported (a typo must not be silently ignored). */
static void test_error_unknown_key(void **state)
{
    (void)state;
    expect_error(HEAD "paramters: {}\n", 2, 1, "unknown key 'paramters'");
}

/* Ensure that values outside what a device can be are refused at the value, as in topology
 * files: an efficiency above 1 (more than the peak), a vanishing one, a 1 B/s link, a
 * negative or absurd time. */
static void test_error_out_of_range(void **state)
{
    (void)state;
    expect_error(HEAD "parameters:\n  eff_conv: {value: 1.5}\n", 3, 21,
                 "eff_conv = 1.5 is out of range (a fraction of the device's peak");
    expect_error(HEAD "parameters:\n  eff_gemm: {value: 1e-300}\n", 3, 21, "out of range");
    expect_error(HEAD "parameters:\n  nic_bw: {value: 1 B/s}\n", 3, 19,
                 "nic_bw = 1 is out of range (a bandwidth from 1 MB/s to 100 TB/s)");
    expect_error(HEAD "parameters:\n  op_overhead: {value: 5 s}\n", 3, 24,
                 "0 or a time from 1 ns to 1 s");
    expect_error(HEAD "parameters:\n  intra_lat: {value: -1 us}\n", 3, 22, "negative");
    expect_error(HEAD "parameters:\n  tanh_time: {value: 2 ms}\n", 3, 22,
                 "tanh_time = 0.002 is out of range (0 or a time from 1 ps to 1 ms)");
    expect_error(HEAD "parameters:\n  exp_time: {value: 0.0001 ns}\n", 3, 21,
                 "exp_time = 1e-13 is out of range");
}

/* Ensure that a calibration records the device it was fitted on (several names for runs on
 * two devices of a kind) and that the file keeps them. */
static void test_device_roundtrip(void **state)
{
    (void)state;
    struct dt_calibration a, b;
    fill(&a);
    struct dt_device_spec v100 = {.kind = DT_DEV_GPU, .name = "NVIDIA Tesla V100 SXM2 32GB"};
    struct dt_device_spec v100b = {.kind = DT_DEV_GPU, .name = "NVIDIA Tesla V100 SXM3 32GB"};
    dt_calibration_add_device(&a, &v100);
    dt_calibration_add_device(&a, &v100b);
    dt_calibration_add_device(&a, &v100); /* listed once */
    assert_string_equal(a.device, "gpu");
    assert_string_equal(a.device_name,
                        "NVIDIA Tesla V100 SXM2 32GB; NVIDIA Tesla V100 SXM3 32GB");
    save_and_load(&a, &b);
    assert_string_equal(b.device, "gpu");
    assert_string_equal(b.device_name, a.device_name);
    assert_true(b.device_line > 0);
}

static struct dt_topology *one_device(struct dt_node_group *g, enum dt_device_kind kind,
                                      const char *name, struct dt_topology *t)
{
    memset(g, 0, sizeof *g);
    memset(t, 0, sizeof *t);
    g->device.kind = kind;
    snprintf(g->device.name, sizeof g->device.name, "%s", name);
    snprintf(t->name, sizeof t->name, "t");
    t->n_groups = 1;
    t->groups = g;
    return t;
}

/* Ensure that a calibration applied to another device kind is refused at its `device:` line
 * naming both devices, and to another device of its kind is allowed with a warning that
 * names both; a listed device gets no warning. */
static void test_device_check(void **state)
{
    (void)state;
    struct dt_calibration cal;
    struct dt_error err;
    dt_error_clear(&err);
    assert_int_equal(dt_calibration_load_string("cal.yaml", HEAD "device: gpu\n"
                                                 "device_name: \"V100; V100b\"\n"
                                                 "parameters: {}\n", &cal, &err), DT_OK);
    struct dt_node_group g;
    struct dt_topology t;
    char warn[512];
    assert_int_equal(dt_calibration_check_device(&cal, one_device(&g, DT_DEV_CPU, "Xeon", &t),
                                                 warn, sizeof warn, &err), DT_EINPUT);
    assert_int_equal(err.line, 2);
    assert_int_equal(err.col, 9);
    assert_non_null(strstr(err.msg, "fitted on V100; V100b (gpu) cannot be applied"));
    assert_non_null(strstr(err.msg, "'Xeon' are cpus"));
    assert_int_equal(dt_calibration_check_device(&cal, one_device(&g, DT_DEV_GPU, "A100", &t),
                                                 warn, sizeof warn, &err), DT_OK);
    assert_non_null(strstr(warn, "fitted on 'V100; V100b' applied to 'A100'"));
    assert_int_equal(dt_calibration_check_device(&cal, one_device(&g, DT_DEV_GPU, "V100b", &t),
                                                 warn, sizeof warn, &err), DT_OK);
    assert_string_equal(warn, "");
    /* a prefix of a listed name is another device */
    assert_int_equal(dt_calibration_check_device(&cal, one_device(&g, DT_DEV_GPU, "V10", &t),
                                                 warn, sizeof warn, &err), DT_OK);
    assert_true(warn[0] != '\0');
}

/* Ensure that a calibration without a covariance gives a prediction interval from its
 * residual spread alone (y exp(-/+ t95 s)), no confidence interval, and none at all (lo = hi,
 * never a zero-width interval presented as one) without a residual spread. */
static void test_interval_without_covariance(void **state)
{
    (void)state;
    struct dt_calibration cal;
    dt_calibration_init(&cal);
    dt_calibration_set(&cal, DT_CAL_ITER_OVERHEAD, 0.1);
    cal.dof = 5;
    cal.t95 = 2.570581836;
    cal.resid_sd = 0.05;
    assert_true(dt_calibration_has_interval(&cal));
    struct dt_cost_params base;
    dt_cost_defaults(&base, DT_DEV_CPU);
    double y, lo, hi;
    struct dt_error err;
    assert_int_equal(dt_calibration_interval(&cal, &base, DT_CAL_PREDICTION, twice_overhead,
                                             NULL, &y, &lo, &hi, &err), DT_OK);
    assert_true(fabs(lo - 0.2 * exp(-cal.t95 * 0.05)) < 1e-12);
    assert_true(fabs(hi - 0.2 * exp(cal.t95 * 0.05)) < 1e-12);
    assert_int_equal(dt_calibration_interval(&cal, &base, DT_CAL_CONFIDENCE, twice_overhead,
                                             NULL, &y, &lo, &hi, &err), DT_OK);
    assert_true(lo == y && hi == y);
    cal.resid_sd = 0;
    assert_false(dt_calibration_has_interval(&cal));
    assert_int_equal(dt_calibration_interval(&cal, &base, DT_CAL_PREDICTION, twice_overhead,
                                             NULL, &y, &lo, &hi, &err), DT_OK);
    assert_true(lo == y && hi == y);
}

/* Ensure that what a fit produced out of range is caught before it is written. */
static void test_check_values(void **state)
{
    (void)state;
    struct dt_calibration cal;
    dt_calibration_init(&cal);
    dt_calibration_set(&cal, DT_CAL_EFF_GEMM, 0.6);
    struct dt_error err;
    dt_error_clear(&err);
    assert_int_equal(dt_calibration_check_values(&cal, &err), DT_OK);
    dt_calibration_set(&cal, DT_CAL_EFF_GEMM, 1.3);
    assert_int_equal(dt_calibration_check_values(&cal, &err), DT_EINPUT);
    assert_non_null(strstr(err.msg, "eff_gemm = 1.3 is out of range"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_roundtrip_no_parameters),
        cmocka_unit_test(test_every_parameter_roundtrips),
        cmocka_unit_test(test_apply),
        cmocka_unit_test(test_apply_half),
        cmocka_unit_test(test_interval_closed_form),
        cmocka_unit_test(test_error_unknown_parameter),
        cmocka_unit_test(test_error_wrong_unit),
        cmocka_unit_test(test_error_missing_unit),
        cmocka_unit_test(test_error_nan),
        cmocka_unit_test(test_error_interval),
        cmocka_unit_test(test_error_fitted_without_stderr),
        cmocka_unit_test(test_error_covariance_name),
        cmocka_unit_test(test_error_asymmetric),
        cmocka_unit_test(test_error_format),
        cmocka_unit_test(test_error_unknown_key),
        cmocka_unit_test(test_error_out_of_range),
        cmocka_unit_test(test_device_roundtrip),
        cmocka_unit_test(test_device_check),
        cmocka_unit_test(test_interval_without_covariance),
        cmocka_unit_test(test_check_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

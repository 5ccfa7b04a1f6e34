/* The fitting path of dtvalidate: GSL's trust-region least squares on a certified NIST problem,
 * and the calibration of the simulator's own parameters from runs it generated itself. */
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

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "calibrate.h"
#include "fit.h"
#include "ops.h"
#include "predict.h"
#include "runs.h"

/* NIST StRD nonlinear regression, Misra1a (lower difficulty; Misra, D., NIST 1978, dental
 * research monomolecular adsorption), https://www.itl.nist.gov/div898/strd/nls/data/misra1a.shtml
 *   y = b1 * (1 - exp(-b2 * x)), 14 observations
 * Certified values (NIST):
 *   b1 = 2.3894212918E+02   standard deviation 2.7070075241E+00
 *   b2 = 5.5015643181E-04   standard deviation 7.2668688436E-06
 *   residual sum of squares 1.2455138894E-01, 12 degrees of freedom
 * Starting values: start 1 (b1 = 500, b2 = 1e-4) and start 2 (b1 = 250, b2 = 5e-4). */
static const double misra_y[14] = {10.07, 14.73, 17.94, 23.93, 29.61, 35.18, 40.02,
                                   44.82, 50.76, 55.05, 61.01, 66.40, 75.47, 81.78};
static const double misra_x[14] = {77.6,  114.9, 141.1, 190.8, 239.9, 289.0, 332.8,
                                   378.4, 434.8, 477.3, 536.8, 593.1, 689.1, 760.0};
#define MISRA_B1 2.3894212918E+02
#define MISRA_B2 5.5015643181E-04
#define MISRA_SE1 2.7070075241E+00
#define MISRA_SE2 7.2668688436E-06
#define MISRA_RSS 1.2455138894E-01

/* Certified values are given to 11 digits; LM with a finite-difference Jacobian reaches the
 * minimum to ~1e-8 relative, and the covariance (from the same Jacobian) to ~1e-5. */
#define TOL_VALUE 1e-6
#define TOL_SE 1e-4

static int misra_resid(const double *b, void *ctx, double *f, struct dt_error *err)
{
    (void)ctx;
    (void)err;
    for (int i = 0; i < 14; i++)
        f[i] = b[0] * (1 - exp(-b[1] * misra_x[i])) - misra_y[i];
    return 0;
}

static void check_misra(const double *start)
{
    struct dtv_fit fit;
    struct dt_error err;
    dt_error_clear(&err);
    assert_int_equal(dtv_fit_run(14, 2, misra_resid, NULL, start, NULL, &fit, &err), DT_OK);
    assert_int_equal(fit.dof, 12);
    assert_true(fabs(fit.theta[0] / MISRA_B1 - 1) < TOL_VALUE);
    assert_true(fabs(fit.theta[1] / MISRA_B2 - 1) < TOL_VALUE);
    assert_true(fabs(fit.chisq / MISRA_RSS - 1) < TOL_VALUE);
    assert_true(fabs(fit.se[0] / MISRA_SE1 - 1) < TOL_SE);
    assert_true(fabs(fit.se[1] / MISRA_SE2 - 1) < TOL_SE);
    assert_true(fit.identified[0] && fit.identified[1]);
    dtv_fit_free(&fit);
}

/* Ensure that the solver reproduces NIST's certified Misra1a estimates, standard errors and
 * residual sum of squares from NIST's first starting point. */
static void test_misra1a_start1(void **state)
{
    (void)state;
    const double start[2] = {500, 1e-4};
    check_misra(start);
}

/* Ensure that the same holds from NIST's second starting point. */
static void test_misra1a_start2(void **state)
{
    (void)state;
    const double start[2] = {250, 5e-4};
    check_misra(start);
}

/* Ensure that the Student t quantiles used for the 95% intervals are right.
 * t(0.975, 1) = tan(0.475 pi) = 12.7062047 (closed form for 1 degree of freedom);
 * t(0.975, 10) = 2.22813885 (any t table). */
static void test_t95(void **state)
{
    (void)state;
    assert_true(fabs(dtv_t95(1) - tan(0.475 * M_PI)) < 1e-8);
    assert_true(fabs(dtv_t95(10) - 2.22813885) < 1e-7);
    assert_true(dtv_t95(0) == 0);
}

/* Ensure that more parameters than observations is refused with a message. */
static void test_too_few_observations(void **state)
{
    (void)state;
    struct dtv_fit fit;
    struct dt_error err;
    dt_error_clear(&err);
    const double start[2] = {1, 1};
    assert_int_equal(dtv_fit_run(1, 2, misra_resid, NULL, start, NULL, &fit, &err), DT_EINPUT);
    assert_non_null(strstr(err.msg, "cannot determine"));
    dtv_fit_free(&fit);
}

/* Ensure that a tie and one of its parts cannot be fitted together (eff_gemm with eff_conv,
 * eff_gemm_half with eff_dense_half, in either order), the parts apart can, and the message
 * names the tie. */
static void test_fitspec_ties(void **state)
{
    (void)state;
    struct dtv_fitspec spec;
    char why[256];
    assert_int_equal(dtv_fitspec_parse("eff_gemm,eff_conv", &spec, why, sizeof why), -1);
    assert_non_null(strstr(why, "eff_gemm ties"));
    assert_int_equal(dtv_fitspec_parse("eff_dense_half,eff_gemm_half", &spec, why, sizeof why),
                     -1);
    assert_non_null(strstr(why, "eff_gemm_half ties"));
    assert_int_equal(dtv_fitspec_parse("eff_conv_half,eff_dense_half,eff_gemm", &spec, why,
                                       sizeof why), 0);
    assert_int_equal(spec.n, 3);
    assert_int_equal(spec.p[1], DT_CAL_EFF_DENSE_HALF);
}

/* ---- the simulator as the model function ---- */

/* Writes a reference table of the nine seed 002 shapes x two batches whose epoch times were
 * simulated with `truth` and multiplied by (1 + rel_noise N(0,1)); returns its path. */
static const char *srcdir(void)
{
    const char *s = getenv("top_srcdir");
    return s && *s ? s : ".";
}

static const int shapes[9][2] = {{1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 1},
                                 {2, 2}, {2, 4}, {4, 1}, {4, 2}};

static void write_table(const char *path, const double *epoch)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "# synthetic: simulated with known parameters (tests/test_fit.c)\n"
               "#%% model: %s/models/cnn690k.yaml\n"
               "#%% topology: %s/topologies/{nodes}n{ppn}p.yaml\n"
               "#%% strategy: reduce-bcast-linear\n#%% dataset_size: 60000\n"
               "nodes,ppn,batch,epoch_s\n",
            srcdir(), srcdir());
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 9; i++)
            fprintf(f, "%d,%d,%d,%.12g\n", shapes[i][0], shapes[i][1], b ? 128 : 32,
                    epoch ? epoch[b * 9 + i] : 1.0);
    fclose(f);
}

/* truth: per-iteration overhead 50 ms, GEMM efficiency 0.2, NIC 2 GB/s. */
static void set_truth(struct dt_cost_params *cp)
{
    dt_cal_param_set(cp, DT_CAL_ITER_OVERHEAD, 0.05);
    dt_cal_param_set(cp, DT_CAL_EFF_GEMM, 0.2);
    dt_cal_param_set(cp, DT_CAL_NIC_BW, 2e9);
}

static void make_synthetic(const char *path, double rel_noise, unsigned long seed)
{
    struct dtv_runset set;
    struct dt_error err;
    dt_error_clear(&err);
    dtv_runset_init(&set);
    write_table(path, NULL);
    assert_int_equal(dtv_runset_load(&set, path, NULL, &err), DT_OK);
    assert_int_equal(set.n, 18);
    double epoch[18];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    for (int i = 0; i < 18; i++) {
        struct dt_cost_params cp;
        dtv_base_params(&set.runs[i], &cp);
        set_truth(&cp);
        struct dtv_pred p;
        assert_int_equal(dtv_predict(&set.runs[i], &cp, &p, &err), DT_OK);
        epoch[i] = p.epoch_s * (1 + rel_noise * gsl_ran_gaussian(rng, 1.0));
    }
    gsl_rng_free(rng);
    dtv_runset_free(&set);
    write_table(path, epoch);
}

static void calibrate_file(const char *path, struct dtv_calib *cb)
{
    struct dtv_runset set;
    struct dt_error err;
    dt_error_clear(&err);
    dtv_runset_init(&set);
    assert_int_equal(dtv_runset_load(&set, path, NULL, &err), DT_OK);
    struct dtv_fitspec spec;
    char why[256];
    assert_int_equal(dtv_fitspec_parse("iter_overhead,eff_gemm,nic_bw", &spec, why, sizeof why), 0);
    int rc = dtv_calibrate(&set, NULL, &spec, NULL, cb, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, DT_OK);
    dtv_runset_free(&set);
}

/* Ensure that, without noise, calibration recovers the parameters the runs were simulated
 * with (to the fit's tolerance: 1e-4 relative). */
static void test_recovers_exact(void **state)
{
    (void)state;
    char path[] = "/tmp/test_fit_exact_XXXXXX.csv";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    close(fd);
    make_synthetic(path, 0, 1);
    struct dtv_calib cb;
    calibrate_file(path, &cb);
    const double truth[3] = {0.05, 0.2, 2e9};
    const enum dt_cal_param p[3] = {DT_CAL_ITER_OVERHEAD, DT_CAL_EFF_GEMM, DT_CAL_NIC_BW};
    for (int k = 0; k < 3; k++) {
        const struct dt_cal_entry *e = dt_calibration_find(&cb.cal, p[k]);
        assert_non_null(e);
        assert_true(fabs(e->value / truth[k] - 1) < 1e-4);
    }
    assert_true(cb.cal.mape_pct < 1e-3);
    dtv_calib_free(&cb);
    remove(path);
}

/* Ensure that with 2% multiplicative noise (seeded) every true value lies inside its reported
 * 95% confidence interval, and the intervals are not absurdly wide (less than a factor 3). */
static void test_recovers_with_noise(void **state)
{
    (void)state;
    char path[] = "/tmp/test_fit_noise_XXXXXX.csv";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    close(fd);
    make_synthetic(path, 0.02, 42);
    struct dtv_calib cb;
    calibrate_file(path, &cb);
    const double truth[3] = {0.05, 0.2, 2e9};
    const enum dt_cal_param p[3] = {DT_CAL_ITER_OVERHEAD, DT_CAL_EFF_GEMM, DT_CAL_NIC_BW};
    for (int k = 0; k < 3; k++) {
        const struct dt_cal_entry *e = dt_calibration_find(&cb.cal, p[k]);
        assert_non_null(e);
        assert_true(e->fitted);
        assert_true(e->lo <= truth[k] && truth[k] <= e->hi);
        assert_true(e->hi / e->lo < 3);
    }
    /* residual SD estimates the 2% noise (18 runs, 15 dof: within a factor 2) */
    assert_true(cb.cal.resid_sd > 0.01 && cb.cal.resid_sd < 0.04);
    assert_int_equal(cb.cal.dof, 15);
    assert_int_equal(cb.cal.n_cov, 3);
    dtv_calib_free(&cb);
    remove(path);
}

/* Ensure that a parameter the runs cannot see (the NIC bandwidth, from one-node runs only) is
 * dropped from the fit, kept at its default and named in the calibration's notes. */
static void test_unidentifiable_dropped(void **state)
{
    (void)state;
    char path[] = "/tmp/test_fit_drop_XXXXXX.csv";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    close(fd);
    make_synthetic(path, 0, 3);
    struct dtv_runset set;
    struct dt_error err;
    dt_error_clear(&err);
    dtv_runset_init(&set);
    assert_int_equal(dtv_runset_load(&set, path, NULL, &err), DT_OK);
    bool use[18];
    for (int i = 0; i < 18; i++)
        use[i] = dtv_run_matches(&set.runs[i], "nodes=1");
    struct dtv_fitspec spec;
    char why[256];
    assert_int_equal(dtv_fitspec_parse("iter_overhead,eff_gemm,nic_bw", &spec, why, sizeof why), 0);
    struct dtv_calib cb;
    assert_int_equal(dtv_calibrate(&set, use, &spec, NULL, &cb, &err), DT_OK);
    assert_null(dt_calibration_find(&cb.cal, DT_CAL_NIC_BW));
    assert_non_null(strstr(cb.cal.notes, "nic_bw"));
    assert_int_equal(cb.fitted.n, 2);
    dtv_calib_free(&cb);
    dtv_runset_free(&set);
    remove(path);
}

/* Ensure the convolutions' joint regression recovers its coefficients: the six conv ops of
 * cnn690k at batch 64 (FLOPs and lowered bytes of conv2d, conv2d_1, conv2d_2, forward and
 * backward, from the layer shapes: lowered = (C_in kh kw + filters) x output pixels x 4 B x
 * 64, twice for a backward with an input gradient) timed as flops / (94.5 GFLOP/s x 0.8) +
 * lowered / 9 GB/s exactly give eff 0.8 and lower_bw 9 GB/s; with 3 % seeded noise the true
 * values lie inside the 95 % intervals. Three ops with proportional columns are refused. */
static void test_conv_joint_regression(void **state)
{
    (void)state;
    const double flops[6] = {26.305e6, 26.305e6, 571.94e6, 1142.89e6, 339.886e6, 679.625e6};
    const double low[6] = {7095296, 7095296, 12886016, 25772032, 3244032, 6488064};
    const double peak = 94.5e9, eff = 0.8, bw = 9e9;
    double t[6];
    for (int i = 0; i < 6; i++)
        t[i] = flops[i] / (peak * eff) + low[i] / bw;
    struct dtv_ops_class k = {0};
    assert_true(dtv_ops_fit_conv(flops, low, t, 6, peak, &k));
    assert_true(fabs(k.eff / eff - 1) < 1e-9);
    assert_true(fabs(k.lower_Bps / bw - 1) < 1e-9);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 7);
    for (int i = 0; i < 6; i++)
        t[i] *= 1 + gsl_ran_gaussian(rng, 0.03);
    gsl_rng_free(rng);
    memset(&k, 0, sizeof k);
    assert_true(dtv_ops_fit_conv(flops, low, t, 6, peak, &k));
    assert_true(k.eff_lo < eff && eff < k.eff_hi);
    assert_true(k.lower_lo < bw && bw < k.lower_hi);
    const double prop[3] = {1e6, 2e6, 3e6}, prop_low[3] = {1e5, 2e5, 3e5}, pt[3] = {1, 2, 3};
    memset(&k, 0, sizeof k);
    assert_false(dtv_ops_fit_conv(prop, prop_low, pt, 3, peak, &k));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_misra1a_start1),
        cmocka_unit_test(test_misra1a_start2),
        cmocka_unit_test(test_t95),
        cmocka_unit_test(test_fitspec_ties),
        cmocka_unit_test(test_conv_joint_regression),
        cmocka_unit_test(test_too_few_observations),
        cmocka_unit_test(test_recovers_exact),
        cmocka_unit_test(test_recovers_with_noise),
        cmocka_unit_test(test_unidentifiable_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

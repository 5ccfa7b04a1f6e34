/* Tests of the flat-buffer optimizers (exec/cpu/optim.h). Expected values are computed here in
 * double from the published update rules, written in a different but equivalent form from the
 * library's (Kingma and Ba 2014, Algorithm 1 and the "epsilon hat" remark of Section 2;
 * torch.optim.SGD's documented algorithm), or by hand where stated. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "optim.h"

/* Ensure that the defaults are those of the frameworks: Keras lr 0.001, betas 0.9/0.999,
 * eps 1e-7 (keras.optimizers.Adam); PyTorch the same but eps 1e-8 (torch.optim.Adam). */
static void test_adam_defaults(void **state)
{
    (void)state;
    struct dtk_adam k = dtk_adam_defaults(DTK_ADAM_KERAS), p = dtk_adam_defaults(DTK_ADAM_PYTORCH);
    assert_float_equal(k.lr, 1e-3f, 0.0f);
    assert_float_equal(k.beta1, 0.9f, 0.0f);
    assert_float_equal(k.beta2, 0.999f, 0.0f);
    assert_float_equal(k.eps, 1e-7f, 0.0f);
    assert_float_equal(p.eps, 1e-8f, 0.0f);
    assert_int_equal(k.flavor, DTK_ADAM_KERAS);
    assert_int_equal(p.flavor, DTK_ADAM_PYTORCH);
}

/* Reference Adam in double with bias-corrected moments:
 * PyTorch: p -= lr m_hat / (sqrt(v_hat) + eps);
 * Keras (eps hat on the uncorrected sqrt(v)): p -= lr m_hat / (sqrt(v_hat) + eps / sqrt(1 - b2^t)),
 * which is lr sqrt(1 - b2^t)/(1 - b1^t) m / (sqrt(v) + eps) rearranged. */
static void adam_ref(double *p, const double *g, double *m, double *v, int n, int t, double lr,
                     double b1, double b2, double eps, int keras)
{
    for (int i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        double mh = m[i] / (1 - pow(b1, t)), vh = v[i] / (1 - pow(b2, t));
        double e = keras ? eps / sqrt(1 - pow(b2, t)) : eps;
        p[i] -= lr * mh / (sqrt(vh) + e);
    }
}

/* Ensure that Keras' first Adam step is -lr * g / (|g| + eps / sqrt(1 - beta2)): almost
 * -lr sign(g) for large gradients, visibly smaller for a gradient near eps/sqrt(0.001) = 3.2e-6
 * (first step: m_hat = g, v_hat = g^2, so the step is lr g / (|g| + eps_eff) exactly). */
static void test_adam_keras_first_step(void **state)
{
    (void)state;
    float p[5] = {1, 1, 1, 1, 1}, g[5] = {0.5f, -2.0f, 1e-3f, 3e-6f, 0.0f};
    float m[5] = {0}, v[5] = {0};
    struct dtk_adam cfg = dtk_adam_defaults(DTK_ADAM_KERAS);
    dtk_adam_step(p, g, m, v, 5, 1, &cfg);
    double eff = 1e-7 / sqrt(1 - 0.999);
    for (int i = 0; i < 5; i++) {
        double want = 1.0 - 1e-3 * g[i] / (fabs(g[i]) + eff);
        assert_float_equal(p[i], want, 1e-7);
    }
    /* by hand: a gradient of 3e-6 moves by 1e-3 * 3e-6 / (3e-6 + 3.162e-6) = 4.87e-4 only */
    assert_float_equal(1.0f - p[3], 4.87e-4f, 2e-6f);
    assert_float_equal(p[4], 1.0f, 0.0f);
}

/* Ensure that PyTorch's first Adam step is -lr g / (|g| + 1e-8) (same derivation). */
static void test_adam_pytorch_first_step(void **state)
{
    (void)state;
    float p[3] = {0, 0, 0}, g[3] = {0.5f, -2.0f, 3e-6f}, m[3] = {0}, v[3] = {0};
    struct dtk_adam cfg = dtk_adam_defaults(DTK_ADAM_PYTORCH);
    dtk_adam_step(p, g, m, v, 3, 1, &cfg);
    for (int i = 0; i < 3; i++)
        assert_float_equal(p[i], -1e-3 * g[i] / (fabs(g[i]) + 1e-8), 1e-9);
}

/* Ensure that 20 Adam steps with varying gradients follow the double-precision reference, in
 * both flavors, and that the flavors differ for small gradients. */
static void test_adam_many_steps(void **state)
{
    (void)state;
    enum { N = 4, T = 20 };
    for (int keras = 0; keras < 2; keras++) {
        struct dtk_adam cfg = dtk_adam_defaults(keras ? DTK_ADAM_KERAS : DTK_ADAM_PYTORCH);
        cfg.lr = 0.01f;
        float p[N] = {0.5f, -0.5f, 2.0f, 0.0f}, m[N] = {0}, v[N] = {0}, g[N];
        double pd[N], md[N] = {0}, vd[N] = {0}, gd[N];
        for (int i = 0; i < N; i++)
            pd[i] = p[i];
        for (int t = 1; t <= T; t++) {
            for (int i = 0; i < N; i++) {
                g[i] = (float)(sin(0.7 * t + i) * pow(10.0, -2 * i)); /* 1 down to 1e-6 */
                gd[i] = g[i];
            }
            dtk_adam_step(p, g, m, v, N, t, &cfg);
            adam_ref(pd, gd, md, vd, N, t, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, keras);
        }
        for (int i = 0; i < N; i++)
            assert_float_equal(p[i], pd[i], 2e-6 + 1e-5 * fabs(pd[i]));
    }
}

/* Ensure that SGD with momentum follows PyTorch: lr 0.1, momentum 0.9, gradients 1 then 2 from
 * p = 0. By hand: buf1 = 1, p1 = -0.1; buf2 = 0.9 + 2 = 2.9, p2 = -0.1 - 0.29 = -0.39. */
static void test_sgd_momentum(void **state)
{
    (void)state;
    struct dtk_sgd cfg = {.lr = 0.1f, .momentum = 0.9f};
    float p = 0, buf = 123, g1 = 1, g2 = 2; /* buf's old value must be ignored at t = 1 */
    dtk_sgd_step(&p, &g1, &buf, 1, 1, &cfg);
    assert_float_equal(p, -0.1f, 1e-7f);
    assert_float_equal(buf, 1.0f, 0.0f);
    dtk_sgd_step(&p, &g2, &buf, 1, 2, &cfg);
    assert_float_equal(p, -0.39f, 1e-6f);
}

/* Ensure Nesterov momentum and weight decay follow PyTorch. By hand, lr 0.1, momentum 0.9:
 * nesterov, gradients 1 then 2 from 0: step1 1 + 0.9*1 = 1.9 -> -0.19; buf2 = 2.9,
 * step2 2 + 0.9*2.9 = 4.61 -> -0.651. Weight decay 0.5 from p = 2, g = 1, no momentum:
 * g' = 1 + 1 = 2, p = 2 - 0.2 = 1.8. Dampening 0.5: buf2 = 0.9*1 + 0.5*2 = 1.9. */
static void test_sgd_nesterov_decay_dampening(void **state)
{
    (void)state;
    struct dtk_sgd nes = {.lr = 0.1f, .momentum = 0.9f, .nesterov = true};
    float p = 0, buf = 0, g1 = 1, g2 = 2;
    dtk_sgd_step(&p, &g1, &buf, 1, 1, &nes);
    assert_float_equal(p, -0.19f, 1e-6f);
    dtk_sgd_step(&p, &g2, &buf, 1, 2, &nes);
    assert_float_equal(p, -0.651f, 1e-6f);

    struct dtk_sgd wd = {.lr = 0.1f, .weight_decay = 0.5f};
    float q = 2;
    dtk_sgd_step(&q, &g1, NULL, 1, 1, &wd);
    assert_float_equal(q, 1.8f, 1e-6f);

    struct dtk_sgd damp = {.lr = 0.1f, .momentum = 0.9f, .dampening = 0.5f};
    float r = 0, rb = 0;
    dtk_sgd_step(&r, &g1, &rb, 1, 1, &damp);
    dtk_sgd_step(&r, &g2, &rb, 1, 2, &damp);
    assert_float_equal(rb, 1.9f, 1e-6f);
    assert_float_equal(r, -0.1f - 0.19f, 1e-6f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adam_defaults),
        cmocka_unit_test(test_adam_keras_first_step),
        cmocka_unit_test(test_adam_pytorch_first_step),
        cmocka_unit_test(test_adam_many_steps),
        cmocka_unit_test(test_sgd_momentum),
        cmocka_unit_test(test_sgd_nesterov_decay_dampening),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Tests of the parallel config (libdt/parallel.c) and of the strategies' fit checks
 * (dt_strategy_fits_options): good values set the option, bad ones are refused with
 * DT_EINPUT and the flag's name, the config's text form reads back to the same config, and
 * combinations a strategy cannot run are refused with the reason. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"

static struct dt_plan_options defaults(void)
{
    struct dt_plan_options o;
    dt_plan_options_init(&o);
    return o;
}

static void set_ok(struct dt_plan_options *o, const char *flag, const char *value)
{
    struct dt_error err;
    if (dt_parallel_set(o, flag, value, &err) != DT_OK)
        fail_msg("%s '%s': %s", flag, value, err.msg);
}

/* Ensure good values set their option, with or without the leading dashes, and that a flag
 * that is not part of the parallel config is left to the caller (1, nothing changed). */
static void test_set_good_values(void **state)
{
    (void)state;
    struct dt_plan_options o = defaults();
    set_ok(&o, "--pp", "4");
    set_ok(&o, "dp", "2");
    set_ok(&o, "--micro-batches", "8");
    set_ok(&o, "--chunks", "3");
    set_ok(&o, "--accumulate", "2");
    set_ok(&o, "--batch", "64");
    set_ok(&o, "--scaling", "strong");
    set_ok(&o, "--bucket", "25 MiB");
    set_ok(&o, "--grad-alg", "rabenseifner");
    set_ok(&o, "--optimizer", "momentum");
    set_ok(&o, "--stages", "0-4,5-11,12-20");
    assert_int_equal(o.pp, 4);
    assert_int_equal(o.dp, 2);
    assert_int_equal(o.micro_batches, 8);
    assert_int_equal(o.chunks, 3);
    assert_int_equal(o.accumulate, 2);
    assert_int_equal(o.batch, 64);
    assert_int_equal(o.scaling, DT_SCALING_STRONG);
    assert_true(o.bucket_bytes == 25.0 * 1024 * 1024);
    assert_int_equal(o.grad_alg, DT_ALG_RABENSEIFNER);
    assert_true(o.grad_alg_given);
    assert_int_equal(o.optimizer, DT_OPTIM_MOMENTUM);
    /* the first layer of each stage after the first, and the last layer named */
    assert_int_equal(o.n_stage_cuts, 2);
    assert_int_equal(o.stage_cuts[0], 5);
    assert_int_equal(o.stage_cuts[1], 12);
    assert_int_equal(o.stage_cuts[DT_MAX_STAGES - 1], 20);
    set_ok(&o, "--optimizer", "adam-torch");
    assert_int_equal(o.optimizer, DT_OPTIM_ADAM);
    set_ok(&o, "--grad-alg", "mpi-allreduce");
    assert_int_equal(o.grad_alg, DT_ALG_LIBRARY);
    set_ok(&o, "--precision", "bf16");
    set_ok(&o, "--tp", "4");
    set_ok(&o, "--zero", "3");
    set_ok(&o, "--sequence-parallel", "on");
    set_ok(&o, "--recompute", "selective");
    assert_false(o.grad_precision_given);
    set_ok(&o, "--grad-precision", "fp32");
    assert_true(o.grad_precision_given);
    assert_int_equal(o.grad_precision, DT_FP32);
    assert_int_equal(o.precision, DT_BF16);
    assert_int_equal(o.tp, 4);
    assert_int_equal(o.zero, 3);
    assert_true(o.sequence_parallel);
    assert_int_equal(o.recompute, DT_RECOMPUTE_SELECTIVE);

    struct dt_plan_options before = o;
    struct dt_error err;
    assert_int_equal(dt_parallel_set(&o, "--topology", "1n2p", &err), 1);
    assert_memory_equal(&o, &before, sizeof o);
}

/* Ensure each bad value is refused with DT_EINPUT and a message naming its flag. */
static void test_set_bad_values(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"--pp", "0"},              {"--pp", "x"},           {"--pp", "257"},
        {"--pp", "2x"},             {"--dp", "0"},           {"--micro-batches", "-1"},
        {"--chunks", "0"},          {"--accumulate", "0"},   {"--batch", "0"},
        {"--stages", "0-3,5-7"},    /* a gap */
        {"--stages", "0-3,3-7"},    /* an overlap */
        {"--stages", "1-3,4-7"},    /* not from layer 0 */
        {"--stages", "0-3,4-2"},    /* a range backwards */
        {"--stages", "a"},          {"--stages", "0-3;4-7"}, {"--stages", ""},
        {"--grad-alg", "bogus"},    {"--grad-alg", "linear"},
        {"--optimizer", "bogus"},   {"--scaling", "medium"},
        {"--bucket", "1 parsec"},   {"--bucket", "2 B"},
        {"--precision", "fp64"},    {"--precision", "BF16"}, {"--tp", "0"},
        {"--zero", "4"},            {"--zero", "-1"},        {"--sequence-parallel", "yes"},
        {"--recompute", "some"},    {"--grad-precision", "fp8"},
        {"--grad-precision", "tf32"}, {"--grad-precision", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct dt_plan_options o = defaults();
        struct dt_error err;
        int rc = dt_parallel_set(&o, bad[i][0], bad[i][1], &err);
        if (rc != DT_EINPUT)
            fail_msg("%s '%s' gave %d, want DT_EINPUT", bad[i][0], bad[i][1], rc);
        if (!strstr(err.msg, bad[i][0]))
            fail_msg("%s '%s': message '%s' does not name the flag", bad[i][0], bad[i][1],
                     err.msg);
    }
}

/* Reads "key=value key=value" (dt_parallel_format's form) back with dt_parallel_set. */
static struct dt_plan_options parse_format(const char *text)
{
    struct dt_plan_options o = defaults();
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save, *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        assert_non_null(eq);
        *eq = 0;
        set_ok(&o, tok, eq + 1);
    }
    return o;
}

/* Ensure dt_parallel_format writes what differs from the defaults, and that its text read
 * back with dt_parallel_set gives the same config: every field it writes, for a config with
 * none (empty text), with all, and with the grad-alg names that differ from dt_coll_alg_name
 * (the library's allreduce is written 'mpi-allreduce'). Batch, scaling and bucket are
 * recorded on their own, not in this text. */
static void test_format_round_trip(void **state)
{
    (void)state;
    char text[512];
    struct dt_plan_options o = defaults();
    dt_parallel_format(&o, text, sizeof text);
    assert_string_equal(text, "");

    set_ok(&o, "--pp", "4");
    set_ok(&o, "--micro-batches", "8");
    dt_parallel_format(&o, text, sizeof text);
    assert_string_equal(text, "pp=4 micro-batches=8");

    const char *const algs[] = {"ring", "recursive-doubling", "rabenseifner", "mpi-allreduce"};
    const char *const optims[] = {"adam", "sgd", "momentum"};
    for (int a = 0; a < 4; a++) {
        o = defaults();
        set_ok(&o, "--accumulate", "3");
        set_ok(&o, "--pp", "2");
        set_ok(&o, "--dp", "4");
        set_ok(&o, "--micro-batches", "6");
        set_ok(&o, "--chunks", "2");
        set_ok(&o, "--grad-alg", algs[a]);
        set_ok(&o, "--stages", "0-1,2-5,6-6,7-9");
        set_ok(&o, "--optimizer", optims[a % 3]);
        set_ok(&o, "--precision", a % 2 ? "fp16" : "bf16");
        set_ok(&o, "--tp", "2");
        set_ok(&o, "--zero", "1");
        set_ok(&o, "--sequence-parallel", "on");
        set_ok(&o, "--recompute", "full");
        set_ok(&o, "--grad-precision", a % 2 ? "fp16" : "fp32");
        dt_parallel_format(&o, text, sizeof text);
        struct dt_plan_options back = parse_format(text);
        assert_int_equal(back.accumulate, 3);
        assert_int_equal(back.pp, 2);
        assert_int_equal(back.dp, 4);
        assert_int_equal(back.micro_batches, 6);
        assert_int_equal(back.chunks, 2);
        assert_int_equal(back.grad_alg, o.grad_alg);
        assert_true(back.grad_alg_given);
        assert_int_equal(back.optimizer, o.optimizer);
        assert_int_equal(back.precision, o.precision);
        assert_int_equal(back.tp, 2);
        assert_int_equal(back.zero, 1);
        assert_true(back.sequence_parallel);
        assert_int_equal(back.recompute, DT_RECOMPUTE_FULL);
        assert_true(back.grad_precision_given);
        assert_int_equal(back.grad_precision, o.grad_precision);
        assert_int_equal(back.n_stage_cuts, 3);
        assert_memory_equal(back.stage_cuts, o.stage_cuts, 3 * sizeof o.stage_cuts[0]);
        assert_int_equal(back.stage_cuts[DT_MAX_STAGES - 1], 9);
        assert_non_null(strstr(text, "stages=0-1,2-5,6-6,7-9"));
        /* and the text of the text is the same text */
        char again[512];
        dt_parallel_format(&back, again, sizeof again);
        assert_string_equal(again, text);
    }
}

/* A chain of n dense layers (enough layers for any split the tests ask for). */
static struct dt_model *chain(int n)
{
    char text[2048];
    int len = snprintf(text, sizeof text, "name: chain\nsource: test\ninput: {shape: [8]}\n"
                                          "classes: 8\nlayers:\n");
    for (int i = 0; i < n; i++)
        len += snprintf(text + len, sizeof text - (size_t)len, "  - {kind: dense, units: 8}\n");
    struct dt_model *m;
    struct dt_error err;
    if (dt_model_load_string("chain.yaml", text, &m, &err) != DT_OK)
        fail_msg("model: %s", err.msg);
    return m;
}

static struct dt_topology *topology(const char *name)
{
    const char *top = getenv("top_srcdir");
    char path[1024];
    snprintf(path, sizeof path, "%s/topologies/%s.yaml", top ? top : ".", name);
    struct dt_topology *t;
    struct dt_error err;
    if (dt_topology_load(path, &t, &err) != DT_OK)
        fail_msg("topology %s: %s", path, err.msg);
    return t;
}

/* Whether strategy s with flags fits n ranks of 2n4p (8 ranks) for the 8-layer chain;
 * `want` must appear in the reason when it does not. */
static void check_fit(enum dt_strategy s, const char *flags, int n, bool fits, const char *want)
{
    struct dt_topology *t = topology("2n4p");
    struct dt_model *m = chain(8);
    struct dt_plan_options o = parse_format(flags);
    o.strategy = s;
    char why[512] = "";
    bool got = dt_strategy_fits_options(&o, m, t, n, why, sizeof why);
    if (got != fits)
        fail_msg("%s [%s] on %d ranks: fits %d, want %d (%s)", dt_strategy_name(s), flags, n,
                 got, fits, why);
    if (!fits && !strstr(why, want))
        fail_msg("%s [%s]: reason '%s' lacks '%s'", dt_strategy_name(s), flags, why, want);
    dt_model_destroy(m);
    dt_topology_destroy(t);
}

/* Ensure the combinations a strategy cannot run are refused with their reason, and their
 * neighbours that it can run are not:
 *   --pp on ring (pipelines only); --accumulate on gpipe (a pipeline accumulates its
 *   micro-batches); interleaved with 6 micro-batches on 4 stages (Megatron-LM needs M
 *   divisible by S; 8 is); naive-mp with 4 micro-batches (it runs one); --dp 2 x --pp 2 on
 *   8 ranks (4 != 8; --dp 4 fits); --chunks on 1f1b; 2 x 8 chunks of an 8-layer model;
 *   --grad-precision of a 16-bit type the compute precision does not store in. */
static void test_fits_options(void **state)
{
    (void)state;
    check_fit(DT_STRAT_ALLREDUCE_RING, "", 8, true, NULL);
    check_fit(DT_STRAT_ALLREDUCE_RING, "pp=2", 8, false, "--pp");
    check_fit(DT_STRAT_ALLREDUCE_RING, "accumulate=4", 8, true, NULL);
    check_fit(DT_STRAT_GPIPE, "accumulate=2", 8, false, "--accumulate");
    check_fit(DT_STRAT_GPIPE, "micro-batches=8", 8, true, NULL);
    check_fit(DT_STRAT_INTERLEAVED, "pp=4 micro-batches=6", 8, false, "divisible");
    check_fit(DT_STRAT_INTERLEAVED, "pp=4 micro-batches=8", 8, true, NULL);
    check_fit(DT_STRAT_NAIVE_MP, "micro-batches=4", 8, false, "one micro-batch");
    check_fit(DT_STRAT_NAIVE_MP, "", 8, true, NULL);
    check_fit(DT_STRAT_GPIPE, "pp=2 dp=2", 8, false, "must equal the 8 ranks");
    check_fit(DT_STRAT_GPIPE, "pp=2 dp=4", 8, true, NULL);
    check_fit(DT_STRAT_1F1B, "chunks=2", 8, false, "--chunks");
    check_fit(DT_STRAT_INTERLEAVED, "pp=2 chunks=8", 2, false, "fewer than");
    check_fit(DT_STRAT_GPIPE, "pp=2 stages=0-3,4-5,6-7", 2, false, "--stages");
    /* gradients: fp32, or the compute precision's own 16-bit type (fp8 stores bf16) */
    check_fit(DT_STRAT_ALLREDUCE_RING, "grad-precision=fp32", 8, true, NULL);
    check_fit(DT_STRAT_ALLREDUCE_RING, "precision=bf16 grad-precision=fp32", 8, true, NULL);
    check_fit(DT_STRAT_GPIPE, "precision=fp16 grad-precision=fp16", 8, true, NULL);
    check_fit(DT_STRAT_ALLREDUCE_RING, "precision=fp8 grad-precision=bf16", 8, true, NULL);
    check_fit(DT_STRAT_ALLREDUCE_RING, "grad-precision=bf16", 8, false,
              "--grad-precision bf16: 16-bit gradients need mixed precision");
    check_fit(DT_STRAT_ALLREDUCE_RING, "precision=tf32 grad-precision=fp16", 8, false,
              "--grad-precision");
    check_fit(DT_STRAT_GPIPE, "precision=bf16 grad-precision=fp16", 8, false,
              "--grad-precision fp16 under --precision bf16");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_good_values),
        cmocka_unit_test(test_set_bad_values),
        cmocka_unit_test(test_format_round_trip),
        cmocka_unit_test(test_fits_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Tests of dtk_net (exec/cpu/net.h): buffers sized from the model loader's counts, whole-network
 * gradients against finite differences (graph wiring: residual add, concat, flatten views,
 * fused losses), layer-by-layer micro-batches against the whole batch, initialisation, and
 * training to high accuracy on synthetic separable data. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dt/model.h"
#include "layers.h"
#include "net.h"

/* Whole-network gradient check: central differences of the mean loss with step NET_H; the
 * loss (~1) is summed in double from float activations, so its rounding (~1e-7) over 2h gives
 * ~5e-5; NET_ATOL and NET_RTOL leave room for that and for h^2 curvature terms, while a wrong
 * wiring (a gradient dropped or counted twice) is off by the size of the gradient itself. */
#define NET_H 1e-3
#define NET_ATOL 3e-4
#define NET_RTOL 3e-2
#define NET_CHECKS 120

static struct dt_model *load_string(const char *yaml)
{
    struct dt_model *m = NULL;
    struct dt_error err;
    if (dt_model_load_string("test", yaml, &m, &err)) {
        char buf[1600];
        dt_error_format(&err, buf, sizeof buf);
        print_error("model: %s\n", buf);
    }
    assert_non_null(m);
    return m;
}

static struct dtk_net *make_net(const struct dt_model *m, int B, enum dtk_init init,
                                uint64_t seed)
{
    struct dtk_net *net = NULL;
    struct dt_error err;
    if (dtk_net_create(m, B, init, seed, &net, &err))
        print_error("net: %s\n", err.msg);
    assert_non_null(net);
    return net;
}

static double loss_at(struct dtk_net *net, const float *x, const int *labels, int B)
{
    assert_int_equal(dtk_net_forward(net, x, B, true, NULL), DT_OK);
    return dtk_net_loss_backward(net, labels, B);
}

/* Compares dtk_net_loss_backward's parameter gradients with finite differences of the loss on
 * max_checks parameters (all when fewer); returns the mismatches. */
static int net_gradcheck_n(struct dtk_net *net, const float *x, const int *labels, int B,
                           uint64_t seed, long max_checks)
{
    long n = dtk_net_n_params(net);
    float *p = dtk_net_params(net);
    float *g = malloc((size_t)n * sizeof(float));
    assert_non_null(g);
    loss_at(net, x, labels, B);
    memcpy(g, dtk_net_grads(net), (size_t)n * sizeof(float));
    struct dtk_rng r;
    dtk_rng_seed(&r, seed);
    int bad = 0;
    long checks = n < max_checks ? n : max_checks;
    for (long c = 0; c < checks; c++) {
        long i = n <= max_checks ? c : (long)dtk_rng_below(&r, (uint64_t)n);
        float keep = p[i];
        p[i] = keep + (float)NET_H;
        double lp = loss_at(net, x, labels, B);
        p[i] = keep - (float)NET_H;
        double lm = loss_at(net, x, labels, B);
        p[i] = keep;
        double step = (double)(keep + (float)NET_H) - (double)(keep - (float)NET_H);
        double num = (lp - lm) / step;
        if (fabs(num - g[i]) > NET_ATOL + NET_RTOL * fabs(g[i])) {
            if (bad < 8)
                print_error("  param %ld: numeric %.6f analytic %.6f\n", i, num, g[i]);
            bad++;
        }
    }
    free(g);
    return bad;
}

static int net_gradcheck(struct dtk_net *net, const float *x, const int *labels, int B,
                         uint64_t seed)
{
    return net_gradcheck_n(net, x, labels, B, seed, NET_CHECKS);
}

static float *rand_input(long n, float lo, float hi, uint64_t seed)
{
    struct dtk_rng r;
    dtk_rng_seed(&r, seed);
    float *x = malloc((size_t)n * sizeof(float));
    assert_non_null(x);
    for (long i = 0; i < n; i++)
        x[i] = dtk_rng_uniform_range(&r, lo, hi);
    return x;
}

/* A CNN with batchnorm, a residual add whose branch is also concatenated (so t1's gradient
 * comes from three consumers), average pooling, a flatten view and a fused softmax. */
static const char *const CNN_GRAPH =
    "name: graph\nsource: test\ninput: {shape: [2, 6, 6]}\nclasses: 3\nlayers:\n"
    "  - {kind: conv2d, name: c1, filters: 3, kernel: 3, padding: same}\n"
    "  - {kind: batchnorm, name: bn1}\n"
    "  - {kind: tanh, name: t1}\n"
    "  - {kind: conv2d, name: c2, filters: 3, kernel: 3, stride: 1, padding: 1, activation: tanh}\n"
    "  - {kind: add, name: res, inputs: [c2, t1]}\n"
    "  - {kind: concat, name: cat, inputs: [res, t1]}\n"
    "  - {kind: avgpool, name: pool, kernel: 2}\n"
    "  - {kind: flatten, name: flat}\n"
    "  - {kind: dense, name: d1, units: 5, activation: gelu}\n"
    "  - {kind: dense, name: d2, units: 3, activation: softmax}\n";

/* Ensure that the network's parameter gradients match finite differences of its loss on a CNN
 * graph with batchnorm (training statistics), a residual add, a concat and a flatten. */
static void test_net_gradcheck_cnn_graph(void **state)
{
    (void)state;
    struct dt_model *m = load_string(CNN_GRAPH);
    enum { B = 4 };
    struct dtk_net *net = make_net(m, B, DTK_INIT_KAIMING, 3);
    float *x = rand_input(B * 72, -1, 1, 11);
    int labels[B] = {0, 2, 1, 2};
    assert_int_equal(net_gradcheck(net, x, labels, B, 5), 0);
    free(x);
    dtk_net_destroy(net);
    dt_model_destroy(m);
}

/* Ensure that a second backward pass over the same batch gives bit-identical gradients: every
 * activation gradient is zeroed before it is accumulated into (layer t1 of the graph has three
 * readers), so nothing of the previous pass leaks into the next. */
static void test_net_backward_repeats_exactly(void **state)
{
    (void)state;
    struct dt_model *m = load_string(CNN_GRAPH);
    enum { B = 3 };
    struct dtk_net *net = make_net(m, B, DTK_INIT_GLOROT, 12);
    float *x = rand_input(B * 72, -1, 1, 15);
    int labels[B] = {1, 0, 2};
    long n = dtk_net_n_params(net);
    float *g = malloc((size_t)n * sizeof(float));
    double l1 = loss_at(net, x, labels, B);
    memcpy(g, dtk_net_grads(net), (size_t)n * sizeof(float));
    double l2 = loss_at(net, x, labels, B);
    assert_true(l1 == l2);
    assert_memory_equal(g, dtk_net_grads(net), (size_t)n * sizeof(float));
    free(g);
    free(x);
    dtk_net_destroy(net);
    dt_model_destroy(m);
}

/* Ensure the same for a token model: embedding with position and token-type tables, layernorm,
 * attention with a residual, an LSTM returning sequences, a dense layer per step, first-token
 * pooling and softmax. */
static void test_net_gradcheck_sequence(void **state)
{
    (void)state;
    struct dt_model *m = load_string(
        "name: seq\nsource: test\ninput: {tokens: 5, vocab: 7}\nclasses: 3\nlayers:\n"
        "  - {kind: embedding, name: emb, dim: 6, positions: 5, token_types: 2}\n"
        "  - {kind: layernorm, name: ln}\n"
        "  - {kind: attention, name: att, heads: 2}\n"
        "  - {kind: add, name: res, inputs: [att, ln]}\n"
        "  - {kind: lstm, name: lstm, units: 4, return_sequences: true}\n"
        "  - {kind: dense, name: proj, units: 6}\n"
        "  - {kind: seqpool, name: pool}\n"
        "  - {kind: dense, name: out, units: 3, activation: softmax}\n");
    enum { B = 3 };
    struct dtk_net *net = make_net(m, B, DTK_INIT_GLOROT, 4);
    float x[B * 5] = {1, 6, 0, 3, 3, 2, 2, 5, 4, 0, 6, 1, 1, 0, 2};
    int labels[B] = {2, 0, 1};
    assert_int_equal(net_gradcheck(net, x, labels, B, 6), 0);
    dtk_net_destroy(net);
    dt_model_destroy(m);
}

/* A GPT block: token and position tables, pre-layernorm causal attention through the core with
 * a residual, final layernorm, an LM head tied to the token table, per-token softmax. */
static const char *const GPT_GRAPH =
    "name: gpt\nsource: test\ninput: {tokens: 5, vocab: 7}\nclasses: 7\n"
    "loss: language_model\nlayers:\n"
    "  - {kind: embedding, name: wte, dim: 8, positions: 5}\n"
    "  - {kind: layernorm, name: ln_1}\n"
    "  - {kind: dense, name: c_attn, units: 24}\n"
    "  - {kind: attention_core, name: core, heads: 2, causal: true}\n"
    "  - {kind: dense, name: c_proj, units: 8}\n"
    "  - {kind: add, name: res, inputs: [wte, c_proj]}\n"
    "  - {kind: layernorm, name: ln_f}\n"
    "  - {kind: dense, name: lm_head, tied: wte}\n"
    "  - {kind: softmax, name: softmax}\n";

/* Ensure that every parameter's gradient of a GPT block with a next-token loss matches finite
 * differences, the token table's included: its gradient is the sum of the lookup's and the
 * tied head's (token 6 never occurs in the input, so its row's gradient is the head's alone,
 * and nonzero), and the head has no parameters of its own. */
static void test_net_gradcheck_gpt_tied(void **state)
{
    (void)state;
    struct dt_model *m = load_string(GPT_GRAPH);
    enum { B = 2, T = 5, V = 7, D = 8 };
    assert_int_equal(m->total_params, (V + T) * D + 16 + (D * 24 + 24) + (D * D + D) + 16);
    struct dtk_net *net = make_net(m, B, DTK_INIT_KAIMING, 3);
    /* two sequences of 6 tokens: inputs the first 5, targets the next 5 */
    const int seq[B][T + 1] = {{1, 4, 0, 2, 2, 5}, {3, 3, 1, 0, 5, 6}};
    float x[B * T];
    int labels[B * T];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            x[b * T + t] = (float)seq[b][t];
            labels[b * T + t] = seq[b][t + 1];
        }
    assert_int_equal(dtk_net_labels_per_sample(net), T);
    assert_int_equal(net_gradcheck_n(net, x, labels, B, 8, 1000), 0);
    loss_at(net, x, labels, B);
    const float *g = dtk_net_grads(net);
    double row6 = 0;
    for (int d = 0; d < D; d++)
        row6 += fabs(g[6 * D + d]);
    assert_true(row6 > 1e-4);
    dtk_net_destroy(net);
    dt_model_destroy(m);
}

/* Ensure the same for a per-pixel classifier (softmax over channels, one label per pixel) with a
 * transposed convolution and a skip concat, U-Net style. */
static void test_net_gradcheck_segmentation(void **state)
{
    (void)state;
    struct dt_model *m = load_string(
        "name: seg\nsource: test\ninput: {shape: [1, 4, 4]}\nclasses: 2\nlayers:\n"
        "  - {kind: conv2d, name: c1, filters: 2, kernel: 3, padding: same, activation: tanh}\n"
        "  - {kind: avgpool, name: p1, kernel: 2}\n"
        "  - {kind: conv2d_transpose, name: up, filters: 2, kernel: 2, stride: 2}\n"
        "  - {kind: concat, name: cat, inputs: [up, c1]}\n"
        "  - {kind: upsample, name: us, scale: 1}\n"
        "  - {kind: conv2d, name: head, filters: 2, kernel: 1, activation: softmax}\n");
    enum { B = 2 };
    struct dtk_net *net = make_net(m, B, DTK_INIT_KAIMING, 8);
    assert_int_equal(dtk_net_labels_per_sample(net), 16);
    float *x = rand_input(B * 16, -1, 1, 12);
    int labels[B * 16];
    for (int i = 0; i < B * 16; i++)
        labels[i] = (i * 7 + i / 5) % 2;
    assert_int_equal(net_gradcheck(net, x, labels, B, 7), 0);
    free(x);
    dtk_net_destroy(net);
    dt_model_destroy(m);
}

/* Ensure the same for a single sigmoid output (binary cross-entropy, Keras' 2-class form). */
static void test_net_gradcheck_sigmoid(void **state)
{
    (void)state;
    struct dt_model *m = load_string(
        "name: bin\nsource: test\ninput: {shape: [4]}\nclasses: 2\nlayers:\n"
        "  - {kind: dense, name: h, units: 3, activation: relu}\n"
        "  - {kind: dense, name: o, units: 1, activation: sigmoid}\n");
    enum { B = 4 };
    struct dtk_net *net = make_net(m, B, DTK_INIT_KAIMING, 9);
    float *x = rand_input(B * 4, -2, 2, 13);
    int labels[B] = {1, 0, 0, 1};
    assert_int_equal(net_gradcheck(net, x, labels, B, 8), 0);
    free(x);
    dtk_net_destroy(net);
    dt_model_destroy(m);
}

/* Ensure that running the batch as two micro-batches layer by layer, with the loss gradient
 * divided by the whole batch and the parameter gradients accumulated, gives the whole-batch
 * gradient (no batchnorm here, whose statistics are per micro-batch by design). */
static void test_net_microbatches_match_batch(void **state)
{
    (void)state;
    struct dt_model *m = load_string(
        "name: mb\nsource: test\ninput: {shape: [1, 8, 8]}\nclasses: 4\nlayers:\n"
        "  - {kind: conv2d, name: c1, filters: 4, kernel: 3, activation: relu}\n"
        "  - {kind: maxpool, name: p1, kernel: 2}\n"
        "  - {kind: flatten, name: f}\n"
        "  - {kind: dropout, name: drop, rate: 0.3}\n"
        "  - {kind: dense, name: d, units: 4, activation: softmax}\n");
    enum { B = 6 };
    struct dtk_net *net = make_net(m, B, DTK_INIT_GLOROT, 10);
    float *x = rand_input(B * 64, -1, 1, 14);
    int labels[B] = {0, 1, 2, 3, 1, 2};
    long n = dtk_net_n_params(net);
    /* eval mode: dropout is the identity, so both runs see the same function */
    assert_int_equal(dtk_net_forward(net, x, B, false, NULL), DT_OK);
    double whole = dtk_net_loss_backward(net, labels, B);
    float *g = malloc((size_t)n * sizeof(float));
    memcpy(g, dtk_net_grads(net), (size_t)n * sizeof(float));

    dtk_net_zero_grads(net);
    double part[2];
    const int nl = m->n_layers;
    for (int mb = 0; mb < 2; mb++) {
        int b0 = mb * 3;
        assert_int_equal(dtk_net_begin_forward(net, x, b0, 3, false, NULL), DT_OK);
        for (int i = 0; i < nl; i++)
            dtk_net_forward_layer(net, i, b0, 3);
    }
    for (int mb = 1; mb >= 0; mb--) {
        int b0 = mb * 3;
        assert_int_equal(dtk_net_begin_backward(net, labels + b0, b0, 3, B, &part[mb], NULL),
                         DT_OK);
        for (int i = nl - 1; i >= 0; i--)
            dtk_net_backward_layer(net, i, b0, 3);
    }
    assert_float_equal((part[0] + part[1]) / 2, whole, 1e-6);
    const float *g2 = dtk_net_grads(net);
    for (long i = 0; i < n; i++) {
        if (!(fabsf(g2[i] - g[i]) <= 1e-5f + 1e-4f * fabsf(g[i])))
            print_error("  grad %ld: micro-batches %g, whole batch %g\n", i, g2[i], g[i]);
        assert_true(fabsf(g2[i] - g[i]) <= 1e-5f + 1e-4f * fabsf(g[i]));
    }
    free(g);
    free(x);
    dtk_net_destroy(net);
    dt_model_destroy(m);
}

/* Ensure that the flat buffers hold exactly the loader's parameter count for the zoo models of
 * the seeds (mlp-fmnist 101,770 = 784*128+128 + 128*10+10; cnn690k 690,590 from seed 002's
 * Figure 1; cnn21k 21,840 from models/cnn21k.yaml's source) and that the layers' slices tile it. */
static void test_net_zoo_param_counts(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        long params;
    } zoo[] = {{"mlp-fmnist", 101770}, {"cnn690k", 690590}, {"cnn21k", 21840}};
    int found = 0;
    const char *top = getenv("top_srcdir"); /* set by make check */
    for (size_t z = 0; z < sizeof zoo / sizeof zoo[0]; z++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/models/%s.yaml", top ? top : ".", zoo[z].file);
        if (access(path, R_OK) != 0)
            continue;
        found++;
        struct dt_model *m;
        struct dt_error err;
        assert_int_equal(dt_model_load(path, &m, &err), DT_OK);
        assert_int_equal(m->total_params, zoo[z].params);
        struct dtk_net *net = make_net(m, 2, DTK_INIT_GLOROT, 1);
        assert_int_equal(dtk_net_n_params(net), zoo[z].params);
        long next = 0;
        for (int i = 0; i < m->n_layers; i++) {
            if (m->layers[i].params == 0)
                continue;
            assert_int_equal(m->layers[i].param_offset, next);
            next += m->layers[i].params;
        }
        assert_int_equal(next, zoo[z].params);
        /* a forward pass on zeros runs and gives probabilities */
        float *x = calloc((size_t)dtk_net_out_floats(net, -1) * 2, sizeof(float));
        assert_int_equal(dtk_net_forward(net, x, 2, false, NULL), DT_OK);
        const float *y = dtk_net_act(net, m->n_layers - 1);
        double s = 0;
        for (long k = 0; k < m->classes; k++)
            s += y[k];
        assert_float_equal(s, 1.0, 1e-5);
        free(x);
        dtk_net_destroy(net);
        dt_model_destroy(m);
    }
    if (!found) {
        print_message("  no zoo models under %s/models: skipped\n", top ? top : ".");
        skip();
    }
}

/* Ensure that initialisation follows the stated rules: PyTorch's kaiming_uniform_(a = sqrt 5)
 * gives weights and biases in [-1/sqrt(fan_in), 1/sqrt(fan_in)) with the uniform's standard
 * deviation bound/sqrt(3); Keras' Glorot gives weights within sqrt(6/(fan_in + fan_out)) and zero
 * biases; batchnorm starts at gamma 1, beta 0; the same seed gives the same parameters. */
static void test_net_initialisation(void **state)
{
    (void)state;
    struct dt_model *m = load_string(
        "name: init\nsource: test\ninput: {shape: [3, 10, 10]}\nclasses: 10\nlayers:\n"
        "  - {kind: conv2d, name: c, filters: 64, kernel: 3}\n"
        "  - {kind: batchnorm, name: bn}\n"
        "  - {kind: flatten, name: f}\n"
        "  - {kind: dense, name: d, units: 10}\n");
    const struct dt_layer *c = &m->layers[0], *bn = &m->layers[1], *d = &m->layers[3];
    for (int k = 0; k < 2; k++) {
        struct dtk_net *net = make_net(m, 1, k ? DTK_INIT_GLOROT : DTK_INIT_KAIMING, 77);
        const float *p = dtk_net_params(net);
        long nw = 64L * 27;
        double lim = k ? sqrt(6.0 / (27 + 64 * 9)) : 1.0 / sqrt(27.0);
        double ss = 0, mx = 0;
        for (long i = 0; i < nw; i++) {
            double v = p[c->param_offset + i];
            ss += v * v;
            mx = fmax(mx, fabs(v));
        }
        assert_true(mx <= lim);
        assert_true(mx > 0.95 * lim);
        /* std of U(-l, l) is l/sqrt(3); 1728 draws: within 5% */
        assert_float_equal(sqrt(ss / nw), lim / sqrt(3.0), 0.05 * lim / sqrt(3.0));
        for (long i = 0; i < 64; i++) {
            float b = p[c->param_offset + nw + i];
            if (k)
                assert_true(b == 0.0f);
            else
                assert_true(fabs(b) <= lim);
            assert_true(p[bn->param_offset + i] == 1.0f);
            assert_true(p[bn->param_offset + 64 + i] == 0.0f);
        }
        long fan_in = 64L * 8 * 8;
        double dl = k ? sqrt(6.0 / (fan_in + 10)) : 1.0 / sqrt((double)fan_in);
        for (long i = 0; i < d->params; i++)
            assert_true(fabs(p[d->param_offset + i]) <= dl);
        struct dtk_net *again = make_net(m, 1, k ? DTK_INIT_GLOROT : DTK_INIT_KAIMING, 77);
        assert_memory_equal(p, dtk_net_params(again), (size_t)m->total_params * sizeof(float));
        struct dtk_net *other = make_net(m, 1, k ? DTK_INIT_GLOROT : DTK_INIT_KAIMING, 78);
        assert_memory_not_equal(p, dtk_net_params(other), (size_t)nw * sizeof(float));
        dtk_net_destroy(net);
        dtk_net_destroy(again);
        dtk_net_destroy(other);
    }
    dt_model_destroy(m);
}

/* Ensure that bad batches are refused with DT_EINPUT and leave no gradient: a batch above
 * max_batch, a token id outside the vocabulary, a label outside the classes. */
static void test_net_rejects_bad_batches(void **state)
{
    (void)state;
    struct dt_model *m = load_string(
        "name: tok\nsource: test\ninput: {tokens: 3, vocab: 5}\nclasses: 2\nlayers:\n"
        "  - {kind: embedding, name: e, dim: 4}\n"
        "  - {kind: seqpool, name: s}\n"
        "  - {kind: dense, name: d, units: 2, activation: softmax}\n");
    struct dtk_net *net = make_net(m, 2, DTK_INIT_GLOROT, 1);
    struct dt_error err;
    float ok[6] = {0, 1, 4, 2, 3, 0}, bad[6] = {0, 1, 5, 2, 3, 0}, frac[6] = {0, 0.5f, 1, 1, 1, 1};
    assert_int_equal(dtk_net_forward(net, ok, 3, false, &err), DT_EINPUT);
    assert_int_equal(dtk_net_forward(net, bad, 2, false, &err), DT_EINPUT);
    assert_non_null(strstr(err.msg, "token"));
    assert_int_equal(dtk_net_forward(net, frac, 2, false, &err), DT_EINPUT);
    assert_int_equal(dtk_net_forward(net, ok, 2, true, &err), DT_OK);
    int labels[2] = {1, 2};
    assert_true(isnan(dtk_net_loss_backward(net, labels, 2)));
    assert_int_equal(dtk_net_begin_backward(net, labels, 0, 2, 2, NULL, &err), DT_EINPUT);
    labels[1] = 0;
    assert_false(isnan(dtk_net_loss_backward(net, labels, 2)));
    dtk_net_destroy(net);
    dt_model_destroy(m);
}

/* Ensure that a model whose declared state does not match its batchnorm layers, or a model
 * with no layers, is refused rather than mis-allocated. */
static void test_net_rejects_inconsistent_model(void **state)
{
    (void)state;
    struct dt_model *m = load_string(
        "name: bn\nsource: test\ninput: {shape: [3]}\nclasses: 3\nlayers:\n"
        "  - {kind: batchnorm, name: b}\n"
        "  - {kind: softmax, name: s}\n");
    struct dtk_net *net = NULL;
    struct dt_error err;
    m->total_state_floats += 1;
    assert_int_equal(dtk_net_create(m, 2, DTK_INIT_GLOROT, 1, &net, &err), DT_EINPUT);
    assert_null(net);
    m->total_state_floats -= 1;
    assert_int_equal(dtk_net_create(m, 0, DTK_INIT_GLOROT, 1, &net, &err), DT_EINPUT);
    assert_int_equal(dtk_net_create(m, 2, DTK_INIT_GLOROT, 1, &net, &err), DT_OK);
    dtk_net_destroy(net);
    dt_model_destroy(m);
}

/* Four unit-variance Gaussian blobs in 8 dimensions, centre k at 4 e_k: two centres are
 * 4 sqrt(2) = 5.66 sd apart, so the nearest-centre rule errs with probability at most
 * 3 Phi(-2.83) = 0.7% (union bound): a trained network should exceed 95% on fresh data. */
static void blobs(float *x, int *y, int n, int dim, struct dtk_rng *r)
{
    for (int i = 0; i < n; i++) {
        y[i] = (int)dtk_rng_below(r, 4);
        for (int k = 0; k < dim; k++)
            x[(long)i * dim + k] = dtk_rng_normal(r) + (k == y[i] ? 4.0f : 0.0f);
    }
}

/* Ensure that an MLP trained with Keras-default Adam on the blobs reaches > 95% accuracy on held
 * out data within 300 steps of batch 32 (deterministic seeds). */
static void test_net_trains_mlp(void **state)
{
    (void)state;
    struct dt_model *m = load_string(
        "name: mlp\nsource: test\ninput: {shape: [8]}\nclasses: 4\nlayers:\n"
        "  - {kind: dense, name: h, units: 16, activation: relu}\n"
        "  - {kind: dropout, name: drop, rate: 0.1}\n"
        "  - {kind: dense, name: o, units: 4, activation: softmax}\n");
    enum { B = 32, TEST = 1000 };
    struct dtk_net *net = make_net(m, TEST, DTK_INIT_GLOROT, 21);
    struct dtk_rng r;
    dtk_rng_seed(&r, 99);
    float x[B * 8];
    int y[B];
    struct dtk_adam adam = dtk_adam_defaults(DTK_ADAM_KERAS);
    double first = 0, loss = 0;
    for (long t = 1; t <= 300; t++) {
        blobs(x, y, B, 8, &r);
        assert_int_equal(dtk_net_forward(net, x, B, true, NULL), DT_OK);
        loss = dtk_net_loss_backward(net, y, B);
        if (t == 1)
            first = loss;
        dtk_net_adam_step(net, &adam, t);
    }
    float *tx = malloc(TEST * 8 * sizeof(float));
    int *ty = malloc(TEST * sizeof(int));
    blobs(tx, ty, TEST, 8, &r);
    assert_int_equal(dtk_net_forward(net, tx, TEST, false, NULL), DT_OK);
    double acc = dtk_net_accuracy(net, ty, TEST);
    print_message("  mlp: loss %.3f -> %.3f, held-out accuracy %.3f\n", first, loss, acc);
    assert_true(acc > 0.95);
    assert_true(loss < first);
    free(tx);
    free(ty);
    dtk_net_destroy(net);
    dt_model_destroy(m);
}

/* 8x8 images holding a bar: class 0 horizontal, 1 vertical, 2 diagonal, at a random place,
 * over uniform noise of amplitude 0.3. */
static void bars(float *x, int *y, int n, struct dtk_rng *r)
{
    for (int i = 0; i < n; i++) {
        float *img = x + (long)i * 64;
        for (int k = 0; k < 64; k++)
            img[k] = dtk_rng_uniform_range(r, -0.3f, 0.3f);
        int c = (int)dtk_rng_below(r, 3), a = 1 + (int)dtk_rng_below(r, 6);
        y[i] = c;
        for (int k = 1; k < 7; k++) {
            int row = c == 0 ? a : k, col = c == 1 ? a : k;
            img[row * 8 + col] += 1.0f;
        }
    }
}

/* Ensure that a small CNN (conv, batchnorm, max pool, global pool) trained with PyTorch-default
 * Adam and Kaiming initialisation tells bar orientations apart with > 95% held-out accuracy
 * within 200 steps of batch 16. */
static void test_net_trains_cnn(void **state)
{
    (void)state;
    struct dt_model *m = load_string(
        "name: bars\nsource: test\ninput: {shape: [1, 8, 8]}\nclasses: 3\nlayers:\n"
        "  - {kind: conv2d, name: c1, filters: 8, kernel: 3, padding: same}\n"
        "  - {kind: batchnorm, name: bn, activation: relu}\n"
        "  - {kind: maxpool, name: p, kernel: 2}\n"
        "  - {kind: conv2d, name: c2, filters: 16, kernel: 3, padding: 1, activation: relu}\n"
        "  - {kind: globalpool, name: g}\n"
        "  - {kind: dense, name: o, units: 3, activation: softmax}\n");
    enum { B = 16, TEST = 600 };
    struct dtk_net *net = make_net(m, TEST, DTK_INIT_KAIMING, 5);
    struct dtk_rng r;
    dtk_rng_seed(&r, 17);
    float x[B * 64];
    int y[B];
    struct dtk_adam adam = dtk_adam_defaults(DTK_ADAM_PYTORCH);
    adam.lr = 0.01f;
    for (long t = 1; t <= 200; t++) {
        bars(x, y, B, &r);
        assert_int_equal(dtk_net_forward(net, x, B, true, NULL), DT_OK);
        dtk_net_loss_backward(net, y, B);
        dtk_net_adam_step(net, &adam, t);
    }
    float *tx = malloc(TEST * 64 * sizeof(float));
    int *ty = malloc(TEST * sizeof(int));
    bars(tx, ty, TEST, &r);
    assert_int_equal(dtk_net_forward(net, tx, TEST, false, NULL), DT_OK);
    double acc = dtk_net_accuracy(net, ty, TEST);
    print_message("  cnn: held-out accuracy %.3f\n", acc);
    assert_true(acc > 0.95);
    free(tx);
    free(ty);
    dtk_net_destroy(net);
    dt_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_net_gradcheck_cnn_graph),
        cmocka_unit_test(test_net_backward_repeats_exactly),
        cmocka_unit_test(test_net_gradcheck_sequence),
        cmocka_unit_test(test_net_gradcheck_gpt_tied),
        cmocka_unit_test(test_net_gradcheck_segmentation),
        cmocka_unit_test(test_net_gradcheck_sigmoid),
        cmocka_unit_test(test_net_microbatches_match_batch),
        cmocka_unit_test(test_net_zoo_param_counts),
        cmocka_unit_test(test_net_initialisation),
        cmocka_unit_test(test_net_rejects_bad_batches),
        cmocka_unit_test(test_net_rejects_inconsistent_model),
        cmocka_unit_test(test_net_trains_mlp),
        cmocka_unit_test(test_net_trains_cnn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

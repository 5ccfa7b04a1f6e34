/* The model loader on the zoo: exact parameter counts against the published figures,
 * output shapes, padding, FLOPs of small layers against hand computation, gradients needed,
 * and the summary table. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/model.h"

/* |a - b| <= tol, with both values in the message (cmocka 1.1 has no double assert). */
#define assert_near(a, b, tol)                                                              \
    do {                                                                                    \
        double a_ = (a), b_ = (b);                                                          \
        if (!(fabs(a_ - b_) <= (tol)))                                                      \
            fail_msg("%s = %.17g, expected %.17g (tolerance %g)", #a, a_, b_, (double)(tol)); \
    } while (0)

static const char *srcdir; /* $top_srcdir, set by make check */

static struct dt_model *load_zoo(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s.yaml", srcdir, name);
    struct dt_model *m = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dt_model_load(path, &m, &err);
    if (rc) {
        char buf[2048];
        dt_error_format(&err, buf, sizeof buf);
        fail_msg("%s", buf);
    }
    assert_non_null(m);
    return m;
}

static struct dt_model *load_text(const char *text)
{
    struct dt_model *m = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dt_model_load_string("test.yaml", text, &m, &err);
    if (rc) {
        char buf[2048];
        dt_error_format(&err, buf, sizeof buf);
        fail_msg("%s", buf);
    }
    assert_non_null(m);
    return m;
}

static const struct dt_layer *layer(const struct dt_model *m, const char *name)
{
    int i = dt_model_find_layer(m, name);
    if (i < 0)
        fail_msg("no layer '%s' in %s", name, m->name);
    return &m->layers[i];
}

static void check_total(const char *name, long expected)
{
    struct dt_model *m = load_zoo(name);
    assert_int_equal(m->total_params, expected);
    dt_model_destroy(m);
}

static void assert_shape(const struct dt_shape *s, int rank, long d0, long d1, long d2)
{
    assert_int_equal(s->rank, rank);
    long d[3] = {d0, d1, d2};
    for (int i = 0; i < rank; i++)
        assert_int_equal(s->d[i], d[i]);
}

/* ---- parameter counts of the zoo ---- */

/* Ensure that the seed 000 MLP has Keras's 101,770 parameters
 * (784*128+128 + 128*10+10; Keras model.summary() of Flatten/Dense(128)/Dropout/Dense(10)). */
static void test_params_mlp_fmnist(void **state)
{
    (void)state;
    check_total("mlp-fmnist", 101770);
}

/* Ensure that the loop's wide MLP has 784*2048+2048 + 2048*2048+2048 + 2048*10+10 =
 * 1,607,680 + 4,196,352 + 20,490 = 5,824,522 parameters (counted by hand, as Keras would). */
static void test_params_mlp_wide(void **state)
{
    (void)state;
    check_total("mlp-wide", 5824522);
}

/* Ensure that the seed 002 CNN has 690,590 parameters (seed 002, Figure 1 "Total params"). */
static void test_params_cnn690k(void **state)
{
    (void)state;
    check_total("cnn690k", 690590);
}

/* Ensure that the seed 003 CNN has 21,840 parameters (seed 003's table: 260 + 5.0K + 16.1K +
 * 510, exactly 260 + 5,020 + 16,050 + 510). */
static void test_params_cnn21k(void **state)
{
    (void)state;
    check_total("cnn21k", 21840);
}

/* Ensure that VGG-11/ImageNet has torchvision's 132,863,336 parameters (vgg11 num_params). */
static void test_params_vgg11_imagenet(void **state)
{
    (void)state;
    check_total("vgg11-imagenet", 132863336);
}

/* Ensure that VGG-16/ImageNet has torchvision's 138,357,544 parameters (vgg16 num_params). */
static void test_params_vgg16_imagenet(void **state)
{
    (void)state;
    check_total("vgg16-imagenet", 138357544);
}

/* Ensure that VGG-11/CIFAR-10 (kuangliu, with batch norm) has 9,231,114 parameters: hand sum
 * of conv 9,220,480 (3x3 weights + biases) + BN 2*2,752 + Linear(512,10) 5,130. */
static void test_params_vgg11_cifar10(void **state)
{
    (void)state;
    check_total("vgg11-cifar10", 9231114);
}

/* Ensure that VGG-16/CIFAR-10 (kuangliu) has 14,728,266 parameters: torchvision's vgg16
 * feature convolutions 14,714,688 + BN 2*4,224 + Linear(512,10) 5,130. */
static void test_params_vgg16_cifar10(void **state)
{
    (void)state;
    check_total("vgg16-cifar10", 14728266);
}

/* Ensure that ResNet-18/ImageNet has torchvision's 11,689,512 parameters. */
static void test_params_resnet18_imagenet(void **state)
{
    (void)state;
    check_total("resnet18-imagenet", 11689512);
}

/* Ensure that ResNet-50/ImageNet has torchvision's 25,557,032 parameters. */
static void test_params_resnet50_imagenet(void **state)
{
    (void)state;
    check_total("resnet50-imagenet", 25557032);
}

/* Ensure that ResNet-18/CIFAR-10 (kuangliu) has 11,173,962 parameters: torchvision's
 * 11,689,512 - 7x7 stem 9,408 + 3x3 stem 1,728 - fc 513,000 + fc 5,130. */
static void test_params_resnet18_cifar10(void **state)
{
    (void)state;
    check_total("resnet18-cifar10", 11173962);
}

/* Ensure that ResNet-50/CIFAR-10 (kuangliu) has 23,520,842 parameters: torchvision's
 * 25,557,032 - 9,408 + 1,728 - 2,049,000 + 20,490. */
static void test_params_resnet50_cifar10(void **state)
{
    (void)state;
    check_total("resnet50-cifar10", 23520842);
}

/* Ensure that the U-Net has 31,030,658 parameters: hand sum over the levels in
 * models/README.md (3x3 convolutions k*k*in*out+out, 2x2 up-convolutions, 1x1 output). */
static void test_params_unet(void **state)
{
    (void)state;
    check_total("unet", 31030658);
}

/* Ensure that the IMDB LSTM has the Keras example's 2,691,713 parameters:
 * 20000*128 + 4*128*(128+128)+4*128 + 128+1. */
static void test_params_lstm_sentiment(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("lstm-sentiment");
    assert_int_equal(m->total_params, 2691713);
    assert_int_equal(layer(m, "embedding")->params, 2560000);
    assert_int_equal(layer(m, "lstm")->params, 131584);
    dt_model_destroy(m);
}

/* Ensure that BERT-base up to its pooler has Hugging Face BertModel's 109,482,240 parameters
 * and that the 2-way classifier adds 768*2+2 (BertForSequenceClassification: 109,483,778). */
static void test_params_bert_base(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("bert-base");
    const struct dt_layer *cls = layer(m, "classifier");
    assert_int_equal(cls->param_offset, 109482240);
    assert_int_equal(cls->params, 1538);
    assert_int_equal(m->total_params, 109483778);
    /* (30522 + 512 + 2) * 768: word, position and token-type tables */
    assert_int_equal(layer(m, "embeddings")->params, 23835648);
    /* 4 * (768*768 + 768): Q, K, V and output projections */
    assert_int_equal(layer(m, "encoder.layer.0.attention")->params, 2362368);
    dt_model_destroy(m);
}

/* Ensure that BERT-large up to its pooler has Hugging Face BertModel's 335,141,888 parameters
 * (bert-large-uncased: 31,782,912 embeddings incl. LayerNorm + 24 x 12,596,224 + 1,049,600
 * pooler) and that the next-sentence head adds 1024*2+2 = 2,050: 335,143,938 (BertForPreTraining
 * less its masked-LM head, which a one-output model cannot hold). */
static void test_params_bert_large(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("bert-large");
    const struct dt_layer *nsp = layer(m, "cls.seq_relationship");
    assert_int_equal(nsp->param_offset, 335141888);
    assert_int_equal(nsp->params, 2050);
    assert_int_equal(m->total_params, 335143938);
    /* (30522 + 512 + 2) * 1024: word, position and token-type tables */
    assert_int_equal(layer(m, "embeddings")->params, 31780864);
    /* 4 * (1024*1024 + 1024): Q, K, V and output projections */
    assert_int_equal(layer(m, "encoder.layer.23.attention")->params, 4198400);
    /* 1024*4096 + 4096 and 4096*1024 + 1024 */
    assert_int_equal(layer(m, "encoder.layer.23.intermediate.dense")->params, 4198400);
    assert_int_equal(layer(m, "encoder.layer.23.output.dense")->params, 4195328);
    assert_int_equal(layer(m, "pooler.dense")->params, 1049600);
    dt_model_destroy(m);
}

/* Ensure that bert-large-512 (pre-training phase 2) is bert-large with 512-token sequences:
 * the same 335,143,938 parameters (the position table has 512 rows in both), per-token layers
 * 4x the FLOPs of the 128-token model, attention more than 4x (its scores grow with T^2). */
static void test_bert_large_512(void **state)
{
    (void)state;
    struct dt_model *m128 = load_zoo("bert-large"), *m512 = load_zoo("bert-large-512");
    assert_int_equal(m512->total_params, 335143938);
    const char *dense = "encoder.layer.11.intermediate.dense", *att = "encoder.layer.11.attention";
    assert_near(layer(m512, dense)->fwd_flops, 4 * layer(m128, dense)->fwd_flops, 0);
    assert_true(layer(m512, att)->fwd_flops > 4.5 * layer(m128, att)->fwd_flops);
    dt_model_destroy(m128);
    dt_model_destroy(m512);
}

/* Ensure that bert-large-phase2 (phase 2 as NVIDIA's binned runs pad it, models/gen/zoo.py)
 * is bert-large with 288-token sequences: the same 335,143,938 parameters, a dense layer
 * 288/128 = 2.25 x the 128-token model's FLOPs. */
static void test_bert_large_phase2(void **state)
{
    (void)state;
    struct dt_model *m128 = load_zoo("bert-large"), *m2 = load_zoo("bert-large-phase2");
    assert_int_equal(m2->total_params, 335143938);
    assert_int_equal(m2->input.d[0], 288);
    const char *dense = "encoder.layer.11.intermediate.dense";
    assert_near(layer(m2, dense)->fwd_flops, 2.25 * layer(m128, dense)->fwd_flops, 0);
    dt_model_destroy(m128);
    dt_model_destroy(m2);
}

/* ---- GPT models ---- */

/* GPT-2-style count with tied embeddings: per layer 12 h^2 + 13 h, token and position tables
 * (V + T) h, the final layernorm 2 h. */
static long gpt_params(long layers, long h, long vocab, long tokens)
{
    return 12 * layers * h * h + 13 * layers * h + (vocab + tokens) * h + 2 * h;
}

/* Checks a GPT model of the zoo: total from the formula, lm_head tied to the token table with
 * no parameters, classes = vocab, a language-model loss. */
static void check_gpt(const char *name, long layers, long h, long vocab, long tokens)
{
    struct dt_model *m = load_zoo(name);
    assert_int_equal(m->total_params, gpt_params(layers, h, vocab, tokens));
    const struct dt_layer *head = layer(m, "lm_head");
    assert_true(head->tied);
    assert_int_equal(head->params, 0);
    assert_int_equal(head->tied_layer, dt_model_find_layer(m, "transformer.wte"));
    assert_int_equal(m->classes, vocab);
    assert_int_equal(m->loss, DT_LOSS_NEXT_TOKEN);
    assert_shape(&m->layers[m->n_layers - 1].out_shape, 2, tokens, vocab, 0);
    dt_model_destroy(m);
}

/* Ensure that gpt2-124m has the 124,439,808 parameters llm.c's train_gpt2 prints
 * (num_parameters with vocab 50257; the 50304 padding is memory only), and that the formula
 * gives that figure. */
static void test_params_gpt2_124m(void **state)
{
    (void)state;
    assert_int_equal(gpt_params(12, 768, 50257, 1024), 124439808);
    check_total("gpt2-124m", 124439808);
    check_gpt("gpt2-124m", 12, 768, 50257, 1024);
    struct dt_model *m = load_zoo("gpt2-124m");
    /* (50257 + 1024) * 768: wte and wpe; qkv 768*2304 + 2304 */
    assert_int_equal(layer(m, "transformer.wte")->params, 39383808);
    assert_int_equal(layer(m, "transformer.h.11.attn.c_attn")->params, 1771776);
    assert_int_equal(layer(m, "transformer.h.11.attn.core")->params, 0);
    dt_model_destroy(m);
}

/* Ensure that the execution tests' tiny models have their formula counts (tiny-gpt: 28,032). */
static void test_params_tiny_gpt(void **state)
{
    (void)state;
    check_total("tiny-gpt", 28032);
    check_gpt("tiny-gpt", 2, 32, 64, 16);
    check_gpt("tiny-gpt-bytes", 2, 64, 256, 64);
}

/* Ensure that the GPT-3 family (Brown et al. 2020, Table 2.1; d_model 2048 with 16 heads and
 * 5120 for 13B, see models/gen/zoo.py) has the formula's counts: 175B is 174,604,259,328. */
static void test_params_gpt3(void **state)
{
    (void)state;
    assert_int_equal(gpt_params(96, 12288, 50257, 2048), 174604259328L);
    check_gpt("gpt3-1.3b", 24, 2048, 50257, 2048);
    check_gpt("gpt3-2.7b", 32, 2560, 50257, 2048);
    check_gpt("gpt3-6.7b", 32, 4096, 50257, 2048);
    check_gpt("gpt3-13b", 40, 5120, 50257, 2048);
    check_gpt("gpt3-175b", 96, 12288, 50257, 2048);
}

/* Ensure that Megatron-LM's 530B row (Narayanan et al. 2021, Table 1: 529.6B by their formula,
 * which leaves out the final layernorm's 2h) has 529,600,819,200 parameters. */
static void test_params_megatron_530b(void **state)
{
    (void)state;
    long h = 20480, l = 105;
    assert_int_equal(12 * l * h * h + 13 * l * h + (51200 + 2048) * h, 529600778240L);
    check_gpt("megatron-530b", 105, 20480, 51200, 2048);
}

/* The smallest causal model: T=4 tokens, D=8, 2 heads, vocab 10, tied head. */
#define CORE_MODEL                                                                           \
    "name: t\nsource: test\ninput: {tokens: 4, vocab: 10}\nclasses: 10\n"                   \
    "loss: language_model\nlayers:\n"                                                       \
    "  - {kind: embedding, name: wte, dim: 8, positions: 4}\n"                                \
    "  - {kind: dense, name: qkv, units: 24}\n"                                               \
    "  - {kind: attention_core, name: core, heads: 2, causal: true}\n"                        \
    "  - {kind: dense, name: proj, units: 8}\n"                                               \
    "  - {kind: dense, name: head, tied: wte}\n"

/* Ensure that the attention core costs the hand value for T=4, D=8, 2 heads: scores and
 * context 2*2*T*T*D = 512, scale, mask and softmax 6*heads*T*T = 192: 704 forward FLOPs;
 * backward 2*4*T*T*D + 4*heads*T*T = 1,152, all of it input gradient; it keeps its output
 * and P: 4*(T*D + heads*T*T) = 256 bytes. */
static void test_flops_attention_core(void **state)
{
    (void)state;
    struct dt_model *m = load_text(CORE_MODEL);
    const struct dt_layer *c = layer(m, "core");
    assert_int_equal(c->params, 0);
    assert_true(c->causal);
    assert_int_equal(c->heads, 2);
    assert_shape(&c->out_shape, 2, 4, 8, 0);
    assert_near(c->fwd_flops, 704, 0);
    assert_near(c->bwd_data_flops, 1152, 0);
    assert_near(c->bwd_weight_flops, 0, 0);
    assert_near(c->act_bytes, 256, 0);
    assert_true(c->needs_input_grad);
    dt_model_destroy(m);
}

/* Ensure that a tied head has no parameters but costs its GEMMs (2*T*D*V = 640 forward, the
 * same for each backward half), reads the table's 100 weights, and counts as trainable. */
static void test_tied_head(void **state)
{
    (void)state;
    struct dt_model *m = load_text(CORE_MODEL);
    const struct dt_layer *h = layer(m, "head");
    assert_int_equal(h->params, 0);
    assert_int_equal(h->units, 10);
    assert_false(h->bias);
    assert_true(dt_layer_trains(h));
    assert_int_equal(dt_layer_weight_floats(m, h), 80);
    assert_near(h->fwd_flops, 640, 0);
    assert_near(h->bwd_data_flops, 640, 0);
    assert_near(h->bwd_weight_flops, 640, 0);
    /* wte (10 + 4) * 8, qkv 8*24 + 24, proj 8*8 + 8; the head adds nothing */
    assert_int_equal(m->total_params, 112 + 216 + 72);
    assert_false(dt_layer_trains(layer(m, "core")));
    dt_model_destroy(m);
}

/* ---- shapes, padding, state ---- */

/* Ensure that the seed 002 CNN has Figure 1's output shapes and per-layer counts. */
static void test_shapes_cnn690k(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("cnn690k");
    /* Figure 1 rows, channels first */
    assert_shape(&layer(m, "conv2d")->out_shape, 3, 32, 26, 26);
    assert_shape(&layer(m, "max_pooling2d")->out_shape, 3, 32, 13, 13);
    assert_shape(&layer(m, "conv2d_1")->out_shape, 3, 128, 11, 11);
    assert_shape(&layer(m, "max_pooling2d_1")->out_shape, 3, 128, 5, 5);
    assert_shape(&layer(m, "conv2d_2")->out_shape, 3, 256, 3, 3);
    assert_shape(&layer(m, "max_pooling2d_2")->out_shape, 3, 256, 1, 1);
    assert_shape(&layer(m, "flatten")->out_shape, 1, 256, 0, 0);
    assert_shape(&layer(m, "dense")->out_shape, 1, 1000, 0, 0);
    assert_shape(&layer(m, "dense_2")->out_shape, 1, 10, 0, 0);
    assert_int_equal(layer(m, "conv2d")->params, 320);
    assert_int_equal(layer(m, "conv2d_1")->params, 36992);
    assert_int_equal(layer(m, "conv2d_2")->params, 295168);
    assert_int_equal(layer(m, "dense")->params, 257000);
    assert_int_equal(layer(m, "dense_1")->params, 100100);
    assert_int_equal(layer(m, "dense_2")->params, 1010);
    dt_model_destroy(m);
}

/* Ensure that ResNet-50's stages give torchvision's feature map sizes (56, 28, 14, 7 for a
 * 224 input) and that explicit padding is kept symmetric. */
static void test_shapes_resnet50(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("resnet50-imagenet");
    const struct dt_layer *c1 = layer(m, "conv1");
    assert_shape(&c1->out_shape, 3, 64, 112, 112); /* (224 + 6 - 7) / 2 + 1 */
    assert_int_equal(c1->pad_t, 3);
    assert_int_equal(c1->pad_b, 3);
    assert_shape(&layer(m, "maxpool")->out_shape, 3, 64, 56, 56);
    assert_shape(&layer(m, "layer1.2.relu")->out_shape, 3, 256, 56, 56);
    assert_shape(&layer(m, "layer2.3.relu")->out_shape, 3, 512, 28, 28);
    assert_shape(&layer(m, "layer3.5.relu")->out_shape, 3, 1024, 14, 14);
    assert_shape(&layer(m, "layer4.2.relu")->out_shape, 3, 2048, 7, 7);
    assert_shape(&layer(m, "avgpool")->out_shape, 1, 2048, 0, 0);
    dt_model_destroy(m);
}

/* Ensure that batch-norm running statistics are state, not parameters: ResNet-18 has 4,800
 * batch-norm channels, hence 9,600 running means and variances (torchvision's buffers). */
static void test_batchnorm_state(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("resnet18-imagenet");
    assert_int_equal(m->total_state_floats, 9600);
    assert_int_equal(layer(m, "bn1")->params, 128);
    assert_int_equal(layer(m, "bn1")->state_floats, 128);
    dt_model_destroy(m);
}

/* Ensure that U-Net's up-convolutions double the map and its output is per pixel. */
static void test_shapes_unet(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("unet");
    const struct dt_layer *up = layer(m, "up4.upconv");
    assert_shape(&up->out_shape, 3, 512, 32, 32);
    assert_int_equal(up->params, 1024L * 512 * 2 * 2 + 512); /* W[in][out][2][2] + bias */
    assert_shape(&layer(m, "up4.concat")->out_shape, 3, 1024, 32, 32);
    assert_shape(&m->layers[m->n_layers - 1].out_shape, 3, 2, 256, 256);
    dt_model_destroy(m);
}

/* Ensure that "same" padding follows TensorFlow: output ceil(in/stride), the odd pixel of
 * padding at the bottom/right. 6x6, k3 s2: out 3, total pad (3-1)*2+3-6 = 1 -> 0 top, 1
 * bottom. 7x7, k3 s1: out 7, pad 1 and 1. */
static void test_same_padding(void **state)
{
    (void)state;
    struct dt_model *m = load_text("name: t\nsource: test\ninput: {shape: [1, 6, 7]}\n"
                                   "classes: 2\nlayers:\n"
                                   "  - {kind: conv2d, filters: 2, kernel: [3, 3], stride: [2, 1],"
                                   " padding: same}\n"
                                   "  - {kind: globalpool}\n");
    const struct dt_layer *c = &m->layers[0];
    assert_shape(&c->out_shape, 3, 2, 3, 7);
    assert_int_equal(c->pad_t, 0);
    assert_int_equal(c->pad_b, 1);
    assert_int_equal(c->pad_l, 1);
    assert_int_equal(c->pad_r, 1);
    dt_model_destroy(m);
}

/* Ensure that a token input feeds an embedding and gives (T, D) sequences. */
static void test_tokens_input(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("lstm-sentiment");
    assert_int_equal(m->input_is_tokens, 1);
    assert_int_equal(m->vocab, 20000);
    assert_shape(&m->input, 1, 80, 0, 0);
    assert_shape(&layer(m, "embedding")->out_shape, 2, 80, 128, 0);
    assert_shape(&layer(m, "lstm")->out_shape, 1, 128, 0, 0);
    dt_model_destroy(m);
}

/* ---- references and activation expansion ---- */

/* Ensure that `activation:` becomes its own layer after the weights, that the entry's name
 * then refers to the activation's output (as in Keras), and that the default input is the
 * previous layer. */
static void test_activation_expansion(void **state)
{
    (void)state;
    struct dt_model *m = load_text("name: t\nsource: test\ninput: {shape: [4]}\nclasses: 3\n"
                                   "layers:\n"
                                   "  - {kind: dense, name: a, units: 5, activation: relu}\n"
                                   "  - {kind: dense, name: b, units: 5, input: a}\n"
                                   "  - {kind: add, inputs: [a, b]}\n"
                                   "  - {kind: dense, units: 3, activation: softmax}\n");
    assert_int_equal(m->n_layers, 6);
    assert_int_equal(m->layers[0].kind, DT_L_DENSE);
    assert_int_equal(m->layers[1].kind, DT_L_RELU);
    assert_string_equal(m->layers[1].name, "a_relu");
    assert_int_equal(m->layers[1].line, 6); /* where "relu" is written */
    assert_int_equal(m->layers[1].col, 50);
    assert_int_equal(m->layers[2].in[0], 1); /* b reads a's ReLU output */
    assert_int_equal(m->layers[3].n_in, 2);
    assert_int_equal(m->layers[3].in[0], 1);
    assert_int_equal(m->layers[3].in[1], 2);
    assert_int_equal(m->layers[4].in[0], 3); /* default: the previous layer */
    assert_string_equal(m->layers[4].name, "dense");
    assert_string_equal(m->layers[5].name, "dense_softmax");
    dt_model_destroy(m);
}

/* Ensure that parameters are laid out back to back in layer order. */
static void test_param_offsets(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("cnn690k");
    long offset = 0;
    for (int i = 0; i < m->n_layers; i++) {
        assert_int_equal(m->layers[i].param_offset, offset);
        offset += m->layers[i].params;
    }
    assert_int_equal(offset, m->total_params);
    dt_model_destroy(m);
}

/* ---- FLOPs ---- */

/* Ensure that the MLP's FLOPs are the hand values: dense 784->128 forward 2*784*128 + 128 =
 * 200,832 and no backward-data (first trainable layer); dense 128->10 forward 2*128*10 + 10 =
 * 2,570, backward-data 2*128*10 = 2,560, backward-weights 2,570. */
static void test_flops_mlp(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("mlp-fmnist");
    const struct dt_layer *d1 = layer(m, "dense"), *d2 = layer(m, "dense_1");
    assert_near(d1->fwd_flops, 200832, 0);
    assert_near(d1->bwd_data_flops, 0, 0);
    assert_near(d1->bwd_weight_flops, 200832, 0);
    assert_false(d1->needs_input_grad);
    assert_false(layer(m, "flatten")->needs_input_grad);
    assert_true(layer(m, "dense_relu")->needs_input_grad);
    assert_near(layer(m, "dense_relu")->fwd_flops, 128, 0);
    assert_near(d2->fwd_flops, 2570, 0);
    assert_near(d2->bwd_data_flops, 2560, 0);
    assert_near(d2->bwd_weight_flops, 2570, 0);
    assert_true(d2->needs_input_grad);
    dt_model_destroy(m);
}

/* Ensure that convolution and pooling FLOPs are the hand values for the seed 002 CNN:
 * conv2d 32x26x26 outputs x 9 MACs = 194,688 MACs -> forward 2*194,688 + 21,632 (bias) =
 * 411,008; conv2d_1 128x11x11 outputs x 32*9 MACs = 4,460,544 -> forward 8,921,088 + 15,488
 * = 8,936,576, backward-data 8,921,088; max_pooling2d 32x13x13 outputs x 4 = 21,632. */
static void test_flops_conv_pool(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("cnn690k");
    const struct dt_layer *c0 = layer(m, "conv2d"), *c1 = layer(m, "conv2d_1");
    assert_near(c0->fwd_flops, 411008, 0);
    assert_near(c0->bwd_data_flops, 0, 0);
    assert_near(c0->bwd_weight_flops, 411008, 0);
    assert_near(c1->fwd_flops, 8936576, 0);
    assert_near(c1->bwd_data_flops, 8921088, 0);
    assert_near(c1->bwd_weight_flops, 8936576, 0);
    assert_near(layer(m, "max_pooling2d")->fwd_flops, 21632, 0);
    dt_model_destroy(m);
}

/* Ensure that the totals are the sums of the layers, and that ResNet-50's forward FLOPs are
 * within 3% of twice torchvision's 4.09 GMACs (the rest is batch norm, ReLU and adds). */
static void test_flops_totals(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("resnet50-imagenet");
    double fwd = 0, bwd = 0, act = 0;
    for (int i = 0; i < m->n_layers; i++) {
        fwd += m->layers[i].fwd_flops;
        bwd += m->layers[i].bwd_data_flops + m->layers[i].bwd_weight_flops;
        act += m->layers[i].act_bytes;
    }
    assert_near(m->fwd_flops, fwd, fwd * 1e-12);
    assert_near(m->bwd_flops, bwd, bwd * 1e-12);
    assert_near(m->act_bytes, act, act * 1e-12);
    assert_near(m->fwd_flops, 2 * 4.09e9, 0.03 * 2 * 4.09e9);
    dt_model_destroy(m);
}

/* Ensure that multi-head attention costs the hand value for T=4, D=8, 2 heads:
 * projections 2*4*T*D*D = 2,048, biases 4*T*D = 128, scores and context 2*2*T*T*D = 512,
 * softmax and scale 6*heads*T*T = 192: 2,880 forward FLOPs; 4*(64+8) = 288 parameters. */
static void test_flops_attention(void **state)
{
    (void)state;
    struct dt_model *m = load_text("name: t\nsource: test\ninput: {tokens: 4, vocab: 10}\n"
                                   "classes: 2\nlayers:\n"
                                   "  - {kind: embedding, dim: 8}\n"
                                   "  - {kind: attention, heads: 2}\n"
                                   "  - {kind: seqpool}\n"
                                   "  - {kind: dense, units: 2}\n");
    const struct dt_layer *a = layer(m, "attention");
    assert_int_equal(a->params, 288);
    assert_near(a->fwd_flops, 2880, 0);
    assert_near(a->bwd_data_flops, 2 * 3 * 4 * 8 * 8, 0); /* dX via Q, K, V */
    assert_shape(&a->out_shape, 2, 4, 8, 0);
    assert_false(layer(m, "embedding")->needs_input_grad);
    dt_model_destroy(m);
}

/* ---- summary ---- */

/* Ensure that the summary lists every layer and prints Keras's three totals. */
static void test_summary_totals(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("cnn690k");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    dt_model_print_summary(m, f);
    fclose(f);
    assert_non_null(strstr(text, "Total params: 690,590\n"));
    assert_non_null(strstr(text, "Trainable params: 690,590\n"));
    assert_non_null(strstr(text, "Non-trainable params: 0\n"));
    assert_non_null(strstr(text, "conv2d_1 (conv2d)"));
    assert_non_null(strstr(text, "(128, 11, 11)"));
    assert_non_null(strstr(text, "36,992"));
    free(text);
    dt_model_destroy(m);
}

/* Ensure that the summary counts batch-norm statistics as non-trainable, as Keras does. */
static void test_summary_non_trainable(void **state)
{
    (void)state;
    struct dt_model *m = load_zoo("resnet18-imagenet");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    dt_model_print_summary(m, f);
    fclose(f);
    /* 11,689,512 + 9,600 */
    assert_non_null(strstr(text, "Total params: 11,699,112\n"));
    assert_non_null(strstr(text, "Trainable params: 11,689,512\n"));
    assert_non_null(strstr(text, "Non-trainable params: 9,600 (running statistics of batch normalisation)\n"));
    free(text);
    dt_model_destroy(m);
}

/* Ensure that shapes print as tuples. */
static void test_shape_format(void **state)
{
    (void)state;
    char buf[64];
    struct dt_shape s = {.rank = 3, .d = {32, 26, 26}};
    dt_shape_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "(32, 26, 26)");
    s = (struct dt_shape){.rank = 1, .d = {256}};
    dt_shape_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "(256)");
    assert_int_equal(dt_shape_size(&(struct dt_shape){.rank = 2, .d = {128, 768}}), 98304);
}

int main(void)
{
    srcdir = getenv("top_srcdir");
    if (!srcdir) {
        fprintf(stderr, "SKIP: top_srcdir is not set (run through make check)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params_mlp_fmnist),
        cmocka_unit_test(test_params_mlp_wide),
        cmocka_unit_test(test_params_cnn690k),
        cmocka_unit_test(test_params_cnn21k),
        cmocka_unit_test(test_params_vgg11_imagenet),
        cmocka_unit_test(test_params_vgg16_imagenet),
        cmocka_unit_test(test_params_vgg11_cifar10),
        cmocka_unit_test(test_params_vgg16_cifar10),
        cmocka_unit_test(test_params_resnet18_imagenet),
        cmocka_unit_test(test_params_resnet50_imagenet),
        cmocka_unit_test(test_params_resnet18_cifar10),
        cmocka_unit_test(test_params_resnet50_cifar10),
        cmocka_unit_test(test_params_unet),
        cmocka_unit_test(test_params_lstm_sentiment),
        cmocka_unit_test(test_params_bert_base),
        cmocka_unit_test(test_params_bert_large),
        cmocka_unit_test(test_bert_large_phase2),
        cmocka_unit_test(test_bert_large_512),
        cmocka_unit_test(test_params_gpt2_124m),
        cmocka_unit_test(test_params_tiny_gpt),
        cmocka_unit_test(test_params_gpt3),
        cmocka_unit_test(test_params_megatron_530b),
        cmocka_unit_test(test_flops_attention_core),
        cmocka_unit_test(test_tied_head),
        cmocka_unit_test(test_shapes_cnn690k),
        cmocka_unit_test(test_shapes_resnet50),
        cmocka_unit_test(test_batchnorm_state),
        cmocka_unit_test(test_shapes_unet),
        cmocka_unit_test(test_same_padding),
        cmocka_unit_test(test_tokens_input),
        cmocka_unit_test(test_activation_expansion),
        cmocka_unit_test(test_param_offsets),
        cmocka_unit_test(test_flops_mlp),
        cmocka_unit_test(test_flops_conv_pool),
        cmocka_unit_test(test_flops_totals),
        cmocka_unit_test(test_flops_attention),
        cmocka_unit_test(test_summary_totals),
        cmocka_unit_test(test_summary_non_trainable),
        cmocka_unit_test(test_shape_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

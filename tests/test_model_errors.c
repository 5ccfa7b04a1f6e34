/* Bad model files: each is rejected with DT_EINPUT and a message located at the offending
 * line and column, and no input (truncated, mutated, huge) crashes or hangs the loader.
 * Columns are 1-based positions in the test text; the layer lines all start "  - {kind: ",
 * so a layer mapping is at column 5 and its kind value at column 12. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/model.h"
#include "dt/yamldoc.h"

/* Lines 1-5; the first layer is on line 6. */
#define HDR "name: t\nsource: test\ninput: {shape: [1, 28, 28]}\nclasses: 10\nlayers:\n"
#define FLAT "  - {kind: flatten}\n"

static void expect_error(const char *text, int line, int col, const char *needle)
{
    struct dt_model *m = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dt_model_load_string("bad.yaml", text, &m, &err);
    char buf[2048];
    dt_error_format(&err, buf, sizeof buf);
    if (rc != DT_EINPUT)
        fail_msg("status %d (expected DT_EINPUT); message: %s", rc, buf);
    assert_null(m);
    assert_string_equal(err.file, "bad.yaml");
    if (err.line != line || err.col != col || !strstr(err.msg, needle))
        fail_msg("expected bad.yaml:%d:%d: ...%s..., got %s", line, col, needle, buf);
}

/* ---- not a model file ---- */

/* Ensure that a YAML syntax error (an unclosed flow mapping) is located by the parser. */
static void test_yaml_syntax_error(void **state)
{
    (void)state;
    /* libyaml notices the missing '}' when it meets the next layer's '{' */
    expect_error(HDR "  - {kind: dense, units: 10\n  - {kind: relu}\n", 7, 5,
                 "did not find expected ',' or '}'");
}

/* Ensure that an empty file is an error at 1:1. */
static void test_empty_file(void **state)
{
    (void)state;
    expect_error("", 1, 1, "empty file");
}

/* Ensure that a file with only comments counts as empty. */
static void test_only_comments(void **state)
{
    (void)state;
    expect_error("# a model\n# nothing else\n", 1, 1, "empty file");
}

/* Ensure that binary bytes are rejected as not YAML. */
static void test_binary_file(void **state)
{
    (void)state;
    expect_error("\x7f" "ELF\x02\x01\x01", 1, 1, "not a YAML text file");
}

/* Ensure that plain text (a scalar document) is rejected: a model is a mapping. */
static void test_not_a_mapping(void **state)
{
    (void)state;
    expect_error("just some text\n", 1, 1, "expected a YAML mapping");
}

/* Ensure that a file over the size limit is refused before parsing (no line to blame). */
static void test_huge_file(void **state)
{
    (void)state;
    size_t n = DT_YAML_MAX_BYTES + 16;
    char *text = malloc(n + 1);
    assert_non_null(text);
    memset(text, '#', n);
    text[n] = '\0';
    struct dt_model *m = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    assert_int_equal(dt_model_load_string("bad.yaml", text, &m, &err), DT_EINPUT);
    assert_null(m);
    assert_string_equal(err.file, "bad.yaml");
    assert_non_null(strstr(err.msg, "too large"));
    free(text);
}

/* Ensure that exponential alias expansion ("billion laughs") is cut off, not expanded. */
static void test_alias_bomb(void **state)
{
    (void)state;
    char text[4096] = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (int i = 1; i < 9; i++) {
        char line[256];
        snprintf(line, sizeof line,
                 "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i,
                 i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
        strcat(text, line);
    }
    struct dt_model *m = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    assert_int_equal(dt_model_load_string("bad.yaml", text, &m, &err), DT_EINPUT);
    assert_null(m);
    assert_true(err.line >= 1);
    assert_non_null(strstr(err.msg, "too large"));
}

/* Ensure that a missing file is an input error naming the file. */
static void test_missing_file(void **state)
{
    (void)state;
    struct dt_model *m = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    assert_int_equal(dt_model_load("/nonexistent/model.yaml", &m, &err), DT_EINPUT);
    assert_null(m);
    assert_string_equal(err.file, "/nonexistent/model.yaml");
    assert_non_null(strstr(err.msg, "cannot open"));
}

/* ---- top level ---- */

/* Ensure that a misspelt top-level key is named at its position. */
static void test_unknown_top_key(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\nnmae: x\n", 3, 1, "unknown key 'nmae'");
}

/* Ensure that a missing source (the citation is required) is reported at the mapping. */
static void test_missing_source(void **state)
{
    (void)state;
    expect_error("name: t\ninput: {shape: [4]}\nclasses: 4\nlayers:\n  - {kind: relu}\n", 1, 1,
                 "missing required key 'source'");
}

/* Ensure that a missing input description is reported at the mapping. */
static void test_missing_input(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\nclasses: 4\nlayers:\n  - {kind: relu}\n", 1, 1,
                 "missing required key 'input'");
}

/* Ensure that a word where a number belongs is a type error at the value. */
static void test_wrong_type(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [4]}\nclasses: ten\nlayers:\n"
                 "  - {kind: relu}\n",
                 4, 10, "expected an integer");
}

/* Ensure that zero classes is out of range. */
static void test_zero_classes(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [4]}\nclasses: 0\nlayers:\n"
                 "  - {kind: relu}\n",
                 4, 10, "out of range");
}

/* Ensure that one class, which leaves nothing to learn, is refused at the classes value. */
static void test_one_class(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [4]}\nclasses: 1\nlayers:\n"
                 "  - {kind: dense, units: 1, activation: softmax}\n",
                 4, 10, "classes is 1");
}

/* Ensure that each kind of bad dataset is refused where it is written (line 5, the mapping
 * at column 10): not a mapping, an unknown key, no samples, zero or fractional samples, a
 * size without a unit; and that a good one is read. */
static void test_bad_dataset(void **state)
{
    (void)state;
#define DS(d) "name: t\nsource: s\ninput: {shape: [4]}\nclasses: 2\ndataset: " d "\n"     \
              "layers:\n  - {kind: dense, units: 2, activation: softmax}\n"
    expect_error(DS("imagenet"), 5, 10, "must be a mapping");
    expect_error(DS("{name: x, samples: 10, size: 3}"), 5, 33, "unknown key 'size'");
    expect_error(DS("{name: x}"), 5, 10, "missing required key 'samples'");
    expect_error(DS("{name: x, samples: 0}"), 5, 29, "out of range");
    expect_error(DS("{name: x, samples: 2.5}"), 5, 29, "expected an integer");
    expect_error(DS("{name: x, samples: 10, bytes: 100}"), 5, 40, "has no unit");
    expect_error(DS("{samples: 10}"), 5, 10, "missing required key 'name'");
    struct dt_model *m = NULL;
    struct dt_error err;
    assert_int_equal(dt_model_load_string("ok.yaml", DS("{name: x, samples: 10, bytes: 1 GiB}"),
                                          &m, &err), DT_OK);
    assert_string_equal(m->dataset, "x");
    assert_int_equal(m->dataset_samples, 10);
    assert_true(m->dataset_bytes == 1073741824.0);
    dt_model_destroy(m);
#undef DS
}

/* Ensure that a softmax layer reading a dense layer's softmax activation is refused at the
 * second softmax. */
static void test_softmax_of_softmax(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [4]}\nclasses: 4\nlayers:\n"
                 "  - {kind: dense, units: 4, activation: softmax}\n  - {kind: softmax}\n",
                 7, 5, "softmax of softmax");
}

/* Ensure that a dropout after the output layer is refused at the dropout. */
static void test_dropout_after_output(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [4]}\nclasses: 4\nlayers:\n"
                 "  - {kind: dense, units: 4, activation: softmax}\n"
                 "  - {kind: dropout, rate: 0.5}\n",
                 7, 5, "is the last layer");
}

/* Ensure that a list where a string belongs is a type error. */
static void test_description_not_string(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ndescription: [a, b]\n", 3, 14, "expected a string");
}

/* Ensure that a negative sequence length is out of range. */
static void test_negative_tokens(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {tokens: -5, vocab: 100}\n", 3, 17,
                 "out of range");
}

/* Ensure that an input cannot be both an image and tokens. */
static void test_shape_and_tokens(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [4], tokens: 4, vocab: 10}\n", 3, 29,
                 "exactly one of");
}

/* Ensure that an input shape of rank 4 is refused at the list. */
static void test_shape_rank4(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [1, 2, 3, 4]}\n", 3, 16,
                 "1 to 3 extents");
}

/* Ensure that a model without layers is refused. */
static void test_empty_layers(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [4]}\nclasses: 4\nlayers: []\n", 5, 9,
                 "at least one layer");
}

/* Ensure that layers written as a mapping instead of a list are refused. */
static void test_layers_not_list(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [4]}\nclasses: 4\nlayers: {kind: relu}\n",
                 5, 9, "must be a list");
}

/* Ensure that more layers than the limit are refused at the list, quickly. */
static void test_too_many_layers(void **state)
{
    (void)state;
    const char *head = "name: t\nsource: s\ninput: {shape: [4]}\nclasses: 4\nlayers:\n";
    const char *row = "  - {kind: relu}\n";
    size_t n = (size_t)DT_MODEL_MAX_LAYERS + 1;
    char *text = malloc(strlen(head) + n * strlen(row) + 1);
    assert_non_null(text);
    char *p = stpcpy(text, head);
    for (size_t i = 0; i < n; i++)
        p = stpcpy(p, row);
    expect_error(text, 6, 3, "more than 65536 layers");
    free(text);
}

/* ---- layer entries ---- */

/* Ensure that a layer written as a bare word is refused. */
static void test_layer_not_mapping(void **state)
{
    (void)state;
    expect_error(HDR "  - dense\n", 6, 5, "must be a mapping");
}

/* Ensure that an unknown layer kind is named at its value, with the known kinds. */
static void test_unknown_kind(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: convolution}\n", 6, 12, "unknown kind 'convolution'");
}

/* Ensure that a layer without kind is reported at the layer. */
static void test_missing_kind(void **state)
{
    (void)state;
    expect_error(HDR "  - {units: 10}\n", 6, 5, "missing required key 'kind'");
}

/* Ensure that a key the kind does not take (a typo) is named at the key. */
static void test_unknown_layer_key(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: conv2d, filter: 8, kernel: 3}\n", 6, 20, "unknown key 'filter'");
}

/* Ensure that a required attribute (filters) is missing at the layer. */
static void test_missing_filters(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: conv2d, kernel: 3}\n", 6, 5, "missing required key 'filters'");
}

/* Ensure that a mapping key given twice is refused at its second occurrence. */
static void test_duplicate_key(void **state)
{
    (void)state;
    expect_error(HDR FLAT "  - {kind: dense, units: 10, units: 20}\n", 7, 30, "duplicate key");
}

/* ---- values ---- */

/* Ensure that zero filters is out of range. */
static void test_zero_filters(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: conv2d, filters: 0, kernel: 3}\n", 6, 29, "out of range");
}

/* Ensure that a negative kernel is out of range. */
static void test_negative_kernel(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: conv2d, filters: 8, kernel: -1}\n", 6, 40, "out of range");
}

/* Ensure that a kernel of three extents is refused. */
static void test_kernel_three_extents(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: conv2d, filters: 8, kernel: [3, 3, 3]}\n", 6, 40,
                 "[height, width] pair");
}

/* Ensure that a zero stride is out of range. */
static void test_zero_stride(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: maxpool, kernel: 2, stride: 0}\n", 6, 40, "out of range");
}

/* Ensure that a dropout rate above 1 is out of range. */
static void test_dropout_rate_above_one(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: dropout, rate: 1.5}\n", 6, 27, "out of range");
}

/* Ensure that a dropout rate of exactly 1 (drop everything) is refused. */
static void test_dropout_rate_one(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: dropout, rate: 1}\n", 6, 27, "below 1");
}

/* Ensure that NaN is refused as a number. */
static void test_nan_rate(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: dropout, rate: nan}\n", 6, 27, "finite");
}

/* Ensure that an absurd width (10^12 units) is out of range, not an allocation. */
static void test_absurd_units(void **state)
{
    (void)state;
    expect_error(HDR FLAT "  - {kind: dense, units: 1000000000000}\n", 7, 26, "out of range");
}

/* Ensure that a width written as a float is not an integer. */
static void test_float_units(void **state)
{
    (void)state;
    expect_error(HDR FLAT "  - {kind: dense, units: 1.0e3}\n", 7, 26, "expected an integer");
}

/* Ensure that a word where true/false belongs is refused. */
static void test_bad_bool(void **state)
{
    (void)state;
    expect_error(HDR FLAT "  - {kind: dense, units: 10, bias: maybe}\n", 7, 36, "true or false");
}

/* Ensure that an unknown activation is named. */
static void test_unknown_activation(void **state)
{
    (void)state;
    expect_error(HDR FLAT "  - {kind: dense, units: 10, activation: relux}\n", 7, 42,
                 "unknown activation 'relux'");
}

/* Ensure that an unknown padding word is refused. */
static void test_bad_padding(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: conv2d, filters: 4, kernel: 3, padding: full}\n", 6, 52,
                 "padding must be");
}

/* Ensure that pooling padding over half the window is refused (PyTorch's rule). */
static void test_pool_padding_too_large(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: maxpool, kernel: 2, padding: 2}\n", 6, 41, "more than half");
}

/* Ensure that groups must divide the channels. */
static void test_groups_not_dividing(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: conv2d, filters: 4, kernel: 3, groups: 3}\n", 6, 51,
                 "groups (3) must divide");
}

/* Ensure that an upsampling scale of 0 is out of range. */
static void test_zero_scale(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: upsample, scale: 0}\n", 6, 29, "out of range");
}

/* Ensure that a normalisation epsilon of 0 is refused. */
static void test_zero_eps(void **state)
{
    (void)state;
    expect_error(HDR FLAT "  - {kind: batchnorm, eps: 0}\n", 7, 28, "above 0");
}

/* ---- names and references ---- */

/* Ensure that a reference to a layer that does not exist is named at the reference. */
static void test_unknown_reference(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: flatten, input: nothere}\n", 6, 28, "no layer named 'nothere'");
}

/* Ensure that a reference to a layer written further down is refused (no cycles). */
static void test_forward_reference(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: flatten, input: later}\n  - {kind: dense, name: later, units: 10}\n",
                 6, 28, "no layer named 'later' before this one");
}

/* Ensure that two layers cannot share a name. */
static void test_duplicate_names(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: flatten, name: x}\n  - {kind: dense, name: x, units: 10}\n", 7,
                 25, "duplicate layer name 'x' (first at line 6)");
}

/* Ensure that the name an activation expands to cannot clash with a written name. */
static void test_duplicate_activation_name(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: flatten, name: d_relu}\n"
                     "  - {kind: dense, name: d, units: 10, activation: relu}\n",
                 7, 51, "duplicate layer name 'd_relu'");
}

/* Ensure that "input" is reserved for the model's input. */
static void test_reserved_name(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: flatten, name: input}\n", 6, 27, "'input' names the model");
}

/* Ensure that over-long names are refused (they would be cut in the summary and plans). */
static void test_long_name(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: flatten, name: "
                     "a234567890123456789012345678901234567890123456789012345678901234}\n",
                 6, 27, "longer than 63");
}

/* Ensure that add needs at least two inputs. */
static void test_add_one_input(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: flatten, name: x}\n  - {kind: add, inputs: [x]}\n", 7, 25,
                 "2 to 4 inputs");
}

/* Ensure that add takes `inputs`, not `input`. */
static void test_add_with_input_key(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: add, input: x}\n", 6, 17, "unknown key 'input'");
}

/* Ensure that a layer whose output nobody reads (a dead branch) is refused. */
static void test_dangling_output(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: flatten, name: f}\n  - {kind: dense, name: a, units: 10}\n"
                     "  - {kind: dense, name: b, units: 10, input: f}\n",
                 7, 5, "never used");
}

/* ---- shapes ---- */

/* Ensure that a 5x5 kernel on a 3x3 input is refused at the kernel. */
static void test_kernel_larger_than_input(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [1, 3, 3]}\nclasses: 4\nlayers:\n"
                 "  - {kind: conv2d, filters: 4, kernel: 5}\n",
                 6, 40, "5x5 kernel does not fit the 3x3 input");
}

/* Ensure that adding tensors of different shapes is refused at the odd input. */
static void test_add_shape_mismatch(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: flatten, name: f}\n"
                     "  - {kind: dense, name: a, units: 10}\n"
                     "  - {kind: dense, name: b, units: 5, input: f}\n"
                     "  - {kind: add, inputs: [a, b]}\n",
                 9, 29, "add needs inputs of one shape: 'a' is (10) but 'b' is (5)");
}

/* Ensure that concatenating maps of different sizes is refused at the odd input. */
static void test_concat_shape_mismatch(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: conv2d, name: a, filters: 2, kernel: 3}\n"
                     "  - {kind: conv2d, name: b, filters: 2, kernel: 1, input: input}\n"
                     "  - {kind: concat, inputs: [a, b]}\n",
                 8, 32, "differ only in channels");
}

/* Ensure that dense on an image needs an explicit flatten (the documented decision). */
static void test_dense_on_image(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: dense, units: 10}\n", 6, 5, "add a flatten layer");
}

/* Ensure that an LSTM on an image is refused. */
static void test_lstm_on_image(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: lstm, units: 4}\n", 6, 5, "sequence (T,D)");
}

/* Ensure that layer norm on an image is refused (it normalises the last axis). */
static void test_layernorm_on_image(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: layernorm}\n", 6, 5, "last axis");
}

/* Ensure that a "same" transposed convolution needs kernel >= stride. */
static void test_transpose_same_small_kernel(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: conv2d_transpose, filters: 2, kernel: 1, stride: 2, padding: same}\n",
                 6, 73, "at least as large as the stride");
}

/* Ensure that the declared classes must match the last layer's output. */
static void test_classes_mismatch(void **state)
{
    (void)state;
    expect_error(HDR FLAT "  - {kind: dense, units: 5}\n", 4, 10,
                 "classes is 10 but the last layer 'dense' outputs (5)");
}

/* ---- tokens ---- */

#define TOK "name: t\nsource: s\ninput: {tokens: 8, vocab: 100}\nclasses: 2\nlayers:\n"

/* Ensure that an embedding cannot read an image. */
static void test_embedding_on_image(void **state)
{
    (void)state;
    expect_error(HDR "  - {kind: embedding, dim: 8}\n", 6, 5, "must read the model's token input");
}

/* Ensure that token ids cannot feed anything but an embedding. */
static void test_dense_on_tokens(void **state)
{
    (void)state;
    expect_error(TOK "  - {kind: dense, units: 2}\n", 6, 5, "only an embedding");
}

/* Ensure that heads must divide the width. */
static void test_heads_not_dividing(void **state)
{
    (void)state;
    expect_error(TOK "  - {kind: embedding, dim: 10}\n  - {kind: attention, heads: 3}\n", 7, 30,
                 "heads (3) must divide");
}

/* Ensure that an embedding smaller than the input vocabulary is refused. */
static void test_embedding_vocab_too_small(void **state)
{
    (void)state;
    expect_error(TOK "  - {kind: embedding, dim: 4, vocab: 50}\n", 6, 38, "smaller than");
}

/* Ensure that a position table shorter than the sequence is refused. */
static void test_positions_too_few(void **state)
{
    (void)state;
    expect_error(TOK "  - {kind: embedding, dim: 4, positions: 4}\n", 6, 42, "do not cover");
}

/* ---- transformer pieces: attention core, tied embeddings, language-model loss ---- */

#define EMB8 "  - {kind: embedding, dim: 8}\n"
/* Lines 1-6 with a language-model loss; the first layer is on line 7. */
#define LM "name: t\nsource: s\ninput: {tokens: 8, vocab: 16}\nclasses: 16\n" \
           "loss: language_model\nlayers:\n"

/* Ensure that an attention core's heads must divide a third of its q|k|v input. */
static void test_core_heads_not_dividing(void **state)
{
    (void)state;
    expect_error(TOK EMB8 "  - {kind: dense, units: 24}\n  - {kind: attention_core, heads: 3}\n",
                 8, 35, "heads (3) must divide the width 8");
}

/* Ensure that an attention core refuses an input that is not q|k|v of one width. */
static void test_core_input_not_qkv(void **state)
{
    (void)state;
    expect_error(TOK EMB8 "  - {kind: attention_core, heads: 2}\n", 7, 5, "(T, 3D) input");
}

/* Ensure that causal is refused on a layer that is not an attention core. */
static void test_causal_on_dense(void **state)
{
    (void)state;
    expect_error(TOK EMB8 "  - {kind: dense, units: 4, causal: true}\n", 7, 29,
                 "unknown key 'causal' in a dense layer");
}

/* Ensure that causal takes only true or false. */
static void test_causal_not_bool(void **state)
{
    (void)state;
    expect_error(TOK EMB8 "  - {kind: dense, units: 24}\n"
                          "  - {kind: attention_core, heads: 2, causal: yes}\n",
                 8, 46, "expected true or false");
}

/* Ensure that a dense layer can only be tied to an embedding. */
static void test_tied_to_layernorm(void **state)
{
    (void)state;
    expect_error(TOK EMB8 "  - {kind: layernorm, name: ln}\n  - {kind: dense, tied: ln}\n", 8, 25,
                 "'ln' is a layernorm layer; a dense layer can only be tied to an embedding");
}

/* Ensure that tied names an existing earlier layer. */
static void test_tied_to_unknown(void **state)
{
    (void)state;
    expect_error(TOK EMB8 "  - {kind: dense, tied: nope}\n", 7, 25, "no layer named 'nope'");
}

/* Ensure that a tied layer's input has the table's width. */
static void test_tied_width_mismatch(void **state)
{
    (void)state;
    expect_error(TOK EMB8 "  - {kind: dense, units: 4}\n  - {kind: dense, tied: embedding}\n", 8,
                 25, "needs inputs of the table's width 8, but its input 'dense' has width 4");
}

/* Ensure that a tied layer has no bias of its own. */
static void test_tied_with_bias(void **state)
{
    (void)state;
    expect_error(TOK EMB8 "  - {kind: dense, tied: embedding, bias: true}\n", 7, 42,
                 "a tied dense layer has no bias");
}

/* Ensure that a tied layer's units, when given, are the table's vocabulary. */
static void test_tied_units_mismatch(void **state)
{
    (void)state;
    expect_error(TOK EMB8 "  - {kind: dense, tied: embedding, units: 10}\n", 7, 43,
                 "units 10 differ from the vocab 100 of the tied table 'embedding'");
}

/* Ensure that an unknown loss is refused at its value. */
static void test_unknown_loss(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {tokens: 8, vocab: 16}\nclasses: 16\n"
                 "loss: regression\nlayers:\n" EMB8,
                 5, 7, "unknown loss 'regression' (known: classification, language_model)");
}

/* Ensure that a language-model loss needs token ids to predict. */
static void test_lm_on_image(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [4]}\nclasses: 4\n"
                 "loss: language_model\nlayers:\n  - {kind: dense, units: 4}\n",
                 5, 7, "needs a token input");
}

/* Ensure that a language-model loss needs one output row per token. */
static void test_lm_not_per_token(void **state)
{
    (void)state;
    expect_error(LM EMB8 "  - {kind: seqpool}\n  - {kind: dense, units: 16}\n", 5, 7,
                 "needs one output row per token, (8, V), but the last layer 'dense' outputs "
                 "(16)");
}

/* Ensure that a language model's classes cover the input's token ids (its targets). */
static void test_lm_classes_below_vocab(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {tokens: 8, vocab: 16}\nclasses: 8\n"
                 "loss: language_model\nlayers:\n" EMB8 "  - {kind: dense, units: 8}\n",
                 5, 7, "classes 8 do not cover the input's vocab 16");
}

/* Ensure that a language model refuses an attention that sees the tokens it predicts. */
static void test_lm_not_causal(void **state)
{
    (void)state;
    expect_error(LM EMB8 "  - {kind: dense, units: 24}\n  - {kind: attention_core, heads: 2}\n"
                         "  - {kind: dense, units: 16}\n",
                 9, 5, "layer 'attention_core' lets every position see the tokens after it");
    expect_error(LM EMB8 "  - {kind: attention, heads: 2}\n  - {kind: dense, units: 16}\n", 8,
                 5, "layer 'attention' lets every position see");
}

/* ---- counts ---- */

/* Ensure that one layer's parameter count over the limit (2^24 x 2^24 dense) is refused. */
static void test_layer_params_overflow(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [16777216]}\nclasses: 4\nlayers:\n"
                 "  - {kind: dense, units: 16777216}\n",
                 6, 5, "more than 1099511627776 parameters");
}

/* Ensure that a model total over the limit is refused at the layer that crosses it:
 * 2^19 x 2^20 + 2^20 and 2^20 x 2^19 + 2^19 are each below 2^40, their sum is not. */
static void test_total_params_overflow(void **state)
{
    (void)state;
    expect_error("name: t\nsource: s\ninput: {shape: [524288]}\nclasses: 524288\nlayers:\n"
                 "  - {kind: dense, units: 1048576}\n  - {kind: dense, units: 524288}\n",
                 7, 5, "the model has more than 1099511627776 parameters (at layer 'dense_1')");
}

/* ---- robustness ---- */

static const char *valid_model =
    "# a small valid model\n"
    "name: robust\n"
    "source: test\n"
    "input: {shape: [1, 12, 12]}\n"
    "classes: 3\n"
    "layers:\n"
    "  - {kind: conv2d, name: c1, filters: 4, kernel: 3, padding: same, activation: relu}\n"
    "  - {kind: maxpool, kernel: 2}\n"
    "  - {kind: conv2d, name: c2, filters: 4, kernel: [3, 1], stride: 1, padding: [1, 0]}\n"
    "  - {kind: batchnorm}\n"
    "  - {kind: add, inputs: [maxpool, batchnorm], activation: relu}\n"
    "  - name: up\n"
    "    kind: upsample\n"
    "    scale: 2\n"
    "  - {kind: concat, inputs: [up, c1]}\n"
    "  - {kind: globalpool}\n"
    "  - {kind: dropout, rate: 0.25}\n"
    "  - {kind: dense, units: 3, activation: softmax}\n";

static void load_any(const char *text)
{
    struct dt_model *m = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dt_model_load_string("fuzz.yaml", text, &m, &err);
    if (rc == DT_OK) {
        assert_non_null(m);
        dt_model_destroy(m);
        return;
    }
    char buf[2048];
    dt_error_format(&err, buf, sizeof buf);
    if (rc != DT_EINPUT || m != NULL || err.line < 1 || err.col < 1)
        fail_msg("status %d, located %d:%d: %s\ninput:\n%s", rc, err.line, err.col, buf, text);
}

/* Ensure that the robustness model itself loads (so the mutations start from a valid file). */
static void test_valid_base_model(void **state)
{
    (void)state;
    struct dt_model *m = NULL;
    struct dt_error err;
    assert_int_equal(dt_model_load_string("ok.yaml", valid_model, &m, &err), DT_OK);
    assert_int_equal(m->n_layers, 13);
    dt_model_destroy(m);
}

/* Ensure that every truncation of a valid file loads or fails with a located input error. */
static void test_truncations(void **state)
{
    (void)state;
    size_t n = strlen(valid_model);
    char *text = malloc(n + 1);
    assert_non_null(text);
    for (size_t len = 1; len < n; len++) {
        memcpy(text, valid_model, len);
        text[len] = '\0';
        load_any(text);
    }
    free(text);
}

/* Ensure that random one- and two-byte mutations (fixed seed) never crash the loader. */
static void test_mutations(void **state)
{
    (void)state;
    static const char alphabet[] = "{}[],:-#&*!|>'\"%@` \n\t0123456789.eE+-xyzkindreluNaN";
    size_t n = strlen(valid_model);
    char *text = malloc(n + 1);
    assert_non_null(text);
    uint64_t x = 0x9E3779B97F4A7C15ULL; /* xorshift64, fixed seed: reproducible */
    for (int trial = 0; trial < 4000; trial++) {
        memcpy(text, valid_model, n + 1);
        for (int k = 0; k < 1 + trial % 2; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            text[x % n] = alphabet[(x >> 32) % (sizeof alphabet - 1)];
        }
        load_any(text);
    }
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml_syntax_error),
        cmocka_unit_test(test_empty_file),
        cmocka_unit_test(test_only_comments),
        cmocka_unit_test(test_binary_file),
        cmocka_unit_test(test_not_a_mapping),
        cmocka_unit_test(test_huge_file),
        cmocka_unit_test(test_alias_bomb),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_unknown_top_key),
        cmocka_unit_test(test_missing_source),
        cmocka_unit_test(test_missing_input),
        cmocka_unit_test(test_wrong_type),
        cmocka_unit_test(test_zero_classes),
        cmocka_unit_test(test_one_class),
        cmocka_unit_test(test_softmax_of_softmax),
        cmocka_unit_test(test_dropout_after_output),
        cmocka_unit_test(test_description_not_string),
        cmocka_unit_test(test_negative_tokens),
        cmocka_unit_test(test_shape_and_tokens),
        cmocka_unit_test(test_shape_rank4),
        cmocka_unit_test(test_empty_layers),
        cmocka_unit_test(test_layers_not_list),
        cmocka_unit_test(test_too_many_layers),
        cmocka_unit_test(test_layer_not_mapping),
        cmocka_unit_test(test_unknown_kind),
        cmocka_unit_test(test_missing_kind),
        cmocka_unit_test(test_unknown_layer_key),
        cmocka_unit_test(test_missing_filters),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_zero_filters),
        cmocka_unit_test(test_negative_kernel),
        cmocka_unit_test(test_kernel_three_extents),
        cmocka_unit_test(test_zero_stride),
        cmocka_unit_test(test_dropout_rate_above_one),
        cmocka_unit_test(test_dropout_rate_one),
        cmocka_unit_test(test_nan_rate),
        cmocka_unit_test(test_absurd_units),
        cmocka_unit_test(test_float_units),
        cmocka_unit_test(test_bad_bool),
        cmocka_unit_test(test_unknown_activation),
        cmocka_unit_test(test_bad_dataset),
        cmocka_unit_test(test_bad_padding),
        cmocka_unit_test(test_pool_padding_too_large),
        cmocka_unit_test(test_groups_not_dividing),
        cmocka_unit_test(test_zero_scale),
        cmocka_unit_test(test_zero_eps),
        cmocka_unit_test(test_unknown_reference),
        cmocka_unit_test(test_forward_reference),
        cmocka_unit_test(test_duplicate_names),
        cmocka_unit_test(test_duplicate_activation_name),
        cmocka_unit_test(test_reserved_name),
        cmocka_unit_test(test_long_name),
        cmocka_unit_test(test_add_one_input),
        cmocka_unit_test(test_add_with_input_key),
        cmocka_unit_test(test_dangling_output),
        cmocka_unit_test(test_kernel_larger_than_input),
        cmocka_unit_test(test_add_shape_mismatch),
        cmocka_unit_test(test_concat_shape_mismatch),
        cmocka_unit_test(test_dense_on_image),
        cmocka_unit_test(test_lstm_on_image),
        cmocka_unit_test(test_layernorm_on_image),
        cmocka_unit_test(test_transpose_same_small_kernel),
        cmocka_unit_test(test_classes_mismatch),
        cmocka_unit_test(test_embedding_on_image),
        cmocka_unit_test(test_dense_on_tokens),
        cmocka_unit_test(test_heads_not_dividing),
        cmocka_unit_test(test_embedding_vocab_too_small),
        cmocka_unit_test(test_positions_too_few),
        cmocka_unit_test(test_core_heads_not_dividing),
        cmocka_unit_test(test_core_input_not_qkv),
        cmocka_unit_test(test_causal_on_dense),
        cmocka_unit_test(test_causal_not_bool),
        cmocka_unit_test(test_tied_to_layernorm),
        cmocka_unit_test(test_tied_to_unknown),
        cmocka_unit_test(test_tied_width_mismatch),
        cmocka_unit_test(test_tied_with_bias),
        cmocka_unit_test(test_tied_units_mismatch),
        cmocka_unit_test(test_unknown_loss),
        cmocka_unit_test(test_lm_on_image),
        cmocka_unit_test(test_lm_not_per_token),
        cmocka_unit_test(test_lm_classes_below_vocab),
        cmocka_unit_test(test_lm_not_causal),
        cmocka_unit_test(test_layer_params_overflow),
        cmocka_unit_test(test_total_params_overflow),
        cmocka_unit_test(test_valid_base_model),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

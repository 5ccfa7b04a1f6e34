/* Tests of dtexec's dataset readers and sampler. Every file is written by the test itself in a
 * temporary directory: tiny IDX files (plain and gzip) whose expected contents follow from the
 * IDX format (big-endian header, then unsigned bytes), CIFAR-10 records, and broken variants. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data.h"

static char dir[64];

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

/* Writes bytes to dir/name, through zlib when gz. */
static void write_file(const char *name, const unsigned char *b, size_t n, bool gz)
{
    char p[256];
    path_of(p, sizeof p, name);
    if (gz) {
        gzFile f = gzopen(p, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, b, (unsigned)n), (int)n);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(p, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(b, 1, n, f), n);
        fclose(f);
    }
}

static void be32(unsigned char *b, uint32_t v)
{
    b[0] = (unsigned char)(v >> 24);
    b[1] = (unsigned char)(v >> 16);
    b[2] = (unsigned char)(v >> 8);
    b[3] = (unsigned char)v;
}

/* An IDX images file of n items of rows x cols, pixel (i, k) = 10 i + k; returns its size. */
static size_t make_images(unsigned char *b, int n, int rows, int cols)
{
    b[0] = 0;
    b[1] = 0;
    b[2] = 0x08;
    b[3] = 3;
    be32(b + 4, (uint32_t)n);
    be32(b + 8, (uint32_t)rows);
    be32(b + 12, (uint32_t)cols);
    size_t o = 16;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < rows * cols; k++)
            b[o++] = (unsigned char)(10 * i + k);
    return o;
}

/* An IDX labels file of n labels, label i = (i * 3) % 10. */
static size_t make_labels(unsigned char *b, int n)
{
    b[0] = 0;
    b[1] = 0;
    b[2] = 0x08;
    b[3] = 1;
    be32(b + 4, (uint32_t)n);
    for (int i = 0; i < n; i++)
        b[8 + i] = (unsigned char)(i * 3 % 10);
    return 8 + (size_t)n;
}

static const struct dtx_data_shape shape_1x2x2 = {
    .input = {3, {1, 2, 2}}, .classes = 10, .label_rows = 1};

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/dt_test_data_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Loads dir/images, dir/labels; returns the status, err filled. */
static int load(const char *images, const char *labels, const struct dtx_data_shape *want,
                struct dtx_range range, struct dtx_data **d, struct dt_error *err)
{
    char pi[256], pl[256];
    path_of(pi, sizeof pi, images);
    path_of(pl, sizeof pl, labels);
    return dtx_idx_load(pi, pl, want, range, d, err);
}

static void check_good(const char *images, const char *labels)
{
    struct dtx_data *d;
    struct dt_error err;
    assert_int_equal(load(images, labels, &shape_1x2x2, (struct dtx_range){0, -1}, &d, &err),
                     DT_OK);
    assert_int_equal(d->n, 3);
    assert_int_equal(d->total, 3);
    assert_int_equal(d->sample_floats, 4);
    /* pixel (i, k) was written as 10 i + k; normalised by 255 */
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 4; k++)
            assert_float_equal(d->x[i * 4 + k], (10 * i + k) / 255.0f, 1e-7);
        assert_int_equal(d->y[i], i * 3 % 10);
    }
    dtx_data_destroy(d);
}

/* Ensure that a plain IDX pair loads with pixels scaled to [0, 1] and the labels as written. */
static void test_idx_plain(void **state)
{
    (void)state;
    unsigned char b[256];
    write_file("a-img", b, make_images(b, 3, 2, 2), false);
    write_file("a-lab", b, make_labels(b, 3), false);
    check_good("a-img", "a-lab");
}

/* Ensure that gzip-compressed IDX files load to the same values. */
static void test_idx_gzip(void **state)
{
    (void)state;
    unsigned char b[256];
    write_file("b-img.gz", b, make_images(b, 3, 2, 2), true);
    write_file("b-lab.gz", b, make_labels(b, 3), true);
    check_good("b-img.gz", "b-lab.gz");
}

/* Ensure that a shard holds exactly its items: items [1, 3) of 3, from a gzip file (seek). */
static void test_idx_shard(void **state)
{
    (void)state;
    unsigned char b[256];
    write_file("c-img.gz", b, make_images(b, 3, 2, 2), true);
    write_file("c-lab", b, make_labels(b, 3), false);
    struct dtx_data *d;
    struct dt_error err;
    assert_int_equal(load("c-img.gz", "c-lab", &shape_1x2x2, (struct dtx_range){1, 2}, &d, &err),
                     DT_OK);
    assert_int_equal(d->first, 1);
    assert_int_equal(d->n, 2);
    assert_int_equal(d->total, 3);
    assert_float_equal(d->x[0], 10 / 255.0f, 1e-7); /* item 1, pixel 0 = 10 */
    assert_int_equal(d->y[1], 6);                   /* label 2 = 2 * 3 % 10 */
    dtx_data_destroy(d);
}

/* Expects DT_EINPUT naming `file` and mentioning `words`. */
static void expect_error(const char *images, const char *labels,
                         const struct dtx_data_shape *want, const char *file, const char *words)
{
    struct dtx_data *d = (struct dtx_data *)&d;
    struct dt_error err;
    dt_error_clear(&err);
    assert_int_equal(load(images, labels, want, (struct dtx_range){0, -1}, &d, &err), DT_EINPUT);
    assert_null(d);
    char want_file[256];
    path_of(want_file, sizeof want_file, file);
    char text[2048];
    dt_error_format(&err, text, sizeof text);
    if (!strstr(text, want_file) || !strstr(text, words))
        fail_msg("message '%s' should name %s and say '%s'", text, want_file, words);
}

/* Ensure that a file whose magic is not IDX's is refused, naming the file. */
static void test_idx_bad_magic(void **state)
{
    (void)state;
    unsigned char b[256];
    size_t n = make_images(b, 3, 2, 2);
    b[0] = 0x1f; /* what a mis-named text or other file would start with */
    write_file("d-img", b, n, false);
    write_file("d-lab", b, make_labels(b, 3), false);
    expect_error("d-img", "d-lab", &shape_1x2x2, "d-img", "magic");
}

/* Ensure that an element type other than unsigned byte is refused. */
static void test_idx_bad_type(void **state)
{
    (void)state;
    unsigned char b[256];
    size_t n = make_images(b, 3, 2, 2);
    b[2] = 0x0D; /* float, valid IDX but not what MNIST uses */
    write_file("e-img", b, n, false);
    write_file("e-lab", b, make_labels(b, 3), false);
    expect_error("e-img", "e-lab", &shape_1x2x2, "e-img", "type");
}

/* Ensure that a plain file shorter than its header announces is refused. */
static void test_idx_truncated_plain(void **state)
{
    (void)state;
    unsigned char b[256];
    size_t n = make_images(b, 3, 2, 2);
    write_file("f-img", b, n - 3, false); /* the last item loses 3 of its 4 bytes */
    write_file("f-lab", b, make_labels(b, 3), false);
    expect_error("f-img", "f-lab", &shape_1x2x2, "f-img", "truncated");
}

/* Ensure that a truncated gzip stream is refused too (detected while reading). */
static void test_idx_truncated_gzip(void **state)
{
    (void)state;
    unsigned char b[256];
    size_t n = make_images(b, 3, 2, 2);
    write_file("g-img.gz", b, n - 5, true);
    write_file("g-lab", b, make_labels(b, 3), false);
    expect_error("g-img.gz", "g-lab", &shape_1x2x2, "g-img.gz", "truncated");
}

/* Ensure that a header cut short is refused. */
static void test_idx_truncated_header(void **state)
{
    (void)state;
    unsigned char b[256];
    make_images(b, 3, 2, 2);
    write_file("h-img", b, 10, false); /* magic + count + half a dimension */
    write_file("h-lab", b, make_labels(b, 3), false);
    expect_error("h-img", "h-lab", &shape_1x2x2, "h-img", "truncated");
}

/* Ensure that bytes after the announced items are refused (a wrong count in the header). */
static void test_idx_trailing(void **state)
{
    (void)state;
    unsigned char b[256];
    size_t n = make_images(b, 3, 2, 2);
    write_file("i-img.gz", b, n + 4, true); /* one more item than the header says */
    write_file("i-lab", b, make_labels(b, 3), false);
    expect_error("i-img.gz", "i-lab", &shape_1x2x2, "i-img.gz", "after the 3 items");
}

/* Ensure that a labels file with another count than the images file is refused, naming it. */
static void test_idx_count_mismatch(void **state)
{
    (void)state;
    unsigned char b[256];
    write_file("j-img", b, make_images(b, 3, 2, 2), false);
    write_file("j-lab", b, make_labels(b, 2), false);
    expect_error("j-img", "j-lab", &shape_1x2x2, "j-lab", "holds 2 labels");
}

/* Ensure that images of another size than the model's input are refused, naming the file. */
static void test_idx_dims_mismatch(void **state)
{
    (void)state;
    unsigned char b[256];
    write_file("k-img", b, make_images(b, 3, 2, 2), false);
    write_file("k-lab", b, make_labels(b, 3), false);
    const struct dtx_data_shape want = {.input = {3, {1, 28, 28}}, .classes = 10,
                                        .label_rows = 1};
    expect_error("k-img", "k-lab", &want, "k-img", "2x2");
}

/* Ensure that a label not below the model's classes is refused, naming the labels file. */
static void test_idx_label_range(void **state)
{
    (void)state;
    unsigned char b[256];
    write_file("l-img", b, make_images(b, 3, 2, 2), false);
    write_file("l-lab", b, make_labels(b, 3), false);
    const struct dtx_data_shape want = {.input = {3, {1, 2, 2}}, .classes = 5, .label_rows = 1};
    /* labels are 0, 3, 6: the third is not below 5 */
    expect_error("l-img", "l-lab", &want, "l-lab", "label 6");
}

/* Ensure that a flat model input of the same size accepts 2-D images. */
static void test_idx_flat_input(void **state)
{
    (void)state;
    unsigned char b[256];
    write_file("m-img", b, make_images(b, 3, 2, 2), false);
    write_file("m-lab", b, make_labels(b, 3), false);
    const struct dtx_data_shape want = {.input = {1, {4}}, .classes = 10, .label_rows = 1};
    struct dtx_data *d;
    struct dt_error err;
    assert_int_equal(load("m-img", "m-lab", &want, (struct dtx_range){0, -1}, &d, &err), DT_OK);
    assert_float_equal(d->x[7], 13 / 255.0f, 1e-7); /* item 1 pixel 3 */
    dtx_data_destroy(d);
}

/* Ensure that a directory with MNIST's file names is found (the .gz variant preferred) and
 * that a directory without data is refused with its name. */
static void test_load_dir(void **state)
{
    (void)state;
    char sub[128];
    snprintf(sub, sizeof sub, "%s/mnist", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    unsigned char b[256];
    write_file("mnist/train-images-idx3-ubyte.gz", b, make_images(b, 3, 2, 2), true);
    write_file("mnist/train-labels-idx1-ubyte.gz", b, make_labels(b, 3), true);
    write_file("mnist/t10k-images-idx3-ubyte", b, make_images(b, 2, 2, 2), false);
    write_file("mnist/t10k-labels-idx1-ubyte", b, make_labels(b, 2), false);
    struct dtx_data *d;
    struct dt_error err;
    assert_int_equal(dtx_data_load_dir(sub, true, &shape_1x2x2, false, 1, 2, &d, &err), DT_OK);
    /* shard 1 of 2 of 3 items: dt_chunk gives rank 0 two items, rank 1 one (item 2) */
    assert_int_equal(d->first, 2);
    assert_int_equal(d->n, 1);
    assert_int_equal(d->y[0], 6);
    dtx_data_destroy(d);
    assert_int_equal(dtx_data_load_dir(sub, false, &shape_1x2x2, true, 0, 2, &d, &err), DT_OK);
    assert_int_equal(d->n, 2);
    dtx_data_destroy(d);
    char empty[128];
    snprintf(empty, sizeof empty, "%s/empty", dir);
    assert_int_equal(mkdir(empty, 0700), 0);
    assert_int_equal(dtx_data_load_dir(empty, true, &shape_1x2x2, false, 0, 1, &d, &err),
                     DT_EINPUT);
    assert_string_equal(err.file, empty);
}

/* Ensure that CIFAR-10 records load (label byte, then CHW pixels) and that a file whose size
 * is not a whole number of 3073-byte records is refused. */
static void test_cifar(void **state)
{
    (void)state;
    static unsigned char b[2 * 3073];
    for (int r = 0; r < 2; r++) {
        b[r * 3073] = (unsigned char)(7 + r);
        for (int k = 0; k < 3072; k++)
            b[r * 3073 + 1 + k] = (unsigned char)((k + r) % 256);
    }
    write_file("cifar.bin", b, sizeof b, false);
    write_file("cifar-short.bin", b, sizeof b - 1, false);
    const struct dtx_data_shape want = {.input = {3, {3, 32, 32}}, .classes = 10,
                                        .label_rows = 1};
    char p[256];
    path_of(p, sizeof p, "cifar.bin");
    const char *paths[] = {p};
    struct dtx_data *d;
    struct dt_error err;
    assert_int_equal(dtx_cifar_load(paths, 1, &want, (struct dtx_range){1, 1}, &d, &err), DT_OK);
    assert_int_equal(d->total, 2);
    assert_int_equal(d->y[0], 8);
    assert_float_equal(d->x[1024], ((1024 + 1) % 256) / 255.0f, 1e-7); /* green plane, pixel 0 */
    dtx_data_destroy(d);
    path_of(p, sizeof p, "cifar-short.bin");
    assert_int_equal(dtx_cifar_load(paths, 1, &want, (struct dtx_range){0, -1}, &d, &err),
                     DT_EINPUT);
    assert_string_equal(err.file, p);
    const struct dtx_data_shape mnist = {.input = {3, {1, 28, 28}}, .classes = 10,
                                         .label_rows = 1};
    assert_int_equal(dtx_cifar_load(paths, 1, &mnist, (struct dtx_range){0, -1}, &d, &err),
                     DT_EINPUT);
}

/* Ensure that synthetic sample i is the same whichever range it is generated in, that pixels
 * lie in [0, 1] and that every label is a class. */
static void test_synthetic(void **state)
{
    (void)state;
    const struct dtx_data_shape want = {.input = {3, {1, 4, 4}}, .classes = 3, .label_rows = 1};
    struct dtx_data *all, *part;
    struct dt_error err;
    assert_int_equal(dtx_synthetic(&want, 50, 5, 9, (struct dtx_range){0, -1}, &all, &err),
                     DT_OK);
    assert_int_equal(dtx_synthetic(&want, 50, 5, 9, (struct dtx_range){20, 10}, &part, &err),
                     DT_OK);
    assert_memory_equal(part->x, all->x + 20 * 16, 10 * 16 * sizeof(float));
    assert_memory_equal(part->y, all->y + 20, 10 * sizeof(int));
    int seen[3] = {0, 0, 0};
    for (long i = 0; i < 50; i++) {
        assert_in_range(all->y[i], 0, 2);
        seen[all->y[i]]++;
        for (int k = 0; k < 16; k++)
            assert_true(all->x[i * 16 + k] >= 0 && all->x[i * 16 + k] <= 1);
    }
    /* the teacher is not constant: more than one class occurs in 50 samples */
    assert_true((seen[0] > 0) + (seen[1] > 0) + (seen[2] > 0) >= 2);
    dtx_data_destroy(all);
    dtx_data_destroy(part);
}

/* Ensure the whole-set sampler's promise: rank 0 and rank 1 with batch 2 together see, in each
 * iteration, exactly the 4 samples that 1 rank with batch 4 sees. */
static void test_sampler_whole_equivalence(void **state)
{
    (void)state;
    const struct dtx_data_shape want = {.input = {1, {2}}, .classes = 2, .label_rows = 1};
    struct dtx_data *d;
    struct dt_error err;
    assert_int_equal(dtx_synthetic(&want, 18, 1, 1, (struct dtx_range){0, -1}, &d, &err), DT_OK);
    struct dtx_sampler one, r0, r1;
    int b1[] = {4}, b2[] = {2, 2};
    assert_int_equal(dtx_sampler_init(&one, d, true, 0, 1, b1, NULL, &err), DT_OK);
    assert_int_equal(dtx_sampler_init(&r0, d, true, 0, 2, b2, NULL, &err), DT_OK);
    assert_int_equal(dtx_sampler_init(&r1, d, true, 1, 2, b2, NULL, &err), DT_OK);
    assert_int_equal(one.iters, 4); /* 18 samples hold 4 full batches of 4 */
    assert_int_equal(r0.iters, 4);
    for (int e = 0; e < 2; e++) {
        dtx_sampler_epoch(&one, 3, e, true);
        dtx_sampler_epoch(&r0, 3, e, true);
        dtx_sampler_epoch(&r1, 3, e, true);
        for (long it = 0; it < 4; it++)
            for (int k = 0; k < 2; k++) {
                assert_int_equal(dtx_sampler_index(&r0, it, k), dtx_sampler_index(&one, it, k));
                assert_int_equal(dtx_sampler_index(&r1, it, k),
                                 dtx_sampler_index(&one, it, 2 + k));
            }
    }
    dtx_sampler_free(&one);
    dtx_sampler_free(&r0);
    dtx_sampler_free(&r1);
    dtx_data_destroy(d);
}

/* Ensure that sharded sampling runs the same number of iterations on every rank (the smallest
 * shard's) and visits each local sample at most once per epoch. */
static void test_sampler_shard(void **state)
{
    (void)state;
    const struct dtx_data_shape want = {.input = {1, {2}}, .classes = 2, .label_rows = 1};
    struct dtx_data *d;
    struct dt_error err;
    /* rank 1 of 2 holds samples [11, 21) of 21 (dt_chunk: 11 and 10) */
    assert_int_equal(dtx_synthetic(&want, 21, 1, 1, (struct dtx_range){11, 10}, &d, &err),
                     DT_OK);
    int batches[] = {3, 3};
    long shards[] = {11, 10};
    struct dtx_sampler s;
    assert_int_equal(dtx_sampler_init(&s, d, false, 1, 2, batches, shards, &err), DT_OK);
    assert_int_equal(s.iters, 3); /* min(11 / 3, 10 / 3) = 3 */
    dtx_sampler_epoch(&s, 1, 0, true);
    int seen[10] = {0};
    for (long it = 0; it < s.iters; it++)
        for (int k = 0; k < 3; k++) {
            long i = dtx_sampler_index(&s, it, k);
            assert_in_range(i, 0, 9);
            assert_int_equal(seen[i]++, 0);
        }
    dtx_sampler_free(&s);
    dtx_data_destroy(d);
}

/* Ensure that a set too small for one global batch is refused. */
static void test_sampler_too_small(void **state)
{
    (void)state;
    const struct dtx_data_shape want = {.input = {1, {2}}, .classes = 2, .label_rows = 1};
    struct dtx_data *d;
    struct dt_error err;
    assert_int_equal(dtx_synthetic(&want, 5, 1, 1, (struct dtx_range){0, -1}, &d, &err), DT_OK);
    int b[] = {8};
    struct dtx_sampler s;
    assert_int_equal(dtx_sampler_init(&s, d, true, 0, 1, b, NULL, &err), DT_EINPUT);
    dtx_data_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_plain),
        cmocka_unit_test(test_idx_gzip),
        cmocka_unit_test(test_idx_shard),
        cmocka_unit_test(test_idx_bad_magic),
        cmocka_unit_test(test_idx_bad_type),
        cmocka_unit_test(test_idx_truncated_plain),
        cmocka_unit_test(test_idx_truncated_gzip),
        cmocka_unit_test(test_idx_truncated_header),
        cmocka_unit_test(test_idx_trailing),
        cmocka_unit_test(test_idx_count_mismatch),
        cmocka_unit_test(test_idx_dims_mismatch),
        cmocka_unit_test(test_idx_label_range),
        cmocka_unit_test(test_idx_flat_input),
        cmocka_unit_test(test_load_dir),
        cmocka_unit_test(test_cifar),
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_sampler_whole_equivalence),
        cmocka_unit_test(test_sampler_shard),
        cmocka_unit_test(test_sampler_too_small),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

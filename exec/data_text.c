/* Language-model data (models with loss: language_model): sequences of T + 1 tokens, the
 * first T the input and the last T the targets, each target the token after its input.
 * Two sources: a synthetic Markov chain (learnable, so that a loss can fall), and a text
 * file read as bytes (one token per byte). */
#include "data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cpu/rng.h"
#include "dt/collective.h"

/* Text files larger than this are refused (a smoke test, not a corpus reader). */
#define MAX_TEXT_BYTES (256L << 20)
/* Percent of a text file's bytes that make the training set; the rest is the test set. */
#define TRAIN_PERCENT 90

/* Copies sequence k (tokens seq[0..T]) into sample k of d: inputs and next-token targets. */
static void put_sequence(struct dtx_data *d, long k, const int *seq, long T)
{
    for (long t = 0; t < T; t++) {
        d->x[k * T + t] = (float)seq[t];
        d->y[k * T + t] = seq[t + 1];
    }
}

static int check_shape(const struct dtx_data_shape *want, const char *what,
                       struct dt_error *err)
{
    if (want->input.rank != 1 || want->vocab < 2 || want->label_rows != want->input.d[0] ||
        want->classes < want->vocab)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "%s: the model is not a language model over its token input", what);
    return DT_OK;
}

/* The chain: from token a the next is succ[a] with probability 3/4, else uniform. Its
 * entropy, about 0.25 ln V + 0.56 nats, is what a model that learned it reaches. */
int dtx_lm_synthetic(const struct dtx_data_shape *want, long total, uint64_t seed,
                     uint64_t teacher_seed, struct dtx_range range, struct dtx_data **out,
                     struct dt_error *err)
{
    *out = NULL;
    char what[64];
    snprintf(what, sizeof what, "synthetic tokens (%ld sequences)", total);
    int rc = check_shape(want, what, err);
    if (rc || (rc = dtx_data_alloc(want, total, range, what, out, err)))
        return rc;
    struct dtx_data *d = *out;
    const long T = want->input.d[0], V = want->vocab;
    int *succ = malloc((size_t)V * sizeof *succ), *seq = malloc((size_t)(T + 1) * sizeof *seq);
    if (!succ || !seq) {
        free(succ);
        free(seq);
        dtx_data_destroy(d);
        *out = NULL;
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    struct dtk_rng rng;
    dtk_rng_seed(&rng, teacher_seed);
    for (long a = 0; a < V; a++)
        succ[a] = (int)dtk_rng_below(&rng, (uint64_t)V);
    for (long k = 0; k < d->n; k++) {
        dtk_rng_seed(&rng, seed * 0x9E3779B97F4A7C15ull + (uint64_t)(d->first + k));
        seq[0] = (int)dtk_rng_below(&rng, (uint64_t)V);
        for (long t = 1; t <= T; t++)
            seq[t] = dtk_rng_uniform(&rng) < 0.75f ? succ[seq[t - 1]]
                                                   : (int)dtk_rng_below(&rng, (uint64_t)V);
        put_sequence(d, k, seq, T);
    }
    free(succ);
    free(seq);
    return DT_OK;
}

/* Reads the whole file; fails with the path on any error or when it is too large. */
static int read_text(const char *path, unsigned char **buf, long *len, struct dt_error *err)
{
    struct stat st;
    *buf = NULL;
    if (stat(path, &st) != 0)
        return dt_fail(err, DT_EINPUT, path, 0, 0, "%s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return dt_fail(err, DT_EINPUT, path, 0, 0,
                       "not a regular file (a language model reads a text file as bytes)");
    if (st.st_size > MAX_TEXT_BYTES)
        return dt_fail(err, DT_EINPUT, path, 0, 0, "%lld bytes: more than the %ld read as text",
                       (long long)st.st_size, MAX_TEXT_BYTES);
    FILE *f = fopen(path, "rb");
    if (!f)
        return dt_fail(err, DT_EINPUT, path, 0, 0, "%s", strerror(errno));
    *buf = malloc((size_t)st.st_size + 1);
    long n = *buf ? (long)fread(*buf, 1, (size_t)st.st_size, f) : 0;
    bool failed = !*buf || ferror(f) || n != (long)st.st_size;
    fclose(f);
    if (failed) {
        free(*buf);
        *buf = NULL;
        return dt_fail(err, DT_EINPUT, path, 0, 0, "could not read its %lld bytes",
                       (long long)st.st_size);
    }
    *len = n;
    return DT_OK;
}

/* Every byte must be a token id of the model: the first that is not is reported at its line
 * and column. */
static int check_bytes(const char *path, const unsigned char *b, long len, long vocab,
                       struct dt_error *err)
{
    int line = 1, col = 1;
    for (long i = 0; i < len; i++) {
        if (b[i] >= vocab)
            return dt_fail(err, DT_EINPUT, path, line, col,
                           "byte 0x%02x (offset %ld) is not a token of the model's vocab %ld "
                           "(a byte-level model has vocab 256)",
                           b[i], i, vocab);
        if (b[i] == '\n')
            line++, col = 1;
        else
            col++;
    }
    return DT_OK;
}

int dtx_text_load(const char *path, bool train, const struct dtx_data_shape *want, bool whole,
                  int shard_index, int shard_count, struct dtx_data **out, struct dt_error *err)
{
    *out = NULL;
    char what[1100];
    snprintf(what, sizeof what, "text %s (%s)", train ? "train" : "test", path);
    unsigned char *b;
    long len = 0;
    int rc = check_shape(want, what, err);
    if (rc || (rc = read_text(path, &b, &len, err)))
        return rc;
    if ((rc = check_bytes(path, b, len, want->vocab, err))) {
        free(b);
        return rc;
    }
    const long T = want->input.d[0];
    long split = len * TRAIN_PERCENT / 100;
    long first = train ? 0 : split, part = train ? split : len - split;
    long total = part > T ? (part - 1) / T : 0; /* windows of T + 1 starting T apart */
    if (total < 1) {
        free(b);
        return dt_fail(err, DT_EINPUT, path, 0, 0,
                       "%ld bytes hold no %s sequence of %ld tokens (the first %d%% of the "
                       "file trains, the rest tests: it needs about %ld bytes)",
                       len, train ? "training" : "test", T + 1, TRAIN_PERCENT,
                       (T + 1) * 100 / (100 - TRAIN_PERCENT));
    }
    struct dtx_range r = {0, -1};
    if (!whole && shard_count > 1)
        dt_chunk(total, shard_count, shard_index, &r.first, &r.count);
    if ((rc = dtx_data_alloc(want, total, r, what, out, err))) {
        free(b);
        return rc;
    }
    struct dtx_data *d = *out;
    int *seq = malloc((size_t)(T + 1) * sizeof *seq);
    if (!seq) {
        free(b);
        dtx_data_destroy(d);
        *out = NULL;
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    for (long k = 0; k < d->n; k++) {
        const unsigned char *s = b + first + (d->first + k) * T;
        for (long t = 0; t <= T; t++)
            seq[t] = s[t];
        put_sequence(d, k, seq, T);
    }
    d->bytes_read = (double)len;
    free(seq);
    free(b);
    return DT_OK;
}

/* Training and test data for dtexec: IDX files (MNIST, Fashion-MNIST; plain or gzip),
 * CIFAR-10's binary batches, or synthetic samples with a learnable teacher.
 *
 * A dataset holds samples [first, first + n) of a set of `total` samples: either all of them
 * (every rank reads the whole file) or one rank's shard. Pixels are normalised to [0, 1] and
 * stored as floats in the model's input layout (C,H,W or flat), labels as class indices,
 * `label_rows` per sample (1 for a classifier; one per token or pixel otherwise).
 *
 * Every reader checks what it reads (magic numbers, dimensions, counts, truncation, labels in
 * range, agreement with the model's input) and fails with DT_EINPUT and the file's name.
 */
#ifndef DTX_DATA_H
#define DTX_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "dt/error.h"
#include "dt/model.h"

struct dtx_data {
    long total;          /* samples in the whole set */
    long first;          /* global index of x[0] */
    long n;              /* samples held */
    long sample_floats;  /* floats per sample */
    int label_rows;      /* labels per sample */
    long classes;
    float *x;            /* n x sample_floats */
    int *y;              /* n x label_rows */
    double bytes_read;   /* bytes read from files (compressed size for .gz: what was decoded) */
    char what[1100];      /* "fashion-mnist train (/usr/share/...)": for messages and records */
};

/* What the data must fit: the model's input and output. */
struct dtx_data_shape {
    struct dt_shape input;  /* the model's input shape */
    long classes;
    int label_rows;         /* labels per sample (last output floats / classes) */
    long vocab;             /* token models: ids < vocab; 0 otherwise */
};

/* Which part of the set to read: samples [first, first + count) of total; count < 0 = all. */
struct dtx_range {
    long first, count;
};

/* Reads an IDX pair (images: unsigned bytes, n x d1 x ... ; labels: unsigned bytes, n).
 * A ".gz" file is read through zlib; a plain file is read as is. The image dimensions must
 * hold exactly the model's input (28x28 images fit (1, 28, 28), (28, 28, 1) or (784)). */
int dtx_idx_load(const char *images_path, const char *labels_path,
                 const struct dtx_data_shape *want, struct dtx_range range,
                 struct dtx_data **out, struct dt_error *err);

/* Reads the header of an IDX file: number of items and the dimensions after the first
 * (dims[0..*ndims-1]). */
int dtx_idx_header(const char *path, long *items, int *ndims, long dims[4], struct dt_error *err);

/* CIFAR-10 binary version: each record is 1 label byte then 3072 bytes (3 x 32 x 32, CHW).
 * paths: the batch files in order (data_batch_1..5.bin for training, test_batch.bin). */
int dtx_cifar_load(const char *const *paths, int n_paths, const struct dtx_data_shape *want,
                   struct dtx_range range, struct dtx_data **out, struct dt_error *err);

/* Synthetic samples: inputs uniform in [0, 1) (token ids uniform below vocab), labels the arg
 * max of a fixed random linear teacher (seeded by teacher_seed, so the train and test sets
 * share it) applied to the centred input: a linearly separable, learnable task. Sample i is
 * the same whatever range is asked for. */
int dtx_synthetic(const struct dtx_data_shape *want, long total, uint64_t seed,
                  uint64_t teacher_seed, struct dtx_range range, struct dtx_data **out,
                  struct dt_error *err);

/* A directory's training or test set. Recognises IDX files (train-images-idx3-ubyte[.gz],
 * train-labels-idx1-ubyte[.gz], t10k-...) and CIFAR-10 (data_batch_N.bin, test_batch.bin, also
 * under cifar-10-batches-bin/). With shard_count > 1 and !whole, reads shard shard_index of
 * shard_count equal parts (dt_chunk). */
int dtx_data_load_dir(const char *dir, bool train, const struct dtx_data_shape *want, bool whole,
                      int shard_index, int shard_count, struct dtx_data **out,
                      struct dt_error *err);

void dtx_data_destroy(struct dtx_data *d);
/* An empty set of `total` samples holding [range.first, range.first + range.count) of them
 * (count < 0: to the end), shaped by want; `what` names it in messages. For the readers. */
int dtx_data_alloc(const struct dtx_data_shape *want, long total, struct dtx_range range,
                   const char *what, struct dtx_data **out, struct dt_error *err);

/* ---- language-model data (data_text.c): models with loss: language_model ----
 * A sample is T token ids (want->input is (T)) and its labels the T tokens that follow each,
 * from sequences of T + 1 tokens.
 * dtx_lm_synthetic: sequences of a fixed random Markov chain over the vocabulary (seeded by
 * teacher_seed; from token a the next is one fixed successor with probability 3/4, else
 * uniform), so that a model can learn it; sequence i is the same whatever range is asked.
 * dtx_text_load: a text file read as bytes, one token per byte (vocab 256 takes any file),
 * cut into sequences of T + 1 bytes starting T apart; the first 90% of the file is the
 * training set (train), the rest the test set. A byte outside the vocab is an error at its
 * line and column; so is a file too short for one sequence of each set. With shard_count > 1
 * and !whole, shard shard_index of the sequences. */
int dtx_lm_synthetic(const struct dtx_data_shape *want, long total, uint64_t seed,
                     uint64_t teacher_seed, struct dtx_range range, struct dtx_data **out,
                     struct dt_error *err);
int dtx_text_load(const char *path, bool train, const struct dtx_data_shape *want, bool whole,
                  int shard_index, int shard_count, struct dtx_data **out, struct dt_error *err);

/* Order of samples for one epoch. With the whole set held, one global permutation (the same on
 * every rank, from seed and epoch) is cut into global batches and rank r takes its part of each
 * (dt_chunk of the global batch): p ranks with batch B see exactly what 1 rank with batch pB
 * sees. With a shard, each rank permutes its own samples. */
struct dtx_sampler {
    const struct dtx_data *data;
    bool whole;
    int rank, n_ranks;
    int local_batch, global_batch;
    long batch_offset;   /* whole: first row of this rank's part of a global batch */
    long iters;          /* iterations per epoch (the same on every rank) */
    long *order;         /* whole: total entries; shard: n */
    long n_order;
};

/* shard_sizes[r]: samples held by rank r (only read when !whole); local_batches[r]: rank r's
 * batch. Returns DT_EINPUT when an epoch would hold no full batch. */
int dtx_sampler_init(struct dtx_sampler *s, const struct dtx_data *data, bool whole, int rank,
                     int n_ranks, const int *local_batches, const long *shard_sizes,
                     struct dt_error *err);
void dtx_sampler_free(struct dtx_sampler *s);
/* Shuffles for epoch (0-based) from seed; shuffle = false keeps file order. */
void dtx_sampler_epoch(struct dtx_sampler *s, uint64_t seed, int epoch, bool shuffle);
/* Index (into data->x / data->y) of row k of this rank's batch of iteration it. */
long dtx_sampler_index(const struct dtx_sampler *s, long it, int k);

/* Copies this rank's batch of iteration it into x (local_batch x sample_floats) and y. */
void dtx_sampler_gather(const struct dtx_sampler *s, long it, float *x, int *y);
/* Rows [row0, row0 + rows) of that batch into x and y (either may be NULL: not loaded). */
void dtx_sampler_gather_rows(const struct dtx_sampler *s, long it, int row0, int rows, float *x,
                             int *y);

#endif

/* What the IDX and CIFAR-10 harnesses share: the model shapes they read data for, gzip, and
 * the checks of a dataset that loaded. */
#ifndef DT_FUZZ_DATA_H
#define DT_FUZZ_DATA_H

#include "fuzz.h"

#include "data.h"

/* The model input picked by the low bits of `pick`: small shapes of each rank, MNIST's and
 * CIFAR-10's. */
struct dt_shape fuzz_data_shape(unsigned pick);

/* The bytes compressed as a gzip file (malloc'ed; *out_size set). */
uint8_t *fuzz_gzip(const uint8_t *data, size_t size, size_t *out_size);

/* A dataset that loaded holds samples [first, total) of `total`, pixels in [0, 1] and labels
 * below the classes. */
void fuzz_check_data(const struct dtx_data *d, const struct dtx_data_shape *want, long total,
                     long first);

/* Two files from one input: data[0..1] is the little-endian length of the first, whose
 * bytes follow; the rest is the second. *cut is that length, clamped to what follows. */
void fuzz_split(const uint8_t *data, size_t size, size_t *cut);

#endif

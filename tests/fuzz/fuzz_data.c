/* Shared by the IDX and CIFAR-10 harnesses. */
#include "fuzz_data.h"

#include <stdlib.h>
#include <zlib.h>

struct dt_shape fuzz_data_shape(unsigned pick)
{
    static const struct dt_shape shapes[8] = {
        {1, {4, 0, 0}},     {2, {2, 3, 0}},   {3, {1, 2, 2}},    {3, {3, 2, 2}},
        {3, {2, 1, 3}},     {1, {784, 0, 0}}, {3, {1, 28, 28}},  {3, {3, 32, 32}}};
    return shapes[pick % 8];
}

uint8_t *fuzz_gzip(const uint8_t *data, size_t size, size_t *out_size)
{
    z_stream z = {0};
    /* 15 window bits + 16: a gzip header and trailer, as gzip(1) writes */
    FUZZ_CHECK(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK,
               "deflateInit2 failed");
    size_t cap = deflateBound(&z, (uLong)size) + 64;
    uint8_t *out = malloc(cap);
    FUZZ_CHECK(out, "out of memory");
    z.next_in = (Bytef *)(uintptr_t)data;
    z.avail_in = (uInt)size;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    FUZZ_CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate failed");
    *out_size = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

void fuzz_check_data(const struct dtx_data *d, const struct dtx_data_shape *want, long total,
                     long first)
{
    FUZZ_CHECK(d->total == total && d->first == first && d->n == total - first,
               "samples %ld + %ld of %ld read, expected %ld.. of %ld", d->first, d->n, d->total,
               first, total);
    FUZZ_CHECK(d->sample_floats == dt_shape_size(&want->input) && d->label_rows == 1,
               "%ld floats and %d labels per sample", d->sample_floats, d->label_rows);
    for (long i = 0; i < d->n * d->sample_floats; i++)
        FUZZ_CHECK(d->x[i] >= 0 && d->x[i] <= 1, "pixel %ld is %g", i, d->x[i]);
    for (long i = 0; i < d->n; i++)
        FUZZ_CHECK(d->y[i] >= 0 && d->y[i] < want->classes, "label %ld is %d", i, d->y[i]);
    FUZZ_CHECK(d->what[0], "no description");
}

void fuzz_split(const uint8_t *data, size_t size, size_t *cut)
{
    size_t n = size >= 2 ? (size_t)data[0] | (size_t)data[1] << 8 : 0;
    size_t left = size >= 2 ? size - 2 : 0;
    *cut = n < left ? n : left;
}

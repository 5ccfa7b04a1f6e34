/* Fuzzes dtexec's IDX reader (exec/data.c: MNIST and Fashion-MNIST files, plain or gzip).
 * Input: an options byte, then an images file and a labels file (fuzz_split). Options: bits
 * 0-2 the model's input shape, bit 3 gzip the images, bit 4 gzip the labels, bit 5 read the
 * second half only (a rank's shard), bit 6 two classes instead of ten, bit 7 a model that
 * wants two labels per sample (refused). Accepted: fuzz_check_data. */
#include "fuzz_data.h"

#include <stdlib.h>
#include <string.h>

static const char *write_part(const char *name, const uint8_t *data, size_t size, bool gz)
{
    if (!gz)
        return fuzz_write_file(name, data, size);
    size_t n;
    uint8_t *z = fuzz_gzip(data, size, &n);
    const char *path = fuzz_write_file(name, z, n);
    free(z);
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    unsigned opt = data[0];
    size_t cut;
    fuzz_split(data + 1, size - 1, &cut);
    const uint8_t *images = data + 3, *labels = images + cut;
    size_t labels_size = size - 3 - cut;
    const char *ipath = write_part("images-idx", images, cut, opt & 8);
    const char *lpath = write_part("labels-idx", labels, labels_size, opt & 16);
    struct dtx_data_shape want = {.input = fuzz_data_shape(opt), .classes = opt & 64 ? 2 : 10,
                                  .label_rows = opt & 128 ? 2 : 1};
    struct dtx_range range = {0, -1};
    long items = 0, dims[4];
    int ndims;
    struct dt_error err;
    dt_error_clear(&err);
    if (dtx_idx_header(ipath, &items, &ndims, dims, &err) == DT_OK && (opt & 32))
        range.first = items / 2;
    struct dtx_data *d = NULL;
    dt_error_clear(&err);
    int rc = dtx_idx_load(ipath, lpath, &want, range, &d, &err);
    if (rc) {
        FUZZ_CHECK(!d, "a failed load returned data");
        FUZZ_CHECK(rc == DT_EINPUT && err.msg[0] &&
                       (strcmp(err.file, ipath) == 0 || strcmp(err.file, lpath) == 0),
                   "status %d, file '%s': %s", rc, err.file, err.msg);
        return 0;
    }
    fuzz_check_data(d, &want, items, range.first);
    dtx_data_destroy(d);
    return 0;
}

/* Fuzzes dtexec's CIFAR-10 reader (exec/data.c: binary batches of 3073-byte records).
 * Input: an options byte, then one batch file, or two (fuzz_split). Options: bits 0-1 the
 * model's input ((3, 32, 32), (3072), or MNIST's (1, 28, 28), refused), bit 2 five classes
 * instead of ten, bit 3 two batch files, bit 4 read the second half only (a rank's shard),
 * bit 5 a model that wants two labels per sample (refused). Accepted: fuzz_check_data, with
 * as many samples as the files hold whole records. */
#include "fuzz_data.h"

#include <string.h>

#define RECORD 3073

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    unsigned opt = data[0];
    static const struct dt_shape inputs[4] = {
        {3, {3, 32, 32}}, {1, {3072, 0, 0}}, {3, {1, 28, 28}}, {3, {3, 32, 32}}};
    struct dtx_data_shape want = {.input = inputs[opt & 3], .classes = opt & 4 ? 5 : 10,
                                  .label_rows = opt & 32 ? 2 : 1};
    const char *paths[2];
    size_t sizes[2];
    int n = opt & 8 ? 2 : 1;
    if (n == 2) {
        fuzz_split(data + 1, size - 1, &sizes[0]);
        sizes[1] = size - 3 - sizes[0];
        paths[0] = fuzz_write_file("data_batch_1.bin", data + 3, sizes[0]);
        paths[1] = fuzz_write_file("data_batch_2.bin", data + 3 + sizes[0], sizes[1]);
    } else {
        sizes[0] = size - 1;
        paths[0] = fuzz_write_file("test_batch.bin", data + 1, sizes[0]);
    }
    long total = 0;
    for (int i = 0; i < n; i++)
        total += (long)(sizes[i] / RECORD);
    struct dtx_range range = {opt & 16 ? total / 2 : 0, -1};
    struct dtx_data *d = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dtx_cifar_load(paths, n, &want, range, &d, &err);
    if (rc) {
        FUZZ_CHECK(!d, "a failed load returned data");
        FUZZ_CHECK(rc == DT_EINPUT && err.msg[0] &&
                       (strcmp(err.file, paths[0]) == 0 || strcmp(err.file, paths[n - 1]) == 0),
                   "status %d, file '%s': %s", rc, err.file, err.msg);
        return 0;
    }
    for (int i = 0; i < n; i++)
        FUZZ_CHECK(sizes[i] > 0 && sizes[i] % RECORD == 0,
                   "a file of %zu bytes, not whole records, was accepted", sizes[i]);
    fuzz_check_data(d, &want, total, range.first);
    dtx_data_destroy(d);
    return 0;
}

/* Dataset readers (IDX, CIFAR-10 binary, synthetic) and the per-epoch sampler. */
#include "data.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "cpu/rng.h"
#include "dt/collective.h"

#define IDX_UBYTE 0x08
#define CIFAR_RECORD 3073L /* 1 label byte + 3 x 32 x 32 pixel bytes */
#define CIFAR_PIXELS 3072L
#define MAX_SAMPLES (1L << 31)
#define READ_PIECE (1u << 24)

void dtx_data_destroy(struct dtx_data *d)
{
    if (!d)
        return;
    free(d->x);
    free(d->y);
    free(d);
}

int dtx_data_alloc(const struct dtx_data_shape *want, long total, struct dtx_range range,
                   const char *what, struct dtx_data **out, struct dt_error *err)
{
    *out = NULL;
    long first = range.first < 0 ? 0 : range.first;
    long count = range.count < 0 ? total - first : range.count;
    if (first > total || count < 0 || first + count > total)
        return dt_fail(err, DT_EINTERNAL, NULL, 0, 0,
                       "%s: samples %ld..%ld asked of a set of %ld", what, first, first + count,
                       total);
    struct dtx_data *d = calloc(1, sizeof *d);
    if (!d)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    d->total = total;
    d->first = first;
    d->n = count;
    d->sample_floats = dt_shape_size(&want->input);
    d->label_rows = want->label_rows;
    d->classes = want->classes;
    snprintf(d->what, sizeof d->what, "%s", what);
    size_t nx = (size_t)(count ? count : 1) * (size_t)d->sample_floats;
    size_t ny = (size_t)(count ? count : 1) * (size_t)d->label_rows;
    d->x = malloc(nx * sizeof *d->x);
    d->y = malloc(ny * sizeof *d->y);
    if (!d->x || !d->y) {
        long floats = d->sample_floats;
        dtx_data_destroy(d);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0,
                       "out of memory for %ld samples of %ld floats (%s)", count, floats, what);
    }
    *out = d;
    return DT_OK;
}

/* ---- IDX ---- */

struct idx_file {
    gzFile f;
    const char *path;
    long items;
    int ndims;          /* dimensions after the item count */
    long dims[4];
    long item_bytes;
    long header_bytes;
    bool plain;
    long file_bytes;    /* plain files: size on disk */
};

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Reads exactly len bytes; returns the number read (less at the end of the data) or -1 on a
 * zlib error (message in err). */
static long read_full(gzFile f, const char *path, void *buf, long len, struct dt_error *err)
{
    long done = 0;
    while (done < len) {
        unsigned piece = (unsigned)(len - done < READ_PIECE ? len - done : READ_PIECE);
        int got = gzread(f, (char *)buf + done, piece);
        if (got < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            dt_fail(err, DT_EINPUT, path, 0, 0, "cannot read: %s",
                    zerr == Z_ERRNO ? strerror(errno) : msg);
            return -1;
        }
        if (got == 0)
            break;
        done += got;
    }
    return done;
}

static int open_gz(const char *path, gzFile *f, struct dt_error *err)
{
    errno = 0;
    *f = gzopen(path, "rb");
    if (!*f)
        return dt_fail(err, DT_EINPUT, path, 0, 0, "cannot open: %s",
                       errno ? strerror(errno) : "out of memory");
    gzbuffer(*f, 1u << 18);
    return DT_OK;
}

static int idx_open(const char *path, struct idx_file *x, struct dt_error *err)
{
    memset(x, 0, sizeof *x);
    x->path = path;
    int rc = open_gz(path, &x->f, err);
    if (rc)
        return rc;
    unsigned char h[4];
    long got = read_full(x->f, path, h, 4, err);
    if (got < 0)
        return DT_EINPUT;
    if (got < 4)
        return dt_fail(err, DT_EINPUT, path, 0, 0,
                       "truncated: %ld bytes, too short for an IDX header", got);
    if (h[0] != 0 || h[1] != 0)
        return dt_fail(err, DT_EINPUT, path, 0, 0,
                       "not an IDX file: magic %02x %02x %02x %02x does not start with 00 00",
                       h[0], h[1], h[2], h[3]);
    if (h[2] != IDX_UBYTE)
        return dt_fail(err, DT_EINPUT, path, 0, 0,
                       "IDX element type 0x%02x is not supported (only 0x08, unsigned byte)",
                       h[2]);
    if (h[3] < 1 || h[3] > 5)
        return dt_fail(err, DT_EINPUT, path, 0, 0,
                       "IDX file with %d dimensions (magic 00 00 08 %02x): expected 1 to 5",
                       h[3], h[3]);
    unsigned char d[20];
    long want = 4L * h[3];
    got = read_full(x->f, path, d, want, err);
    if (got < 0)
        return DT_EINPUT;
    if (got < want)
        return dt_fail(err, DT_EINPUT, path, 0, 0,
                       "truncated: the header announces %d dimensions but the file ends after %ld "
                       "bytes",
                       h[3], 4 + got);
    x->items = be32(d);
    x->ndims = h[3] - 1;
    x->item_bytes = 1;
    for (int i = 0; i < x->ndims; i++) {
        x->dims[i] = be32(d + 4 * (i + 1));
        if (x->dims[i] < 1 || x->dims[i] > 65536)
            return dt_fail(err, DT_EINPUT, path, 0, 0,
                           "IDX dimension %d is %ld (expected 1..65536)", i + 2, x->dims[i]);
        x->item_bytes *= x->dims[i];
    }
    if (x->items > MAX_SAMPLES || x->item_bytes > (1L << 31))
        return dt_fail(err, DT_EINPUT, path, 0, 0, "IDX sizes too large (%ld items of %ld bytes)",
                       x->items, x->item_bytes);
    x->header_bytes = 4 + want;
    x->plain = gzdirect(x->f) != 0;
    if (x->plain) {
        struct stat st;
        if (stat(path, &st) == 0) {
            x->file_bytes = (long)st.st_size;
            long expect = x->header_bytes + x->items * x->item_bytes;
            if (x->file_bytes < expect)
                return dt_fail(err, DT_EINPUT, path, 0, 0,
                               "truncated: the header announces %ld items of %ld bytes (%ld bytes "
                               "in all) but the file has %ld bytes",
                               x->items, x->item_bytes, expect, x->file_bytes);
            if (x->file_bytes > expect)
                return dt_fail(err, DT_EINPUT, path, 0, 0,
                               "%ld bytes after the %ld items of %ld bytes the header announces",
                               x->file_bytes - expect, x->items, x->item_bytes);
        }
    }
    return DT_OK;
}

static void idx_close(struct idx_file *x)
{
    if (x->f)
        gzclose(x->f);
    x->f = NULL;
}

int dtx_idx_header(const char *path, long *items, int *ndims, long dims[4], struct dt_error *err)
{
    struct idx_file x;
    int rc = idx_open(path, &x, err);
    if (!rc) {
        *items = x.items;
        *ndims = x.ndims;
        memcpy(dims, x.dims, sizeof x.dims);
    }
    idx_close(&x);
    return rc;
}

static int idx_seek(struct idx_file *x, long first, struct dt_error *err)
{
    if (first > 0 && gzseek(x->f, x->header_bytes + first * x->item_bytes, SEEK_SET) < 0) {
        int zerr;
        const char *msg = gzerror(x->f, &zerr);
        return dt_fail(err, DT_EINPUT, x->path, 0, 0,
                       "truncated or corrupt: cannot skip to item %ld (%s)", first,
                       zerr == Z_ERRNO ? strerror(errno) : msg);
    }
    return DT_OK;
}

/* Reads the next count items (item `at` onwards) into buf. */
static int idx_read(struct idx_file *x, long at, long count, unsigned char *buf,
                    struct dt_error *err)
{
    long want = count * x->item_bytes;
    long got = read_full(x->f, x->path, buf, want, err);
    if (got < 0)
        return DT_EINPUT;
    if (got < want)
        return dt_fail(err, DT_EINPUT, x->path, 0, 0,
                       "truncated: the header announces %ld items but the data ends inside item "
                       "%ld",
                       x->items, at + got / x->item_bytes);
    return DT_OK;
}

/* After the last item: nothing may follow. */
static int idx_check_end(struct idx_file *x, struct dt_error *err)
{
    unsigned char extra;
    long got = read_full(x->f, x->path, &extra, 1, err);
    if (got < 0)
        return DT_EINPUT;
    if (got > 0)
        return dt_fail(err, DT_EINPUT, x->path, 0, 0,
                       "data continues after the %ld items the header announces", x->items);
    return DT_OK;
}

static void shape_text(const struct dt_shape *s, char *buf, size_t len)
{
    dt_shape_format(s, buf, len);
}

/* Whether the images' dimensions hold the model's input; *hwc says the file is laid out
 * (rows, cols, channels) and needs a transposition to (C, H, W). */
static bool idx_fits(const struct idx_file *x, const struct dt_shape *in, bool *hwc)
{
    *hwc = false;
    long n = dt_shape_size(in);
    if (x->item_bytes != n)
        return false;
    if (in->rank == 1)
        return true;
    if (in->rank == 2)
        return x->ndims == 2 && x->dims[0] == in->d[0] && x->dims[1] == in->d[1];
    /* (C, H, W) */
    if (x->ndims == 2)
        return in->d[0] == 1 && x->dims[0] == in->d[1] && x->dims[1] == in->d[2];
    if (x->ndims == 3 && x->dims[0] == in->d[1] && x->dims[1] == in->d[2] &&
        x->dims[2] == in->d[0]) {
        *hwc = in->d[0] > 1;
        return true;
    }
    return x->ndims == 3 && x->dims[0] == in->d[0] && x->dims[1] == in->d[1] &&
           x->dims[2] == in->d[2];
}

static void bytes_to_floats(float *dst, const unsigned char *src, long n, bool hwc, long C,
                            long HW)
{
    if (!hwc) {
        for (long i = 0; i < n; i++)
            dst[i] = src[i] * (1.0f / 255.0f);
        return;
    }
    for (long p = 0; p < HW; p++)
        for (long c = 0; c < C; c++)
            dst[c * HW + p] = src[p * C + c] * (1.0f / 255.0f);
}

/* Index of the first label not below classes, or -1. */
static long check_labels(const unsigned char *lab, long count, long classes)
{
    for (long i = 0; i < count; i++)
        if (lab[i] >= classes)
            return i;
    return -1;
}

int dtx_idx_load(const char *images_path, const char *labels_path,
                 const struct dtx_data_shape *want, struct dtx_range range,
                 struct dtx_data **out, struct dt_error *err)
{
    *out = NULL;
    struct idx_file im, lb;
    memset(&lb, 0, sizeof lb);
    unsigned char *buf = NULL;
    struct dtx_data *d = NULL;
    int rc = idx_open(images_path, &im, err);
    if (!rc)
        rc = idx_open(labels_path, &lb, err);
    if (rc)
        goto done;
    if (want->label_rows != 1) {
        rc = dt_fail(err, DT_EINPUT, labels_path, 0, 0,
                     "the model wants %d labels per sample; IDX files give one (use --synthetic)",
                     want->label_rows);
        goto done;
    }
    if (im.ndims < 1) {
        rc = dt_fail(err, DT_EINPUT, images_path, 0, 0,
                     "an images file needs at least 2 dimensions (items and pixels); it has 1");
        goto done;
    }
    if (lb.ndims != 0) {
        rc = dt_fail(err, DT_EINPUT, labels_path, 0, 0,
                     "a labels file has 1 dimension (magic 00 00 08 01); this one has %d",
                     lb.ndims + 1);
        goto done;
    }
    if (lb.items != im.items) {
        rc = dt_fail(err, DT_EINPUT, labels_path, 0, 0, "holds %ld labels but %s holds %ld images",
                     lb.items, images_path, im.items);
        goto done;
    }
    bool hwc;
    if (!idx_fits(&im, &want->input, &hwc)) {
        char got[64] = "", exp[64];
        for (int i = 0; i < im.ndims; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%ld", i ? "x" : "",
                     im.dims[i]);
        shape_text(&want->input, exp, sizeof exp);
        rc = dt_fail(err, DT_EINPUT, images_path, 0, 0,
                     "images are %s but the model's input is %s", got, exp);
        goto done;
    }
    char what[600];
    snprintf(what, sizeof what, "%s", images_path);
    if ((rc = dtx_data_alloc(want, im.items, range, what, &d, err)))
        goto done;
    long chunk = 4096, C = want->input.rank == 3 ? want->input.d[0] : 1;
    long HW = im.item_bytes / C;
    buf = malloc((size_t)(chunk * im.item_bytes > d->n ? chunk * im.item_bytes : d->n) + 1);
    if (!buf) {
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    /* images, in chunks of items */
    if ((rc = idx_seek(&im, d->first, err)))
        goto done;
    for (long at = 0, k; at < d->n; at += k) {
        k = d->n - at < chunk ? d->n - at : chunk;
        if ((rc = idx_read(&im, d->first + at, k, buf, err)))
            goto done;
        for (long i = 0; i < k; i++)
            bytes_to_floats(d->x + (at + i) * d->sample_floats, buf + i * im.item_bytes,
                            im.item_bytes, hwc, C, HW);
    }
    if (d->first + d->n == im.items && (rc = idx_check_end(&im, err)))
        goto done;
    if ((rc = idx_seek(&lb, d->first, err)) || (rc = idx_read(&lb, d->first, d->n, buf, err)))
        goto done;
    if (d->first + d->n == lb.items && (rc = idx_check_end(&lb, err)))
        goto done;
    long bad = check_labels(buf, d->n, want->classes);
    if (bad >= 0) {
        rc = dt_fail(err, DT_EINPUT, labels_path, 0, 0,
                     "label %d of item %ld is not below the model's %ld classes", buf[bad],
                     d->first + bad, want->classes);
        goto done;
    }
    for (long i = 0; i < d->n; i++)
        d->y[i] = buf[i];
    d->bytes_read = (double)d->n * (im.item_bytes + 1) + im.header_bytes + lb.header_bytes;
done:
    free(buf);
    idx_close(&im);
    idx_close(&lb);
    if (rc) {
        dtx_data_destroy(d);
        return rc;
    }
    *out = d;
    return DT_OK;
}

/* ---- CIFAR-10 ---- */

static bool cifar_fits(const struct dt_shape *in)
{
    if (dt_shape_size(in) != CIFAR_PIXELS)
        return false;
    return in->rank == 1 || (in->rank == 3 && in->d[0] == 3 && in->d[1] == 32 && in->d[2] == 32);
}

int dtx_cifar_load(const char *const *paths, int n_paths, const struct dtx_data_shape *want,
                   struct dtx_range range, struct dtx_data **out, struct dt_error *err)
{
    *out = NULL;
    if (n_paths < 1)
        return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "no CIFAR-10 files");
    if (!cifar_fits(&want->input)) {
        char exp[64];
        shape_text(&want->input, exp, sizeof exp);
        return dt_fail(err, DT_EINPUT, paths[0], 0, 0,
                       "CIFAR-10 images are 3x32x32 but the model's input is %s", exp);
    }
    if (want->label_rows != 1)
        return dt_fail(err, DT_EINPUT, paths[0], 0, 0,
                       "the model wants %d labels per sample; CIFAR-10 gives one",
                       want->label_rows);
    long *records = calloc((size_t)n_paths, sizeof *records), total = 0;
    if (!records)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int i = 0; i < n_paths; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0) {
            int e = errno;
            free(records);
            return dt_fail(err, DT_EINPUT, paths[i], 0, 0, "cannot open: %s", strerror(e));
        }
        if (st.st_size == 0 || st.st_size % CIFAR_RECORD != 0) {
            free(records);
            return dt_fail(err, DT_EINPUT, paths[i], 0, 0,
                           "size %lld bytes is not a positive multiple of the %ld-byte CIFAR-10 "
                           "record (truncated?)",
                           (long long)st.st_size, CIFAR_RECORD);
        }
        records[i] = (long)(st.st_size / CIFAR_RECORD);
        total += records[i];
    }
    char what[600];
    snprintf(what, sizeof what, "%s", paths[0]);
    struct dtx_data *d;
    int rc = dtx_data_alloc(want, total, range, what, &d, err);
    unsigned char *rec = malloc(CIFAR_RECORD);
    if (!rc && !rec)
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    long base = 0, k = 0;
    for (int i = 0; i < n_paths && !rc && k < d->n; base += records[i], i++) {
        long lo = d->first > base ? d->first - base : 0;
        if (lo >= records[i])
            continue;
        gzFile f;
        if ((rc = open_gz(paths[i], &f, err)))
            break;
        if (lo > 0 && gzseek(f, lo * CIFAR_RECORD, SEEK_SET) < 0)
            rc = dt_fail(err, DT_EINPUT, paths[i], 0, 0, "cannot skip to record %ld", lo);
        for (long r = lo; r < records[i] && k < d->n && !rc; r++, k++) {
            long got = read_full(f, paths[i], rec, CIFAR_RECORD, err);
            if (got < 0) {
                rc = DT_EINPUT;
                break;
            }
            if (got < CIFAR_RECORD) {
                rc = dt_fail(err, DT_EINPUT, paths[i], 0, 0, "truncated inside record %ld", r);
                break;
            }
            if (rec[0] >= want->classes || rec[0] > 9) {
                rc = dt_fail(err, DT_EINPUT, paths[i], 0, 0,
                             "label %d of record %ld is not a CIFAR-10 class below %ld", rec[0],
                             r, want->classes < 10 ? want->classes : 10);
                break;
            }
            d->y[k] = rec[0];
            bytes_to_floats(d->x + k * d->sample_floats, rec + 1, CIFAR_PIXELS, false, 3, 1024);
        }
        gzclose(f);
    }
    free(rec);
    free(records);
    if (rc) {
        dtx_data_destroy(d);
        return rc;
    }
    d->bytes_read = (double)d->n * CIFAR_RECORD;
    *out = d;
    return DT_OK;
}

/* ---- synthetic ---- */

/* Images (and vectors) come from a few latent factors: z uniform in [-1, 1)^K, x = 0.5 +
 * 0.5 A z / sqrt(K) clipped to [0, 1] with a fixed random mixing A (F x K), and the label is
 * the arg max of a fixed random linear teacher W z (C x K). Every feature carries signal, as
 * pixels of real images do, so a small network learns it in an epoch or two; without the
 * clipping the classes are linearly separable in x. Token inputs draw ids uniformly and the
 * teacher reads the first K ids. */
#define LATENT 8

int dtx_synthetic(const struct dtx_data_shape *want, long total, uint64_t seed,
                  uint64_t teacher_seed, struct dtx_range range, struct dtx_data **out,
                  struct dt_error *err)
{
    *out = NULL;
    if (total < 1 || total > MAX_SAMPLES)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--synthetic needs 1 to %ld samples, not %ld",
                       MAX_SAMPLES, total);
    if (want->classes < 1)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "the model has no classes to learn");
    char what[64];
    snprintf(what, sizeof what, "synthetic (%ld samples)", total);
    struct dtx_data *d;
    int rc = dtx_data_alloc(want, total, range, what, &d, err);
    if (rc)
        return rc;
    const long F = d->sample_floats, C = want->classes, R = d->label_rows;
    const bool tokens = want->vocab > 0;
    float *A = tokens ? NULL : malloc((size_t)(F * LATENT) * sizeof *A);
    float *W = malloc((size_t)(C * LATENT) * sizeof *W);
    if ((!tokens && !A) || !W) {
        free(A);
        free(W);
        dtx_data_destroy(d);
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    }
    struct dtk_rng rng;
    dtk_rng_seed(&rng, teacher_seed);
    for (long i = 0; i < C * LATENT; i++)
        W[i] = dtk_rng_normal(&rng);
    for (long i = 0; !tokens && i < F * LATENT; i++)
        A[i] = dtk_rng_normal(&rng);
    const float gain = 0.5f / sqrtf((float)LATENT);
    for (long k = 0; k < d->n; k++) {
        long i = d->first + k;
        float *x = d->x + k * F, z[LATENT];
        dtk_rng_seed(&rng, seed * 0x9E3779B97F4A7C15ull + (uint64_t)i);
        for (int q = 0; q < LATENT; q++)
            z[q] = tokens ? 0 : dtk_rng_uniform_range(&rng, -1, 1);
        for (long j = 0; j < F; j++) {
            if (tokens) {
                x[j] = (float)dtk_rng_below(&rng, (uint64_t)want->vocab);
                if (j < LATENT)
                    z[j] = 2.0f * x[j] / (float)want->vocab - 1.0f;
                continue;
            }
            float v = 0.5f;
            for (int q = 0; q < LATENT; q++)
                v += gain * A[j * LATENT + q] * z[q];
            x[j] = v < 0 ? 0 : v > 1 ? 1 : v;
        }
        for (long t = 0; t < R; t++) {
            /* label row t (a token or pixel of a dense output) sees the latent through the
             * signs of one row of the mixing: still a fixed function of the sample */
            long best = 0;
            double best_s = -1e300;
            for (long c = 0; c < C; c++) {
                double sc = 0;
                for (int q = 0; q < LATENT; q++) {
                    float sgn = R == 1 || tokens ? 1.0f
                                                 : (A[((t * 7919) % F) * LATENT + q] < 0 ? -1.0f
                                                                                          : 1.0f);
                    sc += W[c * LATENT + q] * z[q] * sgn;
                }
                if (sc > best_s) {
                    best_s = sc;
                    best = c;
                }
            }
            d->y[k * R + t] = (int)best;
        }
    }
    free(A);
    free(W);
    *out = d;
    return DT_OK;
}

/* ---- directories ---- */

static bool readable(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

/* dir/base or dir/base.gz, whichever exists (into out). */
static bool find_variant(const char *dir, const char *base, char *out, size_t len)
{
    snprintf(out, len, "%s/%s.gz", dir, base);
    if (readable(out))
        return true;
    snprintf(out, len, "%s/%s", dir, base);
    return readable(out);
}

static int shard_range(long total, bool whole, int idx, int count, struct dtx_range *r)
{
    if (whole || count <= 1) {
        r->first = 0;
        r->count = total;
    } else {
        dt_chunk(total, count, idx, &r->first, &r->count);
    }
    return DT_OK;
}

int dtx_data_load_dir(const char *dir, bool train, const struct dtx_data_shape *want, bool whole,
                      int shard_index, int shard_count, struct dtx_data **out,
                      struct dt_error *err)
{
    *out = NULL;
    char img[1024], lab[1024];
    const char *pre = train ? "train" : "t10k";
    char base_i[64], base_l[64];
    snprintf(base_i, sizeof base_i, "%s-images-idx3-ubyte", pre);
    snprintf(base_l, sizeof base_l, "%s-labels-idx1-ubyte", pre);
    bool have_i = find_variant(dir, base_i, img, sizeof img);
    bool have_l = find_variant(dir, base_l, lab, sizeof lab);
    if (have_i || have_l) {
        if (!have_i || !have_l)
            return dt_fail(err, DT_EINPUT, dir, 0, 0, "has %s but no %s[.gz]",
                           have_i ? img : lab, have_i ? base_l : base_i);
        long items;
        int nd;
        long dims[4];
        int rc = dtx_idx_header(img, &items, &nd, dims, err);
        if (rc)
            return rc;
        struct dtx_range r;
        shard_range(items, whole, shard_index, shard_count, &r);
        rc = dtx_idx_load(img, lab, want, r, out, err);
        if (!rc)
            snprintf((*out)->what, sizeof (*out)->what, "%.1000s (%s)", img,
                     train ? "train" : "test");
        return rc;
    }
    /* CIFAR-10 binary */
    char sub[1024];
    const char *cdir = dir;
    snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", dir);
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/test_batch.bin", dir);
    if (!readable(probe)) {
        snprintf(probe, sizeof probe, "%s/test_batch.bin", sub);
        if (readable(probe))
            cdir = sub;
    }
    snprintf(probe, sizeof probe, "%s/test_batch.bin", cdir);
    if (readable(probe)) {
        char names[5][1100];
        const char *paths[5];
        int n = 0;
        if (train) {
            for (int i = 1; i <= 5; i++) {
                snprintf(names[n], sizeof names[n], "%s/data_batch_%d.bin", cdir, i);
                if (!readable(names[n]))
                    return dt_fail(err, DT_EINPUT, names[n], 0, 0,
                                   "cannot open: CIFAR-10 training needs data_batch_1..5.bin");
                paths[n] = names[n];
                n++;
            }
        } else {
            snprintf(names[0], sizeof names[0], "%s", probe);
            paths[0] = names[0];
            n = 1;
        }
        /* total from the file sizes, read by dtx_cifar_load; a first pass for the shard */
        long total = 0;
        for (int i = 0; i < n; i++) {
            struct stat st;
            if (stat(paths[i], &st) == 0)
                total += (long)(st.st_size / CIFAR_RECORD);
        }
        struct dtx_range r;
        shard_range(total, whole, shard_index, shard_count, &r);
        int rc = dtx_cifar_load(paths, n, want, r, out, err);
        if (!rc)
            snprintf((*out)->what, sizeof (*out)->what, "%.1000s (%s)", paths[0],
                     train ? "train" : "test");
        return rc;
    }
    return dt_fail(err, DT_EINPUT, dir, 0, 0,
                   "no dataset found: expected %s[.gz] and %s[.gz] (MNIST, Fashion-MNIST) or "
                   "CIFAR-10's data_batch_N.bin and test_batch.bin",
                   base_i, base_l);
}

/* ---- sampler ---- */

int dtx_sampler_init(struct dtx_sampler *s, const struct dtx_data *data, bool whole, int rank,
                     int n_ranks, const int *local_batches, const long *shard_sizes,
                     struct dt_error *err)
{
    memset(s, 0, sizeof *s);
    s->data = data;
    s->whole = whole;
    s->rank = rank;
    s->n_ranks = n_ranks;
    s->local_batch = local_batches[rank];
    for (int r = 0; r < n_ranks; r++) {
        if (r < rank)
            s->batch_offset += local_batches[r];
        s->global_batch += local_batches[r];
    }
    if (whole) {
        s->iters = dt_epoch_iterations(data->total, s->global_batch);
        s->n_order = data->total;
    } else {
        s->iters = -1;
        for (int r = 0; r < n_ranks; r++) {
            long it = local_batches[r] > 0 ? shard_sizes[r] / local_batches[r] : 0;
            if (s->iters < 0 || it < s->iters)
                s->iters = it;
        }
        s->n_order = data->n;
    }
    if (s->iters < 1)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "%s: %ld samples hold no full batch of %d (global batch %d over %d ranks)",
                       data->what, whole ? data->total : data->n, whole ? s->global_batch
                                                                        : s->local_batch,
                       s->global_batch, n_ranks);
    s->order = malloc((size_t)s->n_order * sizeof *s->order);
    if (!s->order)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (long i = 0; i < s->n_order; i++)
        s->order[i] = i;
    return DT_OK;
}

void dtx_sampler_free(struct dtx_sampler *s)
{
    free(s->order);
    s->order = NULL;
}

void dtx_sampler_epoch(struct dtx_sampler *s, uint64_t seed, int epoch, bool shuffle)
{
    for (long i = 0; i < s->n_order; i++)
        s->order[i] = i;
    if (!shuffle)
        return;
    /* whole: the same stream on every rank; shard: one stream per rank */
    uint64_t key = seed * 1000003ull + (uint64_t)epoch * 7919ull +
                   (s->whole ? 0 : (uint64_t)(s->rank + 1) * 0x9E3779B97F4A7C15ull);
    struct dtk_rng rng;
    dtk_rng_seed(&rng, key);
    for (long i = s->n_order - 1; i > 0; i--) {
        long j = (long)dtk_rng_below(&rng, (uint64_t)i + 1);
        long t = s->order[i];
        s->order[i] = s->order[j];
        s->order[j] = t;
    }
}

long dtx_sampler_index(const struct dtx_sampler *s, long it, int k)
{
    if (s->whole)
        return s->order[it * s->global_batch + s->batch_offset + k] - s->data->first;
    return s->order[it * s->local_batch + k];
}

void dtx_sampler_gather(const struct dtx_sampler *s, long it, float *x, int *y)
{
    dtx_sampler_gather_rows(s, it, 0, s->local_batch, x, y);
}

void dtx_sampler_gather_rows(const struct dtx_sampler *s, long it, int row0, int rows, float *x,
                             int *y)
{
    const struct dtx_data *d = s->data;
    for (int k = 0; k < rows; k++) {
        long i = dtx_sampler_index(s, it, row0 + k);
        if (x)
            memcpy(x + (long)k * d->sample_floats, d->x + i * d->sample_floats,
                   (size_t)d->sample_floats * sizeof *x);
        if (y)
            memcpy(y + (long)k * d->label_rows, d->y + i * d->label_rows,
                   (size_t)d->label_rows * sizeof *y);
    }
}

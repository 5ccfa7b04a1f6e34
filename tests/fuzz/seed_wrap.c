/* Seeding the fuzz corpus from the test suite (tests/fuzz/seed-corpus.sh): linked into every
 * program of a separate build with -Wl,--wrap=FUNCTION for each reader below, it saves what
 * each reader is given, in the harness's input format, to $DT_SEED_OUT/TARGET/ (a file named
 * by a hash of its content), then calls the reader. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "data.h"
#include "dt/calibration.h"
#include "dt/model.h"
#include "dt/topology.h"
#include "dt/units.h"
#include "runs.h"

#define WEAK __attribute__((weak))
int __real_dt_model_load(const char *, struct dt_model **, struct dt_error *) WEAK;
int __real_dt_model_load_string(const char *, const char *, struct dt_model **,
                                struct dt_error *) WEAK;
int __real_dt_topology_load(const char *, struct dt_topology **, struct dt_error *) WEAK;
int __real_dt_topology_load_string(const char *, const char *, struct dt_topology **,
                                   struct dt_error *) WEAK;
int __real_dt_calibration_load(const char *, struct dt_calibration *, struct dt_error *) WEAK;
int __real_dt_calibration_load_string(const char *, const char *, struct dt_calibration *,
                                      struct dt_error *) WEAK;
int __real_dt_parse_quantity(const char *, enum dt_unit, double *, char *, size_t) WEAK;
int __real_dtv_runset_load(struct dtv_runset *, const char *, const struct dtv_load_options *,
                           struct dt_error *) WEAK;
int __real_dtx_idx_load(const char *, const char *, const struct dtx_data_shape *,
                        struct dtx_range, struct dtx_data **, struct dt_error *) WEAK;
int __real_dtx_cifar_load(const char *const *, int, const struct dtx_data_shape *,
                          struct dtx_range, struct dtx_data **, struct dt_error *) WEAK;

/* Prototypes of the wrappers (-Wmissing-prototypes). */
int __wrap_dt_model_load(const char *, struct dt_model **, struct dt_error *);
int __wrap_dt_model_load_string(const char *, const char *, struct dt_model **,
                                struct dt_error *);
int __wrap_dt_topology_load(const char *, struct dt_topology **, struct dt_error *);
int __wrap_dt_topology_load_string(const char *, const char *, struct dt_topology **,
                                   struct dt_error *);
int __wrap_dt_calibration_load(const char *, struct dt_calibration *, struct dt_error *);
int __wrap_dt_calibration_load_string(const char *, const char *, struct dt_calibration *,
                                      struct dt_error *);
int __wrap_dt_parse_quantity(const char *, enum dt_unit, double *, char *, size_t);
int __wrap_dtv_runset_load(struct dtv_runset *, const char *, const struct dtv_load_options *,
                           struct dt_error *);
int __wrap_dtx_idx_load(const char *, const char *, const struct dtx_data_shape *,
                        struct dtx_range, struct dtx_data **, struct dt_error *);
int __wrap_dtx_cifar_load(const char *const *, int, const struct dtx_data_shape *,
                          struct dtx_range, struct dtx_data **, struct dt_error *);

#define MAX_SEED (64L << 10) /* larger inputs slow the fuzzer more than they teach it */

static void save(const char *target, const void *data, size_t size)
{
    const char *out = getenv("DT_SEED_OUT");
    if (!out || size > MAX_SEED)
        return;
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (size_t i = 0; i < size; i++)
        h = (h ^ ((const uint8_t *)data)[i]) * 1099511628211ull;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out, target);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/%s/%016llx", out, target, (unsigned long long)h);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, size, f);
        fclose(f);
    }
}

/* The file's bytes, decompressed when gzip (*gz set); NULL when it cannot be read. */
static uint8_t *slurp(const char *path, size_t *size, int *gz)
{
    gzFile f = gzopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    int got;
    while (buf && (got = gzread(f, buf + len, (unsigned)(cap - len))) > 0) {
        len += (size_t)got;
        if (len == cap)
            buf = realloc(buf, cap *= 2);
    }
    if (gz)
        *gz = !gzdirect(f);
    gzclose(f);
    *size = len;
    return buf;
}

static void save_file(const char *target, const char *path)
{
    size_t n;
    uint8_t *b = slurp(path, &n, NULL);
    if (b)
        save(target, b, n);
    free(b);
}

int __wrap_dt_model_load(const char *path, struct dt_model **out, struct dt_error *err)
{
    save_file("model", path);
    return __real_dt_model_load(path, out, err);
}

int __wrap_dt_model_load_string(const char *name, const char *text, struct dt_model **out,
                                struct dt_error *err)
{
    save("model", text, strlen(text));
    return __real_dt_model_load_string(name, text, out, err);
}

int __wrap_dt_topology_load(const char *path, struct dt_topology **out, struct dt_error *err)
{
    save_file("topology", path);
    return __real_dt_topology_load(path, out, err);
}

int __wrap_dt_topology_load_string(const char *name, const char *text,
                                   struct dt_topology **out, struct dt_error *err)
{
    save("topology", text, strlen(text));
    return __real_dt_topology_load_string(name, text, out, err);
}

int __wrap_dt_calibration_load(const char *path, struct dt_calibration *cal,
                               struct dt_error *err)
{
    save_file("calibration", path);
    return __real_dt_calibration_load(path, cal, err);
}

int __wrap_dt_calibration_load_string(const char *name, const char *text,
                                      struct dt_calibration *cal, struct dt_error *err)
{
    save("calibration", text, strlen(text));
    return __real_dt_calibration_load_string(name, text, cal, err);
}

int __wrap_dt_parse_quantity(const char *text, enum dt_unit unit, double *out, char *why,
                             size_t whylen)
{
    size_t n = strlen(text);
    char *b = malloc(n + 1);
    if (b) {
        b[0] = (char)unit; /* fuzz_units.c: the first byte picks the kind */
        memcpy(b + 1, text, n);
        save("units", b, n + 1);
        free(b);
    }
    return __real_dt_parse_quantity(text, unit, out, why, whylen);
}

int __wrap_dtv_runset_load(struct dtv_runset *set, const char *path,
                           const struct dtv_load_options *opt, struct dt_error *err)
{
    size_t len = strlen(path);
    save_file(len > 4 && strcmp(path + len - 4, ".csv") == 0 ? "table" : "records", path);
    return __real_dtv_runset_load(set, path, opt, err);
}

/* The options byte of fuzz_idx.c / fuzz_cifar.c for this shape: its index in the harness's
 * table (fuzz_data.c), 0 when it has none. */
static unsigned shape_pick(const struct dt_shape *s)
{
    static const struct dt_shape shapes[8] = {
        {1, {4, 0, 0}},     {2, {2, 3, 0}},   {3, {1, 2, 2}},    {3, {3, 2, 2}},
        {3, {2, 1, 3}},     {1, {784, 0, 0}}, {3, {1, 28, 28}},  {3, {3, 32, 32}}};
    for (unsigned i = 0; i < 8; i++)
        if (shapes[i].rank == s->rank && shapes[i].d[0] == s->d[0] &&
            shapes[i].d[1] == s->d[1] && shapes[i].d[2] == s->d[2])
            return i;
    return 0;
}

/* options byte, 2-byte length of the first file, the first file, the second */
static void save_pair(const char *target, unsigned opt, const uint8_t *a, size_t na,
                      const uint8_t *b, size_t nb)
{
    if (na > 0xffff)
        return;
    uint8_t *buf = malloc(3 + na + nb);
    if (!buf)
        return;
    buf[0] = (uint8_t)opt;
    buf[1] = (uint8_t)(na & 0xff);
    buf[2] = (uint8_t)(na >> 8);
    memcpy(buf + 3, a, na);
    memcpy(buf + 3 + na, b, nb);
    save(target, buf, 3 + na + nb);
    free(buf);
}

int __wrap_dtx_idx_load(const char *images, const char *labels,
                        const struct dtx_data_shape *want, struct dtx_range range,
                        struct dtx_data **out, struct dt_error *err)
{
    size_t ni = 0, nl = 0;
    int gi = 0, gl = 0;
    uint8_t *a = slurp(images, &ni, &gi), *b = slurp(labels, &nl, &gl);
    if (a && b)
        save_pair("idx", shape_pick(&want->input) | (gi ? 8u : 0) | (gl ? 16u : 0) |
                             (range.first > 0 ? 32u : 0) | (want->classes == 2 ? 64u : 0) |
                             (want->label_rows != 1 ? 128u : 0),
                  a, ni, b, nl);
    free(a);
    free(b);
    return __real_dtx_idx_load(images, labels, want, range, out, err);
}

int __wrap_dtx_cifar_load(const char *const *paths, int n_paths,
                          const struct dtx_data_shape *want, struct dtx_range range,
                          struct dtx_data **out, struct dt_error *err)
{
    unsigned opt = (want->input.rank == 1 ? 1u : want->input.d[0] == 1 ? 2u : 0u) |
                   (want->classes == 5 ? 4u : 0) | (range.first > 0 ? 16u : 0) |
                   (want->label_rows != 1 ? 32u : 0);
    size_t na = 0, nb = 0;
    uint8_t *a = n_paths >= 1 ? slurp(paths[0], &na, NULL) : NULL;
    uint8_t *b = n_paths >= 2 ? slurp(paths[1], &nb, NULL) : NULL;
    if (a && n_paths == 1) {
        uint8_t *buf = malloc(na + 1);
        if (buf) {
            buf[0] = (uint8_t)opt;
            memcpy(buf + 1, a, na);
            save("cifar", buf, na + 1);
            free(buf);
        }
    } else if (a && b) {
        save_pair("cifar", opt | 8u, a, na, b, nb);
    }
    free(a);
    free(b);
    return __real_dtx_cifar_load(paths, n_paths, want, range, out, err);
}

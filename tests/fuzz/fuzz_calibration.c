/* Fuzzes the calibration loader (libdt/calibration.c on libdt/yamldoc.c and libdt/units.c).
 * Accepted: entries are distinct known parameters with positive finite values inside their
 * intervals, the covariance names fitted entries; the file dtvalidate would write from it
 * loads back to the same calibration (dt_calibration_write's promise), and applying it to the
 * defaults keeps the cost parameters finite. */
#include "fuzz.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt/calibration.h"
#include "dt/costmodel.h"

static void check_calibration(const struct dt_calibration *c)
{
    FUZZ_CHECK(c->n_entries >= 0 && c->n_entries <= DT_CAL_COUNT, "%d entries", c->n_entries);
    FUZZ_CHECK(c->n_data >= 0 && c->n_data <= DT_CAL_MAX_DATA, "%d data entries", c->n_data);
    FUZZ_CHECK(c->n_cov >= 0 && c->n_cov <= c->n_entries, "covariance of %d, %d entries",
               c->n_cov, c->n_entries);
    for (int i = 0; i < c->n_entries; i++) {
        const struct dt_cal_entry *e = &c->entry[i];
        FUZZ_CHECK(e->param >= 0 && e->param < DT_CAL_COUNT, "entry %d: parameter %d", i,
                   (int)e->param);
        FUZZ_CHECK(dt_calibration_find(c, e->param) == e, "parameter %s given twice",
                   dt_cal_param_name(e->param));
        FUZZ_CHECK(fuzz_in(e->value, 0, DBL_MAX) &&
                       (e->value > 0 || dt_cal_param_kind(e->param) == DT_CAL_TIME),
                   "%s = %g", dt_cal_param_name(e->param), e->value);
        FUZZ_CHECK(fuzz_in(e->se, 0, DBL_MAX) && fuzz_in(e->lo, 0, e->value) &&
                       fuzz_in(e->hi, e->value, DBL_MAX),
                   "%s: stderr %g, interval [%g, %g] around %g", dt_cal_param_name(e->param),
                   e->se, e->lo, e->hi, e->value);
    }
    for (int i = 0; i < c->n_cov; i++) {
        const struct dt_cal_entry *e = dt_calibration_find(c, c->cov_param[i]);
        FUZZ_CHECK(e && e->fitted, "the covariance names %s, not a fitted entry",
                   dt_cal_param_name(c->cov_param[i]));
        for (int j = 0; j < c->n_cov; j++)
            FUZZ_CHECK(fuzz_in(c->cov[i * DT_CAL_COUNT + j], -DBL_MAX, DBL_MAX),
                       "covariance (%d, %d) = %g", i, j, c->cov[i * DT_CAL_COUNT + j]);
        FUZZ_CHECK(c->cov[i * DT_CAL_COUNT + i] >= 0, "variance %d is negative", i);
    }
    FUZZ_CHECK(!c->n_cov || (c->dof >= 1 && c->t95 > 0), "a covariance without dof and t95");
}

/* Equal to the 9 significant digits the writer keeps. */
static bool same(double a, double b)
{
    /* %.9g: half a unit of the 9th digit, 5e-9 of the value at worst */
    return fabs(a - b) <= 6e-9 * fmax(fabs(a), fabs(b)) || (a == 0 && fabs(b) < 1e-300);
}

static void same_string(const char *what, const char *a, const char *b)
{
    FUZZ_CHECK(strcmp(a, b) == 0, "%s changed on the round trip: '%s' became '%s'", what, a, b);
}

/* What the writer writes (fitted entries: stderr and interval) reads back the same. */
static void check_same(const struct dt_calibration *a, const struct dt_calibration *b)
{
    same_string("created", a->created, b->created);
    same_string("host", a->host, b->host);
    same_string("tool", a->tool, b->tool);
    same_string("method", a->method, b->method);
    same_string("notes", a->notes, b->notes);
    same_string("device", a->device[0] ? a->device : "cpu", b->device);
    FUZZ_CHECK(a->n_data == b->n_data, "%d data entries became %d", a->n_data, b->n_data);
    for (int i = 0; i < a->n_data; i++) {
        same_string("data file", a->data[i].file, b->data[i].file);
        same_string("data rows", a->data[i].rows, b->data[i].rows);
        same_string("data host", a->data[i].host, b->data[i].host);
        same_string("data when", a->data[i].when, b->data[i].when);
    }
    FUZZ_CHECK(a->n_obs == b->n_obs && a->dof == b->dof && same(a->resid_sd, b->resid_sd) &&
                   same(a->t95, b->t95) && same(a->mape_pct, b->mape_pct),
               "the fit statistics changed on the round trip");
    FUZZ_CHECK(a->n_entries == b->n_entries, "%d entries became %d", a->n_entries,
               b->n_entries);
    for (int i = 0; i < a->n_entries; i++) {
        const struct dt_cal_entry *x = &a->entry[i], *y = &b->entry[i];
        same_string("source", x->source, y->source);
        FUZZ_CHECK(x->param == y->param && same(x->value, y->value) && x->fitted == y->fitted,
                   "entry %s changed on the round trip: %.17g became %.17g",
                   dt_cal_param_name(x->param), x->value, y->value);
        FUZZ_CHECK(!x->fitted || (same(x->se, y->se) && same(x->lo, y->lo) &&
                                  same(x->hi, y->hi)),
                   "the uncertainty of %s changed on the round trip",
                   dt_cal_param_name(x->param));
    }
    FUZZ_CHECK(a->n_cov == b->n_cov, "a covariance of %d became %d", a->n_cov, b->n_cov);
    for (int i = 0; i < a->n_cov; i++) {
        FUZZ_CHECK(a->cov_param[i] == b->cov_param[i], "covariance parameter %d changed", i);
        for (int j = 0; j < a->n_cov; j++)
            FUZZ_CHECK(same(a->cov[i * DT_CAL_COUNT + j], b->cov[i * DT_CAL_COUNT + j]),
                       "covariance (%d, %d) changed on the round trip", i, j);
    }
}

static void check_round_trip(const struct dt_calibration *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    FUZZ_CHECK(f, "open_memstream failed");
    dt_calibration_write(f, c);
    FUZZ_CHECK(fclose(f) == 0, "cannot write the calibration");
    const char *path = fuzz_write_file("written.yaml", text, len);
    struct dt_calibration *back = malloc(sizeof *back);
    FUZZ_CHECK(back, "out of memory");
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dt_calibration_load(path, back, &err);
    if (rc) {
        char where[2048];
        dt_error_format(&err, where, sizeof where);
        fuzz_fail("the written calibration does not load: %s\n%s", where, text);
    }
    check_same(c, back);
    free(back);
    free(text);
}

static void check_apply(const struct dt_calibration *c)
{
    for (int kind = DT_DEV_CPU; kind <= DT_DEV_GPU; kind++) {
        struct dt_cost_params cp;
        dt_cost_defaults(&cp, (enum dt_device_kind)kind);
        dt_calibration_apply(c, &cp);
        for (int p = 0; p < DT_CAL_COUNT; p++)
            FUZZ_CHECK(fuzz_in(dt_cal_param_get(&cp, (enum dt_cal_param)p), 0, DBL_MAX),
                       "%s = %g after applying", dt_cal_param_name((enum dt_cal_param)p),
                       dt_cal_param_get(&cp, (enum dt_cal_param)p));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("calibration.yaml", data, size);
    struct dt_calibration *cal = malloc(sizeof *cal);
    FUZZ_CHECK(cal, "out of memory");
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dt_calibration_load(path, cal, &err);
    if (rc) {
        FUZZ_CHECK(cal->n_entries == 0, "a failed load left %d entries", cal->n_entries);
        fuzz_check_error(rc, &err, path, data, size, FUZZ_LINES_YAML, true);
    } else {
        check_calibration(cal);
        check_round_trip(cal);
        check_apply(cal);
    }
    free(cal);
    return 0;
}

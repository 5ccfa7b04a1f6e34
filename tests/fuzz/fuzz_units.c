/* Fuzzes the units parser (libdt/units.c). The first byte picks the kind of quantity, the
 * rest is the text. Accepted: a finite value; what dt_format_quantity prints for it (3
 * significant digits, the prefixes the parser knows) parses back to within rounding.
 * Refused: a reason, NUL-terminated inside its buffer. */
#include "fuzz.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt/units.h"

#define KINDS (DT_UNIT_FREQUENCY + 1)

/* Values dt_format_quantity writes with a prefix the parser reads (k to P, ns to h). */
static bool printable(double v, enum dt_unit unit)
{
    double a = fabs(v);
    if (unit == DT_UNIT_TIME)
        return a >= 1e-9 && a < 1e15;
    return a >= 1e-3 && a < 1e17;
}

static void check_format(double v, enum dt_unit unit)
{
    char text[64], why[256];
    dt_format_quantity(v, unit, text, sizeof text);
    if (!printable(v, unit))
        return;
    double back;
    if (dt_parse_quantity(text, unit, &back, why, sizeof why))
        fuzz_fail("%.17g formatted as '%s' does not parse back: %s", v, text, why);
    /* 3 significant digits: half a unit of the third digit */
    FUZZ_CHECK(fabs(back - v) <= 5.01e-3 * fabs(v), "%.17g formatted as '%s' reads %.17g", v,
               text, back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum dt_unit unit = (enum dt_unit)(data[0] % KINDS);
    char *text = malloc(size);
    FUZZ_CHECK(text, "out of memory");
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    char why[128];
    memset(why, 'x', sizeof why);
    double v = NAN;
    if (dt_parse_quantity(text, unit, &v, why, sizeof why) == 0) {
        FUZZ_CHECK(isfinite(v), "'%s' parsed to %g", text, v);
        check_format(v, unit);
    } else {
        FUZZ_CHECK(memchr(why, 0, sizeof why) && why[0], "a refusal without a reason");
        FUZZ_CHECK(isnan(v), "a refusal set the value");
    }
    (void)dt_unit_kind_name(unit);
    (void)dt_unit_example(unit);
    free(text);
    return 0;
}

/* Strict parsing of quantities with units ("10 GB/s", "1.5 us"). */
#include "dt/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct prefix {
    const char *text;
    double factor;
};

/* Longest first so that "Ki" wins over "K"-less matches. SI k is lower case only. */
static const struct prefix prefixes[] = {
    {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
    {"Pi", 1125899906842624.0},
    {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"", 1.0},
};

/* Base units of each kind, with their factor to SI. */
struct base {
    const char *text;
    double factor;
    int prefixable; /* 1: SI and binary prefixes; 0: none */
};

static const struct base bytes_units[] = {{"B", 1.0, 1}, {"bit", 0.125, 1}, {NULL, 0, 0}};
static const struct base bw_units[] = {{"B/s", 1.0, 1}, {"bit/s", 0.125, 1}, {NULL, 0, 0}};
/* Microseconds: "us", the micro sign U+00B5 and the Greek mu U+03BC (both look alike). */
static const struct base time_units[] = {{"ns", 1e-9, 0}, {"us", 1e-6, 0}, {"\xc2\xb5s", 1e-6, 0},
                                         {"\xce\xbcs", 1e-6, 0},
                                         {"ms", 1e-3, 0}, {"s", 1.0, 0},    {"min", 60.0, 0},
                                         {"h", 3600.0, 0}, {NULL, 0, 0}};
static const struct base rate_units[] = {{"FLOP/s", 1.0, 1}, {NULL, 0, 0}};
static const struct base flop_units[] = {{"FLOP", 1.0, 1}, {NULL, 0, 0}};
static const struct base price_units[] = {{"USD/h", 1.0, 0}, {NULL, 0, 0}};
static const struct base freq_units[] = {{"Hz", 1.0, 1}, {NULL, 0, 0}};

static const struct base *units_of(enum dt_unit unit)
{
    switch (unit) {
    case DT_UNIT_BYTES: return bytes_units;
    case DT_UNIT_BANDWIDTH: return bw_units;
    case DT_UNIT_TIME: return time_units;
    case DT_UNIT_FLOP_RATE: return rate_units;
    case DT_UNIT_FLOPS: return flop_units;
    case DT_UNIT_PRICE: return price_units;
    case DT_UNIT_FREQUENCY: return freq_units;
    }
    return bytes_units;
}

const char *dt_unit_kind_name(enum dt_unit unit)
{
    static const char *const names[] = {"size in bytes", "bandwidth", "time", "FLOP rate",
                                        "FLOP count", "price", "frequency"};
    return names[unit];
}

const char *dt_unit_example(enum dt_unit unit)
{
    static const char *const examples[] = {"16 GiB", "10 GB/s", "1.5 us", "2 TFLOP/s",
                                           "1.2 GFLOP", "3.06 USD/h", "2.5 GHz"};
    return examples[unit];
}

/* Matches unit text u against prefix+base of the kind; returns the factor or 0. */
static double match_unit(const char *u, enum dt_unit unit)
{
    for (const struct base *b = units_of(unit); b->text; b++) {
        if (strcmp(u, b->text) == 0)
            return b->factor;
        if (!b->prefixable)
            continue;
        for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
            size_t pl = strlen(prefixes[i].text);
            if (pl && strncmp(u, prefixes[i].text, pl) == 0 && strcmp(u + pl, b->text) == 0)
                return prefixes[i].factor * b->factor;
        }
    }
    return 0.0;
}

/* A hint for the most common mistakes. */
static const char *hint_for(const char *u, enum dt_unit unit)
{
    if (u[0] == 'K')
        return "; the SI prefix is lower-case k (1e3), the binary one Ki (1024)";
    if (unit == DT_UNIT_BANDWIDTH && (strstr(u, "b/s") || strstr(u, "bps") || strstr(u, "Bps")))
        return "; write bits as 'bit/s' (100 Gbit/s) and bytes as 'B/s' (12.5 GB/s)";
    if (unit == DT_UNIT_BYTES && strchr(u, 'b'))
        return "; write bytes as B and bits as bit";
    if (unit == DT_UNIT_FLOP_RATE && (strstr(u, "FLOPS") || strstr(u, "flops")))
        return "; write FLOP/s (e.g. 2 TFLOP/s)";
    return "";
}

int dt_parse_quantity(const char *text, enum dt_unit unit, double *out, char *why, size_t whylen)
{
    const char *s = text;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s) {
        snprintf(why, whylen, "empty value; write a %s such as '%s'", dt_unit_kind_name(unit),
                 dt_unit_example(unit));
        return -1;
    }
    /* Refuse strtod's extras: hex floats, inf, nan (with or without a sign). */
    const char *digits = s + (s[0] == '+' || s[0] == '-');
    if (isalpha((unsigned char)digits[0]) || strncmp(digits, "0x", 2) == 0 ||
        strncmp(digits, "0X", 2) == 0) {
        snprintf(why, whylen, "'%s' is not a number with a unit; write e.g. '%s'", text,
                 dt_unit_example(unit));
        return -1;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v)) {
        snprintf(why, whylen, "'%s' is not a finite number with a unit; write e.g. '%s'", text,
                 dt_unit_example(unit));
        return -1;
    }
    const char *u = end;
    while (*u == ' ' || *u == '\t')
        u++;
    char ubuf[32];
    size_t ul = strlen(u);
    while (ul && isspace((unsigned char)u[ul - 1]))
        ul--;
    if (ul == 0) {
        snprintf(why, whylen, "'%s' has no unit; write a %s such as '%s'", text,
                 dt_unit_kind_name(unit), dt_unit_example(unit));
        return -1;
    }
    if (ul >= sizeof ubuf) {
        snprintf(why, whylen, "unknown unit in '%s'; write e.g. '%s'", text,
                 dt_unit_example(unit));
        return -1;
    }
    memcpy(ubuf, u, ul);
    ubuf[ul] = '\0';
    double f = match_unit(ubuf, unit);
    if (f == 0.0) {
        /* Say so when the unit is right for another kind (a time where a bandwidth goes). */
        for (int k = DT_UNIT_BYTES; k <= DT_UNIT_FREQUENCY; k++)
            if (k != (int)unit && match_unit(ubuf, (enum dt_unit)k) != 0.0) {
                snprintf(why, whylen, "'%s' is a %s, expected a %s such as '%s'", text,
                         dt_unit_kind_name((enum dt_unit)k), dt_unit_kind_name(unit),
                         dt_unit_example(unit));
                return -1;
            }
        snprintf(why, whylen, "unknown unit '%s' in '%s'%s; write e.g. '%s'", ubuf, text,
                 hint_for(ubuf, unit), dt_unit_example(unit));
        return -1;
    }
    double r = v * f;
    if (!isfinite(r)) {
        snprintf(why, whylen, "'%s' is too large", text);
        return -1;
    }
    *out = r;
    return 0;
}

void dt_format_quantity(double value, enum dt_unit unit, char *buf, size_t len)
{
    static const char *const base[] = {"B", "B/s", "s", "FLOP/s", "FLOP", "USD/h", "Hz"};
    if (unit == DT_UNIT_PRICE) {
        snprintf(buf, len, "%.3g USD/h", value);
        return;
    }
    if (unit == DT_UNIT_TIME) {
        double a = fabs(value);
        if (a == 0 || a >= 1)
            snprintf(buf, len, "%.3g s", value);
        else if (a >= 1e-3)
            snprintf(buf, len, "%.3g ms", value * 1e3);
        else if (a >= 1e-6)
            snprintf(buf, len, "%.3g us", value * 1e6);
        else
            snprintf(buf, len, "%.3g ns", value * 1e9);
        return;
    }
    static const char *const si[] = {"", "k", "M", "G", "T", "P", "E"};
    int i = 0;
    double a = fabs(value);
    while (a >= 1000 && i < 6) {
        a /= 1000;
        value /= 1000;
        i++;
    }
    snprintf(buf, len, "%.3g %s%s", value, si[i], base[unit]);
}

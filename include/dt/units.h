/* Quantities written with their unit, parsed strictly into SI doubles.
 *   bytes      "16 GiB" "32 GB" "512 kB" "1.5 MiB" "64 B"   (k=1e3, Ki=1024; B=byte, bit=bit)
 *   bandwidth  "10 GB/s" "100 Gbit/s" "12.5 GiB/s" "1 Gbit/s" -> bytes per second
 *   time       "1.5 us" "2 ms" "0.3 s" "500 ns" "1 min" "2 h" -> seconds
 *   flop rate  "2 TFLOP/s" "989 TFLOP/s" "150 GFLOP/s"        -> FLOP per second
 *   flops      "1.2 GFLOP"                                    -> FLOP
 *   price      "3.06 USD/h"                                   -> USD per hour
 *   frequency  "2.5 GHz"                                      -> Hz
 * A number without unit, an unknown unit, a unit of the wrong kind, an ambiguous prefix
 * ("K", "Gb" without "it"), NaN, inf and trailing text are errors. */
#ifndef DT_UNITS_H
#define DT_UNITS_H

#include <stddef.h>

enum dt_unit {
    DT_UNIT_BYTES,
    DT_UNIT_BANDWIDTH,
    DT_UNIT_TIME,
    DT_UNIT_FLOP_RATE,
    DT_UNIT_FLOPS,
    DT_UNIT_PRICE,
    DT_UNIT_FREQUENCY
};

/* Returns 0 and sets *out, or returns -1 and writes a reason ("unknown unit 'GBs'; write
 * e.g. '10 GB/s'") into why (which holds whylen bytes). */
int dt_parse_quantity(const char *text, enum dt_unit unit, double *out, char *why, size_t whylen);

/* Name of the kind ("bandwidth") and an example ("10 GB/s"), for messages. */
const char *dt_unit_kind_name(enum dt_unit unit);
const char *dt_unit_example(enum dt_unit unit);

/* Formats an SI value for humans with a suitable prefix: "1.50 us", "12.5 GB/s". */
void dt_format_quantity(double value, enum dt_unit unit, char *buf, size_t len);

#endif

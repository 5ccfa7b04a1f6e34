/* A YAML document as a tree that remembers where each node was written, so every
 * check can report file:line:column. Built on libyaml's event parser.
 * Limits (so no input can exhaust memory or time): DT_YAML_MAX_BYTES of file,
 * DT_YAML_MAX_NODES nodes after alias expansion, DT_YAML_MAX_DEPTH nesting. */
#ifndef DT_YAMLDOC_H
#define DT_YAMLDOC_H

#include <stdbool.h>
#include <stddef.h>

#include "dt/error.h"
#include "dt/units.h"

#define DT_YAML_MAX_BYTES (16u << 20)
#define DT_YAML_MAX_NODES 2000000L
#define DT_YAML_MAX_DEPTH 64

enum dt_ynode_type { DT_Y_SCALAR, DT_Y_MAP, DT_Y_SEQ };

struct dt_ynode {
    enum dt_ynode_type type;
    int line, col;        /* 1-based position of the node's first character */
    const char *value;    /* DT_Y_SCALAR: the text, NUL-terminated */
    bool quoted;          /* DT_Y_SCALAR: written in quotes (so a string, never a number) */
    size_t n;             /* DT_Y_MAP: pairs; DT_Y_SEQ: items */
    struct dt_ynode **keys;   /* DT_Y_MAP: n scalar keys */
    struct dt_ynode **items;  /* DT_Y_MAP: n values; DT_Y_SEQ: n items */
};

struct dt_ydoc; /* owns every node; freed at once by dt_ydoc_destroy */

/* Loads and parses path. Empty files, non-YAML text, a top level that is not a mapping,
 * files over the limits and duplicate keys are errors with a location. */
int dt_ydoc_load_file(const char *path, struct dt_ydoc **out, struct dt_error *err);
/* Same from memory; name is what error messages call the source. */
int dt_ydoc_load_string(const char *name, const char *text, size_t len, struct dt_ydoc **out,
                        struct dt_error *err);
void dt_ydoc_destroy(struct dt_ydoc *doc);

const struct dt_ynode *dt_ydoc_root(const struct dt_ydoc *doc);
const char *dt_ydoc_name(const struct dt_ydoc *doc);

/* Error located at node (or at the file when node is NULL). Returns DT_EINPUT. */
int dt_yfail(const struct dt_ydoc *doc, const struct dt_ynode *node, struct dt_error *err,
             const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Value of key in a mapping, or NULL. */
const struct dt_ynode *dt_ymap_get(const struct dt_ynode *map, const char *key);
/* Checks that node is a mapping whose keys are all in allowed (NULL-terminated). */
int dt_ycheck_map(const struct dt_ydoc *doc, const struct dt_ynode *node, const char *what,
                  const char *const *allowed, struct dt_error *err);
/* Checks that node is a sequence. */
int dt_ycheck_seq(const struct dt_ydoc *doc, const struct dt_ynode *node, const char *what,
                  struct dt_error *err);

/* Typed getters. A missing key is an error when required, otherwise *out is left as is
 * (the caller sets the documented default first). Each checks type and range. */
int dt_yget_str(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                bool required, const char **out, struct dt_error *err);
int dt_yget_long(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                 bool required, long min, long max, long *out, struct dt_error *err);
int dt_yget_int(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                bool required, int min, int max, int *out, struct dt_error *err);
/* A plain finite number without unit, min <= x <= max. */
int dt_yget_double(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                   bool required, double min, double max, double *out, struct dt_error *err);
int dt_yget_bool(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                 bool required, bool *out, struct dt_error *err);
/* A quantity written with its unit ("10 GB/s"), converted to SI; min < x <= max
 * (a quantity must be positive unless min is negative). */
int dt_yget_quantity(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                     bool required, enum dt_unit unit, double min, double max, double *out,
                     struct dt_error *err);
/* One of the NULL-terminated names; *out is its index. */
int dt_yget_enum(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                 bool required, const char *const *names, int *out, struct dt_error *err);

/* Conversions of a scalar node, with the same checks. */
int dt_ynode_long(const struct dt_ydoc *doc, const struct dt_ynode *node, long min, long max,
                  long *out, struct dt_error *err);
int dt_ynode_double(const struct dt_ydoc *doc, const struct dt_ynode *node, double min,
                    double max, double *out, struct dt_error *err);

#endif

/* YAML document tree with positions, built from libyaml parser events. */
#include "dt/yamldoc.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* All nodes and strings live in arena blocks freed together. */
struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    unsigned char data[];
};

struct anchor {
    char *name;
    struct dt_ynode *node;
    long weight; /* nodes under it, aliases expanded */
};

struct dt_ydoc {
    char name[512];
    struct arena_block *blocks;
    struct dt_ynode *root;
    struct anchor *anchors;
    size_t n_anchors, cap_anchors;
    long weight; /* total nodes with aliases expanded */
};

static void *arena_alloc(struct dt_ydoc *doc, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    struct arena_block *b = doc->blocks;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > 65536 ? size : 65536;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->next = doc->blocks;
        b->used = 0;
        b->cap = cap;
        doc->blocks = b;
    }
    void *p = b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

static char *arena_strdup(struct dt_ydoc *doc, const char *s, size_t len)
{
    char *p = arena_alloc(doc, len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

void dt_ydoc_destroy(struct dt_ydoc *doc)
{
    if (!doc)
        return;
    struct arena_block *b = doc->blocks;
    while (b) {
        struct arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(doc->anchors);
    free(doc);
}

const struct dt_ynode *dt_ydoc_root(const struct dt_ydoc *doc) { return doc->root; }
const char *dt_ydoc_name(const struct dt_ydoc *doc) { return doc->name; }

int dt_yfail(const struct dt_ydoc *doc, const struct dt_ynode *node, struct dt_error *err,
             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dt_vfail(err, DT_EINPUT, doc->name, node ? node->line : 0, node ? node->col : 0, fmt, ap);
    va_end(ap);
    return DT_EINPUT;
}

/* ---- building the tree ---- */

struct builder {
    struct dt_ydoc *doc;
    yaml_parser_t parser;
    struct dt_error *err;
    int depth;
};

static int fail_at_mark(struct builder *b, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_at_mark(struct builder *b, yaml_mark_t mark, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dt_vfail(b->err, DT_EINPUT, b->doc->name, (int)mark.line + 1, (int)mark.column + 1, fmt, ap);
    va_end(ap);
    return DT_EINPUT;
}

static int next_event(struct builder *b, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&b->parser, ev)) {
        const char *problem = b->parser.problem ? b->parser.problem : "syntax error";
        yaml_mark_t mark = b->parser.problem_mark;
        if (b->parser.context)
            return fail_at_mark(b, mark, "YAML syntax error: %s %s", problem, b->parser.context);
        return fail_at_mark(b, mark, "YAML syntax error: %s", problem);
    }
    return DT_OK;
}

static struct dt_ynode *new_node(struct builder *b, enum dt_ynode_type type, yaml_mark_t mark)
{
    struct dt_ynode *n = arena_alloc(b->doc, sizeof *n);
    if (n) {
        n->type = type;
        n->line = (int)mark.line + 1;
        n->col = (int)mark.column + 1;
    }
    return n;
}

static int remember_anchor(struct builder *b, const unsigned char *name, struct dt_ynode *node,
                           long weight)
{
    struct dt_ydoc *doc = b->doc;
    if (doc->n_anchors == doc->cap_anchors) {
        size_t cap = doc->cap_anchors ? 2 * doc->cap_anchors : 16;
        struct anchor *a = realloc(doc->anchors, cap * sizeof *a);
        if (!a)
            return DT_ENOMEM;
        doc->anchors = a;
        doc->cap_anchors = cap;
    }
    char *copy = arena_strdup(doc, (const char *)name, strlen((const char *)name));
    if (!copy)
        return DT_ENOMEM;
    doc->anchors[doc->n_anchors++] = (struct anchor){copy, node, weight};
    return DT_OK;
}

static int parse_node(struct builder *b, yaml_event_t *ev, struct dt_ynode **out, long *weight);

/* Reads children until the closing event of a mapping or sequence. */
static int parse_children(struct builder *b, struct dt_ynode *node, yaml_event_type_t end,
                          long *weight)
{
    size_t cap = 0;
    for (;;) {
        yaml_event_t ev;
        int rc = next_event(b, &ev);
        if (rc)
            return rc;
        if (ev.type == end) {
            yaml_event_delete(&ev);
            return DT_OK;
        }
        struct dt_ynode *child = NULL;
        long w = 0;
        rc = parse_node(b, &ev, &child, &w);
        yaml_event_delete(&ev);
        if (rc)
            return rc;
        *weight += w;
        if (*weight > DT_YAML_MAX_NODES)
            return dt_yfail(b->doc, child, b->err,
                            "document too large: more than %ld nodes (aliases expanded)",
                            DT_YAML_MAX_NODES);
        if (node->type == DT_Y_MAP) {
            /* key */
            if (child->type != DT_Y_SCALAR)
                return dt_yfail(b->doc, child, b->err, "mapping keys must be plain scalars");
            /* The duplicate check below is quadratic: no real file has this many keys. */
            if (node->n >= 10000)
                return dt_yfail(b->doc, child, b->err, "more than 10000 keys in one mapping");
            for (size_t i = 0; i < node->n; i++)
                if (strcmp(node->keys[i]->value, child->value) == 0)
                    return dt_yfail(b->doc, child, b->err,
                                    "duplicate key '%s' (first at line %d)", child->value,
                                    node->keys[i]->line);
            rc = next_event(b, &ev);
            if (rc)
                return rc;
            struct dt_ynode *value = NULL;
            long wv = 0;
            rc = parse_node(b, &ev, &value, &wv);
            yaml_event_delete(&ev);
            if (rc)
                return rc;
            *weight += wv;
            if (*weight > DT_YAML_MAX_NODES)
                return dt_yfail(b->doc, value, b->err,
                                "document too large: more than %ld nodes (aliases expanded)",
                                DT_YAML_MAX_NODES);
            if (node->n == cap) {
                size_t ncap = cap ? 2 * cap : 8;
                struct dt_ynode **k = arena_alloc(b->doc, ncap * sizeof *k);
                struct dt_ynode **v = arena_alloc(b->doc, ncap * sizeof *v);
                if (!k || !v)
                    return DT_ENOMEM;
                if (cap) {
                    memcpy(k, node->keys, cap * sizeof *k);
                    memcpy(v, node->items, cap * sizeof *v);
                }
                node->keys = k;
                node->items = v;
                cap = ncap;
            }
            node->keys[node->n] = child;
            node->items[node->n] = value;
            node->n++;
        } else {
            if (node->n == cap) {
                size_t ncap = cap ? 2 * cap : 8;
                struct dt_ynode **v = arena_alloc(b->doc, ncap * sizeof *v);
                if (!v)
                    return DT_ENOMEM;
                if (cap)
                    memcpy(v, node->items, cap * sizeof *v);
                node->items = v;
                cap = ncap;
            }
            node->items[node->n++] = child;
        }
    }
}

static int parse_node(struct builder *b, yaml_event_t *ev, struct dt_ynode **out, long *weight)
{
    const unsigned char *anchor = NULL;
    int rc;
    *weight = 1;
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        struct dt_ynode *n = new_node(b, DT_Y_SCALAR, ev->start_mark);
        if (!n)
            return DT_ENOMEM;
        n->value = arena_strdup(b->doc, (const char *)ev->data.scalar.value,
                                ev->data.scalar.length);
        if (!n->value)
            return DT_ENOMEM;
        if (strlen(n->value) != ev->data.scalar.length)
            return dt_yfail(b->doc, n, b->err, "NUL byte inside a scalar");
        n->quoted = ev->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                    ev->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        anchor = ev->data.scalar.anchor;
        *out = n;
        break;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool map = ev->type == YAML_MAPPING_START_EVENT;
        struct dt_ynode *n = new_node(b, map ? DT_Y_MAP : DT_Y_SEQ, ev->start_mark);
        if (!n)
            return DT_ENOMEM;
        anchor = map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
        if (++b->depth > DT_YAML_MAX_DEPTH)
            return dt_yfail(b->doc, n, b->err, "nesting deeper than %d levels",
                            DT_YAML_MAX_DEPTH);
        rc = parse_children(b, n, map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT,
                            weight);
        b->depth--;
        if (rc)
            return rc;
        *out = n;
        break;
    }
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        for (size_t i = b->doc->n_anchors; i-- > 0;)
            if (strcmp(b->doc->anchors[i].name, name) == 0) {
                *out = b->doc->anchors[i].node;
                *weight = b->doc->anchors[i].weight;
                return DT_OK;
            }
        return fail_at_mark(b, ev->start_mark, "unknown alias '*%s'", name);
    }
    default:
        return fail_at_mark(b, ev->start_mark, "unexpected YAML event");
    }
    if (anchor)
        return remember_anchor(b, anchor, *out, *weight);
    return DT_OK;
}

/* True when text has bytes that are not text (a binary file given by mistake). */
static bool looks_binary(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == 0 || (c < 32 && c != '\n' && c != '\r' && c != '\t'))
            return true;
    }
    return false;
}

int dt_ydoc_load_string(const char *name, const char *text, size_t len, struct dt_ydoc **out,
                        struct dt_error *err)
{
    *out = NULL;
    struct dt_ydoc *doc = calloc(1, sizeof *doc);
    if (!doc)
        return dt_fail(err, DT_ENOMEM, name, 0, 0, "out of memory");
    snprintf(doc->name, sizeof doc->name, "%s", name);
    if (len > DT_YAML_MAX_BYTES) {
        dt_ydoc_destroy(doc);
        return dt_fail(err, DT_EINPUT, name, 1, 1, "file too large (%zu bytes; the limit is %u)",
                       len, DT_YAML_MAX_BYTES);
    }
    if (looks_binary(text, len)) {
        dt_ydoc_destroy(doc);
        return dt_fail(err, DT_EINPUT, name, 1, 1, "not a YAML text file (binary bytes)");
    }
    struct builder b = {.doc = doc, .err = err};
    if (!yaml_parser_initialize(&b.parser)) {
        dt_ydoc_destroy(doc);
        return dt_fail(err, DT_ENOMEM, name, 0, 0, "cannot initialise the YAML parser");
    }
    yaml_parser_set_input_string(&b.parser, (const unsigned char *)text, len);
    int rc = DT_OK;
    yaml_event_t ev;
    bool have_doc = false;
    for (;;) {
        rc = next_event(&b, &ev);
        if (rc)
            break;
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (t == YAML_DOCUMENT_START_EVENT && have_doc) {
            rc = fail_at_mark(&b, ev.start_mark, "more than one YAML document in the file");
            yaml_event_delete(&ev);
            break;
        }
        if (t == YAML_DOCUMENT_START_EVENT)
            have_doc = true;
        if (t == YAML_SCALAR_EVENT || t == YAML_SEQUENCE_START_EVENT ||
            t == YAML_MAPPING_START_EVENT || t == YAML_ALIAS_EVENT) {
            long w;
            rc = parse_node(&b, &ev, &doc->root, &w);
            doc->weight = w;
        }
        yaml_event_delete(&ev);
        if (rc)
            break;
    }
    yaml_parser_delete(&b.parser);
    if (rc == DT_OK && !doc->root)
        rc = dt_fail(err, DT_EINPUT, name, 1, 1, "empty file: expected a YAML mapping");
    if (rc == DT_OK && doc->root->type != DT_Y_MAP)
        rc = dt_yfail(doc, doc->root, err,
                      "expected a YAML mapping (key: value lines) at the top level");
    if (rc == DT_ENOMEM)
        dt_fail(err, rc, name, 0, 0, "out of memory");
    if (rc) {
        dt_ydoc_destroy(doc);
        return rc;
    }
    *out = doc;
    return DT_OK;
}

int dt_ydoc_load_file(const char *path, struct dt_ydoc **out, struct dt_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return dt_fail(err, DT_EINPUT, path, 0, 0, "cannot open: %s", strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    int rc = DT_OK;
    while (buf) {
        if (len == cap) {
            if (cap > DT_YAML_MAX_BYTES) {
                rc = dt_fail(err, DT_EINPUT, path, 1, 1,
                             "file too large (over %u bytes): not a model or topology file",
                             DT_YAML_MAX_BYTES);
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                rc = dt_fail(err, DT_EINPUT, path, 0, 0, "read error: %s", strerror(errno));
            break;
        }
    }
    fclose(f);
    if (!buf)
        return dt_fail(err, DT_ENOMEM, path, 0, 0, "out of memory");
    if (rc == DT_OK)
        rc = dt_ydoc_load_string(path, buf, len, out, err);
    free(buf);
    return rc;
}

/* ---- access and typed getters ---- */

const struct dt_ynode *dt_ymap_get(const struct dt_ynode *map, const char *key)
{
    if (!map || map->type != DT_Y_MAP)
        return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->keys[i]->value, key) == 0)
            return map->items[i];
    return NULL;
}

int dt_ycheck_map(const struct dt_ydoc *doc, const struct dt_ynode *node, const char *what,
                  const char *const *allowed, struct dt_error *err)
{
    if (node->type != DT_Y_MAP)
        return dt_yfail(doc, node, err, "%s must be a mapping (key: value)", what);
    for (size_t i = 0; i < node->n; i++) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(*a, node->keys[i]->value) == 0;
        if (!ok) {
            char list[512] = "";
            size_t used = 0;
            for (const char *const *a = allowed; *a && used < sizeof list - 64; a++)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                         a == allowed ? "" : ", ", *a);
            return dt_yfail(doc, node->keys[i], err, "unknown key '%s' in %s (known: %s)",
                            node->keys[i]->value, what, list);
        }
    }
    return DT_OK;
}

int dt_ycheck_seq(const struct dt_ydoc *doc, const struct dt_ynode *node, const char *what,
                  struct dt_error *err)
{
    if (node->type != DT_Y_SEQ)
        return dt_yfail(doc, node, err, "%s must be a list (lines starting with '- ')", what);
    return DT_OK;
}

/* Finds key; a missing required key is an error located at the mapping. */
static int lookup(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                  bool required, const struct dt_ynode **node, struct dt_error *err)
{
    *node = dt_ymap_get(map, key);
    if (!*node && required)
        return dt_yfail(doc, map, err, "missing required key '%s'", key);
    return DT_OK;
}

/* Prefixes an error message with the key it is about ("count: 0 is out of range"). */
static int name_key(struct dt_error *err, const char *key, int rc)
{
    if (err) {
        size_t k = strlen(key), n = strlen(err->msg);
        if (k + 2 + n >= sizeof err->msg)
            return rc; /* no room: keep the message as it is */
        memmove(err->msg + k + 2, err->msg, n + 1);
        memcpy(err->msg, key, k);
        memcpy(err->msg + k, ": ", 2);
    }
    return rc;
}

static int want_scalar(const struct dt_ydoc *doc, const struct dt_ynode *node, const char *what,
                       struct dt_error *err)
{
    if (node->type != DT_Y_SCALAR)
        return dt_yfail(doc, node, err, "expected %s, found a %s", what,
                        node->type == DT_Y_MAP ? "mapping" : "list");
    return DT_OK;
}

int dt_yget_str(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                bool required, const char **out, struct dt_error *err)
{
    const struct dt_ynode *n;
    int rc = lookup(doc, map, key, required, &n, err);
    if (rc || !n)
        return rc;
    if ((rc = want_scalar(doc, n, "a string", err)))
        return rc;
    if (!n->value[0])
        return dt_yfail(doc, n, err, "'%s' must not be empty", key);
    *out = n->value;
    return DT_OK;
}

int dt_ynode_long(const struct dt_ydoc *doc, const struct dt_ynode *node, long min, long max,
                  long *out, struct dt_error *err)
{
    int rc = want_scalar(doc, node, "an integer", err);
    if (rc)
        return rc;
    const char *s = node->value;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (node->quoted || end == s || *end != '\0')
        return dt_yfail(doc, node, err, "expected an integer, found '%s'", s);
    if (errno == ERANGE || v < min || v > max)
        return dt_yfail(doc, node, err, "%s is out of range [%ld, %ld]", s, min, max);
    *out = v;
    return DT_OK;
}

int dt_yget_long(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                 bool required, long min, long max, long *out, struct dt_error *err)
{
    const struct dt_ynode *n;
    int rc = lookup(doc, map, key, required, &n, err);
    if (rc || !n)
        return rc;
    rc = dt_ynode_long(doc, n, min, max, out, err);
    return rc ? name_key(err, key, rc) : rc;
}

int dt_yget_int(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                bool required, int min, int max, int *out, struct dt_error *err)
{
    long v = *out;
    int rc = dt_yget_long(doc, map, key, required, min, max, &v, err);
    if (rc == DT_OK)
        *out = (int)v;
    return rc;
}

int dt_ynode_double(const struct dt_ydoc *doc, const struct dt_ynode *node, double min,
                    double max, double *out, struct dt_error *err)
{
    int rc = want_scalar(doc, node, "a number", err);
    if (rc)
        return rc;
    const char *s = node->value;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (node->quoted || end == s || *end != '\0')
        return dt_yfail(doc, node, err, "expected a number, found '%s'", s);
    if (!isfinite(v))
        return dt_yfail(doc, node, err, "expected a finite number, found '%s'", s);
    if (v < min || v > max)
        return dt_yfail(doc, node, err, "%s is out of range [%g, %g]", s, min, max);
    *out = v;
    return DT_OK;
}

int dt_yget_double(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                   bool required, double min, double max, double *out, struct dt_error *err)
{
    const struct dt_ynode *n;
    int rc = lookup(doc, map, key, required, &n, err);
    if (rc || !n)
        return rc;
    rc = dt_ynode_double(doc, n, min, max, out, err);
    return rc ? name_key(err, key, rc) : rc;
}

int dt_yget_bool(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                 bool required, bool *out, struct dt_error *err)
{
    const struct dt_ynode *n;
    int rc = lookup(doc, map, key, required, &n, err);
    if (rc || !n)
        return rc;
    if ((rc = want_scalar(doc, n, "true or false", err)))
        return rc;
    if (!n->quoted && strcmp(n->value, "true") == 0)
        *out = true;
    else if (!n->quoted && strcmp(n->value, "false") == 0)
        *out = false;
    else
        return dt_yfail(doc, n, err, "expected true or false, found '%s'", n->value);
    return DT_OK;
}

int dt_yget_quantity(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                     bool required, enum dt_unit unit, double min, double max, double *out,
                     struct dt_error *err)
{
    const struct dt_ynode *n;
    int rc = lookup(doc, map, key, required, &n, err);
    if (rc || !n)
        return rc;
    char what[128];
    snprintf(what, sizeof what, "a %s such as '%s'", dt_unit_kind_name(unit),
             dt_unit_example(unit));
    if ((rc = want_scalar(doc, n, what, err)))
        return rc;
    char why[256];
    double v;
    if (dt_parse_quantity(n->value, unit, &v, why, sizeof why))
        return dt_yfail(doc, n, err, "%s: %s", key, why);
    if (!(v > min) || v > max) {
        char lo[64], hi[64];
        dt_format_quantity(min, unit, lo, sizeof lo);
        dt_format_quantity(max, unit, hi, sizeof hi);
        return dt_yfail(doc, n, err, "%s: '%s' is out of range (must be above %s and at most %s)",
                        key, n->value, lo, hi);
    }
    *out = v;
    return DT_OK;
}

int dt_yget_enum(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                 bool required, const char *const *names, int *out, struct dt_error *err)
{
    const struct dt_ynode *n;
    int rc = lookup(doc, map, key, required, &n, err);
    if (rc || !n)
        return rc;
    if ((rc = want_scalar(doc, n, "a name", err)))
        return rc;
    char list[512] = "";
    size_t used = 0;
    for (int i = 0; names[i]; i++) {
        if (strcmp(names[i], n->value) == 0) {
            *out = i;
            return DT_OK;
        }
        if (used < sizeof list - 64)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                     names[i]);
    }
    return dt_yfail(doc, n, err, "unknown %s '%s' (known: %s)", key, n->value, list);
}

/* Recursive-descent JSON reader (RFC 8259), positions kept for messages. */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reader {
    const char *text, *p;
    int depth;
    int err_col;
    char *why;
    size_t whylen;
};

static int col_of(const struct reader *r, const char *at) { return (int)(at - r->text) + 1; }

static int fail(struct reader *r, const char *at, const char *msg)
{
    if (!r->err_col) {
        r->err_col = col_of(r, at);
        snprintf(r->why, r->whylen, "%s", msg);
    }
    return -1;
}

static void skip_ws(struct reader *r)
{
    while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')
        r->p++;
}

static struct dtv_json *new_value(struct reader *r, enum dtv_jtype t)
{
    struct dtv_json *v = calloc(1, sizeof *v);
    if (v) {
        v->type = t;
        v->col = col_of(r, r->p);
    }
    return v;
}

static int parse_value(struct reader *r, struct dtv_json **out);

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A string at r->p (which is '"'); *out is malloc'd. */
static int parse_string(struct reader *r, char **out)
{
    const char *start = r->p++;
    size_t cap = 32, n = 0;
    char *s = malloc(cap);
    if (!s)
        return fail(r, start, "out of memory");
    for (;;) {
        char c = *r->p;
        if (c == '\0') {
            free(s);
            return fail(r, start, "unterminated string");
        }
        if ((unsigned char)c < 0x20) {
            free(s);
            return fail(r, r->p, "control character in a string");
        }
        if (n + 4 >= cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) {
                free(s);
                return fail(r, r->p, "out of memory");
            }
            s = t;
        }
        r->p++;
        if (c == '"')
            break;
        if (c != '\\') {
            s[n++] = c;
            continue;
        }
        char e = *r->p++;
        switch (e) {
        case '"': s[n++] = '"'; break;
        case '\\': s[n++] = '\\'; break;
        case '/': s[n++] = '/'; break;
        case 'b': s[n++] = '\b'; break;
        case 'f': s[n++] = '\f'; break;
        case 'n': s[n++] = '\n'; break;
        case 'r': s[n++] = '\r'; break;
        case 't': s[n++] = '\t'; break;
        case 'u': {
            int u = 0;
            for (int i = 0; i < 4; i++) {
                int h = hexval(r->p[i]);
                if (h < 0) {
                    free(s);
                    return fail(r, r->p - 2, "bad \\u escape in a string");
                }
                u = u * 16 + h;
            }
            r->p += 4;
            s[n++] = u < 0x80 && u >= 0x20 ? (char)u : '?';
            break;
        }
        default:
            free(s);
            return fail(r, r->p - 2, "bad escape in a string");
        }
    }
    s[n] = '\0';
    *out = s;
    return 0;
}

static int parse_number(struct reader *r, struct dtv_json *v)
{
    const char *s = r->p, *q = s;
    /* JSON's grammar, stricter than strtod: no leading '+', no hex, no inf/nan. */
    if (*q == '-')
        q++;
    if (*q == '0')
        q++;
    else if (*q >= '1' && *q <= '9')
        while (*q >= '0' && *q <= '9')
            q++;
    else
        return fail(r, s, "expected a value (number, string, true, false, null, [ or {)");
    if (*q == '.') {
        q++;
        if (!(*q >= '0' && *q <= '9'))
            return fail(r, q, "expected digits after '.'");
        while (*q >= '0' && *q <= '9')
            q++;
    }
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '+' || *q == '-')
            q++;
        if (!(*q >= '0' && *q <= '9'))
            return fail(r, q, "expected digits in the exponent");
        while (*q >= '0' && *q <= '9')
            q++;
    }
    errno = 0;
    v->num = strtod(s, NULL);
    if (errno == ERANGE && fabs(v->num) > 1)
        return fail(r, s, "number out of range");
    r->p = q;
    return 0;
}

static int parse_container(struct reader *r, struct dtv_json *v, char close)
{
    if (++r->depth > DTV_JSON_MAX_DEPTH)
        return fail(r, r->p, "nested too deeply");
    r->p++;
    skip_ws(r);
    if (*r->p == close) {
        r->p++;
        r->depth--;
        return 0;
    }
    int cap = 0;
    for (;;) {
        char *key = NULL;
        int key_col = 0;
        skip_ws(r);
        if (close == '}') {
            if (*r->p != '"')
                return fail(r, r->p, "expected a key in double quotes");
            key_col = col_of(r, r->p);
            if (parse_string(r, &key))
                return -1;
            /* a second value for a key would silently win or lose: refuse it */
            for (int i = 0; i < v->n; i++)
                if (strcmp(v->keys[i], key) == 0) {
                    char msg[160];
                    snprintf(msg, sizeof msg, "key '%.80s' appears twice in this object (first "
                             "at column %d)", key, v->key_cols[i]);
                    free(key);
                    return fail(r, r->text + key_col - 1, msg);
                }
            skip_ws(r);
            if (*r->p != ':') {
                free(key);
                return fail(r, r->p, "expected ':' after a key");
            }
            r->p++;
        }
        struct dtv_json *item = NULL;
        if (parse_value(r, &item)) {
            free(key);
            return -1;
        }
        if (v->n == cap) {
            cap = cap ? 2 * cap : 8;
            struct dtv_json **items = realloc(v->items, (size_t)cap * sizeof *items);
            char **keys = close == '}' ? realloc(v->keys, (size_t)cap * sizeof *keys) : NULL;
            int *cols = close == '}' ? realloc(v->key_cols, (size_t)cap * sizeof *cols) : NULL;
            if (items)
                v->items = items;
            if (keys)
                v->keys = keys;
            if (cols)
                v->key_cols = cols;
            if (!items || (close == '}' && (!keys || !cols))) {
                free(key);
                dtv_json_free(item);
                return fail(r, r->p, "out of memory");
            }
        }
        if (close == '}') {
            v->keys[v->n] = key;
            v->key_cols[v->n] = key_col;
        }
        v->items[v->n++] = item;
        skip_ws(r);
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (*r->p == close) {
            r->p++;
            r->depth--;
            return 0;
        }
        return fail(r, r->p, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int parse_value(struct reader *r, struct dtv_json **out)
{
    skip_ws(r);
    struct dtv_json *v;
    int rc = 0;
    char c = *r->p;
    if (c == '{' || c == '[') {
        if (!(v = new_value(r, c == '{' ? DTV_J_OBJ : DTV_J_ARR)))
            return fail(r, r->p, "out of memory");
        rc = parse_container(r, v, c == '{' ? '}' : ']');
    } else if (c == '"') {
        if (!(v = new_value(r, DTV_J_STR)))
            return fail(r, r->p, "out of memory");
        rc = parse_string(r, &v->str);
    } else if (strncmp(r->p, "true", 4) == 0 || strncmp(r->p, "false", 5) == 0) {
        if (!(v = new_value(r, DTV_J_BOOL)))
            return fail(r, r->p, "out of memory");
        v->b = c == 't';
        r->p += v->b ? 4 : 5;
    } else if (strncmp(r->p, "null", 4) == 0) {
        if (!(v = new_value(r, DTV_J_NULL)))
            return fail(r, r->p, "out of memory");
        r->p += 4;
    } else {
        if (!(v = new_value(r, DTV_J_NUM)))
            return fail(r, r->p, "out of memory");
        rc = parse_number(r, v);
    }
    if (rc) {
        dtv_json_free(v);
        return -1;
    }
    *out = v;
    return 0;
}

int dtv_json_parse(const char *text, struct dtv_json **out, int *err_col, char *why,
                   size_t whylen)
{
    struct reader r = {.text = text, .p = text, .why = why, .whylen = whylen};
    *out = NULL;
    struct dtv_json *v = NULL;
    if (parse_value(&r, &v) == 0) {
        skip_ws(&r);
        if (*r.p == '\0') {
            *out = v;
            return 0;
        }
        fail(&r, r.p, "unexpected text after the value");
        dtv_json_free(v);
    }
    *err_col = r.err_col;
    return -1;
}

void dtv_json_free(struct dtv_json *v)
{
    if (!v)
        return;
    for (int i = 0; i < v->n; i++) {
        dtv_json_free(v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_cols);
    free(v->str);
    free(v);
}

const struct dtv_json *dtv_json_get(const struct dtv_json *obj, const char *key)
{
    if (!obj || obj->type != DTV_J_OBJ)
        return NULL;
    for (int i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return obj->items[i];
    return NULL;
}

const char *dtv_json_type_name(enum dtv_jtype t)
{
    static const char *const n[] = {"null", "true/false", "a number", "a string", "a list",
                                    "an object"};
    return n[t];
}

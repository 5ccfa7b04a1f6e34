/* A small JSON reader for dtexec's run records (one object per line). It keeps the column of
 * every value so that a bad field is reported as file:line:column. Strings are UTF-8 as
 * written (\uXXXX escapes outside ASCII become '?'); numbers are doubles. A key repeated in
 * one object is an error (which value was meant?). Nesting is limited to DTV_JSON_MAX_DEPTH, so
 * no input can exhaust the stack. */
#ifndef DTV_JSON_H
#define DTV_JSON_H

#include <stdbool.h>
#include <stddef.h>

#define DTV_JSON_MAX_DEPTH 32

enum dtv_jtype { DTV_J_NULL, DTV_J_BOOL, DTV_J_NUM, DTV_J_STR, DTV_J_ARR, DTV_J_OBJ };

struct dtv_json {
    enum dtv_jtype type;
    int col;                  /* 1-based column of the value's first character */
    bool b;                   /* DTV_J_BOOL */
    double num;               /* DTV_J_NUM */
    char *str;                /* DTV_J_STR */
    int n;                    /* DTV_J_ARR, DTV_J_OBJ: items */
    char **keys;              /* DTV_J_OBJ */
    int *key_cols;            /* DTV_J_OBJ: column of each key */
    struct dtv_json **items;
};

/* Parses one JSON value that fills text (whitespace around it allowed). On error returns -1
 * with *err_col (1-based) and a reason in why. The tree is the caller's (dtv_json_free). */
int dtv_json_parse(const char *text, struct dtv_json **out, int *err_col, char *why,
                   size_t whylen);
void dtv_json_free(struct dtv_json *v);

/* The value of key in an object, or NULL. */
const struct dtv_json *dtv_json_get(const struct dtv_json *obj, const char *key);
const char *dtv_json_type_name(enum dtv_jtype t);

#endif

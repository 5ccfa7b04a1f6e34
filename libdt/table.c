/* Text tables with columns as wide as their widest cell. */
#define _GNU_SOURCE /* vasprintf */
#include "dt/table.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* A line of the table: a row of cells, or a section line (n == -1, text in cells[0]). */
struct line {
    int n;
    char *cells[DT_TABLE_MAX_COLS];
};

struct dt_table {
    int ncols;
    const char *heads[DT_TABLE_MAX_COLS];
    bool left[DT_TABLE_MAX_COLS];
    struct line *lines;
    int n_lines, cap;
    bool open;   /* the last line is a row still taking cells */
    bool failed; /* out of memory on the way */
};

struct dt_table *dt_table_new(int ncols)
{
    if (ncols < 1 || ncols > DT_TABLE_MAX_COLS)
        return NULL;
    struct dt_table *t = calloc(1, sizeof *t);
    if (t)
        t->ncols = ncols;
    return t;
}

void dt_table_destroy(struct dt_table *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_lines; i++)
        for (int c = 0; c < (t->lines[i].n < 0 ? 1 : t->lines[i].n); c++)
            free(t->lines[i].cells[c]);
    free(t->lines);
    free(t);
}

void dt_table_column(struct dt_table *t, int col, const char *head, bool left)
{
    if (col >= 0 && col < t->ncols) {
        t->heads[col] = head;
        t->left[col] = left;
    }
}

static struct line *new_line(struct dt_table *t)
{
    if (t->n_lines == t->cap) {
        int cap = t->cap ? 2 * t->cap : 32;
        struct line *l = realloc(t->lines, (size_t)cap * sizeof *l);
        if (!l) {
            t->failed = true;
            return NULL;
        }
        t->lines = l;
        t->cap = cap;
    }
    struct line *l = &t->lines[t->n_lines++];
    memset(l, 0, sizeof *l);
    return l;
}

void dt_table_section(struct dt_table *t, const char *text)
{
    t->open = false;
    struct line *l = new_line(t);
    if (!l)
        return;
    l->n = -1;
    if (!(l->cells[0] = strdup(text)))
        t->failed = true;
}

void dt_table_cell(struct dt_table *t, const char *fmt, ...)
{
    struct line *l = t->open ? &t->lines[t->n_lines - 1] : new_line(t);
    if (!l)
        return;
    t->open = true;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&l->cells[l->n], fmt, ap) < 0) {
        l->cells[l->n] = NULL;
        t->failed = true;
    }
    va_end(ap);
    l->n++;
    if (l->n == t->ncols)
        t->open = false;
}

static void print_cells(const struct dt_table *t, const int *width, const char *const *cells,
                        int n, FILE *out)
{
    for (int c = 0; c < n; c++) {
        const char *s = cells[c] ? cells[c] : "";
        bool last = c == n - 1;
        if (t->left[c])
            fprintf(out, "%s%-*s", c ? " " : "", last ? 0 : width[c], s);
        else
            fprintf(out, "%s%*s", c ? " " : "", width[c], s);
    }
    fputc('\n', out);
}

int dt_table_print(const struct dt_table *t, FILE *out)
{
    if (t->failed)
        return -1;
    int width[DT_TABLE_MAX_COLS] = {0};
    for (int c = 0; c < t->ncols; c++)
        width[c] = t->heads[c] ? (int)strlen(t->heads[c]) : 0;
    for (int i = 0; i < t->n_lines; i++)
        for (int c = 0; c < t->lines[i].n; c++) {
            int w = (int)strlen(t->lines[i].cells[c]);
            if (w > width[c])
                width[c] = w;
        }
    bool header_due = true;
    for (int i = 0; i < t->n_lines; i++) {
        const struct line *l = &t->lines[i];
        if (l->n < 0) {
            fprintf(out, "\n%s\n", l->cells[0]);
            header_due = true;
            continue;
        }
        if (header_due)
            print_cells(t, width, t->heads, t->ncols, out);
        header_due = false;
        print_cells(t, width, (const char *const *)l->cells, l->n, out);
    }
    if (header_due && t->n_lines == 0)
        print_cells(t, width, t->heads, t->ncols, out);
    return 0;
}

/* Text tables whose columns fit their widest cell, so that large values never shift the
 * columns after them. Cells are formatted as they are added and printed at the end. */
#ifndef DT_TABLE_H
#define DT_TABLE_H

#include <stdbool.h>
#include <stdio.h>

#define DT_TABLE_MAX_COLS 24

struct dt_table;

/* A table of ncols columns (at most DT_TABLE_MAX_COLS); NULL when out of memory. */
struct dt_table *dt_table_new(int ncols);
void dt_table_destroy(struct dt_table *t);
/* Column col's header; left-aligned columns pad on the right, the others on the left. */
void dt_table_column(struct dt_table *t, int col, const char *head, bool left);
/* A line printed as it is (after a blank line) before the rows that follow, and the header
 * again under it: the sections of one table keep one set of widths. */
void dt_table_section(struct dt_table *t, const char *text);
/* The next cell of the current row (printf format); a row ends when it has ncols cells. */
void dt_table_cell(struct dt_table *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints everything; returns -1 if out of memory was met on the way (nothing printed). */
int dt_table_print(const struct dt_table *t, FILE *out);

#endif

/* Errors that carry where they happened: file:line:column: message.
 * Library code fills a dt_error and returns a status; only programs print and exit. */
#ifndef DT_ERROR_H
#define DT_ERROR_H

#include <stdarg.h>
#include <stddef.h>

enum dt_status {
    DT_OK = 0,
    DT_EINPUT = 2,   /* bad user input: a program exits with status 2 */
    DT_ENOMEM = 3,
    DT_ESYS = 4,     /* an operating-system call failed (errno in the message) */
    DT_EINTERNAL = 5
};

struct dt_error {
    char file[512]; /* empty when the error is not about a file (a flag, say) */
    int line;       /* 1-based; 0 when unknown */
    int col;        /* 1-based; 0 when unknown */
    char msg[1024];
};

/* Fills err (which may be NULL) and returns status, so that `return dt_fail(...)` reads well. */
int dt_fail(struct dt_error *err, int status, const char *file, int line, int col,
            const char *fmt, ...) __attribute__((format(printf, 6, 7)));
int dt_vfail(struct dt_error *err, int status, const char *file, int line, int col,
             const char *fmt, va_list ap);
void dt_error_clear(struct dt_error *err);

/* Formats "file:line:col: msg" (or "file: msg", or "msg") into buf. */
void dt_error_format(const struct dt_error *err, char *buf, size_t len);
/* Prints "prog: file:line:col: msg\n" to stderr. */
void dt_error_print(const char *prog, const struct dt_error *err);

#endif

/* Located error messages. */
#include "dt/error.h"

#include <stdio.h>
#include <string.h>

void dt_error_clear(struct dt_error *err)
{
    if (err)
        memset(err, 0, sizeof *err);
}

int dt_vfail(struct dt_error *err, int status, const char *file, int line, int col,
             const char *fmt, va_list ap)
{
    if (!err)
        return status;
    snprintf(err->file, sizeof err->file, "%s", file ? file : "");
    err->line = line;
    err->col = col;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return status;
}

int dt_fail(struct dt_error *err, int status, const char *file, int line, int col,
            const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dt_vfail(err, status, file, line, col, fmt, ap);
    va_end(ap);
    return status;
}

void dt_error_format(const struct dt_error *err, char *buf, size_t len)
{
    if (err->file[0] && err->line > 0)
        snprintf(buf, len, "%s:%d:%d: %s", err->file, err->line, err->col > 0 ? err->col : 1,
                 err->msg);
    else if (err->file[0])
        snprintf(buf, len, "%s: %s", err->file, err->msg);
    else
        snprintf(buf, len, "%s", err->msg);
}

void dt_error_print(const char *prog, const struct dt_error *err)
{
    char buf[2048];
    dt_error_format(err, buf, sizeof buf);
    fprintf(stderr, "%s: %s\n", prog, buf);
}

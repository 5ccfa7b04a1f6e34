/* Shared helpers of the fuzz harnesses: temporary files, the error-location check. */
#include "fuzz.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILES 8

const char *fuzz_input_name;

static char dir[512];
static char paths[MAX_FILES][600];
static int n_paths;

void fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz invariant: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (fuzz_input_name)
        fprintf(stderr, "fuzz input: %s\n", fuzz_input_name);
    abort();
}

static void remove_files(void)
{
    for (int i = 0; i < n_paths; i++)
        unlink(paths[i]);
    if (dir[0])
        rmdir(dir);
}

/* $TMPDIR, else memory (/dev/shm) where there is one: rewriting a file on a disk file
 * system waits for the disk (ext4 flushes a file truncated and written again). */
static void make_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/dtfuzz.XXXXXX", tmp);
    if (!mkdtemp(dir))
        fuzz_fail("cannot create a temporary directory %s: %s", dir, strerror(errno));
    atexit(remove_files);
}

const char *fuzz_write_file(const char *name, const void *data, size_t size)
{
    if (!dir[0])
        make_dir();
    int i = 0;
    while (i < n_paths && strcmp(strrchr(paths[i], '/') + 1, name) != 0)
        i++;
    if (i == n_paths) {
        FUZZ_CHECK(n_paths < MAX_FILES, "more than %d temporary files", MAX_FILES);
        snprintf(paths[n_paths++], sizeof paths[0], "%s/%s", dir, name);
    }
    FILE *f = fopen(paths[i], "wb");
    FUZZ_CHECK(f, "cannot write %s: %s", paths[i], strerror(errno));
    FUZZ_CHECK(fwrite(data, 1, size, f) == size && fclose(f) == 0, "cannot write %s", paths[i]);
    return paths[i];
}

FILE *fuzz_null(void)
{
    static FILE *f;
    if (!f)
        f = fopen("/dev/null", "w");
    FUZZ_CHECK(f, "cannot open /dev/null");
    return f;
}

bool fuzz_in(double x, double lo, double hi)
{
    return isfinite(x) && x >= lo && x <= hi;
}

/* Length in bytes of the line break at p (0 if none), as the loader counts them. */
static size_t line_break(const uint8_t *p, size_t left, enum fuzz_lines lines)
{
    if (p[0] == '\n')
        return 1;
    if (lines == FUZZ_LINES_TEXT)
        return 0;
    if (p[0] == '\r')
        return left > 1 && p[1] == '\n' ? 2 : 1;
    if (left > 1 && p[0] == 0xC2 && p[1] == 0x85)
        return 2;
    if (left > 2 && p[0] == 0xE2 && p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9))
        return 3;
    return 0;
}

/* Length in bytes of line `line` (1-based) of the input, or -1 when the input has fewer
 * lines. The end of the input is a line of length 0 after the last: after a final line
 * break, or (libyaml's end of stream) after a last line without one. */
static long line_length(const uint8_t *data, size_t size, int line, enum fuzz_lines lines)
{
    int at = 1;
    size_t start = 0;
    for (size_t i = 0; i < size;) {
        size_t b = line_break(data + i, size - i, lines);
        if (!b) {
            i++;
            continue;
        }
        if (at == line)
            return (long)(i - start);
        at++;
        i += b;
        start = i;
    }
    if (at == line)
        return (long)(size - start);
    return at + 1 == line && start < size ? 0 : -1;
}

void fuzz_check_error(int rc, const struct dt_error *err, const char *path, const uint8_t *data,
                      size_t size, enum fuzz_lines lines, bool located)
{
    char text[2048];
    dt_error_format(err, text, sizeof text);
    FUZZ_CHECK(rc == DT_EINPUT, "status %d, expected DT_EINPUT (%d): %s", rc, DT_EINPUT, text);
    FUZZ_CHECK(err->msg[0], "a failure without a message");
    FUZZ_CHECK(strcmp(err->file, path) == 0, "the error names '%s', not the input '%s': %s",
               err->file, path, text);
    FUZZ_CHECK(err->line >= 0 && err->col >= 0 && (err->line > 0 || err->col == 0),
               "bad location %d:%d: %s", err->line, err->col, text);
    FUZZ_CHECK(!located || (err->line > 0 && err->col > 0), "no line and column: %s", text);
    if (err->line == 0)
        return;
    long len = line_length(data, size, err->line, lines);
    FUZZ_CHECK(len >= 0, "line %d is past the end of the input: %s", err->line, text);
    FUZZ_CHECK(err->col <= len + 1, "column %d is past the end of line %d (%ld bytes): %s",
               err->col, err->line, len, text);
}

/* Shared helpers of the fuzz harnesses (tests/fuzz/fuzz_*.c).
 *
 * Each harness defines LLVMFuzzerTestOneInput. Built with clang -fsanitize=fuzzer (make fuzz,
 * tests/fuzz/fuzz.mk) it is a libFuzzer program; built with replay.c under the normal build
 * (make check) it replays the seed corpus and the regression inputs of tests/fuzz/.
 * Besides the sanitizers, a harness checks what the loader promises: success gives a
 * structure that passes the checks below, failure gives DT_EINPUT and a message located
 * inside the input. A broken promise aborts (a crash to libFuzzer, a failure to make check). */
#ifndef DT_FUZZ_H
#define DT_FUZZ_H

#include <float.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dt/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The file being replayed (replay.c), for messages; NULL under libFuzzer. */
extern const char *fuzz_input_name;

/* Prints "fuzz invariant: ..." (and the replayed file) and aborts. */
void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#define FUZZ_CHECK(cond, ...)                                                                  \
    do {                                                                                       \
        if (!(cond))                                                                           \
            fuzz_fail(__VA_ARGS__);                                                            \
    } while (0)

/* Writes the bytes to `name` in this process's private temporary directory (created on first
 * use in $TMPDIR or /dev/shm, removed at exit) and returns the file's path. */
const char *fuzz_write_file(const char *name, const void *data, size_t size);

/* /dev/null opened for writing: printers run on what a loader accepted. */
FILE *fuzz_null(void);

/* How the loader numbers lines: YAML (libyaml: CR, LF, CR LF and the Unicode breaks NEL, LS,
 * PS) or plain text read line by line (LF only). */
enum fuzz_lines { FUZZ_LINES_YAML, FUZZ_LINES_TEXT };

/* A failed load: status DT_EINPUT, a message, err->file == path, and a location that lies in
 * the input (line 0 = the whole file; col 0 = the whole line; col at most the line's length
 * + 1). With `located`, line and column must both be given. */
void fuzz_check_error(int rc, const struct dt_error *err, const char *path, const uint8_t *data,
                      size_t size, enum fuzz_lines lines, bool located);

/* Whether x is finite and lo <= x <= hi (DBL_MAX: any finite value). */
bool fuzz_in(double x, double lo, double hi);

#endif

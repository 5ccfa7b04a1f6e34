/* main() for a harness built without libFuzzer: runs LLVMFuzzerTestOneInput on each file
 * named, or on each file of each directory named (in name order), and says how many ran. A
 * broken invariant aborts; the sanitizers of the build (if any) report the rest. */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    FUZZ_CHECK(f, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap)
            buf = realloc(buf, cap *= 2);
    }
    FUZZ_CHECK(buf && !ferror(f), "cannot read %s", path);
    fclose(f);
    /* a copy of exactly len bytes, so that the sanitizers see a read past the input */
    uint8_t *copy = malloc(len ? len : 1);
    FUZZ_CHECK(copy, "out of memory");
    memcpy(copy, buf, len);
    free(buf);
    fuzz_input_name = path;
    LLVMFuzzerTestOneInput(copy, len);
    fuzz_input_name = NULL;
    free(copy);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int run_dir(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, by_name), runs = 0;
    FUZZ_CHECK(n >= 0, "cannot read %s: %s", dir, strerror(errno));
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            run_file(path);
            runs++;
        }
        free(names[i]);
    }
    free(names);
    return runs;
}

int main(int argc, char **argv)
{
    /* absolute paths: a harness may change the current directory (fuzz_runs.c) */
    char **paths = calloc((size_t)argc, sizeof *paths);
    FUZZ_CHECK(paths, "out of memory");
    for (int i = 1; i < argc; i++)
        FUZZ_CHECK((paths[i] = realpath(argv[i], NULL)), "cannot open %s: %s", argv[i],
                   strerror(errno));
    int runs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        FUZZ_CHECK(stat(paths[i], &st) == 0, "cannot open %s: %s", paths[i], strerror(errno));
        if (S_ISDIR(st.st_mode)) {
            runs += run_dir(paths[i]);
        } else {
            run_file(paths[i]);
            runs++;
        }
        free(paths[i]);
    }
    free(paths);
    const char *name = strrchr(argv[0], '/');
    printf("%s: %d inputs passed\n", name ? name + 1 : argv[0], runs);
    return 0;
}

/* Resolution of model and topology names to files. */
#include "dt/datafile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DT_DATADIR
#define DT_DATADIR "/usr/local/share/dtsim"
#endif

static int try_path(char *out, size_t len, const char *dir, const char *folder,
                    const char *name, const char *ext)
{
    int n;
    if (dir)
        n = snprintf(out, len, "%s/%s/%s%s", dir, folder, name, ext);
    else
        n = snprintf(out, len, "%s/%s%s", folder, name, ext);
    return n > 0 && (size_t)n < len && access(out, R_OK) == 0;
}

int dt_find_data_file(const char *folder, const char *name, char *out, size_t len)
{
    if (access(name, R_OK) == 0 || strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return access(name, R_OK) == 0 ? 0 : -1;
    }
    const char *env = getenv("DTSIM_DATADIR");
    const char *dirs[] = {NULL, env && *env ? env : DT_DATADIR, DT_DATADIR};
    const char *exts[] = {"", ".yaml"};
    for (size_t d = 0; d < 3; d++)
        for (size_t e = 0; e < 2; e++)
            if (try_path(out, len, dirs[d], folder, name, exts[e]))
                return 0;
    snprintf(out, len, "%s", name);
    return -1;
}

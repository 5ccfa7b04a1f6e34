/* Resolution of model and topology names to files, from any working directory. */
#include "dt/datafile.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DT_DATADIR
#define DT_DATADIR "/usr/local/share/dtsim"
#endif

/* The program is the build tree's (not installed) when its executable lies under the build
 * directory it was compiled in: it then reads the source tree's data, so that it works from
 * any directory before `make install` and never picks up an older installed copy. */
static bool uninstalled(void)
{
#if defined(DT_SRCDIR) && defined(DT_BUILDDIR)
    char exe[PATH_MAX], build[PATH_MAX];
    if (!realpath("/proc/self/exe", exe) || !realpath(DT_BUILDDIR, build))
        return false;
    size_t n = strlen(build);
    return strncmp(exe, build, n) == 0 && exe[n] == '/';
#else
    return false;
#endif
}

/* The folders searched after the working directory: $DTSIM_DATADIR, then the source tree
 * for an uninstalled program or the installed data directory otherwise. */
static int search_dirs(const char *dirs[2])
{
    const char *env = getenv("DTSIM_DATADIR");
    int n = 0;
    if (env && *env)
        dirs[n++] = env;
#ifdef DT_SRCDIR
    dirs[n++] = uninstalled() ? DT_SRCDIR : DT_DATADIR;
#else
    dirs[n++] = DT_DATADIR;
#endif
    return n;
}

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
    const char *dirs[3] = {NULL};
    int n = 1 + search_dirs(dirs + 1);
    const char *exts[] = {"", ".yaml"};
    for (int d = 0; d < n; d++)
        for (size_t e = 0; e < 2; e++)
            if (try_path(out, len, dirs[d], folder, name, exts[e]))
                return 0;
    snprintf(out, len, "%s", name);
    return -1;
}

int dt_locate_data(const char *flag, const char *folder, const char *name, char *out,
                   size_t len, struct dt_error *err)
{
    if (dt_find_data_file(folder, name, out, len) == 0)
        return DT_OK;
    if (strchr(name, '/'))
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "%s %s: no such file", flag, name);
    const char *dirs[2];
    int n = search_dirs(dirs);
    char where[1200];
    int w = snprintf(where, sizeof where, "./%s, %s/%s", name, folder, name);
    for (int d = 0; d < n && w > 0 && (size_t)w < sizeof where; d++)
        w += snprintf(where + w, sizeof where - (size_t)w, ", %s/%s/%s", dirs[d], folder, name);
    return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                   "%s %s: not found (looked for %s, each also with .yaml; DTSIM_DATADIR=DIR "
                   "adds DIR/%s)",
                   flag, name, where, folder);
}

/* Finding the project's data files (models/, topologies/) by name, from any directory. */
#ifndef DT_DATAFILE_H
#define DT_DATAFILE_H

#include <stddef.h>

#include "dt/error.h"

/* Resolves `name` for folder ("models", "topologies", ...): a path that exists is used as is;
 * otherwise folder/name and folder/name.yaml are tried under the current directory, then
 * $DTSIM_DATADIR, then the source tree when the program runs from its build tree (not
 * installed), else the installed data directory (DT_DATADIR). Returns 0 and fills out, or -1
 * with `name` copied to out (so the caller's open fails with the name the user gave). */
int dt_find_data_file(const char *folder, const char *name, char *out, size_t len);

/* The same for the value of a flag: when nothing is found, err names the flag and every
 * place looked in (DT_EINPUT). */
int dt_locate_data(const char *flag, const char *folder, const char *name, char *out,
                   size_t len, struct dt_error *err);

#endif

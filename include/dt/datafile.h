/* Finding the project's data files (models/, topologies/) by name. */
#ifndef DT_DATAFILE_H
#define DT_DATAFILE_H

#include <stddef.h>

/* Resolves `name` for folder ("models" or "topologies"): a path that exists is used as is;
 * otherwise folder/name, folder/name.yaml in the current directory, then in $DTSIM_DATADIR,
 * then in the installed data directory (DT_DATADIR). Returns 0 and fills out, or -1
 * with `name` copied to out (so the caller's open fails with the name the user gave). */
int dt_find_data_file(const char *folder, const char *name, char *out, size_t len);

#endif

/* What the run-record and reference-table harnesses share: loading one file into a run set
 * and checking the runs of a successful load. */
#ifndef DT_FUZZ_RUNS_H
#define DT_FUZZ_RUNS_H

#include "fuzz.h"

/* Writes the bytes to `name` (its suffix picks the reader: .csv a table, else records),
 * loads it with dtv_runset_load and checks the outcome. Models and topologies named in the
 * input are looked up as dtvalidate does, in $DTSIM_DATADIR (the source tree), which the
 * first call makes the current directory (paths given to the harness must be absolute). */
void fuzz_runs_load(const char *name, const uint8_t *data, size_t size);

#endif

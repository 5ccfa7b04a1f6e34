/* Fuzzes dtvalidate's reader of reference tables (CSV with provenance comments:
 * validate/runs.c); see fuzz_runs.c for what is checked. */
#include "fuzz_runs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_runs_load("table.csv", data, size);
    return 0;
}

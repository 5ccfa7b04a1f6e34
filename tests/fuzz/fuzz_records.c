/* Fuzzes dtvalidate's reader of dtexec run records (JSON lines: validate/runs.c on
 * validate/json.c); see fuzz_runs.c for what is checked. */
#include "fuzz_runs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_runs_load("records.jsonl", data, size);
    return 0;
}

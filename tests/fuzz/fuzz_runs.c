/* Loading fuzzed run records and reference tables (validate/runs.c, validate/json.c).
 * Accepted: every run has its model, topology and plan, a positive finite iteration and
 * epoch time, ranks that fit its topology and a label; keeping the fastest repeats and
 * matching selections run on the set. */
#include "fuzz_runs.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runs.h"

static void check_run(const struct dtv_run *r)
{
    FUZZ_CHECK(r->model && r->topo && r->plan, "run at line %d: no model, topology or plan",
               r->line);
    FUZZ_CHECK(r->ranks >= 1 && r->ranks <= r->topo->n_ranks && r->plan->n_ranks == r->ranks,
               "run at line %d: %d ranks, the topology has %d, the plan %d", r->line, r->ranks,
               r->topo->n_ranks, r->plan->n_ranks);
    FUZZ_CHECK(r->batch >= 1 && r->global_batch >= 1 && r->iters_per_epoch >= 1,
               "run at line %d: batch %d, global batch %d, %ld iterations", r->line, r->batch,
               r->global_batch, r->iters_per_epoch);
    FUZZ_CHECK(fuzz_in(r->iter_s, DBL_MIN, DBL_MAX) && fuzz_in(r->epoch_s, DBL_MIN, DBL_MAX),
               "run at line %d: iteration %g s, epoch %g s", r->line, r->iter_s, r->epoch_s);
    FUZZ_CHECK(r->label[0] && memchr(r->label, 0, sizeof r->label) &&
                   memchr(r->setup, 0, sizeof r->setup),
               "run at line %d: no label", r->line);
    FUZZ_CHECK(r->n_alloc == 0 || r->n_alloc == r->ranks, "run at line %d: %d allocations",
               r->line, r->n_alloc);
}

void fuzz_runs_load(const char *name, const uint8_t *data, size_t size)
{
    /* in the source tree, as the tests that wrote the seeds: records name "topologies/x.yaml" */
    static bool in_tree;
    const char *tree = getenv("DTSIM_DATADIR");
    FUZZ_CHECK(tree, "set DTSIM_DATADIR to the source tree (models/ and topologies/ of the runs)");
    FUZZ_CHECK(in_tree || chdir(tree) == 0, "cannot enter %s", tree);
    in_tree = true;
    const char *path = fuzz_write_file(name, data, size);
    struct dtv_runset set;
    dtv_runset_init(&set);
    struct dtv_load_options opt = {.topology = "2n2p"};
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dtv_runset_load(&set, path, &opt, &err);
    if (rc) {
        FUZZ_CHECK(set.n == 0, "a failed load kept %d runs", set.n);
        fuzz_check_error(rc, &err, path, data, size, FUZZ_LINES_TEXT, false);
    } else {
        FUZZ_CHECK(set.n >= 1, "a load without runs succeeded");
        for (int i = 0; i < set.n; i++)
            check_run(&set.runs[i]);
        int before = set.n, dropped = dtv_runset_keep_fastest(&set);
        FUZZ_CHECK(dropped >= 0 && set.n == before - dropped && set.n >= 1,
                   "keep_fastest: %d runs, %d dropped, %d left", before, dropped, set.n);
        for (int i = 0; i < set.n; i++)
            FUZZ_CHECK(dtv_run_matches(&set.runs[i], "") &&
                           set.runs[i].repeats >= 1 && set.runs[i].repeats <= DTV_MAX_REPEATS,
                       "run %d after keep_fastest: %d repeats", i, set.runs[i].repeats);
        FUZZ_CHECK(dtv_label_width(&set) >= 40, "label width");
    }
    dtv_runset_free(&set);
}

/* Fuzzes the model loader (libdt/model.c, libdt/model_layers.c on libdt/yamldoc.c).
 * Accepted: every layer reads earlier layers only, shapes and counts stay in the documented
 * limits, parameters are laid out back to back and the totals are the layers' sums; the
 * summary prints, and the sequential plan of one sample (what dtsim and dtexec compile first)
 * builds and passes the plan checker. */
#include "fuzz.h"

#include <math.h>
#include <string.h>

#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"

/* One CPU device: enough to build a sequential plan. */
static const char one_device[] =
    "name: fuzz\n"
    "nodes:\n"
    "  - {name: n, count: 1, devices: 1,\n"
    "     device: {kind: cpu, name: c, cores: 1, peak: {fp32: 100 GFLOP/s},\n"
    "              memory: 1 TiB, memory_bw: 10 GB/s},\n"
    "     intra: {kind: shm, bandwidth: 10 GB/s, latency: 1 us}}\n";

static const struct dt_topology *topology(void)
{
    static struct dt_topology *t;
    struct dt_error err;
    if (!t && dt_topology_load_string("fuzz-topology", one_device, &t, &err))
        fuzz_fail("the harness's topology does not load: %s", err.msg);
    return t;
}

static void check_shape(const struct dt_shape *s, const char *what, int layer)
{
    FUZZ_CHECK(s->rank >= 1 && s->rank <= 3, "layer %d: %s of rank %d", layer, what, s->rank);
    for (int k = 0; k < s->rank; k++)
        FUZZ_CHECK(s->d[k] >= 1, "layer %d: %s has extent %ld", layer, what, s->d[k]);
    FUZZ_CHECK(dt_shape_size(s) <= DT_MODEL_MAX_ELEMS, "layer %d: %s holds %ld elements",
               layer, what, dt_shape_size(s));
}

static void check_layer(const struct dt_model *m, int i, long *offset)
{
    const struct dt_layer *l = &m->layers[i];
    FUZZ_CHECK(l->kind >= 0 && l->kind < DT_L_KIND_COUNT, "layer %d: kind %d", i, (int)l->kind);
    FUZZ_CHECK(memchr(l->name, 0, sizeof l->name) && l->name[0], "layer %d: no name", i);
    FUZZ_CHECK(dt_model_find_layer(m, l->name) == i, "layer %d: name '%s' is also layer %d", i,
               l->name, dt_model_find_layer(m, l->name));
    FUZZ_CHECK(l->n_in >= 1 && l->n_in <= DT_MAX_INPUTS, "layer %d: %d inputs", i, l->n_in);
    for (int k = 0; k < l->n_in; k++)
        FUZZ_CHECK(l->in[k] >= -1 && l->in[k] < i, "layer %d reads layer %d", i, l->in[k]);
    check_shape(&l->in_shape, "input", i);
    check_shape(&l->out_shape, "output", i);
    FUZZ_CHECK(l->params >= 0 && l->state_floats >= 0 && l->param_offset == *offset,
               "layer %d: %ld parameters at %ld (expected at %ld), %ld state floats", i,
               l->params, l->param_offset, *offset, l->state_floats);
    *offset += l->params;
    FUZZ_CHECK(fuzz_in(l->fwd_flops, 0, DBL_MAX) && fuzz_in(l->bwd_data_flops, 0, DBL_MAX) &&
                   fuzz_in(l->bwd_weight_flops, 0, DBL_MAX) && fuzz_in(l->act_bytes, 0, DBL_MAX) &&
                   fuzz_in(l->fwd_io_bytes, 0, DBL_MAX) && fuzz_in(l->bwd_io_bytes, 0, DBL_MAX),
               "layer %d: a cost is negative or not finite", i);
    FUZZ_CHECK(l->needs_input_grad || l->bwd_data_flops == 0,
               "layer %d: backward-data FLOPs without an input gradient", i);
}

static bool close_to(double sum, double total)
{
    return fabs(sum - total) <= 1e-9 * fmax(fabs(sum), fabs(total));
}

static void check_model(const struct dt_model *m)
{
    FUZZ_CHECK(m->n_layers >= 1 && m->n_layers <= DT_MODEL_MAX_LAYERS, "%d layers",
               m->n_layers);
    FUZZ_CHECK(m->classes >= 1 && m->name[0], "%ld classes, name '%s'", m->classes, m->name);
    check_shape(&m->input, "the model's input", -1);
    long offset = 0;
    long state = 0;
    double fwd = 0, bwd = 0, act = 0;
    for (int i = 0; i < m->n_layers; i++) {
        check_layer(m, i, &offset);
        const struct dt_layer *l = &m->layers[i];
        state += l->state_floats;
        fwd += l->fwd_flops;
        bwd += l->bwd_data_flops + l->bwd_weight_flops;
        act += l->act_bytes;
    }
    FUZZ_CHECK(offset == m->total_params && offset <= DT_MODEL_MAX_PARAMS,
               "%ld parameters in the layers, %ld in the total", offset, m->total_params);
    FUZZ_CHECK(state == m->total_state_floats && close_to(fwd, m->fwd_flops) &&
                   close_to(bwd, m->bwd_flops) && close_to(act, m->act_bytes),
               "the totals are not the sums of the layers");
    dt_model_print_summary(m, fuzz_null());
}

/* The sequential plan of one sample: builds (or says why not) and passes the checker. */
static void check_plan(const struct dt_model *m)
{
    struct dt_plan_options o;
    dt_plan_options_init(&o);
    o.strategy = DT_STRAT_SEQUENTIAL;
    o.batch = 1;
    o.n_ranks = 1;
    struct dt_plan *plan = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dt_plan_build(m, topology(), &o, &plan, &err);
    if (rc) {
        FUZZ_CHECK(rc == DT_EINPUT && err.msg[0] && !plan,
                   "plan of an accepted model: status %d, '%s'", rc, err.msg);
        return;
    }
    rc = dt_plan_check(plan, &err);
    FUZZ_CHECK(rc == DT_OK, "the sequential plan fails its check: %s", err.msg);
    struct dt_memory mem;
    dt_plan_rank_memory(plan, 0, &mem);
    FUZZ_CHECK(fuzz_in(mem.total, 0, DBL_MAX), "plan memory %g", mem.total);
    dt_plan_destroy(plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("model.yaml", data, size);
    struct dt_model *m = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dt_model_load(path, &m, &err);
    if (rc) {
        FUZZ_CHECK(!m, "a failed load returned a model");
        fuzz_check_error(rc, &err, path, data, size, FUZZ_LINES_YAML, true);
        return 0;
    }
    check_model(m);
    check_plan(m);
    dt_model_destroy(m);
    return 0;
}

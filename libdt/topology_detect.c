/* A topology of the machine we run on: cores and memory from hwloc (or sysconf without it),
 * clock and vector width from /proc/cpuinfo. What no probe can tell cheaply (bandwidths,
 * latencies) gets the documented estimates below, which dtvalidate can then calibrate. */
#include "config.h"

#include "dt/topology.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_HWLOC
#include <hwloc.h>
#endif

/* Estimates for what is not probed (topologies/README.md, "Detection"). */
#define EST_MEM_BW_PER_CORE 10e9   /* B/s: server DDR4/DDR5 gives roughly 5-15 GB/s per core */
#define EST_SHM_LAT 1e-6           /* s: an MPI shared-memory message */
#define EST_CLOCK 2e9              /* Hz: when /proc/cpuinfo gives no clock */

struct cpu_facts {
    int cores;
    double mem_bytes;
    char model[96];
    double clock_Hz;
    int flop_per_cycle; /* FP32, per core */
    const char *isa;    /* the flag that decided flop_per_cycle */
    char how[64];       /* what found cores and memory */
};

static bool has_flag(const char *flags, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = flags; (p = strstr(p, name)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ' || p[-1] == '\t') &&
            (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

/* Value after "key<spaces>: " on a /proc/cpuinfo line, or NULL. */
static const char *cpuinfo_value(const char *line, const char *key)
{
    size_t n = strlen(key);
    if (strncmp(line, key, n) != 0 || (line[n] != ' ' && line[n] != '\t' && line[n] != ':'))
        return NULL;
    const char *colon = strchr(line + n, ':');
    if (!colon)
        return NULL;
    colon++;
    while (*colon == ' ')
        colon++;
    return colon;
}

/* Clock, model name and vector width of the first CPU, when Linux tells them. */
static void read_cpuinfo(struct cpu_facts *f)
{
    /* Without AVX the SSE units do 4-wide adds and multiplies: 8 FLOP/cycle. */
    f->flop_per_cycle = 8;
    f->isa = "sse";
    FILE *in = fopen("/proc/cpuinfo", "r");
    if (!in)
        return;
    char line[8192];
    bool have_flags = false;
    while (fgets(line, sizeof line, in)) {
        const char *v;
        if (!f->model[0] && (v = cpuinfo_value(line, "model name"))) {
            snprintf(f->model, sizeof f->model, "%s", v);
            f->model[strcspn(f->model, "\n")] = '\0';
        } else if (f->clock_Hz == 0 && (v = cpuinfo_value(line, "cpu MHz"))) {
            double mhz = strtod(v, NULL);
            if (mhz > 1 && mhz < 10000)
                f->clock_Hz = mhz * 1e6;
        } else if (!have_flags && (v = cpuinfo_value(line, "flags"))) {
            have_flags = true;
            /* Two 256-bit FMA pipes (Haswell and later, Zen 2 and later) give 2 x 8 x 2 = 32
             * FP32 FLOP/cycle. AVX-512 parts have one or two 512-bit FMA units (Zen 4 splits
             * them into 256-bit halves), so 32 is the safe figure for them too. */
            if (has_flag(v, "avx512f")) {
                f->flop_per_cycle = 32;
                f->isa = "avx512f";
            } else if (has_flag(v, "avx2") && has_flag(v, "fma")) {
                f->flop_per_cycle = 32;
                f->isa = "avx2+fma";
            } else if (has_flag(v, "avx")) {
                f->flop_per_cycle = 16;
                f->isa = "avx";
            }
        }
    }
    fclose(in);
}

#ifdef HAVE_HWLOC
static bool probe_hwloc(struct cpu_facts *f)
{
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) < 0)
        return false;
    if (hwloc_topology_load(t) < 0) {
        hwloc_topology_destroy(t);
        return false;
    }
    int cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    if (cores < 1)
        cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    hwloc_obj_t root = hwloc_get_root_obj(t);
    double mem = root ? (double)root->total_memory : 0;
    hwloc_obj_t pkg = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, 0);
    const char *model = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUModel") : NULL;
    if (model && model[0])
        snprintf(f->model, sizeof f->model, "%s", model);
    hwloc_topology_destroy(t);
    if (cores < 1 || mem <= 0)
        return false;
    f->cores = cores;
    f->mem_bytes = mem;
    unsigned v = hwloc_get_api_version();
    snprintf(f->how, sizeof f->how, "hwloc API %u.%u", v >> 16, (v >> 8) & 0xff);
    return true;
}
#endif

static double sysconf_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

static bool probe_sysconf(struct cpu_facts *f)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double mem = sysconf_memory();
    if (cores < 1 || mem <= 0)
        return false;
    f->cores = cores > DT_TOPO_MAX_DEVICES ? DT_TOPO_MAX_DEVICES : (int)cores;
    f->mem_bytes = mem;
    snprintf(f->how, sizeof f->how, "sysconf");
    return true;
}

int dt_topology_detect(struct dt_topology **out, struct dt_error *err)
{
    *out = NULL;
    struct cpu_facts f = {0};
    read_cpuinfo(&f);
    bool ok = false;
#ifdef HAVE_HWLOC
    ok = probe_hwloc(&f);
    /* hwloc adds up the NUMA nodes' meminfo, which virtual machines whose memory is brought
     * online lazily under-report; the kernel's own total (sysconf) is then the larger. */
    if (ok && sysconf_memory() > f.mem_bytes)
        f.mem_bytes = sysconf_memory();
#endif
    if (!ok && !probe_sysconf(&f))
        return dt_fail(err, DT_ESYS, "", 0, 0, "cannot count the cores and memory: %s",
                       strerror(errno));
    if (f.cores > DT_TOPO_MAX_DEVICES)
        f.cores = DT_TOPO_MAX_DEVICES;
    bool clock_known = f.clock_Hz > 0;
    if (!clock_known)
        f.clock_Hz = EST_CLOCK;
    if (!f.model[0])
        snprintf(f.model, sizeof f.model, "this machine's CPU");

    struct dt_topology *t = calloc(1, sizeof *t);
    struct dt_node_group *g = calloc(1, sizeof *g);
    if (!t || !g) {
        free(t);
        free(g);
        return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory");
    }
    t->groups = g;
    t->n_groups = 1;
    snprintf(t->name, sizeof t->name, "localhost");
    snprintf(t->path, sizeof t->path, "detected");
    snprintf(t->source, sizeof t->source,
             "detected: %d cores and %.1f GiB (%s); peak = clock %.0f MHz%s x %d FP32 "
             "FLOP/cycle (%s); bandwidths and latencies are estimates (topologies/README.md)",
             f.cores, f.mem_bytes / 1073741824.0, f.how, f.clock_Hz / 1e6,
             clock_known ? "" : " (assumed)", f.flop_per_cycle, f.isa);
    snprintf(g->name, sizeof g->name, "local");
    g->count = 1;
    /* One rank per core, as mpiexec places them by default. */
    g->devices = f.cores;
    struct dt_device_spec *d = &g->device;
    d->kind = DT_DEV_CPU;
    snprintf(d->name, sizeof d->name, "%s", f.model);
    d->cores = 1;
    d->clock_Hz = f.clock_Hz;
    d->peak_flops[DT_FP32] = f.clock_Hz * f.flop_per_cycle;
    d->peak_flops[DT_FP64] = d->peak_flops[DT_FP32] / 2;
    d->mem_bytes = f.mem_bytes / f.cores;
    d->mem_bw_Bps = EST_MEM_BW_PER_CORE;
    /* Shared memory: a copy reads and writes every byte, so half the memory bandwidth. */
    snprintf(g->intra.kind, sizeof g->intra.kind, "shm");
    g->intra.sharing = DT_LINK_SHARED;
    g->intra.bw_Bps = EST_MEM_BW_PER_CORE / 2;
    g->intra.bus_bw_Bps = EST_MEM_BW_PER_CORE * f.cores / 2;
    g->intra.lat_s = EST_SHM_LAT;
    t->n_nodes = 1;
    t->n_ranks = f.cores;
    *out = t;
    return DT_OK;
}

/* Fuzzes the topology loader (libdt/topology.c, on libdt/yamldoc.c and libdt/units.c).
 * Accepted: the derived counts agree with the groups and stay in the documented limits, every
 * rank maps to a node and back, the printer runs, and a one-group topology reshapes as
 * dtsim --sweep and dtvalidate do. */
#include "fuzz.h"

#include <string.h>

#include "dt/topology.h"

static void check_group(const struct dt_node_group *g)
{
    const struct dt_device_spec *d = &g->device;
    FUZZ_CHECK(g->count >= 1 && g->devices >= 1 && g->devices <= DT_TOPO_MAX_DEVICES,
               "group '%s': %d nodes of %d devices", g->name, g->count, g->devices);
    FUZZ_CHECK(g->nics >= 0 && g->nics <= DT_TOPO_MAX_NICS, "group '%s': %d NICs", g->name,
               g->nics);
    FUZZ_CHECK(memchr(g->name, 0, sizeof g->name) && memchr(d->name, 0, sizeof d->name),
               "a name without its terminating NUL");
    FUZZ_CHECK(fuzz_in(d->peak_flops[DT_FP32], 1, 1e30), "group '%s': fp32 peak %g", g->name,
               d->peak_flops[DT_FP32]);
    for (int p = 0; p < DT_PREC_COUNT; p++)
        FUZZ_CHECK(fuzz_in(d->peak_flops[p], 0, 1e30), "group '%s': peak %g", g->name,
                   d->peak_flops[p]);
    FUZZ_CHECK(fuzz_in(d->mem_bw_Bps, 1, 1e30) && fuzz_in(d->mem_bytes, 1, 1e30) &&
                   fuzz_in(d->cache_bytes, 0, 1e30) && fuzz_in(d->clock_Hz, 0, 1e30),
               "group '%s': a device quantity out of range", g->name);
    FUZZ_CHECK(d->kind == DT_DEV_CPU ? d->cores >= 1 : d->cores == 0,
               "group '%s': %d cores on a %s", g->name, d->cores,
               d->kind == DT_DEV_CPU ? "cpu" : "gpu");
    FUZZ_CHECK(fuzz_in(g->intra.bw_Bps, 0, 1e30) && fuzz_in(g->intra.lat_s, 0, 1e3) &&
                   fuzz_in(g->intra.bus_bw_Bps, 0, 1e30) && fuzz_in(g->nic.bw_Bps, 0, 1e30) &&
                   fuzz_in(g->nic.lat_s, 0, 1e3) && fuzz_in(g->price_per_h, 0, 1e30) &&
                   fuzz_in(g->data_read_Bps, 0, 1e30),
               "group '%s': a link quantity out of range", g->name);
    FUZZ_CHECK(g->nics == 0 || g->nic.bw_Bps > 0, "group '%s': NICs without bandwidth",
               g->name);
}

static void check_topology(const struct dt_topology *t)
{
    FUZZ_CHECK(t->n_groups >= 1 && t->n_groups <= DT_TOPO_MAX_GROUPS, "%d groups",
               t->n_groups);
    long nodes = 0, ranks = 0;
    for (int g = 0; g < t->n_groups; g++) {
        check_group(&t->groups[g]);
        nodes += t->groups[g].count;
        ranks += (long)t->groups[g].count * t->groups[g].devices;
    }
    FUZZ_CHECK(nodes == t->n_nodes && ranks == t->n_ranks,
               "%d nodes and %d ranks derived, the groups hold %ld and %ld", t->n_nodes,
               t->n_ranks, nodes, ranks);
    FUZZ_CHECK(nodes <= DT_TOPO_MAX_NODES && ranks <= DT_TOPO_MAX_RANKS,
               "%ld nodes, %ld ranks: over the limits", nodes, ranks);
    FUZZ_CHECK(t->has_network || t->n_nodes == 1, "%d nodes without a network", t->n_nodes);
    if (t->has_network) {
        const struct dt_network *n = &t->net;
        FUZZ_CHECK(n->endpoints >= 1 && n->hosts_per_leaf >= 1 && n->nodes_per_leaf >= 1 &&
                       n->n_leaves >= 1 && n->levels >= 1 && n->levels <= 3,
                   "network layout: %d endpoints, %d hosts and %d nodes per leaf, %d leaves, "
                   "%d levels", n->endpoints, n->hosts_per_leaf, n->nodes_per_leaf,
                   n->n_leaves, n->levels);
        FUZZ_CHECK(fuzz_in(n->switch_lat_s, 0, 1e3) && fuzz_in(n->uplink_bw_Bps, 0, 1e30) &&
                       fuzz_in(n->leaf_up_bw_Bps, 0, 1e30),
                   "a network quantity out of range");
    }
    /* every node's ranks are contiguous and map back to it */
    int next = 0;
    for (int node = 0; node < t->n_nodes; node++) {
        int first = dt_topology_node_first_rank(t, node), n = dt_topology_node_ranks(t, node);
        FUZZ_CHECK(first == next && n >= 1, "node %d: first rank %d (expected %d), %d ranks",
                   node, first, next, n);
        FUZZ_CHECK(dt_topology_node_of(t, first) == node &&
                       dt_topology_node_of(t, first + n - 1) == node,
                   "the ranks of node %d map elsewhere", node);
        FUZZ_CHECK(dt_topology_group_of_node(t, node) == dt_topology_group_of_rank(t, first),
                   "node %d and its first rank are in different groups", node);
        next = first + n;
    }
    FUZZ_CHECK(next == t->n_ranks && dt_topology_node_of(t, t->n_ranks) == -1 &&
                   dt_topology_node_of(t, -1) == -1,
               "the nodes hold %d ranks of %d", next, t->n_ranks);
    FUZZ_CHECK(fuzz_in(dt_topology_price_per_h(t), 0, DBL_MAX), "price per hour %g",
               dt_topology_price_per_h(t));
    dt_topology_print(t, fuzz_null());
}

/* A reshape either fails with a message or gives a topology of that shape that passes. */
static void check_reshape(const struct dt_topology *t, int nodes, int ppn)
{
    struct dt_topology *r = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dt_topology_reshape(t, nodes, ppn, &r, &err);
    if (rc) {
        FUZZ_CHECK(rc == DT_EINPUT && err.msg[0] && !r, "reshape: status %d, '%s'", rc,
                   err.msg);
        return;
    }
    FUZZ_CHECK(r->n_nodes == nodes && r->n_ranks == nodes * ppn,
               "reshaped to %dx%d: %d nodes, %d ranks", nodes, ppn, r->n_nodes, r->n_ranks);
    check_topology(r);
    dt_topology_destroy(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("topology.yaml", data, size);
    struct dt_topology *t = NULL;
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dt_topology_load(path, &t, &err);
    if (rc) {
        FUZZ_CHECK(!t, "a failed load returned a topology");
        fuzz_check_error(rc, &err, path, data, size, FUZZ_LINES_YAML, true);
        return 0;
    }
    check_topology(t);
    if (t->n_groups == 1) {
        check_reshape(t, 1, 1);
        check_reshape(t, 2, t->groups[0].devices);
        check_reshape(t, t->n_nodes, 2 * t->groups[0].devices);
    }
    dt_topology_destroy(t);
    return 0;
}

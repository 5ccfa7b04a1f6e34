/* Loads a topology YAML file into struct dt_topology: every value is checked against a sane
 * range and located errors say file:line:column. Also derives node and rank counts and the switch
 * layout of the network, and answers rank <-> node questions. The format and the ranges are
 * documented in topologies/README.md; keep the two in step. */
#include "dt/topology.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "dt/units.h"
#include "dt/yamldoc.h"

/* Ranges: a quantity must lie in (MIN, MAX]. Wide enough for any machine built or announced,
 * narrow enough to catch a wrong prefix ("1e30 B/s", "latency: 1 h"). */
#define BW_MIN 1e6                  /* 1 MB/s */
#define BW_MAX 1e14                 /* 100 TB/s */
#define LAT_MIN 0.0
#define LAT_MAX 1.0                 /* 1 s */
#define FLOPS_MIN 1e6               /* 1 MFLOP/s */
#define FLOPS_MAX 1e17              /* 100 PFLOP/s per device */
#define MEM_MIN 1e6                 /* 1 MB */
#define MEM_MAX 70368744177664.0    /* 64 TiB per device */
#define CACHE_MIN 1024.0            /* 1 KiB */
#define PRICE_MIN 0.0
#define PRICE_MAX 1e4               /* USD per node-hour */
#define CLOCK_MIN 1e6               /* 1 MHz */
#define CLOCK_MAX 1e10              /* 10 GHz */
#define MAX_CORES 4096
#define MAX_SMS 4096     /* streaming multiprocessors (compute units) of a gpu */
#define MIN_RADIX 2
#define MAX_RADIX 4096
#define MAX_OVERSUB 64.0

static const char *const device_kinds[] = {"cpu", "gpu", NULL};
static const char *const intra_kinds[] = {"shm", "pcie", "nvlink", "nvswitch", NULL};
static const char *const nic_kinds[] = {"ethernet", "infiniband", "roce", "efa", "omnipath", NULL};
static const char *const sharing_names[] = {"shared", "crossbar", NULL};
static const char *const network_kinds[] = {"switch", "fat-tree", "rail", "torus", NULL};
/* Same order as enum dt_precision. */
static const char *const precision_keys[] = {"fp32", "fp64", "tf32", "fp16", "bf16", "fp8", NULL};

const char *dt_precision_name(enum dt_precision p)
{
    return p >= 0 && p < DT_PREC_COUNT ? precision_keys[p] : "?";
}

/* Where errors go: a YAML document when loading (errors carry line:column), or only a path
 * when reshaping a topology already in memory. */
struct where {
    const struct dt_ydoc *doc;
    const char *path;
};

static int fail_at(const struct where *w, const struct dt_ynode *node, struct dt_error *err,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_at(const struct where *w, const struct dt_ynode *node, struct dt_error *err,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (w->doc && node)
        dt_vfail(err, DT_EINPUT, dt_ydoc_name(w->doc), node->line, node->col, fmt, ap);
    else
        dt_vfail(err, DT_EINPUT, w->path, 0, 0, fmt, ap);
    va_end(ap);
    return DT_EINPUT;
}

/* A string key copied into a fixed buffer; too long is an error, not a silent truncation. */
static int get_text(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                    bool required, char *buf, size_t len, struct dt_error *err)
{
    const char *s = NULL;
    int rc = dt_yget_str(doc, map, key, required, &s, err);
    if (rc || !s)
        return rc;
    if (strlen(s) >= len)
        return dt_yfail(doc, dt_ymap_get(map, key), err, "'%s' is longer than %zu characters",
                        key, len - 1);
    memcpy(buf, s, strlen(s) + 1);
    return DT_OK;
}

/* A key that only makes sense in some cases is an error elsewhere, not silently ignored. */
static int refuse_key(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                      const char *why, struct dt_error *err)
{
    const struct dt_ynode *n = dt_ymap_get(map, key);
    if (n)
        return dt_yfail(doc, n, err, "'%s' %s", key, why);
    return DT_OK;
}

static int parse_peak(const struct dt_ydoc *doc, const struct dt_ynode *peak,
                      struct dt_device_spec *d, struct dt_error *err)
{
    int rc = dt_ycheck_map(doc, peak, "peak", precision_keys, err);
    for (int p = 0; rc == DT_OK && p < DT_PREC_COUNT; p++)
        rc = dt_yget_quantity(doc, peak, precision_keys[p], p == DT_FP32, DT_UNIT_FLOP_RATE,
                              FLOPS_MIN, FLOPS_MAX, &d->peak_flops[p], err);
    return rc;
}

static int parse_device(const struct dt_ydoc *doc, const struct dt_ynode *node,
                        struct dt_device_spec *d, struct dt_error *err)
{
    static const char *const keys[] = {"kind",   "name",  "peak",  "memory",
                                       "memory_bw", "cache", "cores", "clock", "sms", NULL};
    int rc = dt_ycheck_map(doc, node, "device", keys, err);
    int kind = 0;
    if (!rc)
        rc = dt_yget_enum(doc, node, "kind", true, device_kinds, &kind, err);
    d->kind = (enum dt_device_kind)kind;
    if (!rc)
        rc = get_text(doc, node, "name", true, d->name, sizeof d->name, err);
    if (!rc && !dt_ymap_get(node, "peak"))
        rc = dt_yfail(doc, node, err, "missing required key 'peak'");
    if (!rc)
        rc = parse_peak(doc, dt_ymap_get(node, "peak"), d, err);
    if (!rc)
        rc = dt_yget_quantity(doc, node, "memory", true, DT_UNIT_BYTES, MEM_MIN, MEM_MAX,
                              &d->mem_bytes, err);
    if (!rc)
        rc = dt_yget_quantity(doc, node, "memory_bw", true, DT_UNIT_BANDWIDTH, BW_MIN, BW_MAX,
                              &d->mem_bw_Bps, err);
    if (!rc)
        rc = dt_yget_quantity(doc, node, "cache", false, DT_UNIT_BYTES, CACHE_MIN, MEM_MAX,
                              &d->cache_bytes, err);
    if (!rc)
        rc = dt_yget_quantity(doc, node, "clock", false, DT_UNIT_FREQUENCY, CLOCK_MIN,
                              CLOCK_MAX, &d->clock_Hz, err);
    if (rc)
        return rc;
    if (d->kind == DT_DEV_CPU) {
        rc = refuse_key(doc, node, "sms", "is only for gpu devices (streaming multiprocessors)",
                        err);
        return rc ? rc : dt_yget_int(doc, node, "cores", true, 1, MAX_CORES, &d->cores, err);
    }
    rc = dt_yget_int(doc, node, "sms", false, 1, MAX_SMS, &d->sms, err);
    return rc ? rc : refuse_key(doc, node, "cores",
                                "is only for cpu devices (the host cores of a gpu are not "
                                "modelled)", err);
}

/* The interconnect between the devices of one node. */
static int parse_intra(const struct dt_ydoc *doc, const struct dt_ynode *node,
                       struct dt_link_spec *l, struct dt_error *err)
{
    static const char *const keys[] = {"kind", "bandwidth", "latency", "sharing",
                                       "bus_bandwidth", NULL};
    int rc = dt_ycheck_map(doc, node, "intra", keys, err);
    int kind = 0;
    if (!rc)
        rc = dt_yget_enum(doc, node, "kind", true, intra_kinds, &kind, err);
    if (rc)
        return rc;
    snprintf(l->kind, sizeof l->kind, "%s", intra_kinds[kind]);
    /* Shared memory is one memory system; PCIe, NVLink and NVSwitch give each device its own
     * lanes into a switch or root complex. */
    int sharing = kind == 0 ? DT_LINK_SHARED : DT_LINK_CROSSBAR;
    rc = dt_yget_quantity(doc, node, "bandwidth", true, DT_UNIT_BANDWIDTH, BW_MIN, BW_MAX,
                          &l->bw_Bps, err);
    if (!rc)
        rc = dt_yget_quantity(doc, node, "latency", true, DT_UNIT_TIME, LAT_MIN, LAT_MAX,
                              &l->lat_s, err);
    if (!rc)
        rc = dt_yget_enum(doc, node, "sharing", false, sharing_names, &sharing, err);
    if (rc)
        return rc;
    l->sharing = (enum dt_link_sharing)sharing;
    if (l->sharing == DT_LINK_CROSSBAR)
        return refuse_key(doc, node, "bus_bandwidth", "is only for sharing: shared", err);
    l->bus_bw_Bps = l->bw_Bps;
    return dt_yget_quantity(doc, node, "bus_bandwidth", false, DT_UNIT_BANDWIDTH, BW_MIN, BW_MAX,
                            &l->bus_bw_Bps, err);
}

static int parse_nic(const struct dt_ydoc *doc, const struct dt_ynode *node,
                     struct dt_link_spec *l, int *count, struct dt_error *err)
{
    static const char *const keys[] = {"kind", "bandwidth", "latency", "count", NULL};
    int rc = dt_ycheck_map(doc, node, "nic", keys, err);
    int kind = 0;
    if (!rc)
        rc = dt_yget_enum(doc, node, "kind", true, nic_kinds, &kind, err);
    if (rc)
        return rc;
    snprintf(l->kind, sizeof l->kind, "%s", nic_kinds[kind]);
    l->sharing = DT_LINK_CROSSBAR;
    *count = 1;
    rc = dt_yget_quantity(doc, node, "bandwidth", true, DT_UNIT_BANDWIDTH, BW_MIN, BW_MAX,
                          &l->bw_Bps, err);
    if (!rc)
        rc = dt_yget_quantity(doc, node, "latency", true, DT_UNIT_TIME, LAT_MIN, LAT_MAX,
                              &l->lat_s, err);
    if (!rc)
        rc = dt_yget_int(doc, node, "count", false, 1, DT_TOPO_MAX_NICS, count, err);
    return rc;
}

static int parse_group(const struct dt_ydoc *doc, const struct dt_ynode *node,
                       struct dt_node_group *g, struct dt_error *err)
{
    static const char *const keys[] = {"name", "count",     "devices", "device", "intra",
                                       "nic",  "data_read", "price",   NULL};
    int rc = dt_ycheck_map(doc, node, "a node group", keys, err);
    if (!rc)
        rc = get_text(doc, node, "name", true, g->name, sizeof g->name, err);
    if (!rc)
        rc = dt_yget_int(doc, node, "count", true, 1, DT_TOPO_MAX_NODES, &g->count, err);
    if (!rc)
        rc = dt_yget_int(doc, node, "devices", true, 1, DT_TOPO_MAX_DEVICES, &g->devices, err);
    if (rc)
        return rc;
    const struct dt_ynode *sub = dt_ymap_get(node, "device");
    if (!sub)
        return dt_yfail(doc, node, err, "missing required key 'device'");
    if ((rc = parse_device(doc, sub, &g->device, err)))
        return rc;
    if (!(sub = dt_ymap_get(node, "intra")))
        return dt_yfail(doc, node, err, "missing required key 'intra'");
    if ((rc = parse_intra(doc, sub, &g->intra, err)))
        return rc;
    g->nics = 0;
    if ((sub = dt_ymap_get(node, "nic")) && (rc = parse_nic(doc, sub, &g->nic, &g->nics, err)))
        return rc;
    rc = dt_yget_quantity(doc, node, "data_read", false, DT_UNIT_BANDWIDTH, BW_MIN, BW_MAX,
                          &g->data_read_Bps, err);
    if (!rc)
        rc = dt_yget_quantity(doc, node, "price", false, DT_UNIT_PRICE, PRICE_MIN, PRICE_MAX,
                              &g->price_per_h, err);
    return rc;
}

/* Keys that apply to some network kinds only: refused on the others. */
static int refuse_keys_of_kind(const struct dt_ydoc *doc, const struct dt_ynode *node,
                               enum dt_network_kind kind, struct dt_error *err)
{
    static const struct {
        const char *key;
        enum dt_network_kind kind;
        const char *why;
    } only[] = {{"oversubscription", DT_NET_FATTREE, "applies only to kind: fat-tree"},
                {"uplink_bandwidth", DT_NET_FATTREE, "applies only to kind: fat-tree"},
                {"routing", DT_NET_FATTREE, "applies only to kind: fat-tree"},
                {"rail_optimized", DT_NET_FATTREE, "applies only to kind: fat-tree"},
                {"dims", DT_NET_TORUS, "applies only to kind: torus"},
                {"link_bandwidth", DT_NET_TORUS, "applies only to kind: torus"}};
    int rc = DT_OK;
    for (size_t i = 0; i < sizeof only / sizeof only[0] && !rc; i++)
        if (only[i].kind != kind)
            rc = refuse_key(doc, node, only[i].key, only[i].why, err);
    return rc;
}

/* dims: [x, y] or [x, y, z], each in [2, DT_TOPO_MAX_TORUS_DIM]. */
static int parse_dims(const struct dt_ydoc *doc, const struct dt_ynode *node,
                      struct dt_network *net, struct dt_error *err)
{
    const struct dt_ynode *dims = dt_ymap_get(node, "dims");
    if (!dims)
        return dt_yfail(doc, node, err, "missing required key 'dims' (kind: torus)");
    int rc = dt_ycheck_seq(doc, dims, "'dims'", err);
    if (rc)
        return rc;
    if (dims->n < 2 || dims->n > 3)
        return dt_yfail(doc, dims, err, "'dims' must list 2 or 3 sizes, not %zu", dims->n);
    net->n_dims = (int)dims->n;
    int hops = 0;
    for (int d = 0; d < net->n_dims && !rc; d++) {
        long v = 0;
        rc = dt_ynode_long(doc, dims->items[d], 2, DT_TOPO_MAX_TORUS_DIM, &v, err);
        net->dims[d] = (int)v;
        hops += net->dims[d] / 2;
    }
    if (!rc && hops > DT_TOPO_MAX_TORUS_HOPS)
        return dt_yfail(doc, dims, err,
                        "a torus of these dims has routes of %d hops; at most %d are simulated",
                        hops, DT_TOPO_MAX_TORUS_HOPS);
    return rc;
}

static int parse_network(const struct dt_ydoc *doc, const struct dt_ynode *node,
                         struct dt_network *net, struct dt_error *err)
{
    static const char *const keys[] = {"kind", "latency", "radix", "oversubscription",
                                       "uplink_bandwidth", "routing", "rail_optimized", "dims",
                                       "link_bandwidth", NULL};
    static const char *const routings[] = {"static", "ecmp", NULL};
    int rc = dt_ycheck_map(doc, node, "network", keys, err);
    int kind = 0;
    if (!rc)
        rc = dt_yget_enum(doc, node, "kind", true, network_kinds, &kind, err);
    if (rc)
        return rc;
    net->kind = (enum dt_network_kind)kind;
    net->oversubscription = 1.0;
    rc = dt_yget_quantity(doc, node, "latency", true, DT_UNIT_TIME, LAT_MIN, LAT_MAX,
                          &net->switch_lat_s, err);
    if (!rc)
        rc = dt_yget_int(doc, node, "radix", net->kind == DT_NET_FATTREE, MIN_RADIX, MAX_RADIX,
                         &net->radix, err);
    if (!rc)
        rc = refuse_keys_of_kind(doc, node, net->kind, err);
    if (rc)
        return rc;
    if (net->kind == DT_NET_TORUS) {
        rc = refuse_key(doc, node, "radix", "does not apply to kind: torus (a router per node)",
                        err);
        if (!rc)
            rc = parse_dims(doc, node, net, err);
        if (!rc)
            rc = dt_yget_quantity(doc, node, "link_bandwidth", false, DT_UNIT_BANDWIDTH, BW_MIN,
                                  BW_MAX, &net->uplink_bw_Bps, err);
        return rc;
    }
    if (net->kind != DT_NET_FATTREE)
        return DT_OK;
    int routing = DT_ROUTE_STATIC;
    rc = dt_yget_double(doc, node, "oversubscription", false, 1.0, MAX_OVERSUB,
                        &net->oversubscription, err);
    if (!rc)
        rc = dt_yget_quantity(doc, node, "uplink_bandwidth", false, DT_UNIT_BANDWIDTH, BW_MIN,
                              BW_MAX, &net->uplink_bw_Bps, err);
    if (!rc)
        rc = dt_yget_enum(doc, node, "routing", false, routings, &routing, err);
    if (!rc)
        rc = dt_yget_bool(doc, node, "rail_optimized", false, &net->rail_optimized, err);
    net->routing = (enum dt_routing)routing;
    return rc;
}

/* Places of the file that derived-value errors point at; all NULL when reshaping. */
struct places {
    const struct dt_ynode *root;
    const struct dt_ynode *network;
    const struct dt_ynode *const *groups; /* n_groups items */
};

static const struct dt_ynode *group_place(const struct places *pl, int g)
{
    return pl->groups ? pl->groups[g] : NULL;
}

/* Switch layout of a fat-tree: leaves split radix ports into down (to NICs) and up in the
 * ratio oversubscription : 1, and all NICs of a node sit on one leaf. Two tiers hold radix
 * leaves (each spine has one port per leaf), three tiers radix pods of radix/2 leaves. */
static int layout_fattree(struct dt_network *net, int nodes, int max_nics, const struct where *w,
                          const struct places *pl, struct dt_error *err)
{
    int down = (int)((double)net->radix * net->oversubscription / (1.0 + net->oversubscription));
    int up = net->radix - down;
    if (down < 1 || up < 1)
        return fail_at(w, pl->network, err,
                       "a fat-tree of radix %d with oversubscription %g leaves a leaf switch "
                       "without %s ports",
                       net->radix, net->oversubscription, down < 1 ? "down" : "up");
    net->hosts_per_leaf = down;
    net->uplinks_per_leaf = up;
    net->leaf_up_bw_Bps = up * net->uplink_bw_Bps;
    if (net->rail_optimized) { /* leaf (group, k) joins NIC k of a group of `down` nodes */
        net->nodes_per_leaf = down;
        net->n_leaves = (nodes + down - 1) / down * max_nics;
    } else {
        net->nodes_per_leaf = down / max_nics > 0 ? down / max_nics : 1;
        net->n_leaves = (nodes + net->nodes_per_leaf - 1) / net->nodes_per_leaf;
    }
    long max_leaves = (long)(net->radix / 2) * net->radix;
    if (net->n_leaves == 1)
        net->levels = 1;
    else if (net->n_leaves <= net->radix)
        net->levels = 2;
    else if (net->n_leaves <= max_leaves)
        net->levels = 3;
    else
        return fail_at(w, pl->network, err,
                       "%d nodes (%d NIC ports) do not fit a three-tier fat-tree of radix %d "
                       "(at most %ld leaves of %d nodes with oversubscription %g)",
                       nodes, net->endpoints, net->radix, max_leaves, net->nodes_per_leaf,
                       net->oversubscription);
    return DT_OK;
}

/* A torus has one router per node: the dims must multiply to the node count. */
static int layout_torus(struct dt_network *net, int nodes, int max_nics, const struct where *w,
                        const struct places *pl, struct dt_error *err)
{
    long product = 1;
    for (int d = 0; d < net->n_dims; d++)
        product *= net->dims[d];
    if (product != nodes)
        return fail_at(w, pl->network, err,
                       "a torus of dims %d x %d%s%.0d has %ld routers but the topology has %d "
                       "nodes (one router per node)",
                       net->dims[0], net->dims[1], net->n_dims == 3 ? " x " : "",
                       net->n_dims == 3 ? net->dims[2] : 0, product, nodes);
    net->hosts_per_leaf = max_nics;
    net->nodes_per_leaf = 1;
    net->n_leaves = nodes;
    net->levels = 1;
    return DT_OK;
}

/* Checks what no single key can and computes the derived fields. */
static int derive(struct dt_topology *t, const struct where *w, const struct places *pl,
                  struct dt_error *err)
{
    long nodes = 0, ranks = 0, endpoints = 0;
    double fastest_nic = 0;
    int max_nics = 1;
    for (int g = 0; g < t->n_groups; g++) {
        const struct dt_node_group *grp = &t->groups[g];
        if (grp->nics > max_nics)
            max_nics = grp->nics;
        nodes += grp->count;
        ranks += (long)grp->count * grp->devices;
        endpoints += (long)grp->count * grp->nics;
        if (grp->nic.bw_Bps > fastest_nic)
            fastest_nic = grp->nic.bw_Bps;
        if (nodes > DT_TOPO_MAX_NODES)
            return fail_at(w, group_place(pl, g), err,
                           "the topology has more than %d nodes (the limit)", DT_TOPO_MAX_NODES);
        if (ranks > DT_TOPO_MAX_RANKS)
            return fail_at(w, group_place(pl, g), err,
                           "the topology has more than %d devices (the limit)",
                           DT_TOPO_MAX_RANKS);
    }
    t->n_nodes = (int)nodes;
    t->n_ranks = (int)ranks;
    if (nodes > 1 && !t->has_network)
        return fail_at(w, pl->root, err,
                       "missing required key 'network' (the topology has %ld nodes)", nodes);
    if (!t->has_network)
        return DT_OK;
    for (int g = 0; g < t->n_groups; g++)
        if (t->groups[g].nics == 0)
            return fail_at(w, group_place(pl, g), err,
                           "node group '%s' has no 'nic': its nodes cannot reach the network",
                           t->groups[g].name);
    struct dt_network *net = &t->net;
    net->endpoints = (int)endpoints;
    net->uplinks_per_leaf = 0;
    net->leaf_up_bw_Bps = 0;
    net->nodes_per_leaf = (int)nodes;
    switch (net->kind) {
    case DT_NET_SWITCH:
        if (net->radix && endpoints > net->radix)
            return fail_at(w, pl->network, err,
                           "one switch of radix %d cannot connect %ld NIC ports; use kind: "
                           "fat-tree",
                           net->radix, endpoints);
        net->hosts_per_leaf = (int)endpoints;
        net->n_leaves = 1;
        net->levels = 1;
        return DT_OK;
    case DT_NET_FATTREE:
        if (net->uplink_bw_Bps == 0)
            net->uplink_bw_Bps = fastest_nic;
        return layout_fattree(net, (int)nodes, max_nics, w, pl, err);
    case DT_NET_RAIL:
        /* Rail r joins NIC r of every node; traffic between rails crosses a spine. */
        for (int g = 0; g < t->n_groups; g++) {
            const struct dt_node_group *grp = &t->groups[g];
            if (grp->nics != grp->devices || grp->nics != t->groups[0].nics)
                return fail_at(w, group_place(pl, g), err,
                               "a rail-optimised network needs one NIC per device, the same in "
                               "every group (group '%s' has %d NICs and %d devices)",
                               grp->name, grp->nics, grp->devices);
        }
        if (net->radix && nodes > net->radix)
            return fail_at(w, pl->network, err,
                           "a rail switch of radix %d cannot connect %ld nodes", net->radix,
                           nodes);
        net->hosts_per_leaf = (int)nodes;
        net->n_leaves = t->groups[0].nics;
        net->levels = net->n_leaves > 1 ? 2 : 1;
        return DT_OK;
    case DT_NET_TORUS:
        if (net->uplink_bw_Bps == 0)
            net->uplink_bw_Bps = fastest_nic;
        return layout_torus(net, (int)nodes, max_nics, w, pl, err);
    }
    return DT_OK;
}

static int parse_topology(const struct dt_ydoc *doc, struct dt_topology *t, struct dt_error *err)
{
    static const char *const keys[] = {"name", "source", "nodes", "network", NULL};
    const struct dt_ynode *root = dt_ydoc_root(doc);
    int rc = dt_ycheck_map(doc, root, "a topology", keys, err);
    if (!rc)
        rc = get_text(doc, root, "name", true, t->name, sizeof t->name, err);
    if (!rc)
        rc = get_text(doc, root, "source", false, t->source, sizeof t->source, err);
    if (rc)
        return rc;
    const struct dt_ynode *nodes = dt_ymap_get(root, "nodes");
    if (!nodes)
        return dt_yfail(doc, root, err, "missing required key 'nodes'");
    if ((rc = dt_ycheck_seq(doc, nodes, "'nodes'", err)))
        return rc;
    if (nodes->n == 0)
        return dt_yfail(doc, nodes, err, "'nodes' must list at least one node group");
    if (nodes->n > DT_TOPO_MAX_GROUPS)
        return dt_yfail(doc, nodes->items[DT_TOPO_MAX_GROUPS], err,
                        "more than %d node groups (the limit)", DT_TOPO_MAX_GROUPS);
    t->groups = calloc(nodes->n, sizeof *t->groups);
    if (!t->groups)
        return dt_fail(err, DT_ENOMEM, dt_ydoc_name(doc), 0, 0, "out of memory");
    t->n_groups = (int)nodes->n;
    for (int g = 0; g < t->n_groups; g++) {
        if ((rc = parse_group(doc, nodes->items[g], &t->groups[g], err)))
            return rc;
        for (int h = 0; h < g; h++)
            if (strcmp(t->groups[h].name, t->groups[g].name) == 0)
                return dt_yfail(doc, dt_ymap_get(nodes->items[g], "name"), err,
                                "node group name '%s' is used twice", t->groups[g].name);
    }
    const struct dt_ynode *net = dt_ymap_get(root, "network");
    if (net) {
        if ((rc = parse_network(doc, net, &t->net, err)))
            return rc;
        t->has_network = true;
    }
    struct where w = {doc, dt_ydoc_name(doc)};
    struct places pl = {root, net, (const struct dt_ynode *const *)nodes->items};
    return derive(t, &w, &pl, err);
}

static int load_doc(struct dt_ydoc *doc, const char *path, struct dt_topology **out,
                    struct dt_error *err)
{
    struct dt_topology *t = calloc(1, sizeof *t);
    if (!t) {
        dt_ydoc_destroy(doc);
        return dt_fail(err, DT_ENOMEM, path, 0, 0, "out of memory");
    }
    snprintf(t->path, sizeof t->path, "%s", path);
    int rc = parse_topology(doc, t, err);
    dt_ydoc_destroy(doc);
    if (rc) {
        dt_topology_destroy(t);
        return rc;
    }
    *out = t;
    return DT_OK;
}

int dt_topology_load(const char *path, struct dt_topology **out, struct dt_error *err)
{
    *out = NULL;
    struct dt_ydoc *doc;
    int rc = dt_ydoc_load_file(path, &doc, err);
    if (rc)
        return rc;
    return load_doc(doc, path, out, err);
}

int dt_topology_load_string(const char *name, const char *text, struct dt_topology **out,
                            struct dt_error *err)
{
    *out = NULL;
    if (!text)
        return dt_fail(err, DT_EINPUT, name, 0, 0, "no text");
    struct dt_ydoc *doc;
    int rc = dt_ydoc_load_string(name, text, strlen(text), &doc, err);
    if (rc)
        return rc;
    return load_doc(doc, name, out, err);
}

void dt_topology_destroy(struct dt_topology *topo)
{
    if (!topo)
        return;
    free(topo->groups);
    free(topo);
}

/* ---- ranks and nodes ---- */

int dt_topology_node_of(const struct dt_topology *topo, int rank)
{
    if (rank < 0 || rank >= topo->n_ranks)
        return -1;
    int node = 0;
    for (int g = 0; g < topo->n_groups; g++) {
        const struct dt_node_group *grp = &topo->groups[g];
        int in_group = grp->count * grp->devices;
        if (rank < in_group)
            return node + rank / grp->devices;
        rank -= in_group;
        node += grp->count;
    }
    return -1;
}

const struct dt_node_group *dt_topology_group_of_node(const struct dt_topology *topo, int node)
{
    if (node < 0)
        return NULL;
    for (int g = 0; g < topo->n_groups; g++) {
        if (node < topo->groups[g].count)
            return &topo->groups[g];
        node -= topo->groups[g].count;
    }
    return NULL;
}

int dt_topology_node_first_rank(const struct dt_topology *topo, int node)
{
    if (node < 0)
        return -1;
    int rank = 0;
    for (int g = 0; g < topo->n_groups; g++) {
        const struct dt_node_group *grp = &topo->groups[g];
        if (node < grp->count)
            return rank + node * grp->devices;
        node -= grp->count;
        rank += grp->count * grp->devices;
    }
    return -1;
}

int dt_topology_node_ranks(const struct dt_topology *topo, int node)
{
    const struct dt_node_group *grp = dt_topology_group_of_node(topo, node);
    return grp ? grp->devices : -1;
}

const struct dt_node_group *dt_topology_group_of_rank(const struct dt_topology *topo, int rank)
{
    return dt_topology_group_of_node(topo, dt_topology_node_of(topo, rank));
}

double dt_topology_nodes_price_per_h(const struct dt_topology *topo, int nodes)
{
    double sum = 0;
    for (int g = 0; g < topo->n_groups && nodes > 0; g++) {
        int k = topo->groups[g].count < nodes ? topo->groups[g].count : nodes;
        if (topo->groups[g].price_per_h <= 0)
            return 0;
        sum += k * topo->groups[g].price_per_h;
        nodes -= k;
    }
    return sum;
}

double dt_topology_price_per_h(const struct dt_topology *topo)
{
    return dt_topology_nodes_price_per_h(topo, topo->n_nodes);
}

/* ---- reshaping for sweeps ---- */

int dt_topology_reshape(const struct dt_topology *topo, int nodes, int ppn,
                        struct dt_topology **out, struct dt_error *err)
{
    *out = NULL;
    struct where w = {NULL, topo->path};
    struct places pl = {NULL, NULL, NULL};
    if (topo->n_groups != 1)
        return fail_at(&w, NULL, err,
                       "cannot reshape topology '%s': it has %d node groups (only one-group "
                       "topologies can be reshaped)",
                       topo->name, topo->n_groups);
    if (nodes < 1 || nodes > DT_TOPO_MAX_NODES || ppn < 1 || ppn > DT_TOPO_MAX_DEVICES)
        return fail_at(&w, NULL, err,
                       "cannot reshape to %d nodes x %d devices: nodes must be in [1, %d] and "
                       "devices per node in [1, %d]",
                       nodes, ppn, DT_TOPO_MAX_NODES, DT_TOPO_MAX_DEVICES);
    const struct dt_node_group *old = &topo->groups[0];
    if (nodes > 1 && (!topo->has_network || old->nics == 0))
        return fail_at(&w, NULL, err,
                       "cannot reshape topology '%s' to %d nodes: it describes no NIC and "
                       "network",
                       topo->name, nodes);
    struct dt_node_group g = *old;
    g.count = nodes;
    g.devices = ppn;
    if (g.device.kind == DT_DEV_CPU) {
        /* A process of a CPU node gets its share of the node's cores, memory and memory
         * bandwidth; peak follows the cores it gets. */
        int node_cores = old->device.cores * old->devices;
        g.device.cores = node_cores / ppn;
        if (g.device.cores < 1)
            return fail_at(&w, NULL, err,
                           "cannot run %d processes per node: a node of '%s' has %d cores", ppn,
                           topo->name, node_cores);
        double cores_ratio = (double)g.device.cores / old->device.cores;
        for (int p = 0; p < DT_PREC_COUNT; p++)
            g.device.peak_flops[p] *= cores_ratio;
        double share = (double)old->devices / ppn;
        g.device.mem_bytes *= share;
        g.device.mem_bw_Bps *= share;
        g.device.cache_bytes *= share;
    }
    if (topo->has_network && topo->net.kind == DT_NET_RAIL)
        g.nics = ppn;
    struct dt_topology *t = calloc(1, sizeof *t);
    struct dt_node_group *groups = calloc(1, sizeof *groups);
    if (!t || !groups) {
        free(t);
        free(groups);
        return dt_fail(err, DT_ENOMEM, topo->path, 0, 0, "out of memory");
    }
    *t = *topo;
    *groups = g;
    t->groups = groups;
    /* A suffix that cannot fit replaces the end of the name rather than overflow it. */
    char suffix[32];
    snprintf(suffix, sizeof suffix, "-%dn%dp", nodes, ppn);
    size_t keep = strlen(topo->name);
    if (keep + strlen(suffix) >= sizeof t->name)
        keep = sizeof t->name - 1 - strlen(suffix);
    snprintf(t->name, sizeof t->name, "%.*s%s", (int)keep, topo->name, suffix);
    int rc = derive(t, &w, &pl, err);
    if (rc) {
        dt_topology_destroy(t);
        return rc;
    }
    *out = t;
    return DT_OK;
}

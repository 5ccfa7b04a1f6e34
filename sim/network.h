/* The topology turned into engine links, and the route between two ranks.
 *   same node:       src device-out -> [the node's shared bus, if shared] -> dst device-in
 *   different nodes: src NIC-up -> first switch -> network -> dst NIC-down, where a rank uses
 *     NIC local * nics / devices of its node (GPU i on NIC i when there is one per GPU) and the
 *     network is
 *     switch:   one non-blocking switch (latency only)
 *     fat-tree: leaf, spine (and core) switches joined by links of uplink_bandwidth, one per
 *               leaf uplink (sim/fabric.c); up to the lowest common tier and down again, the
 *               uplink picked per destination (static) or per flow hash (ecmp)
 *     rail:     one NIC per device (rail); same rail crosses the rail switch, another rail
 *               also crosses the spine (one more switch latency)
 *     torus:    a router per node, links to the two neighbours in each dimension (wrap-around),
 *               dimension-order routing the shorter way round (sim/fabric.c)
 * Latencies: the intra-node link's on the intra-node hop; the NIC's on NIC-up; the switch's
 * on each switch crossed. Calibration overrides (dt_cost_params) replace datasheet values. */
#ifndef DT_SIM_NETWORK_H
#define DT_SIM_NETWORK_H

#include "dt/costmodel.h"
#include "dt/topology.h"
#include "engine.h"

/* Switch links of a fat-tree, in blocks of consecutive link ids (see sim/fabric.c). */
struct dt_fattree_links {
    int levels;        /* 1: one leaf; 2: leaf + spine; 3: leaf + aggregation + core */
    int up;            /* uplinks per leaf: spines (2 tiers) or aggregation switches per pod */
    int half;          /* 3 tiers: core uplinks per aggregation switch (radix / 2) */
    int pod_leaves;    /* 3 tiers: leaves per pod (radix / 2) */
    int leaf_up, leaf_down;   /* first id: leaf l <-> spine/aggregation s at l * up + s */
    int agg_up, agg_down;     /* first id: agg (pod p, s) <-> core (s, c) at (p*up + s)*half + c */
};

struct dt_simnet {
    const struct dt_topology *topo;
    int n_ranks;
    int *node_of;      /* per rank */
    int *local_of;     /* per rank: index within its node */
    int *nic_of;       /* per rank: the NIC it sends and receives through */
    int *bus;          /* per node: shared-bus link, or -1 */
    int *dev_out, *dev_in;      /* per rank: crossbar links, or -1 */
    int *nic_up, *nic_down;     /* per node x nics */
    int max_nics;
    int sw;            /* switch latency link */
    int nodes_per_leaf;
    struct dt_fattree_links ft;
    int torus_first;   /* torus: first link id; node n, dim d, direction + (0) or - (1) at
                          (n * dims + d) * 2 + direction */
    int n_links, cap_names;
    char (*link_name)[40]; /* per link, for traces and --links: "node 0 nic-up 3" */
};

int dt_simnet_build(struct dt_simnet *net, struct dt_sim *sim, const struct dt_topology *topo,
                    int n_ranks, const struct dt_cost_params *cp, struct dt_error *err);
void dt_simnet_free(struct dt_simnet *net);
/* Fills route (DT_SIM_MAX_HOPS entries) and returns the number of hops. */
int dt_simnet_route(const struct dt_simnet *net, int src, int dst, int *route);

/* For sim/fabric.c: adds a link named by fmt and remembers the name. */
int dt_simnet_add_link(struct dt_simnet *net, struct dt_sim *sim, double bw, double lat, int *id,
                       struct dt_error *err, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

#endif

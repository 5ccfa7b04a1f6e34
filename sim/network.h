/* The topology turned into engine links, and the route between two ranks.
 *   same node:       src device-out -> [the node's shared bus, if shared] -> dst device-in
 *   different nodes: src NIC-up -> network -> dst NIC-down, where the network is
 *     switch:   one non-blocking switch (latency only)
 *     fat-tree: leaf switches of nodes_per_leaf nodes; between leaves the source leaf's total
 *               uplink (leaf_up_bw_Bps, oversubscription included) and the destination's downlink
 *     rail:     one NIC per device (rail); same rail crosses the rail switch, another rail
 *               also crosses the spine (one more switch latency)
 * Latencies: the intra-node link's on the intra-node hop; the NIC's on NIC-up; the switch's
 * on each switch crossed. Calibration overrides (dt_cost_params) replace datasheet values. */
#ifndef DT_SIM_NETWORK_H
#define DT_SIM_NETWORK_H

#include "dt/costmodel.h"
#include "dt/topology.h"
#include "engine.h"

struct dt_simnet {
    const struct dt_topology *topo;
    int n_ranks;
    int *node_of;      /* per rank */
    int *local_of;     /* per rank: index within its node */
    int *bus;          /* per node: shared-bus link, or -1 */
    int *dev_out, *dev_in;      /* per rank: crossbar links, or -1 */
    int *nic_up, *nic_down;     /* per node x nics */
    int max_nics;
    int sw;            /* switch latency link */
    int *leaf_up, *leaf_down;   /* fat-tree: per leaf */
    int nodes_per_leaf;
    int n_links;
    char (*link_name)[40]; /* per link, for traces: "node 0 nic-up" */
};

int dt_simnet_build(struct dt_simnet *net, struct dt_sim *sim, const struct dt_topology *topo,
                    int n_ranks, const struct dt_cost_params *cp, struct dt_error *err);
void dt_simnet_free(struct dt_simnet *net);
/* Fills route (DT_SIM_MAX_HOPS entries) and returns the number of hops. */
int dt_simnet_route(const struct dt_simnet *net, int src, int dst, int *route);

#endif

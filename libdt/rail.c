/* The multi-level ring allreduce ("rail-ring"), as NCCL and ASTRA-sim run a ring at scale:
 * a ring reduce-scatter among the g ranks of each node (over NVLink), so that local rank i
 * holds the node's sum of chunk i; a ring allreduce of chunk i across the nodes among the
 * ranks of local index i (one ring per rail: NIC i of every node); a ring allgather inside
 * the node. A flat ring over p = n g ranks starts 2p(p-1) flows; this one 2n g(g-1) inside
 * the nodes and g 2n(n-1) across them, each of 1/g of the data. */
#include <stdio.h>
#include <stdlib.h>

#include "compile.h"
#include "dt/collective.h"
#include "dt/topology.h"

bool dtc_rail_fits(const struct dt_topology *topo, int n_ranks, char *why, size_t whylen)
{
    int nodes = dt_topology_node_of(topo, n_ranks - 1) + 1;
    int g = dt_topology_node_ranks(topo, 0);
    if (nodes < 2) {
        snprintf(why, whylen, "rail-ring needs ranks on at least 2 nodes");
        return false;
    }
    for (int node = 0; node < nodes; node++) {
        int first = dt_topology_node_first_rank(topo, node);
        int here = dt_topology_node_ranks(topo, node);
        if (first + here > n_ranks)
            here = n_ranks - first;
        if (here != g) {
            snprintf(why, whylen, "rail-ring needs the same number of ranks on every node "
                     "(node 0 has %d, node %d %d)", g, node, here);
            return false;
        }
    }
    return true;
}

/* One group per node (its ranks in order) and one per rail (local rank i of every node, in
 * node order); node_group[r] and rail_group[r] are rank r's. */
int dtc_rail_groups(struct dt_plan *plan, int *node_group, int *rail_group)
{
    const struct dt_topology *topo = plan->topo;
    int p = plan->n_ranks, nodes = dt_topology_node_of(topo, p - 1) + 1, g = p / nodes;
    int *ranks = malloc((size_t)(g > nodes ? g : nodes) * sizeof *ranks);
    int rc = ranks ? DT_OK : DT_ENOMEM;
    for (int node = 0; node < nodes && !rc; node++) {
        int first = dt_topology_node_first_rank(topo, node);
        for (int i = 0; i < g; i++)
            ranks[i] = first + i;
        int grp = dt_plan_add_group(plan, g, ranks);
        rc = grp < 0 ? DT_ENOMEM : DT_OK;
        for (int i = 0; i < g && !rc; i++)
            node_group[first + i] = grp;
    }
    for (int i = 0; i < g && !rc; i++) {
        for (int node = 0; node < nodes; node++)
            ranks[node] = dt_topology_node_first_rank(topo, node) + i;
        int grp = dt_plan_add_group(plan, nodes, ranks);
        rc = grp < 0 ? DT_ENOMEM : DT_OK;
        for (int node = 0; node < nodes && !rc; node++)
            rail_group[ranks[node]] = grp;
    }
    free(ranks);
    return rc;
}

/* Rank r's three collectives over GRADS [0, count). */
int dtc_rail_allreduce(struct dt_plan *plan, int r, int node_group, int rail_group, long count)
{
    const struct dt_group *node = &plan->groups[node_group];
    long off, len;
    dt_chunk(count, node->n, dtc_group_index(node, r), &off, &len);
    int rc = dtc_push(plan, r, dtc_coll(DT_COLL_REDUCE_SCATTER, DT_ALG_RING, node_group, 0,
                                        DT_BUF_GRADS, 0, count));
    if (!rc)
        rc = dtc_push(plan, r, dtc_coll(DT_COLL_ALLREDUCE, DT_ALG_RING, rail_group, 0,
                                        DT_BUF_GRADS, off, len));
    if (!rc)
        rc = dtc_push(plan, r, dtc_coll(DT_COLL_ALLGATHER, DT_ALG_RING, node_group, 0,
                                        DT_BUF_GRADS, 0, count));
    return rc;
}

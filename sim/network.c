/* Links and routes of a topology. */
#include "network.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double pick(double override, double value) { return override > 0 ? override : value; }

/* Adds a link and remembers its name for traces. */
static int add_link(struct dt_simnet *net, struct dt_sim *sim, double bw, double lat, int *id,
                    struct dt_error *err, const char *fmt, int a)
{
    int rc = dt_sim_add_link(sim, bw, lat, id, err);
    if (rc)
        return rc;
    char (*names)[40] = realloc(net->link_name, (size_t)(*id + 1) * sizeof *names);
    if (!names)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    net->link_name = names;
    snprintf(names[*id], sizeof names[*id], fmt, a);
    return DT_OK;
}

int dt_simnet_build(struct dt_simnet *net, struct dt_sim *sim, const struct dt_topology *topo,
                    int n_ranks, const struct dt_cost_params *cp, struct dt_error *err)
{
    *net = (struct dt_simnet){.topo = topo, .n_ranks = n_ranks, .sw = -1};
    int n_nodes = topo->n_nodes, rc = DT_OK;
    for (int g = 0; g < topo->n_groups; g++)
        if (topo->groups[g].nics > net->max_nics)
            net->max_nics = topo->groups[g].nics;
    if (net->max_nics < 1)
        net->max_nics = 1;
    net->node_of = calloc((size_t)n_ranks, sizeof(int));
    net->local_of = calloc((size_t)n_ranks, sizeof(int));
    net->dev_out = calloc((size_t)n_ranks, sizeof(int));
    net->dev_in = calloc((size_t)n_ranks, sizeof(int));
    net->bus = calloc((size_t)n_nodes, sizeof(int));
    net->nic_up = calloc((size_t)n_nodes * net->max_nics, sizeof(int));
    net->nic_down = calloc((size_t)n_nodes * net->max_nics, sizeof(int));
    if (!net->node_of || !net->local_of || !net->dev_out || !net->dev_in || !net->bus ||
        !net->nic_up || !net->nic_down)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int r = 0; r < n_ranks; r++) {
        net->node_of[r] = dt_topology_node_of(topo, r);
        net->local_of[r] = r - dt_topology_node_first_rank(topo, net->node_of[r]);
        net->dev_out[r] = net->dev_in[r] = -1;
    }
    for (int node = 0; node < n_nodes && !rc; node++) {
        const struct dt_node_group *g = dt_topology_group_of_node(topo, node);
        double ibw = pick(cp->intra_bw_Bps, g->intra.bw_Bps);
        double ilat = pick(cp->intra_lat_s, g->intra.lat_s);
        net->bus[node] = -1;
        if (g->intra.sharing == DT_LINK_SHARED)
            rc = add_link(net, sim, g->intra.bus_bw_Bps > 0 ? g->intra.bus_bw_Bps : ibw, 0,
                          &net->bus[node], err, "node %d bus", node);
        int first = dt_topology_node_first_rank(topo, node);
        for (int r = first; r < first + g->devices && r < n_ranks && !rc; r++) {
            rc = add_link(net, sim, ibw, ilat, &net->dev_out[r], err, "rank %d out", r);
            if (!rc)
                rc = add_link(net, sim, ibw, 0, &net->dev_in[r], err, "rank %d in", r);
        }
        double nbw = pick(cp->nic_bw_Bps, g->nic.bw_Bps);
        double nlat = pick(cp->nic_lat_s, g->nic.lat_s);
        int nics = g->nics > 0 ? g->nics : 1;
        if (!(nbw > 0)) { /* a node without a NIC: fine while it is the only node */
            if (n_nodes > 1)
                return dt_fail(err, DT_EINPUT, topo->path, 0, 0,
                               "node group '%s' has no NIC but the topology has %d nodes",
                               g->name, n_nodes);
            continue;
        }
        for (int k = 0; k < net->max_nics && !rc; k++) {
            int kk = k < nics ? k : nics - 1; /* fewer NICs: alias to the last one */
            if (k != kk) {
                net->nic_up[node * net->max_nics + k] = net->nic_up[node * net->max_nics + kk];
                net->nic_down[node * net->max_nics + k] =
                    net->nic_down[node * net->max_nics + kk];
                continue;
            }
            rc = add_link(net, sim, nbw, nlat, &net->nic_up[node * net->max_nics + k], err,
                          "node %d nic-up", node);
            if (!rc)
                rc = add_link(net, sim, nbw, 0, &net->nic_down[node * net->max_nics + k], err,
                              "node %d nic-down", node);
        }
    }
    if (rc)
        return rc;
    double swlat = pick(cp->net_lat_s, topo->net.switch_lat_s);
    rc = add_link(net, sim, INFINITY, swlat, &net->sw, err, "switch%.0d", 0);
    if (!rc && topo->net.kind == DT_NET_FATTREE) {
        /* The loader derives the leaves: nodes per leaf and each leaf's total uplink. */
        net->nodes_per_leaf = topo->net.nodes_per_leaf > 0 ? topo->net.nodes_per_leaf : 1;
        int leaves = (n_nodes + net->nodes_per_leaf - 1) / net->nodes_per_leaf;
        double up = topo->net.leaf_up_bw_Bps;
        if (!(up > 0))
            return dt_fail(err, DT_EINPUT, topo->path, 0, 0, "fat-tree without leaf uplinks");
        net->leaf_up = calloc((size_t)leaves, sizeof(int));
        net->leaf_down = calloc((size_t)leaves, sizeof(int));
        if (!net->leaf_up || !net->leaf_down)
            return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        for (int l = 0; l < leaves && !rc; l++) {
            rc = add_link(net, sim, up, swlat, &net->leaf_up[l], err, "leaf %d up", l);
            if (!rc)
                rc = add_link(net, sim, up, swlat, &net->leaf_down[l], err, "leaf %d down", l);
        }
    }
    net->n_links = dt_sim_n_links(sim);
    return rc;
}

void dt_simnet_free(struct dt_simnet *net)
{
    free(net->node_of);
    free(net->local_of);
    free(net->dev_out);
    free(net->dev_in);
    free(net->bus);
    free(net->nic_up);
    free(net->nic_down);
    free(net->leaf_up);
    free(net->leaf_down);
    free(net->link_name);
}

int dt_simnet_route(const struct dt_simnet *net, int src, int dst, int *route)
{
    int a = net->node_of[src], b = net->node_of[dst], n = 0;
    if (src == dst)
        return 0;
    if (a == b) {
        route[n++] = net->dev_out[src];
        if (net->bus[a] >= 0)
            route[n++] = net->bus[a];
        route[n++] = net->dev_in[dst];
        return n;
    }
    const struct dt_topology *t = net->topo;
    int ka = 0, kb = 0;
    if (t->net.kind == DT_NET_RAIL) {
        ka = net->local_of[src] % net->max_nics;
        kb = net->local_of[dst] % net->max_nics;
    }
    route[n++] = net->nic_up[a * net->max_nics + ka];
    route[n++] = net->sw;
    if (t->net.kind == DT_NET_FATTREE) {
        int la = a / net->nodes_per_leaf, lb = b / net->nodes_per_leaf;
        if (la != lb) {
            route[n++] = net->leaf_up[la];
            route[n++] = net->leaf_down[lb];
        }
    } else if (t->net.kind == DT_NET_RAIL && ka != kb) {
        route[n++] = net->sw; /* across rails: through the spine as well */
    }
    route[n++] = net->nic_down[b * net->max_nics + kb];
    return n;
}

/* Links and routes of a topology. */
#include "network.h"

#include "fabric.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static double pick(double override, double value) { return override > 0 ? override : value; }

int dt_simnet_add_link(struct dt_simnet *net, struct dt_sim *sim, double bw, double lat, int *id,
                       struct dt_error *err, const char *fmt, ...)
{
    int rc = dt_sim_add_link(sim, bw, lat, id, err);
    if (rc)
        return rc;
    if (*id >= net->cap_names) { /* doubling: large fabrics have 10^5 links */
        int cap = net->cap_names ? 2 * net->cap_names : 256;
        char(*names)[40] = realloc(net->link_name, (size_t)cap * sizeof *names);
        if (!names)
            return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        net->link_name = names;
        net->cap_names = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(net->link_name[*id], sizeof net->link_name[*id], fmt, ap);
    va_end(ap);
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
    net->nic_of = calloc((size_t)n_ranks, sizeof(int));
    net->bus = calloc((size_t)n_nodes, sizeof(int));
    net->nic_up = calloc((size_t)n_nodes * net->max_nics, sizeof(int));
    net->nic_down = calloc((size_t)n_nodes * net->max_nics, sizeof(int));
    if (!net->node_of || !net->local_of || !net->dev_out || !net->dev_in || !net->nic_of || !net->bus ||
        !net->nic_up || !net->nic_down)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int r = 0; r < n_ranks; r++) {
        net->node_of[r] = dt_topology_node_of(topo, r);
        net->local_of[r] = r - dt_topology_node_first_rank(topo, net->node_of[r]);
        net->dev_out[r] = net->dev_in[r] = -1;
        const struct dt_node_group *g = dt_topology_group_of_node(topo, net->node_of[r]);
        net->nic_of[r] = g->nics > 1 ? (int)((long)net->local_of[r] * g->nics / g->devices) : 0;
    }
    for (int node = 0; node < n_nodes && !rc; node++) {
        const struct dt_node_group *g = dt_topology_group_of_node(topo, node);
        double ibw = pick(cp->intra_bw_Bps, g->intra.bw_Bps);
        double ilat = pick(cp->intra_lat_s, g->intra.lat_s);
        net->bus[node] = -1;
        if (g->intra.sharing == DT_LINK_SHARED)
            rc = dt_simnet_add_link(net, sim, g->intra.bus_bw_Bps > 0 ? g->intra.bus_bw_Bps : ibw, 0,
                          &net->bus[node], err, "node %d bus", node);
        int first = dt_topology_node_first_rank(topo, node);
        for (int r = first; r < first + g->devices && r < n_ranks && !rc; r++) {
            rc = dt_simnet_add_link(net, sim, ibw, ilat, &net->dev_out[r], err, "rank %d out", r);
            if (!rc)
                rc = dt_simnet_add_link(net, sim, ibw, 0, &net->dev_in[r], err, "rank %d in", r);
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
            rc = dt_simnet_add_link(net, sim, nbw, nlat, &net->nic_up[node * net->max_nics + k], err,
                          "node %d nic-up %d", node, k);
            if (!rc)
                rc = dt_simnet_add_link(net, sim, nbw, 0, &net->nic_down[node * net->max_nics + k], err,
                              "node %d nic-down %d", node, k);
        }
    }
    if (rc)
        return rc;
    double swlat = pick(cp->net_lat_s, topo->net.switch_lat_s);
    rc = dt_simnet_add_link(net, sim, INFINITY, swlat, &net->sw, err, "switch");
    net->nodes_per_leaf = topo->net.nodes_per_leaf > 0 ? topo->net.nodes_per_leaf : 1;
    if (!rc && topo->has_network && topo->net.kind == DT_NET_FATTREE)
        rc = dt_fattree_build(net, sim, swlat, err);
    if (!rc && topo->has_network && topo->net.kind == DT_NET_TORUS)
        rc = dt_torus_build(net, sim, swlat, err);
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
    free(net->nic_of);
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
    int ka = net->nic_of[src], kb = net->nic_of[dst];
    route[n++] = net->nic_up[a * net->max_nics + ka];
    route[n++] = net->sw;
    if (t->net.kind == DT_NET_FATTREE)
        n = dt_fattree_route(net, src, dst, a, ka, b, kb, route, n);
    else if (t->net.kind == DT_NET_TORUS)
        n = dt_torus_route(net, a, b, route, n);
    else if (t->net.kind == DT_NET_RAIL && ka != kb)
        route[n++] = net->sw; /* across rails: through the spine as well */
    route[n++] = net->nic_down[b * net->max_nics + kb];
    return n;
}

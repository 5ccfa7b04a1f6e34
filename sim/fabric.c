/* Fat-tree and torus links and routes (see fabric.h and network.h).
 *
 * Fat-tree. The loader (libdt/topology.c) derives leaves of hosts_per_leaf ports down and
 * up = uplinks_per_leaf ports up. Two tiers: `up` spines, each with one link to every leaf.
 * Three tiers: pods of radix/2 leaves with `up` aggregation switches each (one link to every
 * leaf of the pod), and `up` planes of radix/2 core switches: aggregation switch s of every pod
 * has one link to each core of plane s. Every link is one direction of a full-duplex cable,
 * at uplink_bandwidth, with the latency of the switch it enters. A flow goes up to the lowest
 * tier its two leaves share and down again: the uplink out of a leaf is s and the core within
 * plane s is c, where static routing takes them from the destination's port number (D-mod-K:
 * s = port mod up, c = port / up mod radix/2) and ECMP from a hash of (source, destination).
 *
 * Torus. Node n sits at coordinates (n mod x, n / x mod y, n / (x y)); it has a link to each
 * neighbour in each dimension, wrapping around. A route corrects dimension 0 first, then 1,
 * then 2, each the shorter way round (the + way on a tie). */
#include "fabric.h"

#include <stdlib.h>

/* A torus route must fit the engine's routes with NIC-up, first router and NIC-down. */
_Static_assert(DT_TOPO_MAX_TORUS_HOPS + 3 <= DT_SIM_MAX_HOPS, "torus routes exceed DT_SIM_MAX_HOPS");

unsigned long long dt_flow_hash(int src, int dst)
{
    unsigned long long x = (unsigned long long)(unsigned)src << 32 | (unsigned)dst;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

int dt_fattree_leaf_of(const struct dt_simnet *net, int node, int k)
{
    int group = node / net->nodes_per_leaf;
    return net->topo->net.rail_optimized ? group * net->max_nics + k : group;
}

/* rows x cols links of consecutive ids from *first, named "<what> row-col". */
static int add_block(struct dt_simnet *net, struct dt_sim *sim, int rows, int cols, double bw,
                     double lat, const char *what, int *first, struct dt_error *err)
{
    int rc = DT_OK, id = -1;
    *first = dt_sim_n_links(sim);
    for (int i = 0; i < rows && !rc; i++)
        for (int j = 0; j < cols && !rc; j++)
            rc = dt_simnet_add_link(net, sim, bw, lat, &id, err, "%s %d-%d", what, i, j);
    return rc;
}

int dt_fattree_build(struct dt_simnet *net, struct dt_sim *sim, double swlat,
                     struct dt_error *err)
{
    const struct dt_network *t = &net->topo->net;
    struct dt_fattree_links *ft = &net->ft;
    ft->levels = t->levels;
    ft->up = t->uplinks_per_leaf;
    ft->half = t->radix / 2;
    ft->pod_leaves = t->radix / 2;
    if (t->levels < 2)
        return DT_OK;
    if (!(t->uplink_bw_Bps > 0) || ft->up < 1)
        return dt_fail(err, DT_EINPUT, net->topo->path, 0, 0, "fat-tree without leaf uplinks");
    double bw = t->uplink_bw_Bps;
    int leaves = t->n_leaves;
    int rc = add_block(net, sim, leaves, ft->up, bw, swlat, "leaf-up", &ft->leaf_up, err);
    if (!rc)
        rc = add_block(net, sim, leaves, ft->up, bw, swlat, "leaf-down", &ft->leaf_down, err);
    if (rc || t->levels < 3)
        return rc;
    int pods = (leaves + ft->pod_leaves - 1) / ft->pod_leaves;
    rc = add_block(net, sim, pods * ft->up, ft->half, bw, swlat, "agg-up", &ft->agg_up, err);
    if (!rc)
        rc = add_block(net, sim, pods * ft->up, ft->half, bw, swlat, "agg-down", &ft->agg_down,
                       err);
    return rc;
}

/* The destination's port number over the whole fabric, leaf by leaf (for D-mod-K). */
static int dest_port(const struct dt_simnet *net, int b, int kb, int lb)
{
    int pos = b % net->nodes_per_leaf;
    if (!net->topo->net.rail_optimized)
        pos = pos * net->max_nics + kb;
    return lb * net->topo->net.hosts_per_leaf + pos;
}

int dt_fattree_route(const struct dt_simnet *net, int src, int dst, int a, int ka, int b, int kb,
                     int *route, int n)
{
    const struct dt_fattree_links *ft = &net->ft;
    int la = dt_fattree_leaf_of(net, a, ka), lb = dt_fattree_leaf_of(net, b, kb);
    if (la == lb || ft->levels < 2)
        return n;
    unsigned long long pick = net->topo->net.routing == DT_ROUTE_ECMP
                                  ? dt_flow_hash(src, dst)
                                  : (unsigned long long)dest_port(net, b, kb, lb);
    int s = (int)(pick % (unsigned)ft->up);
    int pa = la / ft->pod_leaves, pb = lb / ft->pod_leaves;
    route[n++] = ft->leaf_up + la * ft->up + s;
    if (ft->levels == 3 && pa != pb) {
        int c = (int)(pick / (unsigned)ft->up % (unsigned)ft->half);
        route[n++] = ft->agg_up + (pa * ft->up + s) * ft->half + c;
        route[n++] = ft->agg_down + (pb * ft->up + s) * ft->half + c;
    }
    route[n++] = ft->leaf_down + lb * ft->up + s;
    return n;
}

int dt_torus_build(struct dt_simnet *net, struct dt_sim *sim, double swlat, struct dt_error *err)
{
    const struct dt_network *t = &net->topo->net;
    int nodes = net->topo->n_nodes, rc = DT_OK, id = -1;
    net->torus_first = dt_sim_n_links(sim);
    for (int node = 0; node < nodes && !rc; node++)
        for (int d = 0; d < t->n_dims && !rc; d++)
            for (int dir = 0; dir < 2 && !rc; dir++)
                rc = dt_simnet_add_link(net, sim, t->uplink_bw_Bps, swlat, &id, err,
                                        "torus %d %c%c", node, dir ? '-' : '+', "xyz"[d]);
    return rc;
}

int dt_torus_route(const struct dt_simnet *net, int a, int b, int *route, int n)
{
    const struct dt_network *t = &net->topo->net;
    int cur[3] = {0}, dst[3] = {0}, stride[3], at = a;
    for (int d = 0, s = 1; d < t->n_dims; s *= t->dims[d], d++) {
        stride[d] = s;
        cur[d] = a / s % t->dims[d];
        dst[d] = b / s % t->dims[d];
    }
    for (int d = 0; d < t->n_dims; d++) {
        int size = t->dims[d], ahead = ((dst[d] - cur[d]) % size + size) % size;
        int dir = ahead <= size / 2 ? 0 : 1, steps = dir ? size - ahead : ahead;
        for (int i = 0; i < steps; i++) {
            route[n++] = net->torus_first + (at * t->n_dims + d) * 2 + dir;
            int next = (cur[d] + (dir ? size - 1 : 1)) % size;
            at += (next - cur[d]) * stride[d];
            cur[d] = next;
        }
    }
    return n;
}

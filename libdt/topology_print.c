/* A readable description of a topology, for `dtsim --show` and for people checking a file. */
#include "dt/topology.h"

#include "dt/units.h"

static const char *fmt_q(double v, enum dt_unit unit, char *buf, size_t len)
{
    dt_format_quantity(v, unit, buf, len);
    return buf;
}

static void print_device(const struct dt_device_spec *d, FILE *out)
{
    char a[48], b[48];
    fprintf(out, "    device: %s \"%s\"", d->kind == DT_DEV_CPU ? "cpu" : "gpu", d->name);
    if (d->kind == DT_DEV_CPU)
        fprintf(out, ", %d core%s", d->cores, d->cores == 1 ? "" : "s");
    if (d->sms > 0)
        fprintf(out, ", %d SMs", d->sms);
    if (d->clock_Hz > 0)
        fprintf(out, " at %s", fmt_q(d->clock_Hz, DT_UNIT_FREQUENCY, a, sizeof a));
    fprintf(out, "\n      peak:");
    /* the widest precision first, as datasheets list them */
    static const enum dt_precision order[] = {DT_FP64, DT_FP32, DT_TF32, DT_FP16, DT_BF16, DT_FP8};
    for (int k = 0; k < DT_PREC_COUNT; k++) {
        enum dt_precision p = order[k];
        if (d->peak_flops[p] > 0)
            fprintf(out, " %s %s", dt_precision_name(p), fmt_q(d->peak_flops[p], DT_UNIT_FLOP_RATE,
                                                                 a, sizeof a));
    }
    fprintf(out, "\n      memory: %.3g GiB at %s\n", d->mem_bytes / 1073741824.0,
            fmt_q(d->mem_bw_Bps, DT_UNIT_BANDWIDTH, b, sizeof b));
}

static void print_group(const struct dt_node_group *g, FILE *out)
{
    char a[48], b[48], c[48];
    fprintf(out, "  group %s: %d node%s x %d device%s\n", g->name, g->count,
            g->count == 1 ? "" : "s", g->devices, g->devices == 1 ? "" : "s");
    print_device(&g->device, out);
    const struct dt_link_spec *l = &g->intra;
    fprintf(out, "    intra: %s, %s per device, %s", l->kind,
            fmt_q(l->bw_Bps, DT_UNIT_BANDWIDTH, a, sizeof a),
            fmt_q(l->lat_s, DT_UNIT_TIME, b, sizeof b));
    if (l->sharing == DT_LINK_SHARED)
        fprintf(out, ", shared bus %s\n", fmt_q(l->bus_bw_Bps, DT_UNIT_BANDWIDTH, c, sizeof c));
    else
        fprintf(out, ", crossbar\n");
    if (g->nics > 0)
        fprintf(out, "    nic: %d x %s, %s, %s\n", g->nics, g->nic.kind,
                fmt_q(g->nic.bw_Bps, DT_UNIT_BANDWIDTH, a, sizeof a),
                fmt_q(g->nic.lat_s, DT_UNIT_TIME, b, sizeof b));
    else
        fprintf(out, "    nic: none\n");
    if (g->data_read_Bps > 0)
        fprintf(out, "    data read: %s\n",
                fmt_q(g->data_read_Bps, DT_UNIT_BANDWIDTH, a, sizeof a));
    if (g->price_per_h > 0)
        fprintf(out, "    price: %.2f USD per node-hour\n", g->price_per_h);
}

static void print_network(const struct dt_network *n, FILE *out)
{
    char a[48], b[48];
    fmt_q(n->switch_lat_s, DT_UNIT_TIME, a, sizeof a);
    switch (n->kind) {
    case DT_NET_SWITCH:
        fprintf(out, "  network: one switch, %s, %d NIC port%s\n", a, n->endpoints,
                n->endpoints == 1 ? "" : "s");
        break;
    case DT_NET_FATTREE:
        fprintf(out,
                "  network: fat-tree of radix %d, oversubscription %g:1, %s per switch\n"
                "    %d NIC ports on %d leaves of %d node%s (%d ports down, %d up at %s each), "
                "%d tier%s\n",
                n->radix, n->oversubscription, a, n->endpoints, n->n_leaves, n->nodes_per_leaf,
                n->nodes_per_leaf == 1 ? "" : "s", n->hosts_per_leaf, n->uplinks_per_leaf,
                fmt_q(n->uplink_bw_Bps, DT_UNIT_BANDWIDTH, b, sizeof b), n->levels,
                n->levels == 1 ? "" : "s");
        fprintf(out, "    %s routing%s\n",
                n->routing == DT_ROUTE_ECMP ? "ECMP (flow hash)" : "static (destination-based)",
                n->rail_optimized ? ", rail-optimised leaves (one per NIC index)" : "");
        break;
    case DT_NET_RAIL:
        fprintf(out, "  network: rail-optimised, %d rail%s of %d node%s, %s per switch\n",
                n->n_leaves, n->n_leaves == 1 ? "" : "s", n->hosts_per_leaf,
                n->hosts_per_leaf == 1 ? "" : "s", a);
        break;
    case DT_NET_TORUS:
        fprintf(out, "  network: %dD torus %d x %d", n->n_dims, n->dims[0], n->dims[1]);
        if (n->n_dims == 3)
            fprintf(out, " x %d", n->dims[2]);
        fprintf(out, ", links of %s, %s per router, dimension-order routing\n",
                fmt_q(n->uplink_bw_Bps, DT_UNIT_BANDWIDTH, b, sizeof b), a);
        break;
    }
}

void dt_topology_print(const struct dt_topology *topo, FILE *out)
{
    fprintf(out, "topology %s (%s)\n", topo->name, topo->path);
    if (topo->source[0])
        fprintf(out, "  source: %s\n", topo->source);
    fprintf(out, "  %d node%s, %d rank%s", topo->n_nodes, topo->n_nodes == 1 ? "" : "s",
            topo->n_ranks, topo->n_ranks == 1 ? "" : "s");
    double price = dt_topology_price_per_h(topo);
    if (price > 0)
        fprintf(out, ", %.2f USD/h", price);
    fprintf(out, "\n");
    for (int g = 0; g < topo->n_groups; g++)
        print_group(&topo->groups[g], out);
    if (topo->has_network)
        print_network(&topo->net, out);
    else
        fprintf(out, "  network: none (one node)\n");
}

void dt_topology_print_shape(const struct dt_topology *topo, FILE *out)
{
    const struct dt_node_group *first = &topo->groups[0];
    bool same_ppn = true, same_kind = true;
    for (int g = 1; g < topo->n_groups; g++) {
        same_ppn &= topo->groups[g].devices == first->devices;
        same_kind &= topo->groups[g].device.kind == first->device.kind;
    }
    const char *kind = first->device.kind == DT_DEV_GPU ? "gpu" : "cpu";
    fprintf(out, "name=%s\nnodes=%d\nranks=%d\n", topo->name, topo->n_nodes, topo->n_ranks);
    if (same_ppn)
        fprintf(out, "ranks_per_node=%d\n", first->devices);
    else
        fprintf(out, "ranks_per_node=mixed\n");
    fprintf(out, "device_kind=%s\ncores_per_rank=%d\ngroups=%d\n", same_kind ? kind : "mixed",
            first->device.kind == DT_DEV_GPU ? 0 : first->device.cores, topo->n_groups);
}

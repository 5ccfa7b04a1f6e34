/* A cluster read from a topologies/ YAML file: node groups, devices, interconnects, network.
 * All values in SI units (bytes, seconds, bytes/s, FLOP/s, USD/h). */
#ifndef DT_TOPOLOGY_H
#define DT_TOPOLOGY_H

#include <stdbool.h>
#include <stdio.h>

#include "dt/error.h"

enum dt_device_kind { DT_DEV_CPU, DT_DEV_GPU };
enum dt_precision { DT_FP64, DT_FP32, DT_TF32, DT_FP16, DT_BF16, DT_FP8, DT_PREC_COUNT };

struct dt_device_spec {
    enum dt_device_kind kind;
    char name[96];
    double peak_flops[DT_PREC_COUNT]; /* FLOP/s; 0 = not supported / not given (fp32 required) */
    double mem_bw_Bps;
    double mem_bytes;
    int cores;                        /* CPU cores this device (process) may use; 0 for GPUs */
};

enum dt_link_sharing { DT_LINK_SHARED, DT_LINK_CROSSBAR };

struct dt_link_spec {
    char kind[24];        /* "shm", "pcie", "nvlink", "nvswitch", "ethernet", "infiniband" */
    double bw_Bps;        /* per direction (links are full duplex) */
    double lat_s;
    enum dt_link_sharing sharing; /* intra-node: one shared bus, or a crossbar of per-device links */
};

struct dt_node_group {
    char name[64];
    int count;                 /* nodes in this group */
    int devices;               /* devices (= ranks) per node */
    struct dt_device_spec device;
    struct dt_link_spec intra; /* between devices of one node */
    struct dt_link_spec nic;   /* node <-> network, per NIC */
    int nics;                  /* NICs per node (rail-optimised networks use one per device) */
    double data_read_Bps;      /* reading the training data on this node */
    double price_per_h;        /* USD per node-hour; 0 if not given */
};

enum dt_network_kind { DT_NET_SWITCH, DT_NET_FATTREE, DT_NET_RAIL };

struct dt_network {
    enum dt_network_kind kind;
    double switch_lat_s;       /* per switch traversed */
    int radix;                 /* fat-tree: ports per switch */
    double oversubscription;   /* fat-tree: down/up bandwidth ratio at the leaves (>= 1) */
    double uplink_bw_Bps;      /* fat-tree: each leaf-to-spine link; derived if not given */
};

struct dt_topology {
    char name[64];
    char path[512];
    char source[512];
    int n_groups;
    struct dt_node_group *groups;
    struct dt_network net;
    /* derived */
    int n_nodes;
    int n_ranks;               /* sum over groups of count * devices */
};

int dt_topology_load(const char *path, struct dt_topology **out, struct dt_error *err);
int dt_topology_load_string(const char *name, const char *text, struct dt_topology **out,
                            struct dt_error *err);
void dt_topology_destroy(struct dt_topology *topo);

/* Rank r lives on node dt_topology_node_of(t, r); ranks are numbered node by node. */
int dt_topology_node_of(const struct dt_topology *topo, int rank);
const struct dt_node_group *dt_topology_group_of_node(const struct dt_topology *topo, int node);
/* First rank of a node and its number of ranks. */
int dt_topology_node_first_rank(const struct dt_topology *topo, int node);

/* A copy of topo with the same node spec reshaped to nodes x ppn (for --sweep); only for
 * single-group topologies. */
int dt_topology_reshape(const struct dt_topology *topo, int nodes, int ppn,
                        struct dt_topology **out, struct dt_error *err);

void dt_topology_print(const struct dt_topology *topo, FILE *out);

#endif

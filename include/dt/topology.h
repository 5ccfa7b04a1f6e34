/* A cluster read from a topologies/ YAML file: node groups, devices, interconnects, network.
 * All values in SI units (bytes, seconds, bytes/s, FLOP/s, USD/h). */
#ifndef DT_TOPOLOGY_H
#define DT_TOPOLOGY_H

#include <stdbool.h>
#include <stdio.h>

#include "dt/error.h"

/* Limits the loader enforces so that no file can ask for an absurd machine (the simulator's
 * time and memory grow with ranks and flows); topologies/README.md lists every range. */
#define DT_TOPO_MAX_GROUPS 64
#define DT_TOPO_MAX_NODES 16384
#define DT_TOPO_MAX_DEVICES 1024   /* devices (ranks) per node */
#define DT_TOPO_MAX_RANKS 131072
#define DT_TOPO_MAX_NICS 64        /* NICs per node */
#define DT_TOPO_MAX_TORUS_DIM 256  /* nodes along one dimension of a torus */
#define DT_TOPO_MAX_TORUS_HOPS 22  /* longest dimension-order route (sum of dims / 2, rounded
                                      down per dimension): the simulator's routes are bounded */

enum dt_device_kind { DT_DEV_CPU, DT_DEV_GPU };
enum dt_precision { DT_FP32, DT_FP64, DT_TF32, DT_FP16, DT_BF16, DT_FP8, DT_PREC_COUNT }; /* fp32 first: the zero of options */
/* "fp32", "tf32", "bf16", ...: the names of topologies' peaks and of --precision. */
const char *dt_precision_name(enum dt_precision p);

struct dt_device_spec {
    enum dt_device_kind kind;
    char name[96];
    double peak_flops[DT_PREC_COUNT]; /* FLOP/s; 0 = not supported / not given (fp32 required) */
    double mem_bw_Bps;
    double mem_bytes;
    double cache_bytes;               /* its share of the last-level cache; 0 if not given */
    int cores;                        /* CPU cores this device (process) may use; 0 for GPUs */
    int sms;                          /* GPU: streaming multiprocessors (topology `sms`), what
                                         GEMM tiles are spread over; 0 if not given */
    double clock_Hz;                  /* clock the peaks assume; 0 if not given */
};

enum dt_link_sharing { DT_LINK_SHARED, DT_LINK_CROSSBAR };

struct dt_link_spec {
    char kind[24];        /* intra: shm pcie nvlink nvswitch; nic: ethernet infiniband roce efa
                             omnipath */
    double bw_Bps;        /* per direction (links are full duplex) */
    double lat_s;
    enum dt_link_sharing sharing; /* intra-node: one shared bus, or a crossbar of per-device links */
    /* Intra-node links: bw_Bps is each device's own link into the interconnect. With
     * DT_LINK_SHARED, every flow inside the node also crosses one medium of capacity
     * bus_bw_Bps (shared memory: the memory system); with DT_LINK_CROSSBAR, bus_bw_Bps is 0
     * and device links are the only constraint. Always 0 for NICs. */
    double bus_bw_Bps;
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

enum dt_network_kind { DT_NET_SWITCH, DT_NET_FATTREE, DT_NET_RAIL, DT_NET_TORUS };
/* Fat-tree path choice among equal-cost uplinks: static is destination-based (D-mod-K, what
 * InfiniBand's subnet manager programs), ecmp hashes (source, destination) per flow. */
enum dt_routing { DT_ROUTE_STATIC, DT_ROUTE_ECMP };

struct dt_network {
    enum dt_network_kind kind;
    double switch_lat_s;       /* per switch traversed */
    int radix;                 /* fat-tree: ports per switch */
    double oversubscription;   /* fat-tree: down/up bandwidth ratio at the leaves (>= 1) */
    double uplink_bw_Bps;      /* fat-tree: each leaf-to-spine link; if not given, the fastest
                                  NIC's bandwidth (a leaf has uplinks_per_leaf of them);
                                  torus: each link between neighbours (same default) */
    enum dt_routing routing;   /* fat-tree: static (default) or ecmp */
    bool rail_optimized;       /* fat-tree: a leaf joins NIC k of its nodes (one rail per NIC
                                  index), as in a DGX SuperPOD, instead of all NICs of a node */
    int n_dims, dims[3];       /* torus: nodes along each dimension (product = nodes) */
    /* derived by the loader (and by dt_topology_reshape) */
    int endpoints;             /* NIC ports on the network: sum over groups of count * nics */
    int hosts_per_leaf;        /* NIC ports under one leaf switch (single switch: endpoints) */
    int nodes_per_leaf;        /* fat-tree: all NICs of a node sit on one leaf, so
                                  max(1, hosts_per_leaf / most NICs per node), or with
                                  rail_optimized hosts_per_leaf (one NIC each); switch: all nodes;
                                  torus: 1; rail: all nodes (one rail switch per NIC index) */
    int uplinks_per_leaf;      /* fat-tree: links from each leaf up; 0 otherwise */
    double leaf_up_bw_Bps;     /* fat-tree: a leaf's total upward capacity, per direction:
                                  uplinks_per_leaf * uplink_bw_Bps; 0 otherwise */
    int n_leaves;              /* fat-tree: ceil(nodes / nodes_per_leaf), times the NICs per
                                  node when rail_optimized; switch: 1; rail: one switch per rail
                                  (NIC index); torus: nodes (one router each) */
    int levels;                /* switch tiers: 1 one switch, 2 leaf+spine, 3 leaf+agg+core */
};

struct dt_topology {
    char name[64];
    char path[512];
    char source[512];
    int n_groups;
    struct dt_node_group *groups;
    struct dt_network net;
    bool has_network;          /* false: single node without NIC, no network given */
    /* derived */
    int n_nodes;
    int n_ranks;               /* sum over groups of count * devices */
};

/* Loads a topology file (format: topologies/README.md). On success *out is the caller's, to be
 * freed with dt_topology_destroy; on error *out is NULL and err says file:line:column. */
int dt_topology_load(const char *path, struct dt_topology **out, struct dt_error *err);
int dt_topology_load_string(const char *name, const char *text, struct dt_topology **out,
                            struct dt_error *err);
void dt_topology_destroy(struct dt_topology *topo);

/* Rank r lives on node dt_topology_node_of(t, r); ranks are numbered node by node, nodes group
 * by group in file order. Out-of-range arguments give -1 (or NULL). */
int dt_topology_node_of(const struct dt_topology *topo, int rank);
const struct dt_node_group *dt_topology_group_of_node(const struct dt_topology *topo, int node);
/* First rank of a node and its number of ranks. */
int dt_topology_node_first_rank(const struct dt_topology *topo, int node);
int dt_topology_node_ranks(const struct dt_topology *topo, int node);
/* The group of the node a rank runs on (its ->device describes the rank's device). */
const struct dt_node_group *dt_topology_group_of_rank(const struct dt_topology *topo, int rank);
/* Sum over nodes of the price per node-hour (USD/h); 0 when a group gives no price. */
double dt_topology_price_per_h(const struct dt_topology *topo);
/* The same over the first `nodes` nodes (those a smaller job holds); 0 when one of them has
 * no price. */
double dt_topology_nodes_price_per_h(const struct dt_topology *topo, int nodes);

/* A copy of topo with the same node spec reshaped to nodes x ppn (for --sweep); only for
 * single-group topologies. GPU devices keep their spec (ppn GPUs per node). A CPU device is a
 * process sharing its node: the node's cores are split over ppn processes (floor), and peak
 * FLOP/s follow the cores while memory and memory bandwidth are split ppn ways. A rail
 * network gets one NIC per device. More than one node needs a NIC and a network. */
int dt_topology_reshape(const struct dt_topology *topo, int nodes, int ppn,
                        struct dt_topology **out, struct dt_error *err);

void dt_topology_print(const struct dt_topology *topo, FILE *out);
/* The job shape as key=value lines for scripts (dtcluster sbatch): name, nodes, ranks,
 * ranks_per_node and device_kind ("mixed" when the node groups differ), cores_per_rank (the
 * first group's; 0 for GPUs), groups. */
void dt_topology_print_shape(const struct dt_topology *topo, FILE *out);

/* A one-node topology of this machine: one device (rank) per core, core count and memory from
 * hwloc when built with it, else from sysconf; FLOP rates from the clock and vector flags in
 * /proc/cpuinfo; bandwidths are estimates (see topologies/README.md). */
int dt_topology_detect(struct dt_topology **out, struct dt_error *err);

#endif

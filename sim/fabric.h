/* The switch fabrics between NICs that need more than one switch: fat-trees (two or three
 * tiers, leaf uplinks as shared links) and 2D/3D tori (a router per node). dt_simnet_build
 * calls the build functions once the NIC links exist; dt_simnet_route the route functions for
 * ranks on different nodes. */
#ifndef DT_SIM_FABRIC_H
#define DT_SIM_FABRIC_H

#include "network.h"

int dt_fattree_build(struct dt_simnet *net, struct dt_sim *sim, double swlat,
                     struct dt_error *err);
/* Appends the switch-to-switch hops from NIC port (node a, NIC ka) to (node b, NIC kb) of a
 * flow between ranks src and dst; returns the new number of hops n. */
int dt_fattree_route(const struct dt_simnet *net, int src, int dst, int a, int ka, int b, int kb,
                     int *route, int n);
/* The leaf switch of NIC k of node. */
int dt_fattree_leaf_of(const struct dt_simnet *net, int node, int k);

int dt_torus_build(struct dt_simnet *net, struct dt_sim *sim, double swlat, struct dt_error *err);
/* Appends the router-to-router hops from node a to node b; returns the new n. */
int dt_torus_route(const struct dt_simnet *net, int a, int b, int *route, int n);

/* The ECMP hash of a flow: deterministic in (src, dst), well mixed (splitmix64's finaliser). */
unsigned long long dt_flow_hash(int src, int dst);

#endif

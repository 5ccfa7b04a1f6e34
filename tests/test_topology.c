/* Tests of the topology loader on the zoo (the YAML files in topologies/) and on small
 * documents: derived counts, the rank -> node map, reshaping for sweeps, defaults, the network
 * layout, detection.
 * Expected SI values are the files' datasheet figures converted by hand (k = 1e3, Gi = 2^30,
 * 1 B = 8 bit); REL is the tolerance for decimals that binary doubles round. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dt/topology.h"

#define REL 1e-12
#define GiB 1073741824.0

static const char *srcdir; /* $top_srcdir, exported by make check */

static void assert_close(double got, double want)
{
    if (fabs(got - want) > REL * fabs(want)) {
        print_error("got %.17g, want %.17g\n", got, want);
        fail();
    }
}

static struct dt_topology *load_zoo(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/topologies/%s.yaml", srcdir, name);
    struct dt_topology *t = NULL;
    struct dt_error err;
    if (dt_topology_load(path, &t, &err)) {
        print_error("%s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
        fail();
    }
    return t;
}

static struct dt_topology *load_text(const char *text)
{
    struct dt_topology *t = NULL;
    struct dt_error err;
    if (dt_topology_load_string("test.yaml", text, &t, &err)) {
        print_error("%s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
        fail();
    }
    return t;
}

/* One node group in flow style; the caller adds name, count, devices and the rest. */
#define GPU_DEVICE                                                                           \
    "device: {kind: gpu, name: x, peak: {fp32: 1 TFLOP/s}, memory: 1 GiB, memory_bw: 1 GB/s}"
#define PCIE "intra: {kind: pcie, bandwidth: 1 GB/s, latency: 1 us}"
#define ETH "nic: {kind: ethernet, bandwidth: 100 Gbit/s, latency: 1 us}"

/* Ensure that every file of the zoo loads, and that the files the project relies on are there
 * (seed 002's nine shapes, the seed machines, the DGX and cluster files, localhost, and the
 * DGX systems of validate/data/gpu-published.csv). */
static void test_every_zoo_file_loads(void **state)
{
    (void)state;
    static const char *const required[] = {
        "1n1p", "1n2p", "1n4p", "1n8p", "2n1p", "2n2p", "2n4p", "4n1p", "4n2p",
        "rtx3070x2", "titanxp", "gcp-t4x4", "dgx-h100", "h100-128n-fattree", "localhost",
        "dgx1-v100", "dgx2-v100", "dgx-a100", "dgx-a100-40gb", "dgx-a100-32n"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        dt_topology_destroy(load_zoo(required[i]));
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/topologies", srcdir);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int loaded = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".yaml") != 0)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(n - 5), e->d_name);
        struct dt_topology *t = load_zoo(name);
        /* A file's name is its file name, so `dtsim -t NAME` finds it. */
        assert_string_equal(t->name, name);
        assert_true(t->source[0] != '\0');
        dt_topology_destroy(t);
        loaded++;
    }
    closedir(d);
    assert_true(loaded >= (int)(sizeof required / sizeof required[0]));
}

/* Ensure that 2n4p has 2 nodes and 8 ranks, ranks 0-3 on node 0 and 4-7 on node 1. */
static void test_2n4p_counts_and_mapping(void **state)
{
    (void)state;
    struct dt_topology *t = load_zoo("2n4p");
    assert_int_equal(t->n_nodes, 2);
    assert_int_equal(t->n_ranks, 8);
    for (int r = 0; r < 8; r++)
        assert_int_equal(dt_topology_node_of(t, r), r / 4);
    assert_int_equal(dt_topology_node_first_rank(t, 0), 0);
    assert_int_equal(dt_topology_node_first_rank(t, 1), 4);
    assert_int_equal(dt_topology_node_ranks(t, 1), 4);
    assert_ptr_equal(dt_topology_group_of_node(t, 1), &t->groups[0]);
    assert_ptr_equal(dt_topology_group_of_rank(t, 7), &t->groups[0]);
    dt_topology_destroy(t);
}

/* Ensure that ranks, nodes out of range give -1 or NULL. */
static void test_out_of_range(void **state)
{
    (void)state;
    struct dt_topology *t = load_zoo("2n4p");
    assert_int_equal(dt_topology_node_of(t, -1), -1);
    assert_int_equal(dt_topology_node_of(t, 8), -1);
    assert_null(dt_topology_group_of_node(t, 2));
    assert_null(dt_topology_group_of_node(t, -1));
    assert_int_equal(dt_topology_node_first_rank(t, 2), -1);
    assert_int_equal(dt_topology_node_ranks(t, -3), -1);
    assert_null(dt_topology_group_of_rank(t, 99));
    dt_topology_destroy(t);
}

/* Ensure that every seed 002 file has the shape its name says (XnYp: X nodes, Y per node) and
 * splits the node's 40 cores evenly. */
static void test_seed002_shapes(void **state)
{
    (void)state;
    static const int shapes[][2] = {{1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 1},
                                    {2, 2}, {2, 4}, {4, 1}, {4, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char name[16];
        snprintf(name, sizeof name, "%dn%dp", shapes[i][0], shapes[i][1]);
        struct dt_topology *t = load_zoo(name);
        assert_int_equal(t->n_nodes, shapes[i][0]);
        assert_int_equal(t->n_ranks, shapes[i][0] * shapes[i][1]);
        assert_int_equal(t->groups[0].device.cores * shapes[i][1], 40);
        /* 160 GFLOP/s per core (2.5 GHz x 64 FP32 FLOP/cycle, Intel ARK). */
        assert_close(t->groups[0].device.peak_flops[DT_FP32],
                     160e9 * t->groups[0].device.cores);
        dt_topology_destroy(t);
    }
}

/* Ensure that 2n4p's quantities convert to the SI values worked by hand. */
static void test_2n4p_units(void **state)
{
    (void)state;
    struct dt_topology *t = load_zoo("2n4p");
    const struct dt_node_group *g = &t->groups[0];
    assert_close(g->device.peak_flops[DT_FP32], 1.6e12);   /* 1.6 TFLOP/s */
    assert_close(g->device.peak_flops[DT_FP64], 800e9);    /* 800 GFLOP/s */
    assert_true(g->device.peak_flops[DT_FP16] == 0);       /* not given */
    assert_close(g->device.mem_bytes, 48 * GiB);           /* 48 GiB = 51539607552 B */
    assert_close(g->device.mem_bw_Bps, 70.392e9);          /* 70.392 GB/s */
    assert_close(g->device.clock_Hz, 2.5e9);               /* 2.5 GHz */
    assert_close(g->intra.bw_Bps, 10e9);                   /* 10 GB/s */
    assert_close(g->intra.bus_bw_Bps, 140.784e9);          /* 140.784 GB/s */
    assert_close(g->intra.lat_s, 0.5e-6);                  /* 0.5 us */
    assert_int_equal(g->intra.sharing, DT_LINK_SHARED);
    assert_close(g->nic.bw_Bps, 12.5e9);                   /* 100 Gbit/s / 8 */
    assert_close(g->nic.lat_s, 1e-6);                      /* 1 us */
    assert_int_equal(g->nics, 1);
    assert_close(g->data_read_Bps, 1e9);                   /* 1 GB/s */
    assert_close(t->net.switch_lat_s, 90e-9);              /* 90 ns */
    assert_int_equal(t->net.kind, DT_NET_SWITCH);
    assert_int_equal(t->net.endpoints, 2);
    dt_topology_destroy(t);
}

/* Ensure that the DGX H100 file reads its datasheet values: NVLink 900 GB/s both ways = 450 GB/s
 * per direction, 8 NICs of 400 Gbit/s = 50 GB/s, dense FP16 989.5 TFLOP/s, 80 GiB of HBM3,
 * one rail per GPU. */
static void test_dgx_h100(void **state)
{
    (void)state;
    struct dt_topology *t = load_zoo("dgx-h100");
    const struct dt_node_group *g = &t->groups[0];
    assert_int_equal(t->n_ranks, 8);
    assert_int_equal(g->device.kind, DT_DEV_GPU);
    assert_int_equal(g->device.cores, 0);
    assert_close(g->intra.bw_Bps, 450e9);
    assert_int_equal(g->intra.sharing, DT_LINK_CROSSBAR);
    assert_true(g->intra.bus_bw_Bps == 0); /* no bus on a crossbar */
    assert_int_equal(g->nics, 8);
    assert_close(g->nic.bw_Bps, 50e9);
    assert_close(g->device.peak_flops[DT_FP16], 989.5e12);
    assert_close(g->device.peak_flops[DT_FP8], 1979e12);
    assert_close(g->device.mem_bytes, 80 * GiB);
    assert_close(g->device.mem_bw_Bps, 3.35e12);
    assert_int_equal(t->net.kind, DT_NET_RAIL);
    assert_int_equal(t->net.n_leaves, 8);
    dt_topology_destroy(t);
}

/* Ensure that the V100 DGX files read their datasheet values: NVLink 2 300 GB/s both ways =
 * 150 GB/s per direction per GPU (on the DGX-1 a crossbar approximates the cube-mesh), dense
 * Tensor Core FP16 125 TFLOP/s, no TF32 or BF16 on Volta, 900 GB/s of HBM2, 32 GiB, EDR NICs
 * of 100 Gbit/s = 12.5 GB/s: 4 on the DGX-1, 8 on the DGX-2; one EDR switch (assumed). */
static void test_dgx_v100(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int ranks, nics;
    } files[] = {{"dgx1-v100", 8, 4}, {"dgx2-v100", 16, 8}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct dt_topology *t = load_zoo(files[i].name);
        const struct dt_node_group *g = &t->groups[0];
        assert_int_equal(t->n_ranks, files[i].ranks);
        assert_int_equal(g->device.kind, DT_DEV_GPU);
        assert_close(g->device.peak_flops[DT_FP32], 15.7e12);
        assert_close(g->device.peak_flops[DT_FP64], 7.8e12);
        assert_close(g->device.peak_flops[DT_FP16], 125e12);
        assert_true(g->device.peak_flops[DT_TF32] == 0);
        assert_true(g->device.peak_flops[DT_BF16] == 0);
        assert_close(g->device.mem_bytes, 32 * GiB);
        assert_close(g->device.mem_bw_Bps, 900e9);
        assert_close(g->intra.bw_Bps, 150e9);
        assert_int_equal(g->intra.sharing, DT_LINK_CROSSBAR);
        assert_int_equal(g->nics, files[i].nics);
        assert_close(g->nic.bw_Bps, 12.5e9);
        assert_int_equal(t->net.kind, DT_NET_SWITCH);
        dt_topology_destroy(t);
    }
    /* AWS p3dn.24xlarge; the DGX-2 has no hourly price. */
    struct dt_topology *t = load_zoo("dgx1-v100");
    assert_close(dt_topology_price_per_h(t), 31.212);
    dt_topology_destroy(t);
    t = load_zoo("dgx2-v100");
    assert_true(dt_topology_price_per_h(t) == 0);
    dt_topology_destroy(t);
}

/* Ensure that the DGX A100 files read their datasheet values: NVLink 3 600 GB/s both ways =
 * 300 GB/s per direction, dense TF32 156 and FP16 312 TFLOP/s, FP64 Tensor 19.5, 8 HDR NICs of
 * 200 Gbit/s = 25 GB/s; 80 GiB at 2,039 GB/s, or 40 GiB at 1,555 GB/s. */
static void test_dgx_a100(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        double mem_gib, mem_bw, price;
    } files[] = {{"dgx-a100", 80, 2039e9, 40.966}, {"dgx-a100-40gb", 40, 1555e9, 32.7726}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct dt_topology *t = load_zoo(files[i].name);
        const struct dt_node_group *g = &t->groups[0];
        assert_int_equal(t->n_ranks, 8);
        assert_close(g->device.peak_flops[DT_FP32], 19.5e12);
        assert_close(g->device.peak_flops[DT_FP64], 19.5e12);
        assert_close(g->device.peak_flops[DT_TF32], 156e12);
        assert_close(g->device.peak_flops[DT_BF16], 312e12);
        assert_close(g->device.peak_flops[DT_FP16], 312e12);
        assert_true(g->device.peak_flops[DT_FP8] == 0);
        assert_close(g->device.mem_bytes, files[i].mem_gib * GiB);
        assert_close(g->device.mem_bw_Bps, files[i].mem_bw);
        assert_close(g->intra.bw_Bps, 300e9);
        assert_int_equal(g->intra.sharing, DT_LINK_CROSSBAR);
        assert_int_equal(g->nics, 8);
        assert_close(g->nic.bw_Bps, 25e9);
        assert_int_equal(t->net.kind, DT_NET_FATTREE);
        assert_close(dt_topology_price_per_h(t), files[i].price);
        dt_topology_destroy(t);
    }
}

/* Ensure that the 32-node DGX A100 fat-tree derives its layout: 32 x 8 = 256 NIC ports; radix
 * 40 at 1:1 gives 20 down and 20 up per leaf, floor(20 / 8) = 2 nodes per leaf, 32 / 2 = 16
 * leaves <= 40: two tiers; a leaf sends up 20 x 200 Gbit/s = 500 GB/s; and that dgx-a100
 * swept to 32 nodes is the same cluster. */
static void test_dgx_a100_32n(void **state)
{
    (void)state;
    struct dt_topology *file = load_zoo("dgx-a100-32n");
    struct dt_topology *one = load_zoo("dgx-a100");
    struct dt_topology *swept = NULL;
    struct dt_error err;
    assert_int_equal(dt_topology_reshape(one, 32, 8, &swept, &err), DT_OK);
    const struct dt_topology *both[] = {file, swept};
    for (int i = 0; i < 2; i++) {
        const struct dt_topology *t = both[i];
        assert_int_equal(t->n_nodes, 32);
        assert_int_equal(t->n_ranks, 256);
        assert_int_equal(t->net.kind, DT_NET_FATTREE);
        assert_int_equal(t->net.endpoints, 256);
        assert_int_equal(t->net.hosts_per_leaf, 20);
        assert_int_equal(t->net.nodes_per_leaf, 2);
        assert_int_equal(t->net.uplinks_per_leaf, 20);
        assert_close(t->net.leaf_up_bw_Bps, 20 * 25e9);
        assert_int_equal(t->net.n_leaves, 16);
        assert_int_equal(t->net.levels, 2);
        assert_close(t->net.switch_lat_s, 130e-9);
        assert_close(t->groups[0].device.mem_bw_Bps, 2039e9);
        /* 32 nodes x 40.966 USD/h (AWS p4de.24xlarge) */
        assert_close(dt_topology_price_per_h(t), 32 * 40.966);
    }
    dt_topology_destroy(swept);
    dt_topology_destroy(one);
    dt_topology_destroy(file);
}

/* Ensure that the 128-node fat-tree derives its layout: 128 x 8 = 1024 NIC ports; radix 64 at
 * 1:1 gives 32 down and 32 up per leaf, so 32 / 8 = 4 nodes per leaf, 128 / 4 = 32 leaves
 * <= 64: two tiers; a leaf sends up 32 x 400 Gbit/s = 1.6 TB/s. */
static void test_fattree_layout(void **state)
{
    (void)state;
    struct dt_topology *t = load_zoo("h100-128n-fattree");
    assert_int_equal(t->n_nodes, 128);
    assert_int_equal(t->n_ranks, 1024);
    assert_int_equal(t->net.kind, DT_NET_FATTREE);
    assert_int_equal(t->net.endpoints, 1024);
    assert_int_equal(t->net.hosts_per_leaf, 32);
    assert_int_equal(t->net.nodes_per_leaf, 4);
    assert_int_equal(t->net.uplinks_per_leaf, 32);
    assert_close(t->net.leaf_up_bw_Bps, 32 * 50e9);
    assert_int_equal(t->net.n_leaves, 32);
    assert_int_equal(t->net.levels, 2);
    assert_close(t->net.uplink_bw_Bps, 50e9); /* 400 Gbit/s */
    assert_close(t->net.oversubscription, 1.0);
    /* 128 nodes x 98.32 USD/h. */
    assert_close(dt_topology_price_per_h(t), 128 * 98.32);
    dt_topology_destroy(t);
}

/* Ensure that the 2,048-node SuperPOD-style fabric derives its layout: 64-port leaves at 1:1
 * have 32 ports down and 32 up; rail-optimised, a leaf joins NIC k of 32 nodes (a scalable
 * unit), so 64 units x 8 rails = 512 leaves, more than 64: three tiers. */
static void test_superpod_layout(void **state)
{
    (void)state;
    struct dt_topology *t = load_zoo("h100-superpod-2048n");
    assert_int_equal(t->n_ranks, 16384);
    assert_int_equal(t->net.kind, DT_NET_FATTREE);
    assert_true(t->net.rail_optimized);
    assert_int_equal(t->net.routing, DT_ROUTE_STATIC);
    assert_int_equal(t->net.nodes_per_leaf, 32);
    assert_int_equal(t->net.uplinks_per_leaf, 32);
    assert_int_equal(t->net.n_leaves, 512);
    assert_int_equal(t->net.levels, 3);
    dt_topology_destroy(t);
}

/* Ensure that oversubscription splits the leaf's ports: radix 64 at 3:1 gives
 * floor(64 x 3/4) = 48 down and 16 up; the uplink defaults to the NIC's bandwidth. */
static void test_fattree_oversubscribed(void **state)
{
    (void)state;
    struct dt_topology *t = load_text(
        "name: t\nnodes:\n  - {name: g, count: 100, devices: 1, " GPU_DEVICE ", " PCIE ", " ETH
        "}\nnetwork: {kind: fat-tree, latency: 100 ns, radix: 64, oversubscription: 3}\n");
    assert_int_equal(t->net.hosts_per_leaf, 48);
    assert_int_equal(t->net.uplinks_per_leaf, 16);
    assert_int_equal(t->net.nodes_per_leaf, 48);
    assert_int_equal(t->net.n_leaves, 3); /* ceil(100 / 48) */
    assert_close(t->net.leaf_up_bw_Bps, 16 * 12.5e9);
    assert_int_equal(t->net.levels, 2);
    assert_close(t->net.uplink_bw_Bps, 12.5e9); /* 100 Gbit/s */
    dt_topology_destroy(t);
}

/* Ensure that tier counts follow size: radix 8 at 1:1 has 4 ports down per leaf; 4 one-NIC
 * nodes fit one leaf (1 tier), 40 need 10 leaves > 8 (3 tiers: up to 8/2 x 8 = 32 leaves). */
static void test_fattree_tiers(void **state)
{
    (void)state;
    struct dt_topology *t = load_text(
        "name: t\nnodes:\n  - {name: g, count: 4, devices: 1, " GPU_DEVICE ", " PCIE ", " ETH
        "}\nnetwork: {kind: fat-tree, latency: 100 ns, radix: 8}\n");
    assert_int_equal(t->net.n_leaves, 1);
    assert_int_equal(t->net.levels, 1);
    dt_topology_destroy(t);
    t = load_text("name: t\nnodes:\n  - {name: g, count: 40, devices: 1, " GPU_DEVICE ", " PCIE
                  ", " ETH "}\nnetwork: {kind: fat-tree, latency: 100 ns, radix: 8}\n");
    assert_int_equal(t->net.n_leaves, 10);
    assert_int_equal(t->net.levels, 3);
    dt_topology_destroy(t);
}

/* Ensure that with two node groups, nodes are numbered group by group and ranks node by node:
 * 2 nodes x 2 ranks then 1 node x 3 ranks gives ranks 0-1 | 2-3 | 4-6. */
static void test_two_groups(void **state)
{
    (void)state;
    struct dt_topology *t = load_text(
        "name: t\nnodes:\n"
        "  - {name: a, count: 2, devices: 2, " GPU_DEVICE ", " PCIE ", " ETH "}\n"
        "  - {name: b, count: 1, devices: 3, " GPU_DEVICE ", " PCIE ", " ETH "}\n"
        "network: {kind: switch, latency: 1 us}\n");
    assert_int_equal(t->n_nodes, 3);
    assert_int_equal(t->n_ranks, 7);
    static const int node_of[] = {0, 0, 1, 1, 2, 2, 2};
    for (int r = 0; r < 7; r++)
        assert_int_equal(dt_topology_node_of(t, r), node_of[r]);
    assert_ptr_equal(dt_topology_group_of_node(t, 1), &t->groups[0]);
    assert_ptr_equal(dt_topology_group_of_node(t, 2), &t->groups[1]);
    assert_int_equal(dt_topology_node_first_rank(t, 2), 4);
    assert_int_equal(dt_topology_node_ranks(t, 2), 3);
    assert_int_equal(t->net.endpoints, 3);
    /* No price in either group: no total. */
    assert_true(dt_topology_price_per_h(t) == 0);
    dt_topology_destroy(t);
}

/* Ensure that the documented defaults apply: shm shares a bus as wide as the link, pcie is a
 * crossbar, one NIC, fat-tree 1:1, no price, no data-read rate, no network for one node. */
static void test_defaults(void **state)
{
    (void)state;
    struct dt_topology *t = load_text(
        "name: t\nnodes:\n  - {name: g, count: 1, devices: 2, device: {kind: cpu, name: c, "
        "cores: 2, peak: {fp32: 1 TFLOP/s}, memory: 1 GiB, memory_bw: 1 GB/s}, "
        "intra: {kind: shm, bandwidth: 7 GB/s, latency: 1 us}}\n");
    const struct dt_node_group *g = &t->groups[0];
    assert_int_equal(g->intra.sharing, DT_LINK_SHARED);
    assert_close(g->intra.bus_bw_Bps, 7e9);
    assert_int_equal(g->nics, 0);
    assert_true(g->price_per_h == 0);
    assert_true(g->data_read_Bps == 0);
    assert_true(g->device.clock_Hz == 0);
    assert_false(t->has_network);
    dt_topology_destroy(t);
    t = load_text("name: t\nnodes:\n  - {name: g, count: 1, devices: 2, " GPU_DEVICE ", " PCIE
                  "}\n");
    assert_int_equal(t->groups[0].intra.sharing, DT_LINK_CROSSBAR);
    assert_true(t->groups[0].intra.bus_bw_Bps == 0);
    dt_topology_destroy(t);
}

/* Ensure that the GCP price adds the VM and its GPUs: 0.379998 + 4 x 0.35 = 1.779998 USD/h. */
static void test_gcp_price(void **state)
{
    (void)state;
    struct dt_topology *t = load_zoo("gcp-t4x4");
    assert_close(t->groups[0].price_per_h, 1.779998);
    assert_close(dt_topology_price_per_h(t), 1.779998);
    assert_close(t->groups[0].nic.bw_Bps, 2e9); /* 16 Gbit/s */
    dt_topology_destroy(t);
}

/* Ensure that reshaping 2n4p to 1 node x 8 gives what 1n8p.yaml says: 5 cores, 800 GFLOP/s,
 * 24 GiB and 35.196 GB/s per process (the node's totals split 8 ways). */
static void test_reshape_matches_file(void **state)
{
    (void)state;
    struct dt_topology *src = load_zoo("2n4p");
    struct dt_topology *want = load_zoo("1n8p");
    struct dt_topology *t = NULL;
    struct dt_error err;
    assert_int_equal(dt_topology_reshape(src, 1, 8, &t, &err), DT_OK);
    assert_string_equal(t->name, "2n4p-1n8p");
    assert_int_equal(t->n_nodes, 1);
    assert_int_equal(t->n_ranks, 8);
    const struct dt_device_spec *a = &t->groups[0].device, *b = &want->groups[0].device;
    assert_int_equal(a->cores, b->cores);
    for (int p = 0; p < DT_PREC_COUNT; p++)
        assert_close(a->peak_flops[p], b->peak_flops[p]);
    assert_close(a->mem_bytes, b->mem_bytes);
    assert_close(a->mem_bw_Bps, b->mem_bw_Bps);
    assert_close(t->groups[0].intra.bus_bw_Bps, want->groups[0].intra.bus_bw_Bps);
    dt_topology_destroy(t);
    dt_topology_destroy(want);
    /* And to 4 nodes x 1: the whole node per process, as in 4n1p.yaml. */
    want = load_zoo("4n1p");
    assert_int_equal(dt_topology_reshape(src, 4, 1, &t, &err), DT_OK);
    assert_int_equal(t->n_ranks, 4);
    assert_int_equal(t->net.endpoints, 4);
    assert_int_equal(t->groups[0].device.cores, 40);
    assert_close(t->groups[0].device.peak_flops[DT_FP32],
                 want->groups[0].device.peak_flops[DT_FP32]);
    assert_close(t->groups[0].device.mem_bytes, want->groups[0].device.mem_bytes);
    dt_topology_destroy(t);
    dt_topology_destroy(want);
    dt_topology_destroy(src);
}

/* Ensure that localhost's device has its share of the L3 cache (16 MiB = 16,777,216 B), and
 * that reshaping splits a cache like the memory: the 2 ranks' node run as 1 rank has the
 * whole 32 MiB. */
static void test_cache_parsed_and_reshaped(void **state)
{
    (void)state;
    struct dt_topology *src = load_zoo("localhost");
    assert_close(src->groups[0].device.cache_bytes, 16777216.0);
    struct dt_topology *t = NULL;
    struct dt_error err;
    assert_int_equal(dt_topology_reshape(src, 1, 1, &t, &err), DT_OK);
    assert_close(t->groups[0].device.cache_bytes, 33554432.0);
    dt_topology_destroy(t);
    dt_topology_destroy(src);
    /* a file without it has none */
    src = load_zoo("2n4p");
    assert_true(src->groups[0].device.cache_bytes == 0);
    dt_topology_destroy(src);
}

/* Ensure that a CPU node cannot run more processes than it has cores: 40 cores, ppn 41. */
static void test_reshape_too_many_processes(void **state)
{
    (void)state;
    struct dt_topology *src = load_zoo("2n4p");
    struct dt_topology *t = (struct dt_topology *)1;
    struct dt_error err;
    assert_int_equal(dt_topology_reshape(src, 1, 41, &t, &err), DT_EINPUT);
    assert_null(t);
    assert_non_null(strstr(err.msg, "40 cores"));
    /* ppn 3 leaves one core idle: floor(40 / 3) = 13 cores, 13 x 160 GFLOP/s. */
    assert_int_equal(dt_topology_reshape(src, 1, 3, &t, &err), DT_OK);
    assert_int_equal(t->groups[0].device.cores, 13);
    assert_close(t->groups[0].device.peak_flops[DT_FP32], 13 * 160e9);
    dt_topology_destroy(t);
    dt_topology_destroy(src);
}

/* Ensure that a GPU box keeps its device spec when reshaped, and that a box without NIC
 * cannot become several nodes. */
static void test_reshape_gpu_box(void **state)
{
    (void)state;
    struct dt_topology *src = load_zoo("rtx3070x2");
    struct dt_topology *t = NULL;
    struct dt_error err;
    assert_int_equal(dt_topology_reshape(src, 1, 1, &t, &err), DT_OK);
    assert_int_equal(t->n_ranks, 1);
    assert_close(t->groups[0].device.peak_flops[DT_FP32], 20.3e12);
    dt_topology_destroy(t);
    assert_int_equal(dt_topology_reshape(src, 2, 2, &t, &err), DT_EINPUT);
    assert_null(t);
    assert_non_null(strstr(err.msg, "NIC"));
    assert_int_equal(dt_topology_reshape(src, 0, 2, &t, &err), DT_EINPUT);
    assert_int_equal(dt_topology_reshape(src, 1, 0, &t, &err), DT_EINPUT);
    dt_topology_destroy(src);
}

/* Ensure that a rail network keeps one NIC per device when the node is reshaped, and that a
 * sweep over nodes re-derives the layout (4 DGX nodes: 8 rails of 4 nodes). */
static void test_reshape_rail(void **state)
{
    (void)state;
    struct dt_topology *src = load_zoo("dgx-h100");
    struct dt_topology *t = NULL;
    struct dt_error err;
    assert_int_equal(dt_topology_reshape(src, 4, 8, &t, &err), DT_OK);
    assert_int_equal(t->n_ranks, 32);
    assert_int_equal(t->net.n_leaves, 8);
    assert_int_equal(t->net.hosts_per_leaf, 4);
    dt_topology_destroy(t);
    assert_int_equal(dt_topology_reshape(src, 2, 4, &t, &err), DT_OK);
    assert_int_equal(t->groups[0].nics, 4);
    assert_int_equal(t->net.n_leaves, 4);
    dt_topology_destroy(t);
    dt_topology_destroy(src);
}

/* Ensure that only one-group topologies can be reshaped. */
static void test_reshape_needs_one_group(void **state)
{
    (void)state;
    struct dt_topology *src = load_text(
        "name: t\nnodes:\n"
        "  - {name: a, count: 1, devices: 2, " GPU_DEVICE ", " PCIE ", " ETH "}\n"
        "  - {name: b, count: 1, devices: 3, " GPU_DEVICE ", " PCIE ", " ETH "}\n"
        "network: {kind: switch, latency: 1 us}\n");
    struct dt_topology *t = (struct dt_topology *)1;
    struct dt_error err;
    assert_int_equal(dt_topology_reshape(src, 2, 2, &t, &err), DT_EINPUT);
    assert_null(t);
    assert_non_null(strstr(err.msg, "2 node groups"));
    dt_topology_destroy(src);
}

/* Ensure that a reshape that breaks the network is refused: 2n4p's switch has 36 ports. */
static void test_reshape_respects_network(void **state)
{
    (void)state;
    struct dt_topology *src = load_zoo("2n4p");
    struct dt_topology *t = (struct dt_topology *)1;
    struct dt_error err;
    assert_int_equal(dt_topology_reshape(src, 37, 1, &t, &err), DT_EINPUT);
    assert_null(t);
    assert_non_null(strstr(err.msg, "radix 36"));
    dt_topology_destroy(src);
}

/* Ensure that the printed description names the topology, its counts and its parts. */
static void test_print(void **state)
{
    (void)state;
    struct dt_topology *t = load_zoo("h100-128n-fattree");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    dt_topology_print(t, f);
    fclose(f);
    assert_non_null(strstr(buf, "topology h100-128n-fattree"));
    assert_non_null(strstr(buf, "128 nodes, 1024 ranks"));
    assert_non_null(strstr(buf, "128 nodes x 8 devices"));
    assert_non_null(strstr(buf, "nvswitch, 450 GB/s per device"));
    assert_non_null(strstr(buf, "8 x infiniband, 50 GB/s"));
    assert_non_null(strstr(buf, "fat-tree of radix 64"));
    assert_non_null(strstr(buf, "32 leaves"));
    free(buf);
    dt_topology_destroy(t);
}

/* Ensure that detection describes this machine: one node, one rank per core (at most the
 * online CPUs), memory no larger than the machine's, positive FLOP rates, and that the result
 * survives a reshape and a print like a loaded file. */
static void test_detect(void **state)
{
    (void)state;
    struct dt_topology *t = NULL;
    struct dt_error err;
    assert_int_equal(dt_topology_detect(&t, &err), DT_OK);
    assert_int_equal(t->n_nodes, 1);
    assert_true(t->n_ranks >= 1);
    assert_true(t->n_ranks <= sysconf(_SC_NPROCESSORS_ONLN));
    assert_int_equal(t->groups[0].devices, t->n_ranks);
    assert_int_equal(t->groups[0].device.cores, 1);
    double mem = t->groups[0].device.mem_bytes * t->n_ranks;
    assert_true(mem > 0);
    assert_true(mem <= (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) * 1.0001);
    assert_true(t->groups[0].device.peak_flops[DT_FP32] > 0);
    assert_true(t->groups[0].intra.bw_Bps > 0);
    struct dt_topology *r = NULL;
    assert_int_equal(dt_topology_reshape(t, 1, 1, &r, &err), DT_OK);
    assert_int_equal(r->groups[0].device.cores, t->n_ranks);
    FILE *f = fopen("/dev/null", "w");
    assert_non_null(f);
    dt_topology_print(r, f);
    fclose(f);
    dt_topology_destroy(r);
    dt_topology_destroy(t);
}

int main(void)
{
    srcdir = getenv("top_srcdir");
    if (!srcdir) {
        fprintf(stderr, "SKIP: top_srcdir is not set (run through make check)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_zoo_file_loads),
        cmocka_unit_test(test_2n4p_counts_and_mapping),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_seed002_shapes),
        cmocka_unit_test(test_2n4p_units),
        cmocka_unit_test(test_dgx_h100),
        cmocka_unit_test(test_dgx_v100),
        cmocka_unit_test(test_dgx_a100),
        cmocka_unit_test(test_dgx_a100_32n),
        cmocka_unit_test(test_fattree_layout),
        cmocka_unit_test(test_fattree_oversubscribed),
        cmocka_unit_test(test_superpod_layout),
        cmocka_unit_test(test_fattree_tiers),
        cmocka_unit_test(test_two_groups),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_gcp_price),
        cmocka_unit_test(test_reshape_matches_file),
        cmocka_unit_test(test_cache_parsed_and_reshaped),
        cmocka_unit_test(test_reshape_too_many_processes),
        cmocka_unit_test(test_reshape_gpu_box),
        cmocka_unit_test(test_reshape_rail),
        cmocka_unit_test(test_reshape_needs_one_group),
        cmocka_unit_test(test_reshape_respects_network),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_detect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Bad topology files: every kind of mistake must give DT_EINPUT with the line and column of the
 * offending text, never a crash or a hang. Each case edits one place of a valid document
 * (BASE below, whose line numbers are in its comments) and states the expected position; the
 * columns are counted by hand from the edited line (1-based, the first character of the value,
 * key or mapping named in the message). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/topology.h"
#include "dt/yamldoc.h"

static const char *const BASE[] = {
    "name: t",                /* 1 */
    "nodes:",                 /* 2 */
    "  - name: g",            /* 3: the group mapping starts at column 5 */
    "    count: 2",           /* 4: value at column 12 */
    "    devices: 4",         /* 5: value at column 14 */
    "    device:",            /* 6 */
    "      kind: cpu",        /* 7: device mapping at column 7, value at column 13 */
    "      name: x",          /* 8 */
    "      cores: 10",        /* 9: value at column 14 */
    "      peak:",            /* 10 */
    "        fp32: 1.6 TFLOP/s", /* 11: peak mapping at column 9, value at column 15 */
    "      memory: 48 GiB",   /* 12: value at column 15 */
    "      memory_bw: 70 GB/s", /* 13: value at column 18 */
    "    intra:",             /* 14 */
    "      kind: shm",        /* 15: intra mapping at column 7 */
    "      bandwidth: 10 GB/s", /* 16: value at column 18 */
    "      latency: 0.5 us",  /* 17: value at column 16 */
    "    nic:",               /* 18 */
    "      kind: infiniband", /* 19 */
    "      bandwidth: 100 Gbit/s", /* 20: value at column 18 */
    "      latency: 1 us",    /* 21 */
    "network:",               /* 22 */
    "  kind: switch",         /* 23: network mapping at column 3, value at column 9 */
    "  latency: 90 ns",       /* 24: value at column 12 */
};
#define BASE_LINES ((int)(sizeof BASE / sizeof BASE[0]))

/* A valid one-line node group of `count` one-GPU nodes, for whole-document cases: with
 * "name: t" first, the group is on line 3 and a following "network:" mapping starts at 5:3. */
#define GROUP(count)                                                                         \
    "nodes:\n  - {name: g, count: " count ", devices: 1, device: {kind: gpu, name: x, "       \
    "peak: {fp32: 1 TFLOP/s}, memory: 1 GiB, memory_bw: 1 GB/s}, intra: {kind: pcie, "       \
    "bandwidth: 1 GB/s, latency: 1 us}, nic: {kind: ethernet, bandwidth: 1 GB/s, "            \
    "latency: 1 us}}\n"

struct bad_case {
    const char *name;
    /* Either a whole document ... */
    const char *doc;
    /* ... or BASE with lines [line, line + drop) replaced by repl (NULL: just removed). */
    int line, drop;
    const char *repl;
    int want_line, want_col;
    const char *want_msg; /* a piece of the message */
};

/* BASE with one edit, as one string (caller frees). */
static char *edited(const struct bad_case *c)
{
    size_t cap = 4096 + (c->repl ? strlen(c->repl) : 0);
    char *s = malloc(cap);
    assert_non_null(s);
    s[0] = '\0';
    for (int i = 1; i <= BASE_LINES; i++) {
        if (i == c->line && c->repl) {
            strcat(s, c->repl);
            strcat(s, "\n");
        }
        if (i >= c->line && i < c->line + c->drop)
            continue;
        strcat(s, BASE[i - 1]);
        strcat(s, "\n");
    }
    if (c->line == BASE_LINES + 1 && c->repl) {
        strcat(s, c->repl);
        strcat(s, "\n");
    }
    return s;
}

static void expect_error(const char *text, int line, int col, const char *msg)
{
    struct dt_topology *t = (struct dt_topology *)1;
    struct dt_error err;
    dt_error_clear(&err);
    int rc = dt_topology_load_string("bad.yaml", text, &t, &err);
    char buf[2048];
    dt_error_format(&err, buf, sizeof buf);
    if (rc != DT_EINPUT || err.line != line || err.col != col || !strstr(err.msg, msg))
        print_error("rc %d, got '%s'; want bad.yaml:%d:%d with '%s'\n", rc, buf, line, col,
                    msg);
    assert_int_equal(rc, DT_EINPUT);
    assert_null(t);
    assert_string_equal(err.file, "bad.yaml");
    assert_int_equal(err.line, line);
    assert_int_equal(err.col, col);
    assert_non_null(strstr(err.msg, msg));
}

static void run_case(void **state)
{
    const struct bad_case *c = *state;
    char *text = c->doc ? strdup(c->doc) : edited(c);
    assert_non_null(text);
    expect_error(text, c->want_line, c->want_col, c->want_msg);
    free(text);
}

static const struct bad_case cases[] = {
    /* Ensure that an unclosed flow sequence is a YAML syntax error where libyaml notices it:
     * the ':' of the next line's "devices: 4" (column 12), read as part of the sequence. */
    {"syntax_unclosed_bracket", NULL, 4, 1, "    count: [2", 5, 12, "YAML syntax error"},
    /* Ensure that a tab used as indentation is a syntax error where the tab is. */
    {"syntax_tab_indent", NULL, 4, 1, "\tcount: 2", 4, 1, "YAML syntax error"},
    /* Ensure that an unclosed quoted string is a syntax error. */
    {"syntax_unclosed_quote", "name: \"abc\nnodes: []\n", 0, 0, NULL, 3, 1,
     "YAML syntax error"},
    /* Ensure that an empty file is refused at 1:1. */
    {"empty_file", "", 0, 0, NULL, 1, 1, "empty file"},
    /* Ensure that a file of comments only counts as empty. */
    {"comments_only", "# nothing here\n\n", 0, 0, NULL, 1, 1, "empty file"},
    /* Ensure that binary bytes are refused as not YAML. */
    {"binary", "\x7f" "ELF\x01\x02", 0, 0, NULL, 1, 1, "not a YAML text file"},
    /* Ensure that prose (a scalar document) is refused: the top level must be a mapping. */
    {"plain_text", "hello world, this is not a topology\n", 0, 0, NULL, 1, 1,
     "YAML mapping"},
    /* Ensure that a list at the top level is refused. */
    {"top_level_list", "- a\n- b\n", 0, 0, NULL, 1, 1, "YAML mapping"},
    /* Ensure that an unknown top-level key is refused at the key. */
    {"unknown_top_key", NULL, 25, 0, "colour: red", 25, 1, "unknown key 'colour'"},
    /* Ensure that an unknown (misspelt) key in the device is refused at the key. */
    {"unknown_device_key", NULL, 9, 1, "      corez: 10", 9, 7, "unknown key 'corez'"},
    /* Ensure that a duplicate key is refused at its second occurrence. */
    {"duplicate_key", NULL, 5, 0, "    count: 3", 5, 5, "duplicate key 'count'"},
    /* Ensure that a missing top-level key is reported at the top mapping (line 1 is now
     * "nodes:"). */
    {"missing_name", NULL, 1, 1, NULL, 1, 1, "missing required key 'name'"},
    /* Ensure that a missing nested key is reported at the mapping that lacks it. */
    {"missing_memory_bw", NULL, 13, 1, NULL, 7, 7, "missing required key 'memory_bw'"},
    /* Ensure that a peak without fp32 is refused at the peak mapping. */
    {"missing_fp32", NULL, 11, 1, "        fp64: 1 TFLOP/s", 11, 9,
     "missing required key 'fp32'"},
    /* Ensure that a cpu device without cores is refused. */
    {"cpu_without_cores", NULL, 9, 1, NULL, 7, 7, "missing required key 'cores'"},
    /* Ensure that cores on a gpu device are refused at the value. */
    {"gpu_with_cores", NULL, 7, 1, "      kind: gpu", 9, 14, "only for cpu"},
    /* Ensure that sms on a cpu device is refused at the value, and a gpu's sms of 0. */
    {"cpu_with_sms", NULL, 9, 1, "      cores: 10\n      sms: 80", 10, 12, "only for gpu"},
    {"gpu_sms_zero", NULL, 7, 3, "      kind: gpu\n      name: x\n      sms: 0", 9, 12,
     "out of range"},
    /* Ensure that a word where an integer goes is refused at the value. */
    {"count_not_integer", NULL, 4, 1, "    count: two", 4, 12, "expected an integer"},
    /* Ensure that a quoted number is a string, not an integer. */
    {"count_quoted", NULL, 4, 1, "    count: \"2\"", 4, 12, "expected an integer"},
    /* Ensure that a fraction where an integer goes is refused. */
    {"devices_fraction", NULL, 5, 1, "    devices: 2.5", 5, 14, "expected an integer"},
    /* Ensure that a scalar where a list goes is refused at the value. */
    {"nodes_not_list", "name: t\nnodes: 3\n", 0, 0, NULL, 2, 8, "must be a list"},
    /* Ensure that a scalar where a mapping goes is refused at the value. */
    {"device_not_mapping", NULL, 6, 8, "    device: gpu", 6, 13, "must be a mapping"},
    /* Ensure that a mapping where a quantity goes is refused. */
    {"bandwidth_mapping", NULL, 16, 1, "      bandwidth: {value: 10}", 16, 18,
     "expected a bandwidth"},
    /* Ensure that an empty node list is refused. */
    {"empty_nodes", "name: t\nnodes: []\n", 0, 0, NULL, 2, 8, "at least one node group"},
    /* Ensure that a node group that is not a mapping is refused at the item. */
    {"group_not_mapping", "name: t\nnodes:\n  - just a name\n", 0, 0, NULL, 3, 5,
     "must be a mapping"},
    /* Ensure that a number without its unit is refused at the value. */
    {"no_unit", NULL, 20, 1, "      bandwidth: 100", 20, 18, "has no unit"},
    /* Ensure that a time where a bandwidth goes is refused, naming both kinds. */
    {"time_for_bandwidth", NULL, 16, 1, "      bandwidth: 2 us", 16, 18, "is a time"},
    /* Ensure that a bandwidth where a time goes is refused. */
    {"bandwidth_for_time", NULL, 17, 1, "      latency: 10 GB/s", 17, 16, "is a bandwidth"},
    /* Ensure that a cache size given as a bandwidth is refused at its value, and one below
     * 1 KiB as out of range. */
    {"cache_as_bandwidth", NULL, 13, 1, "      memory_bw: 70 GB/s\n      cache: 16 GB/s", 14,
     14, "is a bandwidth"},
    {"cache_too_small", NULL, 13, 1, "      memory_bw: 70 GB/s\n      cache: 512 B", 14, 14,
     "out of range"},
    /* Ensure that bits written as 'Gb/s' are refused as ambiguous. */
    {"ambiguous_gbps", NULL, 20, 1, "      bandwidth: 100 Gb/s", 20, 18, "bit/s"},
    /* Ensure that an unknown unit is refused. */
    {"unknown_unit", NULL, 12, 1, "      memory: 48 gigs", 12, 15, "unknown unit"},
    /* Ensure that a price in the wrong unit is refused. */
    {"price_wrong_unit", NULL, 22, 0, "    price: 3 USD", 22, 12, "unknown unit"},
    /* Ensure that a count of zero nodes is refused. */
    {"count_zero", NULL, 4, 1, "    count: 0", 4, 12, "out of range"},
    /* Ensure that 10^9 nodes is refused (limit DT_TOPO_MAX_NODES per group). */
    {"count_absurd", NULL, 4, 1, "    count: 1000000000", 4, 12, "out of range"},
    /* Ensure that zero devices per node is refused. */
    {"devices_zero", NULL, 5, 1, "    devices: 0", 5, 14, "out of range"},
    /* Ensure that a negative bandwidth is refused. */
    {"bandwidth_negative", NULL, 16, 1, "      bandwidth: -5 GB/s", 16, 18, "out of range"},
    /* Ensure that a zero bandwidth is refused. */
    {"bandwidth_zero", NULL, 16, 1, "      bandwidth: 0 GB/s", 16, 18, "out of range"},
    /* Ensure that NaN is refused. */
    {"bandwidth_nan", NULL, 16, 1, "      bandwidth: nan GB/s", 16, 18, "not a number"},
    /* Ensure that an infinite bandwidth is refused. */
    {"bandwidth_inf", NULL, 16, 1, "      bandwidth: inf GB/s", 16, 18, "not a number"},
    /* Ensure that an absurd bandwidth (1e30 B/s, above the 100 TB/s limit) is refused. */
    {"bandwidth_absurd", NULL, 16, 1, "      bandwidth: 1e30 B/s", 16, 18, "out of range"},
    /* Ensure that a latency of an hour (above the 1 s limit) is refused. */
    {"latency_hour", NULL, 17, 1, "      latency: 1 h", 17, 16, "out of range"},
    /* Ensure that a zero latency is refused. */
    {"latency_zero", NULL, 17, 1, "      latency: 0 s", 17, 16, "out of range"},
    /* Ensure that a memory of 1 PiB per device (above 64 TiB) is refused. */
    {"memory_absurd", NULL, 12, 1, "      memory: 1 PiB", 12, 15, "out of range"},
    /* Ensure that a peak of 1 EFLOP/s per device written as 1e6 PFLOP/s is refused. */
    {"peak_absurd", NULL, 11, 1, "        fp32: 1e6 PFLOP/s", 11, 15, "out of range"},
    /* Ensure that an unknown enum value is refused at the value, listing the known ones. */
    {"unknown_device_kind", NULL, 7, 1, "      kind: tpu", 7, 13, "unknown kind 'tpu'"},
    /* Ensure that an unknown network kind is refused. */
    {"unknown_network_kind", NULL, 23, 1, "  kind: dragonfly", 23, 9,
     "unknown kind 'dragonfly'"},
    /* Ensure that a name longer than the field is refused, not truncated. */
    {"name_too_long", NULL, 1, 1,
     "name: a-topology-name-that-is-much-longer-than-sixty-three-characters-allowed", 1, 7,
     "longer than 63"},
    /* Ensure that two node groups with one name are refused at the second name. */
    {"duplicate_group_name", NULL, 22, 0,
     "  - name: g\n    count: 1\n    devices: 1\n    device: {kind: gpu, name: x, peak: "
     "{fp32: 1 TFLOP/s}, memory: 1 GiB, memory_bw: 1 GB/s}\n    intra: {kind: pcie, "
     "bandwidth: 1 GB/s, latency: 1 us}\n    nic: {kind: ethernet, bandwidth: 1 GB/s, "
     "latency: 1 us}",
     22, 11, "used twice"},
    /* Ensure that a fat-tree without a radix is refused at the network mapping. */
    {"fattree_without_radix", NULL, 23, 1, "  kind: fat-tree", 23, 3,
     "missing required key 'radix'"},
    /* Ensure that a fat-tree too small for its nodes is refused: 300 one-NIC nodes on radix 4
     * (2 nodes per leaf, 150 leaves; three tiers hold at most 4/2 x 4 = 8 leaves). */
    {"fattree_too_small",
     "name: t\n" GROUP("300") "network:\n  kind: fat-tree\n  latency: 1 us\n  radix: 4\n", 0, 0,
     NULL, 5, 3, "do not fit a three-tier fat-tree"},
    /* Ensure that an oversubscription below 1 is refused. */
    {"oversubscription_below_one", NULL, 23, 1,
     "  kind: fat-tree\n  radix: 64\n  oversubscription: 0.5", 25, 21, "out of range"},
    /* Ensure that an oversubscription on a single switch is refused, not ignored. */
    {"oversubscription_on_switch", NULL, 25, 0, "  oversubscription: 2", 25, 21,
     "only to kind: fat-tree"},
    /* Ensure that a single switch with fewer ports than NICs is refused. */
    {"switch_radix_too_small",
     "name: t\n" GROUP("3") "network:\n  kind: switch\n  latency: 1 us\n  radix: 2\n", 0, 0,
     NULL, 5, 3, "cannot connect"},
    /* Ensure that a rail network without one NIC per device is refused at the group. */
    {"rail_needs_nic_per_device", NULL, 23, 1, "  kind: rail", 3, 5,
     "one NIC per device"},
    /* Ensure that a torus without dims is refused at the network mapping. */
    {"torus_without_dims", NULL, 23, 1, "  kind: torus", 23, 3, "missing required key 'dims'"},
    /* Ensure that a torus of one dimension is refused at the sequence. */
    {"torus_one_dim", NULL, 23, 1, "  kind: torus\n  dims: [2]", 24, 9, "2 or 3 sizes"},
    /* Ensure that a dimension of size 1 is refused at the item. */
    {"torus_dim_one", NULL, 23, 1, "  kind: torus\n  dims: [2, 1]", 24, 13,
     "1 is out of range [2, 256]"},
    /* Ensure that a dimension that is not a number is refused at the item. */
    {"torus_dim_text", NULL, 23, 1, "  kind: torus\n  dims: [2, x]", 24, 13, "'x'"},
    /* Ensure that dims whose product is not the node count (2) are refused at the network. */
    {"torus_dims_mismatch", NULL, 23, 1, "  kind: torus\n  dims: [2, 2]", 23, 3,
     "has 4 routers but the topology has 2 nodes"},
    /* Ensure that a torus whose routes would exceed the simulator's hop limit is refused. */
    {"torus_too_many_hops", NULL, 23, 1, "  kind: torus\n  dims: [256, 256]", 24, 9,
     "routes of 256 hops"},
    /* Ensure that a radix on a torus is refused, not ignored. */
    {"torus_radix", NULL, 23, 1, "  kind: torus\n  radix: 8\n  dims: [2, 1]", 24, 10,
     "does not apply to kind: torus"},
    /* Ensure that dims and link_bandwidth on a fat-tree are refused, not ignored. */
    {"dims_on_fattree", NULL, 23, 1, "  kind: fat-tree\n  radix: 8\n  dims: [2, 1]", 25, 9,
     "only to kind: torus"},
    {"link_bandwidth_on_fattree", NULL, 23, 1,
     "  kind: fat-tree\n  radix: 8\n  link_bandwidth: 1 GB/s", 25, 19, "only to kind: torus"},
    /* Ensure that an unknown routing is refused at the value. */
    {"routing_unknown", NULL, 23, 1, "  kind: fat-tree\n  radix: 8\n  routing: adaptive", 25,
     12, "adaptive"},
    /* Ensure that routing and rail_optimized on a single switch are refused, not ignored. */
    {"routing_on_switch", NULL, 25, 0, "  routing: ecmp", 25, 12, "only to kind: fat-tree"},
    {"rail_optimized_on_switch", NULL, 25, 0, "  rail_optimized: true", 25, 19,
     "only to kind: fat-tree"},
    /* Ensure that rail_optimized must be a boolean. */
    {"rail_optimized_not_bool", NULL, 23, 1,
     "  kind: fat-tree\n  radix: 8\n  rail_optimized: maybe", 25, 19, "true or false"},
    /* Ensure that several nodes without a network are refused at the top mapping. */
    {"nodes_without_network", NULL, 22, 3, NULL, 1, 1, "missing required key 'network'"},
    /* Ensure that nodes on a network without a NIC are refused at their group. */
    {"network_without_nic", NULL, 18, 4, NULL, 3, 5, "has no 'nic'"},
    /* Ensure that more devices than DT_TOPO_MAX_RANKS in total are refused at the group that
     * crosses the limit: 16384 nodes x 16 devices = 262144 > 131072. */
    {"too_many_ranks", NULL, 4, 2, "    count: 16384\n    devices: 16", 3, 5,
     "more than 131072 devices"},
    /* Ensure that bus_bandwidth on a crossbar is refused at the value. */
    {"bus_on_crossbar", NULL, 15, 1, "      kind: pcie\n      bus_bandwidth: 20 GB/s", 16, 22,
     "only for sharing: shared"},
    /* Ensure that a NIC count of zero is refused. */
    {"nic_count_zero", NULL, 22, 0, "      count: 0", 22, 14, "out of range"},
    /* Ensure that an exponential alias expansion ("billion laughs") is refused quickly: g
     * would expand to 11 million nodes; the error points at the anchor &f (line 6, column 4)
     * whose seventh-level copies cross the 2-million-node limit. */
    {"alias_bomb",
     "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
     "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
     "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
     "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
     "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n",
     0, 0, NULL, 6, 4, "document too large"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* Ensure that more than DT_TOPO_MAX_GROUPS node groups are refused at the first one too many:
 * "nodes: [" is 8 characters and items are 3 apart ("1, "), so item k (from 0) starts at column
 * 9 + 3k: item 64, the 65th, at 201. */
static void test_too_many_groups(void **state)
{
    (void)state;
    char text[1024] = "name: t\nnodes: [";
    for (int i = 0; i < 100; i++)
        strcat(text, i ? ", 1" : "1");
    strcat(text, "]\n");
    expect_error(text, 2, 9 + 3 * DT_TOPO_MAX_GROUPS, "more than 64 node groups");
}

/* Ensure that nesting deeper than DT_YAML_MAX_DEPTH is refused without recursion trouble. */
static void test_deep_nesting(void **state)
{
    (void)state;
    size_t n = 100000;
    char *text = malloc(2 * n + 16);
    assert_non_null(text);
    strcpy(text, "a: ");
    memset(text + 3, '[', n);
    memset(text + 3 + n, ']', n);
    text[3 + 2 * n] = '\0';
    struct dt_topology *t;
    struct dt_error err;
    assert_int_equal(dt_topology_load_string("deep.yaml", text, &t, &err), DT_EINPUT);
    assert_null(t);
    assert_int_equal(err.line, 1);
    assert_true(err.col > 1);
    free(text);
}

/* Ensure that a file over DT_YAML_MAX_BYTES is refused before parsing. The size check has no
 * position, so the message is "bad.yaml: file too large ..." (line 0). */
static void test_huge_file(void **state)
{
    (void)state;
    size_t n = DT_YAML_MAX_BYTES + 10;
    char *text = malloc(n + 1);
    assert_non_null(text);
    memset(text, '#', n);
    text[n] = '\0';
    struct dt_topology *t;
    struct dt_error err;
    assert_int_equal(dt_topology_load_string("huge.yaml", text, &t, &err), DT_EINPUT);
    assert_null(t);
    assert_string_equal(err.file, "huge.yaml");
    assert_non_null(strstr(err.msg, "too large"));
    free(text);
}

/* Ensure that a file that does not exist is an input error naming the file. */
static void test_missing_file(void **state)
{
    (void)state;
    struct dt_topology *t;
    struct dt_error err;
    assert_int_equal(dt_topology_load("/nonexistent/dir/x.yaml", &t, &err), DT_EINPUT);
    assert_null(t);
    assert_string_equal(err.file, "/nonexistent/dir/x.yaml");
    assert_non_null(strstr(err.msg, "cannot open"));
}

/* Ensure that BASE itself loads: the cases above fail because of their edit alone. */
static void test_base_is_valid(void **state)
{
    (void)state;
    struct bad_case none = {"none", NULL, 0, 0, NULL, 0, 0, NULL};
    char *text = edited(&none);
    struct dt_topology *t;
    struct dt_error err;
    int rc = dt_topology_load_string("base.yaml", text, &t, &err);
    if (rc)
        print_error("%s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
    assert_int_equal(rc, DT_OK);
    assert_int_equal(t->n_ranks, 8);
    dt_topology_destroy(t);
    free(text);
}

int main(void)
{
    struct CMUnitTest tests[N_CASES + 5];
    size_t n = 0;
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_base_is_valid);
    for (size_t i = 0; i < N_CASES; i++)
        tests[n++] = (struct CMUnitTest){cases[i].name, run_case, NULL, NULL,
                                         (void *)&cases[i]};
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_too_many_groups);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_deep_nesting);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_huge_file);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_missing_file);
    return _cmocka_run_group_tests("test_topology_errors", tests, n, NULL, NULL);
}

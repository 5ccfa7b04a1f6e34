/* Calibration files: the parameter table, the YAML writer and loader, the delta-method
 * interval. */
#include "dt/calibration.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt/yamldoc.h"

#define FORMAT_TAG "dtsim-calibration/1"

struct param_info {
    const char *name;
    enum dt_cal_kind kind;
    const char *description;
};

/* Ranges of a value, as the topology files' (libdt/topology.c): an efficiency is a fraction
 * of the device's peak, so at most 1; a bandwidth lies between 1 MB/s and 100 TB/s; a time is
 * 0 or between 1 ns and a bound of its kind (latencies and per-op costs 1 s, the per-iteration
 * overhead an hour). What lies outside is a typo or a fit gone wrong, never a machine. */
#define FRACTION_MIN 1e-6
#define FRACTION_MAX 1.0
#define BW_MIN 1e6
#define BW_MAX 1e14
#define TIME_MIN 1e-9
#define TIME_MAX 1.0
#define ITER_TIME_MAX 3600.0
/* one libm evaluation: a vectorised exp is well under a nanosecond per value */
#define EVAL_TIME_MIN 1e-12
#define EVAL_TIME_MAX 1e-3

static const struct param_info params[DT_CAL_COUNT] = {
    [DT_CAL_ITER_OVERHEAD] = {"iter_overhead", DT_CAL_TIME,
                              "framework overhead per iteration, per rank"},
    [DT_CAL_EFF_GEMM] = {"eff_gemm", DT_CAL_FRACTION,
                         "fraction of fp32 peak reached by conv and dense layers (tied)"},
    [DT_CAL_EFF_CONV] = {"eff_conv", DT_CAL_FRACTION, "fraction of fp32 peak, conv layers"},
    [DT_CAL_EFF_DENSE] = {"eff_dense", DT_CAL_FRACTION, "fraction of fp32 peak, dense layers"},
    [DT_CAL_EFF_POOL] = {"eff_pool", DT_CAL_FRACTION, "fraction of fp32 peak, pooling"},
    [DT_CAL_EFF_ELEMENTWISE] = {"eff_elementwise", DT_CAL_FRACTION,
                                "fraction of fp32 peak, elementwise layers"},
    [DT_CAL_EFF_NORM] = {"eff_norm", DT_CAL_FRACTION, "fraction of fp32 peak, normalisation"},
    [DT_CAL_EFF_UPDATE] = {"eff_update", DT_CAL_FRACTION,
                           "fraction of fp32 peak, optimizer step"},
    [DT_CAL_OP_OVERHEAD] = {"op_overhead", DT_CAL_TIME, "fixed time of every compute op"},
    [DT_CAL_REDUCE_BW] = {"reduce_bw", DT_CAL_BANDWIDTH,
                          "bytes/s of summing received gradients"},
    [DT_CAL_MEM_BW] = {"mem_bw", DT_CAL_BANDWIDTH,
                       "memory bandwidth compute ops reach (caches included)"},
    [DT_CAL_LOWER_BW] = {"lower_bw", DT_CAL_BANDWIDTH,
                         "bytes/s of convolution lowering (im2col, col2im)"},
    [DT_CAL_NODE_MEM_BW] = {"node_mem_bw", DT_CAL_BANDWIDTH,
                            "memory bandwidth the ranks of one node share"},
    [DT_CAL_CACHE_BW] = {"cache_bw", DT_CAL_BANDWIDTH,
                         "bandwidth of ops whose bytes fit in the device's cache"},
    [DT_CAL_PACK_BW] = {"pack_bw", DT_CAL_BANDWIDTH,
                        "bytes/s of packing dense layers' weights, once per GEMM call"},
    [DT_CAL_INTRA_BW] = {"intra_bw", DT_CAL_BANDWIDTH,
                         "each process's link inside a node (per direction)"},
    [DT_CAL_INTRA_LAT] = {"intra_lat", DT_CAL_TIME, "latency inside a node"},
    [DT_CAL_NIC_BW] = {"nic_bw", DT_CAL_BANDWIDTH, "node network interface (per direction)"},
    [DT_CAL_NIC_LAT] = {"nic_lat", DT_CAL_TIME, "network interface latency"},
    [DT_CAL_NET_LAT] = {"net_lat", DT_CAL_TIME, "latency per switch"},
    [DT_CAL_READ_BW] = {"read_bw", DT_CAL_BANDWIDTH,
                        "reading the training data at start-up (per process)"},
    [DT_CAL_EFF_GEMM_HALF] = {"eff_gemm_half", DT_CAL_FRACTION,
                              "fraction of the 16- or 8-bit peak reached by conv and dense "
                              "layers (tensor cores, tied)"},
    [DT_CAL_EFF_MEM] = {"eff_mem", DT_CAL_FRACTION,
                        "fraction of the device's memory bandwidth compute ops reach"},
    [DT_CAL_EXP_TIME] = {"exp_time", DT_CAL_TIME,
                         "one exp evaluation (softmax, attention scores, sigmoid, loss)"},
    [DT_CAL_TANH_TIME] = {"tanh_time", DT_CAL_TIME, "one tanh evaluation (tanh, GELU, LSTM)"},
    [DT_CAL_EFF_CONV_HALF] = {"eff_conv_half", DT_CAL_FRACTION,
                              "fraction of the 16- or 8-bit peak, conv layers"},
    [DT_CAL_EFF_DENSE_HALF] = {"eff_dense_half", DT_CAL_FRACTION,
                               "fraction of the 16- or 8-bit peak, dense layers"},
    [DT_CAL_OPT_BW] = {"opt_bw", DT_CAL_BANDWIDTH,
                       "bytes/s of the optimizer's passes: its update, the gradient reset"},
    [DT_CAL_EFF_GEMM_TF32] = {"eff_gemm_tf32", DT_CAL_FRACTION,
                              "fraction of the tf32 peak reached by conv and dense layers "
                              "(tensor cores, tied)"},
    [DT_CAL_EFF_CONV_TF32] = {"eff_conv_tf32", DT_CAL_FRACTION,
                              "fraction of the tf32 peak, conv layers"},
    [DT_CAL_EFF_DENSE_TF32] = {"eff_dense_tf32", DT_CAL_FRACTION,
                               "fraction of the tf32 peak, dense layers"},
};

const char *dt_cal_param_name(enum dt_cal_param p)
{
    return (unsigned)p < DT_CAL_COUNT ? params[p].name : "?";
}

int dt_cal_param_parse(const char *name)
{
    for (int p = 0; p < DT_CAL_COUNT; p++)
        if (strcmp(name, params[p].name) == 0)
            return p;
    return -1;
}

enum dt_cal_kind dt_cal_param_kind(enum dt_cal_param p) { return params[p].kind; }

const char *dt_cal_param_description(enum dt_cal_param p)
{
    return (unsigned)p < DT_CAL_COUNT ? params[p].description : "?";
}

/* The values p may take, [lo, hi] (times may also be 0), and how to say so. */
static const char *range_of(enum dt_cal_param p, double *lo, double *hi)
{
    switch (params[p].kind) {
    case DT_CAL_FRACTION:
        *lo = FRACTION_MIN, *hi = FRACTION_MAX;
        return "a fraction of the device's peak, from 1e-6 to 1";
    case DT_CAL_BANDWIDTH:
        *lo = BW_MIN, *hi = BW_MAX;
        return "a bandwidth from 1 MB/s to 100 TB/s";
    default:
        if (p == DT_CAL_EXP_TIME || p == DT_CAL_TANH_TIME) {
            *lo = EVAL_TIME_MIN, *hi = EVAL_TIME_MAX;
            return "0 or a time from 1 ps to 1 ms";
        }
        *lo = TIME_MIN;
        *hi = p == DT_CAL_ITER_OVERHEAD ? ITER_TIME_MAX : TIME_MAX;
        return p == DT_CAL_ITER_OVERHEAD ? "0 or a time from 1 ns to 1 h"
                                         : "0 or a time from 1 ns to 1 s";
    }
}

bool dt_cal_param_in_range(enum dt_cal_param p, double v, char *why, size_t len)
{
    double lo, hi;
    const char *range = range_of(p, &lo, &hi);
    if ((isfinite(v) && v >= lo && v <= hi) || (v == 0 && params[p].kind == DT_CAL_TIME))
        return true;
    snprintf(why, len, "%s = %g is out of range (%s)", params[p].name, v, range);
    return false;
}

double dt_cal_param_clamp(enum dt_cal_param p, double v)
{
    double lo, hi;
    range_of(p, &lo, &hi);
    if (v < lo && params[p].kind == DT_CAL_TIME)
        return 0; /* a time driven below its range: none */
    return v < lo ? lo : v > hi ? hi : v;
}

int dt_calibration_check_values(const struct dt_calibration *cal, struct dt_error *err)
{
    char why[160];
    for (int i = 0; i < cal->n_entries; i++)
        if (!dt_cal_param_in_range(cal->entry[i].param, cal->entry[i].value, why, sizeof why))
            return dt_fail(err, DT_EINPUT, cal->path[0] ? cal->path : NULL, 0, 0, "%s", why);
    return DT_OK;
}

double dt_cal_param_get(const struct dt_cost_params *cp, enum dt_cal_param p)
{
    switch (p) {
    case DT_CAL_ITER_OVERHEAD: return cp->iter_overhead_s;
    case DT_CAL_EFF_GEMM:
    case DT_CAL_EFF_CONV: return cp->eff[DT_CLASS_CONV];
    case DT_CAL_EFF_DENSE: return cp->eff[DT_CLASS_DENSE];
    case DT_CAL_EFF_POOL: return cp->eff[DT_CLASS_POOL];
    case DT_CAL_EFF_ELEMENTWISE: return cp->eff[DT_CLASS_ELEMENTWISE];
    case DT_CAL_EFF_NORM: return cp->eff[DT_CLASS_NORM];
    case DT_CAL_EFF_UPDATE: return cp->eff[DT_CLASS_UPDATE];
    case DT_CAL_OP_OVERHEAD: return cp->overhead_s[DT_CLASS_CONV];
    case DT_CAL_REDUCE_BW: return cp->reduce_Bps;
    case DT_CAL_MEM_BW: return cp->mem_Bps;
    case DT_CAL_LOWER_BW: return cp->lower_Bps;
    case DT_CAL_NODE_MEM_BW: return cp->node_mem_Bps;
    case DT_CAL_CACHE_BW: return cp->cache_Bps;
    case DT_CAL_PACK_BW: return cp->pack_Bps;
    case DT_CAL_INTRA_BW: return cp->intra_bw_Bps;
    case DT_CAL_INTRA_LAT: return cp->intra_lat_s;
    case DT_CAL_NIC_BW: return cp->nic_bw_Bps;
    case DT_CAL_NIC_LAT: return cp->nic_lat_s;
    case DT_CAL_NET_LAT: return cp->net_lat_s;
    case DT_CAL_READ_BW: return cp->read_Bps;
    case DT_CAL_EFF_GEMM_HALF:
    case DT_CAL_EFF_CONV_HALF: return cp->eff_conv_half;
    case DT_CAL_EFF_DENSE_HALF: return cp->eff_dense_half;
    case DT_CAL_EFF_MEM: return cp->eff_mem;
    case DT_CAL_EXP_TIME: return cp->exp_s;
    case DT_CAL_TANH_TIME: return cp->tanh_s;
    case DT_CAL_OPT_BW: return cp->opt_Bps;
    case DT_CAL_EFF_GEMM_TF32:
    case DT_CAL_EFF_CONV_TF32: return cp->eff_conv_tf32;
    case DT_CAL_EFF_DENSE_TF32: return cp->eff_dense_tf32;
    case DT_CAL_COUNT: break;
    }
    return 0;
}

void dt_cal_param_set(struct dt_cost_params *cp, enum dt_cal_param p, double v)
{
    switch (p) {
    case DT_CAL_ITER_OVERHEAD: cp->iter_overhead_s = v; break;
    case DT_CAL_EFF_GEMM: cp->eff[DT_CLASS_CONV] = cp->eff[DT_CLASS_DENSE] = v; break;
    case DT_CAL_EFF_CONV: cp->eff[DT_CLASS_CONV] = v; break;
    case DT_CAL_EFF_DENSE: cp->eff[DT_CLASS_DENSE] = v; break;
    case DT_CAL_EFF_POOL: cp->eff[DT_CLASS_POOL] = v; break;
    case DT_CAL_EFF_ELEMENTWISE: cp->eff[DT_CLASS_ELEMENTWISE] = v; break;
    case DT_CAL_EFF_NORM: cp->eff[DT_CLASS_NORM] = v; break;
    case DT_CAL_EFF_UPDATE: cp->eff[DT_CLASS_UPDATE] = v; break;
    case DT_CAL_OP_OVERHEAD:
        for (int c = 0; c < DT_CLASS_COUNT; c++)
            cp->overhead_s[c] = v;
        break;
    case DT_CAL_REDUCE_BW: cp->reduce_Bps = v; break;
    case DT_CAL_MEM_BW: cp->mem_Bps = v; break;
    case DT_CAL_LOWER_BW: cp->lower_Bps = v; break;
    case DT_CAL_NODE_MEM_BW: cp->node_mem_Bps = v; break;
    case DT_CAL_CACHE_BW: cp->cache_Bps = v; break;
    case DT_CAL_PACK_BW: cp->pack_Bps = v; break;
    case DT_CAL_INTRA_BW: cp->intra_bw_Bps = v; break;
    case DT_CAL_INTRA_LAT: cp->intra_lat_s = v; break;
    case DT_CAL_NIC_BW: cp->nic_bw_Bps = v; break;
    case DT_CAL_NIC_LAT: cp->nic_lat_s = v; break;
    case DT_CAL_NET_LAT: cp->net_lat_s = v; break;
    case DT_CAL_READ_BW: cp->read_Bps = v; break;
    case DT_CAL_EFF_GEMM_HALF: cp->eff_conv_half = cp->eff_dense_half = v; break;
    case DT_CAL_EFF_CONV_HALF: cp->eff_conv_half = v; break;
    case DT_CAL_EFF_DENSE_HALF: cp->eff_dense_half = v; break;
    case DT_CAL_EFF_MEM: cp->eff_mem = v; break;
    case DT_CAL_EXP_TIME: cp->exp_s = v; break;
    case DT_CAL_TANH_TIME: cp->tanh_s = v; break;
    case DT_CAL_OPT_BW: cp->opt_Bps = v; break;
    case DT_CAL_EFF_GEMM_TF32: cp->eff_conv_tf32 = cp->eff_dense_tf32 = v; break;
    case DT_CAL_EFF_CONV_TF32: cp->eff_conv_tf32 = v; break;
    case DT_CAL_EFF_DENSE_TF32: cp->eff_dense_tf32 = v; break;
    case DT_CAL_COUNT: break;
    }
}

double dt_cal_param_effective(const struct dt_cost_params *cp, const struct dt_topology *topo,
                              enum dt_cal_param p)
{
    double v = dt_cal_param_get(cp, p);
    if (v > 0 || !topo || topo->n_groups < 1)
        return v;
    const struct dt_node_group *g = &topo->groups[0];
    switch (p) {
    case DT_CAL_REDUCE_BW:
    case DT_CAL_LOWER_BW:
    case DT_CAL_CACHE_BW:
    case DT_CAL_PACK_BW:
    case DT_CAL_OPT_BW:
    case DT_CAL_MEM_BW: return dt_cost_mem_bw(cp, &g->device);
    /* unset: every rank of a full node gets its own mem_bw (no contention) */
    case DT_CAL_NODE_MEM_BW: return g->devices * dt_cost_mem_bw(cp, &g->device);
    case DT_CAL_INTRA_BW: return g->intra.bw_Bps;
    case DT_CAL_INTRA_LAT: return g->intra.lat_s;
    case DT_CAL_NIC_BW: return g->nic.bw_Bps;
    case DT_CAL_NIC_LAT: return g->nic.lat_s;
    case DT_CAL_NET_LAT: return topo->net.switch_lat_s;
    case DT_CAL_READ_BW: return g->data_read_Bps;
    case DT_CAL_EFF_GEMM_HALF:
    case DT_CAL_EFF_CONV_HALF: return cp->eff[DT_CLASS_CONV]; /* unset: eff_conv's */
    case DT_CAL_EFF_DENSE_HALF: return cp->eff[DT_CLASS_DENSE];
    case DT_CAL_EFF_GEMM_TF32:
    case DT_CAL_EFF_CONV_TF32: return cp->eff[DT_CLASS_CONV];
    case DT_CAL_EFF_DENSE_TF32: return cp->eff[DT_CLASS_DENSE];
    case DT_CAL_EFF_MEM: return 1;                             /* unset: the datasheet's */
    default: return v;
    }
}

void dt_calibration_init(struct dt_calibration *cal)
{
    memset(cal, 0, sizeof *cal);
    snprintf(cal->device, sizeof cal->device, "cpu");
}

const struct dt_cal_entry *dt_calibration_find(const struct dt_calibration *cal,
                                               enum dt_cal_param p)
{
    for (int i = 0; i < cal->n_entries; i++)
        if (cal->entry[i].param == p)
            return &cal->entry[i];
    return NULL;
}

struct dt_cal_entry *dt_calibration_set(struct dt_calibration *cal, enum dt_cal_param p,
                                        double value)
{
    struct dt_cal_entry *e = (struct dt_cal_entry *)dt_calibration_find(cal, p);
    if (!e) {
        e = &cal->entry[cal->n_entries++];
        memset(e, 0, sizeof *e);
        e->param = p;
    }
    e->value = value;
    return e;
}

bool dt_calibration_has_interval(const struct dt_calibration *cal)
{
    return cal->dof >= 1 && cal->t95 > 0 && (cal->n_cov > 0 || cal->resid_sd > 0);
}

static const char *kind_name(enum dt_device_kind k) { return k == DT_DEV_GPU ? "gpu" : "cpu"; }

/* Whether name is one of the "; "-separated names of list. */
static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p; p = strstr(p, "; "), p = p ? p + 2 : NULL)
        if (strncmp(p, name, n) == 0 && (p[n] == '\0' || strncmp(p + n, "; ", 2) == 0))
            return true;
    return false;
}

void dt_calibration_add_device(struct dt_calibration *cal, const struct dt_device_spec *d)
{
    snprintf(cal->device, sizeof cal->device, "%s", kind_name(d->kind));
    if (listed(cal->device_name, d->name))
        return;
    size_t n = strlen(cal->device_name);
    if (n + strlen(d->name) + 3 < sizeof cal->device_name)
        snprintf(cal->device_name + n, sizeof cal->device_name - n, "%s%s", n ? "; " : "",
                 d->name);
}

int dt_calibration_check_device(const struct dt_calibration *cal, const struct dt_topology *topo,
                                char *warn, size_t len, struct dt_error *err)
{
    warn[0] = '\0';
    for (int g = 0; g < topo->n_groups; g++) {
        const struct dt_device_spec *d = &topo->groups[g].device;
        const char *kind = kind_name(d->kind);
        const char *fitted = cal->device_name[0] ? cal->device_name : "an unnamed device";
        if (strcmp(kind, cal->device) != 0)
            return dt_fail(err, DT_EINPUT, cal->path[0] ? cal->path : NULL, cal->device_line,
                           cal->device_col, "calibration fitted on %s (%s) cannot be applied "
                           "to topology '%s', whose devices '%s' are %ss: its unlisted "
                           "parameters are the %s defaults", fitted, cal->device, topo->name,
                           d->name, kind, cal->device);
        if (cal->device_name[0] && !listed(cal->device_name, d->name) && !warn[0])
            snprintf(warn, len, "calibration fitted on '%s' applied to '%s' (topology '%s'): "
                     "its efficiencies are taken as fractions of this device's peaks",
                     cal->device_name, d->name, topo->name);
    }
    return DT_OK;
}

enum dt_cal_param dt_cal_param_tie(enum dt_cal_param p)
{
    switch (p) {
    case DT_CAL_EFF_CONV:
    case DT_CAL_EFF_DENSE: return DT_CAL_EFF_GEMM;
    case DT_CAL_EFF_CONV_HALF:
    case DT_CAL_EFF_DENSE_HALF: return DT_CAL_EFF_GEMM_HALF;
    case DT_CAL_EFF_CONV_TF32:
    case DT_CAL_EFF_DENSE_TF32: return DT_CAL_EFF_GEMM_TF32;
    default: return p;
    }
}

/* Whether p is a tie: another parameter's tie. */
static bool is_tie(enum dt_cal_param p)
{
    for (int q = 0; q < DT_CAL_COUNT; q++)
        if (q != (int)p && dt_cal_param_tie(q) == p)
            return true;
    return false;
}

void dt_calibration_apply(const struct dt_calibration *cal, struct dt_cost_params *cp)
{
    /* Tied parameters first, so that an explicit eff_conv beside eff_gemm wins. */
    for (int i = 0; i < cal->n_entries; i++)
        if (is_tie(cal->entry[i].param))
            dt_cal_param_set(cp, cal->entry[i].param, cal->entry[i].value);
    for (int i = 0; i < cal->n_entries; i++)
        if (!is_tie(cal->entry[i].param))
            dt_cal_param_set(cp, cal->entry[i].param, cal->entry[i].value);
}

/* ---- writing ---- */

/* Length of the UTF-8 character at s and its code point, or 0 when the bytes are not one
 * (a stray byte, an overlong form, a surrogate, beyond U+10FFFF). */
static int utf8_char(const unsigned char *s, unsigned long *cp)
{
    int n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    static const unsigned long least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (!n || s[0] >= 0xF8)
        return 0;
    *cp = s[0] & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        *cp = *cp << 6 | (s[i] & 0x3F);
    }
    if (*cp < least[n] || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF))
        return 0;
    return n;
}

/* A double-quoted YAML string that loads back to s: control characters, the characters
 * YAML reads as line breaks or refuses in a file (C1 controls, U+2028, U+2029, U+FFFE,
 * U+FFFF) are escaped; a byte that is not UTF-8 is written as the character of its value. */
static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned long cp = 0;
        int n = *p >= 0x80 ? utf8_char(p, &cp) : 1;
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7F || n == 0)
            fprintf(f, "\\x%02x", *p);
        else if (n > 1 && (cp <= 0x9F || cp == 0x2028 || cp == 0x2029 || cp >= 0xFFFE) &&
                 cp <= 0xFFFF)
            fprintf(f, "\\u%04lx", cp);
        else
            fwrite(p, 1, (size_t)n, f);
        p += n ? n : 1;
    }
    fputc('"', f);
}

/* "key: "value"" on a line of its own, nothing when the value is empty. */
static void put_key(FILE *f, const char *key, const char *value)
{
    if (!value[0])
        return;
    fprintf(f, "%s: ", key);
    put_string(f, value);
    fputc('\n', f);
}

/* A value with its unit, 9 significant digits, in a unit a human reads easily. */
static void format_value(char *buf, size_t len, enum dt_cal_kind kind, double v)
{
    if (kind == DT_CAL_FRACTION) {
        snprintf(buf, len, "%.9g", v);
        return;
    }
    static const char *const tunits[] = {"s", "ms", "us", "ns"};
    static const char *const bunits[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
    if (kind == DT_CAL_TIME) {
        int u = 0;
        double x = v;
        while (u < 3 && x != 0 && fabs(x) < 1) {
            x *= 1e3;
            u++;
        }
        snprintf(buf, len, "%.9g %s", x, tunits[u]);
    } else {
        int u = 0;
        double x = v;
        while (u < 4 && fabs(x) >= 1e3) {
            x /= 1e3;
            u++;
        }
        snprintf(buf, len, "%.9g %s", x, bunits[u]);
    }
}

void dt_calibration_write(FILE *f, const struct dt_calibration *cal)
{
    char a[64], b[64];
    fprintf(f, "# Cost-model calibration for dtsim (apply: dtsim --calibration FILE).\n"
               "# Parameters not listed keep dtsim's defaults for the device kind and the\n"
               "# topology's datasheet values. Fitted values carry their standard error, 95%%\n"
               "# confidence interval and the covariance of their logarithms, from which dtsim\n"
               "# gives each prediction an interval. Format: validate/README.md.\n");
    fprintf(f, "format: %s\n", FORMAT_TAG);
    /* empty strings are left out: the loader refuses them */
    put_key(f, "created", cal->created);
    put_key(f, "host", cal->host);
    put_key(f, "tool", cal->tool);
    fprintf(f, "device: %s\n", cal->device[0] ? cal->device : "cpu");
    put_key(f, "device_name", cal->device_name);
    put_key(f, "method", cal->method);
    if (cal->n_data) {
        fprintf(f, "data:\n");
        for (int i = 0; i < cal->n_data; i++) {
            const struct dt_cal_data *d = &cal->data[i];
            fprintf(f, "  - file: ");
            put_string(f, d->file);
            if (d->rows[0]) {
                fprintf(f, "\n    rows: ");
                put_string(f, d->rows);
            }
            if (d->host[0]) {
                fprintf(f, "\n    host: ");
                put_string(f, d->host);
            }
            if (d->when[0]) {
                fprintf(f, "\n    when: ");
                put_string(f, d->when);
            }
            fputc('\n', f);
        }
    }
    fprintf(f, "fit:\n  observations: %d\n  dof: %d\n  residual_sd: %.9g   # relative "
               "(predicted/measured - 1)\n  t95: %.9g\n  mape_pct: %.9g\n",
            cal->n_obs, cal->dof, cal->resid_sd, cal->t95, cal->mape_pct);
    /* none: an empty mapping, which a bare "parameters:" (a null) would not be */
    fprintf(f, cal->n_entries ? "parameters:\n" : "parameters: {}\n");
    for (int i = 0; i < cal->n_entries; i++) {
        const struct dt_cal_entry *e = &cal->entry[i];
        enum dt_cal_kind k = params[e->param].kind;
        format_value(a, sizeof a, k, e->value);
        fprintf(f, "  %s:   # %s\n    value: %s\n    fitted: %s\n", params[e->param].name,
                params[e->param].description, a, e->fitted ? "true" : "false");
        if (e->fitted) {
            format_value(a, sizeof a, k, e->se);
            fprintf(f, "    stderr: %s\n", a);
            format_value(a, sizeof a, k, e->lo);
            /* an interval the rows do not bound above (YAML's spelling of infinity) */
            if (isinf(e->hi))
                snprintf(b, sizeof b, ".inf");
            else
                format_value(b, sizeof b, k, e->hi);
            fprintf(f, "    ci95: [%s, %s]\n", a, b);
        }
        if (e->source[0]) {
            fprintf(f, "    source: ");
            put_string(f, e->source);
            fputc('\n', f);
        }
    }
    if (cal->n_cov) {
        fprintf(f, "covariance:   # of the natural logs of the fitted parameters\n"
                   "  parameters: [");
        for (int i = 0; i < cal->n_cov; i++)
            fprintf(f, "%s%s", i ? ", " : "", params[cal->cov_param[i]].name);
        fprintf(f, "]\n  log_matrix:\n");
        for (int i = 0; i < cal->n_cov; i++) {
            fprintf(f, "    - [");
            for (int j = 0; j < cal->n_cov; j++)
                fprintf(f, "%s%.9g", j ? ", " : "", cal->cov[i * DT_CAL_COUNT + j]);
            fprintf(f, "]\n");
        }
    }
    if (cal->notes[0]) {
        fprintf(f, "notes: ");
        put_string(f, cal->notes);
        fputc('\n', f);
    }
}

int dt_calibration_save(const char *path, const struct dt_calibration *cal,
                        struct dt_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return dt_fail(err, DT_ESYS, path, 0, 0, "cannot write: %s", strerror(errno));
    dt_calibration_write(f, cal);
    if (fclose(f) != 0)
        return dt_fail(err, DT_ESYS, path, 0, 0, "cannot write: %s", strerror(errno));
    return DT_OK;
}

/* ---- loading ---- */

static int copy_str(const struct dt_ydoc *doc, const struct dt_ynode *map, const char *key,
                    char *out, size_t len, struct dt_error *err)
{
    const char *s = NULL;
    int rc = dt_yget_str(doc, map, key, false, &s, err);
    if (!rc && s) {
        if (strlen(s) >= len)
            return dt_yfail(doc, dt_ymap_get(map, key), err, "'%s' is too long (at most %zu "
                            "characters)", key, len - 1);
        snprintf(out, len, "%s", s);
    }
    return rc;
}

/* A value of the parameter's kind, zero or more: a plain number for fractions, a quantity
 * otherwise. */
static int node_value(const struct dt_ydoc *doc, const struct dt_ynode *n, enum dt_cal_param p,
                      const char *what, double *out, struct dt_error *err)
{
    enum dt_cal_kind k = params[p].kind;
    if (n->type != DT_Y_SCALAR)
        return dt_yfail(doc, n, err, "%s of %s must be a single value", what, params[p].name);
    if (k == DT_CAL_FRACTION) {
        char *end;
        errno = 0;
        double v = strtod(n->value, &end);
        if (n->quoted || end == n->value || *end || errno == ERANGE || !isfinite(v))
            return dt_yfail(doc, n, err, "%s of %s: expected a plain number (a fraction of "
                            "peak, e.g. 0.35), found '%s'", what, params[p].name, n->value);
        if (v < 0)
            return dt_yfail(doc, n, err, "%s of %s cannot be negative, found '%s'", what,
                            params[p].name, n->value);
        *out = v;
        return DT_OK;
    }
    enum dt_unit u = k == DT_CAL_TIME ? DT_UNIT_TIME : DT_UNIT_BANDWIDTH;
    char why[256];
    double v;
    if (dt_parse_quantity(n->value, u, &v, why, sizeof why))
        return dt_yfail(doc, n, err, "%s of %s: %s", what, params[p].name, why);
    if (v < 0)
        return dt_yfail(doc, n, err, "%s of %s cannot be negative, found '%s'", what,
                        params[p].name, n->value);
    *out = v;
    return DT_OK;
}

static int load_entry(const struct dt_ydoc *doc, const struct dt_ynode *key,
                      const struct dt_ynode *node, struct dt_calibration *cal,
                      struct dt_error *err)
{
    static const char *const allowed[] = {"value", "fitted", "stderr", "ci95", "source", NULL};
    int p = dt_cal_param_parse(key->value);
    if (p < 0) {
        char list[1024] = "";
        size_t used = 0;
        for (int i = 0; i < DT_CAL_COUNT; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                     params[i].name);
        return dt_yfail(doc, key, err, "unknown parameter '%s' (known: %s)", key->value, list);
    }
    if (dt_calibration_find(cal, p))
        return dt_yfail(doc, key, err, "parameter '%s' given twice", key->value);
    int rc = dt_ycheck_map(doc, node, params[p].name, allowed, err);
    if (rc)
        return rc;
    const struct dt_ynode *v = dt_ymap_get(node, "value");
    if (!v)
        return dt_yfail(doc, node, err, "parameter '%s' has no 'value'", params[p].name);
    double value;
    char why[160];
    if ((rc = node_value(doc, v, p, "value", &value, err)))
        return rc;
    if (!dt_cal_param_in_range(p, value, why, sizeof why))
        return dt_yfail(doc, v, err, "%s", why);
    struct dt_cal_entry e = {.param = p, .value = value};
    if ((rc = dt_yget_bool(doc, node, "fitted", false, &e.fitted, err)))
        return rc;
    if ((rc = copy_str(doc, node, "source", e.source, sizeof e.source, err)))
        return rc;
    const struct dt_ynode *se = dt_ymap_get(node, "stderr");
    const struct dt_ynode *ci = dt_ymap_get(node, "ci95");
    if (e.fitted && (!se || !ci))
        return dt_yfail(doc, node, err, "fitted parameter '%s' needs 'stderr' and 'ci95'",
                        params[p].name);
    if (se && (rc = node_value(doc, se, p, "stderr", &e.se, err)))
        return rc;
    e.lo = e.hi = value;
    if (ci) {
        if (ci->type != DT_Y_SEQ || ci->n != 2)
            return dt_yfail(doc, ci, err, "ci95 of %s must be a list of two values [low, "
                            "high]", params[p].name);
        const struct dt_ynode *hi = ci->items[1];
        bool unbounded = hi->type == DT_Y_SCALAR && !hi->quoted && strcmp(hi->value, ".inf") == 0;
        if ((rc = node_value(doc, ci->items[0], p, "ci95", &e.lo, err)) ||
            (!unbounded && (rc = node_value(doc, hi, p, "ci95", &e.hi, err))))
            return rc;
        if (unbounded)
            e.hi = INFINITY;
        if (!(e.lo <= value && value <= e.hi))
            return dt_yfail(doc, ci, err, "ci95 of %s does not contain its value (low <= value "
                            "<= high)", params[p].name);
    }
    cal->entry[cal->n_entries++] = e;
    return DT_OK;
}

static int load_covariance(const struct dt_ydoc *doc, const struct dt_ynode *node,
                           struct dt_calibration *cal, struct dt_error *err)
{
    static const char *const allowed[] = {"parameters", "log_matrix", NULL};
    int rc = dt_ycheck_map(doc, node, "covariance", allowed, err);
    if (rc)
        return rc;
    const struct dt_ynode *names = dt_ymap_get(node, "parameters");
    const struct dt_ynode *m = dt_ymap_get(node, "log_matrix");
    if (!names || !m)
        return dt_yfail(doc, node, err, "covariance needs 'parameters' and 'log_matrix'");
    if ((rc = dt_ycheck_seq(doc, names, "covariance parameters", err)) ||
        (rc = dt_ycheck_seq(doc, m, "log_matrix", err)))
        return rc;
    if (names->n < 1 || names->n > DT_CAL_COUNT)
        return dt_yfail(doc, names, err, "covariance parameters: expected 1 to %d names",
                        DT_CAL_COUNT);
    int n = (int)names->n;
    for (int i = 0; i < n; i++) {
        const struct dt_ynode *nm = names->items[i];
        int p = nm->type == DT_Y_SCALAR ? dt_cal_param_parse(nm->value) : -1;
        const struct dt_cal_entry *e = p >= 0 ? dt_calibration_find(cal, p) : NULL;
        if (!e || !e->fitted)
            return dt_yfail(doc, nm, err, "covariance names '%s', which is not a fitted "
                            "parameter of this file",
                            nm->type == DT_Y_SCALAR ? nm->value : "?");
        for (int j = 0; j < i; j++)
            if ((int)cal->cov_param[j] == p)
                return dt_yfail(doc, nm, err, "covariance names '%s' twice", nm->value);
        cal->cov_param[i] = p;
    }
    if (m->n != (size_t)n)
        return dt_yfail(doc, m, err, "log_matrix must have %d rows, one per parameter", n);
    for (int i = 0; i < n; i++) {
        const struct dt_ynode *row = m->items[i];
        if (row->type != DT_Y_SEQ || row->n != (size_t)n)
            return dt_yfail(doc, row, err, "log_matrix row %d must be a list of %d numbers",
                            i + 1, n);
        for (int j = 0; j < n; j++)
            if ((rc = dt_ynode_double(doc, row->items[j], -1e30, 1e30,
                                      &cal->cov[i * DT_CAL_COUNT + j], err)))
                return rc;
    }
    for (int i = 0; i < n; i++) {
        if (cal->cov[i * DT_CAL_COUNT + i] < 0)
            return dt_yfail(doc, m->items[i]->items[i], err,
                            "log_matrix: a variance (diagonal) cannot be negative");
        for (int j = 0; j < i; j++) {
            double a = cal->cov[i * DT_CAL_COUNT + j], b = cal->cov[j * DT_CAL_COUNT + i];
            if (fabs(a - b) > 1e-6 * (fabs(a) + fabs(b)) + 1e-300)
                return dt_yfail(doc, m->items[i]->items[j], err,
                                "log_matrix is not symmetric (row %d column %d differs from "
                                "row %d column %d)", i + 1, j + 1, j + 1, i + 1);
        }
    }
    cal->n_cov = n;
    return DT_OK;
}

static int load_tree(const struct dt_ydoc *doc, struct dt_calibration *cal,
                     struct dt_error *err)
{
    static const char *const top[] = {"format", "created", "host", "tool", "device",
                                      "device_name", "method", "data", "fit", "parameters",
                                      "covariance", "notes", NULL};
    static const char *const fitkeys[] = {"observations", "dof", "residual_sd", "t95",
                                          "mape_pct", NULL};
    static const char *const datakeys[] = {"file", "rows", "host", "when", NULL};
    static const char *const devices[] = {"cpu", "gpu", NULL};
    const struct dt_ynode *root = dt_ydoc_root(doc);
    int rc = dt_ycheck_map(doc, root, "a calibration file", top, err);
    if (rc)
        return rc;
    const char *fmt = NULL;
    if ((rc = dt_yget_str(doc, root, "format", true, &fmt, err)))
        return rc;
    if (strcmp(fmt, FORMAT_TAG) != 0)
        return dt_yfail(doc, dt_ymap_get(root, "format"), err,
                        "format '%s' is not '%s' (a file written by dtvalidate)", fmt,
                        FORMAT_TAG);
    if ((rc = copy_str(doc, root, "created", cal->created, sizeof cal->created, err)) ||
        (rc = copy_str(doc, root, "host", cal->host, sizeof cal->host, err)) ||
        (rc = copy_str(doc, root, "tool", cal->tool, sizeof cal->tool, err)) ||
        (rc = copy_str(doc, root, "method", cal->method, sizeof cal->method, err)) ||
        (rc = copy_str(doc, root, "notes", cal->notes, sizeof cal->notes, err)))
        return rc;
    int dev = 0;
    if ((rc = dt_yget_enum(doc, root, "device", false, devices, &dev, err)))
        return rc;
    snprintf(cal->device, sizeof cal->device, "%s", devices[dev]);
    const struct dt_ynode *devnode = dt_ymap_get(root, "device");
    if (devnode) {
        cal->device_line = devnode->line;
        cal->device_col = devnode->col;
    }
    if ((rc = copy_str(doc, root, "device_name", cal->device_name, sizeof cal->device_name,
                       err)))
        return rc;
    const struct dt_ynode *data = dt_ymap_get(root, "data");
    if (data) {
        if ((rc = dt_ycheck_seq(doc, data, "data", err)))
            return rc;
        if (data->n > DT_CAL_MAX_DATA)
            return dt_yfail(doc, data, err, "data: at most %d entries", DT_CAL_MAX_DATA);
        for (size_t i = 0; i < data->n; i++) {
            const struct dt_ynode *d = data->items[i];
            struct dt_cal_data *cd = &cal->data[cal->n_data];
            if ((rc = dt_ycheck_map(doc, d, "a data entry", datakeys, err)))
                return rc;
            if (!dt_ymap_get(d, "file"))
                return dt_yfail(doc, d, err, "a data entry needs 'file'");
            if ((rc = copy_str(doc, d, "file", cd->file, sizeof cd->file, err)) ||
                (rc = copy_str(doc, d, "rows", cd->rows, sizeof cd->rows, err)) ||
                (rc = copy_str(doc, d, "host", cd->host, sizeof cd->host, err)) ||
                (rc = copy_str(doc, d, "when", cd->when, sizeof cd->when, err)))
                return rc;
            cal->n_data++;
        }
    }
    const struct dt_ynode *fit = dt_ymap_get(root, "fit");
    if (fit) {
        if ((rc = dt_ycheck_map(doc, fit, "fit", fitkeys, err)) ||
            (rc = dt_yget_int(doc, fit, "observations", false, 0, 1000000, &cal->n_obs, err)) ||
            (rc = dt_yget_int(doc, fit, "dof", false, 0, 1000000, &cal->dof, err)) ||
            (rc = dt_yget_double(doc, fit, "residual_sd", false, 0, 1e6, &cal->resid_sd,
                                 err)) ||
            (rc = dt_yget_double(doc, fit, "t95", false, 0, 1e6, &cal->t95, err)) ||
            (rc = dt_yget_double(doc, fit, "mape_pct", false, 0, 1e9, &cal->mape_pct, err)))
            return rc;
    }
    const struct dt_ynode *ps = dt_ymap_get(root, "parameters");
    if (!ps)
        return dt_yfail(doc, root, err, "missing required key 'parameters'");
    if (ps->type != DT_Y_MAP)
        return dt_yfail(doc, ps, err, "parameters must be a mapping (name: {value: ...})");
    for (size_t i = 0; i < ps->n; i++)
        if ((rc = load_entry(doc, ps->keys[i], ps->items[i], cal, err)))
            return rc;
    const struct dt_ynode *cov = dt_ymap_get(root, "covariance");
    if (cov && (rc = load_covariance(doc, cov, cal, err)))
        return rc;
    if (cal->n_cov && (cal->dof < 1 || !(cal->t95 > 0)))
        return dt_yfail(doc, fit ? fit : cov, err, "a covariance needs fit: dof >= 1 and "
                        "t95 > 0 to give intervals");
    return DT_OK;
}

int dt_calibration_load(const char *path, struct dt_calibration *cal, struct dt_error *err)
{
    struct dt_ydoc *doc;
    dt_calibration_init(cal);
    int rc = dt_ydoc_load_file(path, &doc, err);
    if (rc)
        return rc;
    rc = load_tree(doc, cal, err);
    dt_ydoc_destroy(doc);
    if (rc)
        dt_calibration_init(cal);
    else
        snprintf(cal->path, sizeof cal->path, "%s", path);
    return rc;
}

int dt_calibration_load_string(const char *name, const char *text,
                               struct dt_calibration *cal, struct dt_error *err)
{
    struct dt_ydoc *doc;
    dt_calibration_init(cal);
    int rc = dt_ydoc_load_string(name, text, strlen(text), &doc, err);
    if (rc)
        return rc;
    rc = load_tree(doc, cal, err);
    dt_ydoc_destroy(doc);
    if (rc)
        dt_calibration_init(cal);
    return rc;
}

/* ---- intervals ---- */

int dt_calibration_interval(const struct dt_calibration *cal, const struct dt_cost_params *base,
                            enum dt_cal_interval kind, dt_cal_predict_fn fn, void *ctx,
                            double *value, double *lo, double *hi, struct dt_error *err)
{
    struct dt_cost_params cp = *base;
    dt_calibration_apply(cal, &cp);
    double y0;
    int rc = fn(ctx, &cp, &y0, err);
    if (rc)
        return rc;
    *value = *lo = *hi = y0;
    if (!dt_calibration_has_interval(cal) || !(y0 > 0) ||
        (kind == DT_CAL_CONFIDENCE && cal->n_cov == 0))
        return DT_OK;
    /* g_k = d log y / d log theta_k by a forward step of 0.1% in theta_k. */
    const double h = 1e-3;
    double g[DT_CAL_COUNT];
    for (int k = 0; k < cal->n_cov; k++) {
        const struct dt_cal_entry *e = dt_calibration_find(cal, cal->cov_param[k]);
        struct dt_cost_params cpk = cp;
        dt_cal_param_set(&cpk, e->param, e->value * exp(h));
        double yk;
        if ((rc = fn(ctx, &cpk, &yk, err)))
            return rc;
        g[k] = yk > 0 ? (log(yk) - log(y0)) / h : 0;
    }
    double var = 0;
    for (int i = 0; i < cal->n_cov; i++)
        for (int j = 0; j < cal->n_cov; j++)
            var += g[i] * cal->cov[i * DT_CAL_COUNT + j] * g[j];
    if (kind == DT_CAL_PREDICTION)
        var += cal->resid_sd * cal->resid_sd;
    double half = cal->t95 * sqrt(fmax(var, 0));
    if (half > 0) { /* else none: a zero-width interval would claim certainty */
        *lo = y0 * exp(-half);
        *hi = y0 * exp(half);
    }
    return DT_OK;
}

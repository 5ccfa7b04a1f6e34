/* Calibration files: cost-model parameters fitted by dtvalidate on measured runs, with their
 * uncertainty and provenance, applied by `dtsim --calibration FILE` and by dtvalidate itself.
 *
 * A calibration overrides some fields of struct dt_cost_params (include/dt/costmodel.h); the
 * others keep dt_cost_defaults() for the device kind and the topology's datasheet values.
 * Fitted parameters are estimated in log space (so they stay positive); the file keeps each
 * one's value, standard error and 95% confidence interval, and the covariance matrix of their
 * logarithms, from which a prediction gets an interval by the delta method:
 *
 *   log y(theta + d) ~ log y(theta) + g . d,   g_k = d log y / d log theta_k (finite differences)
 *   var log y = g' C g  (+ s^2, the relative residual variance of the fit, for a prediction
 *                        interval: where a new measurement is expected to fall)
 *   interval = y * exp(-/+ t95(dof) * sqrt(var log y))
 *
 * The format (YAML, values with units) is described in validate/README.md; the loader reports
 * every problem as file:line:column. */
#ifndef DT_CALIBRATION_H
#define DT_CALIBRATION_H

#include <stdbool.h>
#include <stdio.h>

#include "dt/costmodel.h"
#include "dt/error.h"
#include "dt/units.h"

/* The parameters a calibration can set. Some stand for several fields of dt_cost_params
 * (eff_gemm sets the conv and dense efficiencies together, op_overhead every class's
 * per-op overhead): what a table of epoch times can identify is usually less than the model
 * distinguishes. */
enum dt_cal_param {
    DT_CAL_ITER_OVERHEAD,   /* s: per iteration, per rank (framework, Python, scheduling) */
    DT_CAL_EFF_GEMM,        /* fraction of fp32 peak, conv and dense layers together */
    DT_CAL_EFF_CONV,
    DT_CAL_EFF_DENSE,
    DT_CAL_EFF_POOL,
    DT_CAL_EFF_ELEMENTWISE,
    DT_CAL_EFF_NORM,
    DT_CAL_EFF_UPDATE,
    DT_CAL_OP_OVERHEAD,     /* s: fixed time of every compute op, all classes */
    DT_CAL_REDUCE_BW,       /* B/s: summing received gradients */
    DT_CAL_MEM_BW,          /* B/s: memory bandwidth of compute ops (caches included) */
    DT_CAL_LOWER_BW,        /* B/s: convolution lowering (im2col/col2im) */
    DT_CAL_NODE_MEM_BW,     /* B/s: memory bandwidth the ranks of one node share */
    DT_CAL_CACHE_BW,        /* B/s: traffic of ops that fit in the device's cache */
    DT_CAL_PACK_BW,         /* B/s: packing a dense layer's weights for each GEMM call */
    DT_CAL_INTRA_BW,        /* B/s: each process's link inside a node */
    DT_CAL_INTRA_LAT,       /* s */
    DT_CAL_NIC_BW,          /* B/s */
    DT_CAL_NIC_LAT,         /* s */
    DT_CAL_NET_LAT,         /* s: per switch */
    DT_CAL_READ_BW,         /* B/s: reading the training data at start-up */
    DT_CAL_EFF_GEMM_HALF,   /* fraction of the 16-/8-bit peak, conv and dense (tensor cores) */
    DT_CAL_EFF_MEM,         /* fraction of the device's memory bandwidth (unlike mem_bw, it
                               carries over to another device's datasheet) */
    DT_CAL_EXP_TIME,        /* s: one exp evaluation (softmax, attention, sigmoid, loss) */
    DT_CAL_TANH_TIME,       /* s: one tanh evaluation (tanh, GELU, LSTM) */
    DT_CAL_EFF_CONV_HALF,   /* eff_gemm_half apart: conv layers only */
    DT_CAL_EFF_DENSE_HALF,  /* eff_gemm_half apart: dense layers only */
    DT_CAL_OPT_BW,          /* B/s: the optimizer step's streaming pass */
    DT_CAL_EFF_GEMM_TF32,   /* fraction of the tf32 peak, conv and dense (tensor cores) */
    DT_CAL_EFF_CONV_TF32,   /* eff_gemm_tf32 apart: conv layers only */
    DT_CAL_EFF_DENSE_TF32,  /* eff_gemm_tf32 apart: dense layers only */
    DT_CAL_COUNT
};

enum dt_cal_kind { DT_CAL_FRACTION, DT_CAL_TIME, DT_CAL_BANDWIDTH };

const char *dt_cal_param_name(enum dt_cal_param p);
/* -1 when unknown. */
int dt_cal_param_parse(const char *name);
enum dt_cal_kind dt_cal_param_kind(enum dt_cal_param p);
const char *dt_cal_param_description(enum dt_cal_param p);
/* The parameter's value in cp (0 for a link override means "the topology's value"). */
double dt_cal_param_get(const struct dt_cost_params *cp, enum dt_cal_param p);
void dt_cal_param_set(struct dt_cost_params *cp, enum dt_cal_param p, double value);
/* The tied parameter that sets p together with its pair (eff_gemm for eff_conv and
 * eff_dense, eff_gemm_half for eff_conv_half and eff_dense_half, eff_gemm_tf32 for
 * eff_conv_tf32 and eff_dense_tf32), or p itself. */
enum dt_cal_param dt_cal_param_tie(enum dt_cal_param p);
/* The value the simulator would use for p when cp leaves it at 0: the topology's datasheet
 * value for links (first node group), mem_bw for reduce_bw; cp's own value otherwise. */
double dt_cal_param_effective(const struct dt_cost_params *cp, const struct dt_topology *topo,
                              enum dt_cal_param p);

struct dt_cal_entry {
    enum dt_cal_param param;
    double value;
    bool fitted;            /* false: fixed (value set by hand or carried over) */
    double se, lo, hi;      /* fitted: standard error and 95% confidence interval */
    char source[256];       /* where the value came from, in words */
};

struct dt_cal_data {
    char file[512];         /* records or reference table */
    char rows[512];         /* which of its runs were used */
    char host[256];         /* where they were measured */
    char when[64];          /* when they were measured (as the data says) */
};

#define DT_CAL_MAX_DATA 32

struct dt_calibration {
    char path[512];         /* loaded from (empty when built in memory) */
    char created[64];       /* UTC, ISO 8601 */
    char host[256];         /* where dtvalidate ran */
    char tool[128];         /* "dtvalidate 0.1.0 (git ...)" */
    char device[8];         /* "cpu" or "gpu": the defaults the unlisted parameters keep */
    char device_name[256];  /* the topologies' device names it was fitted on, "; "-separated
                               ("" unknown) */
    int device_line, device_col;    /* where the file says `device:` (0 when absent) */
    char method[256];       /* how the fit was made */
    char notes[2048];       /* what was fixed and why; what did not fit */
    int n_data;
    struct dt_cal_data data[DT_CAL_MAX_DATA];
    int n_entries;
    struct dt_cal_entry entry[DT_CAL_COUNT];
    /* fit statistics */
    int n_obs, dof;
    double resid_sd;        /* relative: RMS of (predicted/measured - 1) scaled to dof */
    double t95;             /* Student t quantile for 95% with dof degrees of freedom */
    double mape_pct;        /* on the fitted runs */
    /* covariance of the logs of the fitted entries, in this order (n_cov <= n_entries) */
    int n_cov;
    enum dt_cal_param cov_param[DT_CAL_COUNT];
    double cov[DT_CAL_COUNT * DT_CAL_COUNT];
};

/* An empty calibration (no entries: applying it changes nothing). */
void dt_calibration_init(struct dt_calibration *cal);
/* Adds or replaces an entry; returns it. */
struct dt_cal_entry *dt_calibration_set(struct dt_calibration *cal, enum dt_cal_param p,
                                        double value);
const struct dt_cal_entry *dt_calibration_find(const struct dt_calibration *cal,
                                               enum dt_cal_param p);
/* Whether the file carries what an interval needs: dof >= 1, t95 > 0, and a covariance or a
 * residual spread (resid_sd > 0: without a covariance the interval is the residual spread
 * alone). */
bool dt_calibration_has_interval(const struct dt_calibration *cal);

/* Whether v is a sensible value of p: an efficiency in [1e-6, 1] (a fraction of the
 * device's peak), a bandwidth in [1 MB/s, 100 TB/s] (the topology files' range), a time 0 or
 * in [1 ns, 1 s] (iter_overhead: 1 h). Otherwise false, with a sentence in why. */
bool dt_cal_param_in_range(enum dt_cal_param p, double v, char *why, size_t len);
/* The value of p's range nearest v (a time below its range: 0). */
double dt_cal_param_clamp(enum dt_cal_param p, double v);
/* DT_EINPUT (err says which) when an entry is out of its range: what a fit wrote must load. */
int dt_calibration_check_values(const struct dt_calibration *cal, struct dt_error *err);

/* Records that cal is fitted on device d: its kind, and its name added to device_name
 * ("A; B" when runs on two devices of a kind were fitted together). */
void dt_calibration_add_device(struct dt_calibration *cal, const struct dt_device_spec *d);

/* Whether cal may be applied to the devices of topo. A device of another kind than the one
 * it was fitted on (a CPU calibration on a GPU) is refused: DT_EINPUT at the file's
 * `device:` line, naming both. A device of the same kind with another name (fitted on a
 * V100, applied to an A100) is allowed with a warning in warn naming both (its efficiencies
 * are fractions of the other device's peaks); warn is "" when the names agree or the file
 * names no device. */
int dt_calibration_check_device(const struct dt_calibration *cal, const struct dt_topology *topo,
                                char *warn, size_t len, struct dt_error *err);

/* Loads path; errors as file:line:column (status DT_EINPUT). */
int dt_calibration_load(const char *path, struct dt_calibration *cal, struct dt_error *err);
int dt_calibration_load_string(const char *name, const char *text,
                               struct dt_calibration *cal, struct dt_error *err);
/* Writes the YAML; the loader reads back the same values (to 9 significant digits). */
void dt_calibration_write(FILE *f, const struct dt_calibration *cal);
int dt_calibration_save(const char *path, const struct dt_calibration *cal,
                        struct dt_error *err);

/* Sets the calibrated fields of cp (which holds the defaults for the device). */
void dt_calibration_apply(const struct dt_calibration *cal, struct dt_cost_params *cp);

/* A prediction as a function of the cost parameters (dtsim: simulate and return the iteration
 * time). value must come out positive. */
typedef int (*dt_cal_predict_fn)(void *ctx, const struct dt_cost_params *cp, double *value,
                                 struct dt_error *err);

enum dt_cal_interval { DT_CAL_CONFIDENCE, DT_CAL_PREDICTION };

/* The prediction with the calibration applied to base, and its 95% interval [lo, hi] by the
 * delta method above (n_cov + 1 calls of fn). Without an interval in the file, lo = hi = value.
 * DT_CAL_CONFIDENCE: parameter uncertainty only; DT_CAL_PREDICTION: plus the fit's residual
 * variance (alone when the file has no covariance). An interval of zero width is none:
 * lo = hi = value. */
int dt_calibration_interval(const struct dt_calibration *cal, const struct dt_cost_params *base,
                            enum dt_cal_interval kind, dt_cal_predict_fn fn, void *ctx,
                            double *value, double *lo, double *hi, struct dt_error *err);

#endif

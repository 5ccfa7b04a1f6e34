/* The parallel config, parsed once: dtsim and dtexec hand every flag of it here, run records
 * write it with dt_parallel_format and dtvalidate reads it back with dt_parallel_set. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "dt/plan.h"
#include "dt/units.h"

enum flag { F_BATCH, F_SCALING, F_BUCKET, F_ACCUMULATE, F_PP, F_DP, F_CHUNKS, F_MICRO, F_STAGES,
            F_GRAD_ALG, F_OPTIMIZER, F_PRECISION, F_TP, F_ZERO, F_SEQ_PARALLEL, F_RECOMPUTE,
            F_GRAD_PRECISION, F_COUNT };

static const struct option longopts[F_COUNT + 1] = {
    {"batch", required_argument, NULL, 0x400 + F_BATCH},
    {"scaling", required_argument, NULL, 0x400 + F_SCALING},
    {"bucket", required_argument, NULL, 0x400 + F_BUCKET},
    {"accumulate", required_argument, NULL, 0x400 + F_ACCUMULATE},
    {"pp", required_argument, NULL, 0x400 + F_PP},
    {"dp", required_argument, NULL, 0x400 + F_DP},
    {"chunks", required_argument, NULL, 0x400 + F_CHUNKS},
    {"micro-batches", required_argument, NULL, 0x400 + F_MICRO},
    {"stages", required_argument, NULL, 0x400 + F_STAGES},
    {"grad-alg", required_argument, NULL, 0x400 + F_GRAD_ALG},
    {"optimizer", required_argument, NULL, 0x400 + F_OPTIMIZER},
    {"precision", required_argument, NULL, 0x400 + F_PRECISION},
    {"tp", required_argument, NULL, 0x400 + F_TP},
    {"zero", required_argument, NULL, 0x400 + F_ZERO},
    {"sequence-parallel", required_argument, NULL, 0x400 + F_SEQ_PARALLEL},
    {"recompute", required_argument, NULL, 0x400 + F_RECOMPUTE},
    {"grad-precision", required_argument, NULL, 0x400 + F_GRAD_PRECISION},
    {NULL, 0, NULL, 0}};

const struct option *dt_parallel_longopts(void) { return longopts; }

int dt_parallel_merge_longopts(const struct option *own, int n_own, struct option *out,
                               int cap)
{
    if (n_own + F_COUNT + 1 > cap)
        return -1;
    for (int i = 0; i < n_own; i++)
        out[i] = own[i];
    for (int f = 0; f <= F_COUNT; f++) /* the terminating zero entry too */
        out[n_own + f] = longopts[f];
    return n_own + F_COUNT;
}

void dt_parallel_usage(FILE *out)
{
    fprintf(out,
        "  -b, --batch N            weak scaling: per device and step (per micro-batch with\n"
        "                           --accumulate; per pipeline replica, split into the\n"
        "                           micro-batches, for pipelines); strong: global (default 128)\n"
        "      --scaling weak|strong  fixed per-device batch, or fixed global batch (default weak)\n"
        "      --bucket SIZE        gradient buckets (e.g. '25 MiB') overlapped with backward\n"
        "      --accumulate K       data parallelism: K micro-batches accumulated per step (1)\n"
        "      --pp S               pipelines: stages (default 2)\n"
        "      --dp D               pipelines: data-parallel replicas of the pipeline\n"
        "                           (default: ranks / stages)\n"
        "      --micro-batches M    pipelines: micro-batches per step (default: stages;\n"
        "                           naive-mp: 1)\n"
        "      --chunks V           interleaved: model chunks per stage (default 2)\n"
        "      --stages CUTS        pipelines: layers of each stage, e.g. '0-4,5-11' (default:\n"
        "                           balanced by predicted cost)\n"
        "      --grad-alg ALG       pipelines: the replicas' allreduce: ring, recursive-doubling,\n"
        "                           rabenseifner, tree or mpi-allreduce (default ring)\n"
        "      --optimizer NAME     adam, adam-torch, sgd or momentum (default adam): its state\n"
        "                           is part of the memory\n"
        "      --precision P        fp32, tf32, bf16, fp16 or fp8: compute precision; bf16 and\n"
        "                           fp16 are mixed precision (fp32 master weights, optimizer\n"
        "                           state and loss scaling) (default fp32)\n"
        "      --grad-precision P   fp32, bf16 or fp16: the gradients' dtype and so their\n"
        "                           allreduce's; fp32 under bf16/fp16 as PyTorch autocast\n"
        "                           and TensorFlow AMP keep them (default: the compute\n"
        "                           precision's storage, 16-bit under mixed precision)\n"
        "      --tp T               tensor parallelism: T ranks share each layer (default 1)\n"
        "      --zero S             ZeRO stage 0-3: shard optimizer state (1), gradients (2),\n"
        "                           parameters (3) over the data-parallel ranks (default 0)\n"
        "      --sequence-parallel on|off  with --tp: reduce-scatter/allgather around norms\n"
        "                           and dropout instead of allreduce (default off)\n"
        "      --recompute none|full|selective  activation recomputation (default none)\n");
}

void dt_plan_options_init(struct dt_plan_options *o)
{
    memset(o, 0, sizeof *o);
    o->scaling = DT_SCALING_WEAK;
    o->batch = 128;
    o->accumulate = 1;
    o->grad_alg = DT_ALG_RING;
    o->optimizer = DT_OPTIM_ADAM;
    o->precision = DT_FP32;
}

const char *dt_recompute_name(enum dt_recompute r)
{
    static const char *const n[] = {"none", "full", "selective"};
    return r < DT_RECOMPUTE_COUNT ? n[r] : "?";
}

enum dt_dtype dt_precision_storage(enum dt_precision p)
{
    return p == DT_FP16 ? DT_TYPE_F16 : p == DT_BF16 || p == DT_FP8 ? DT_TYPE_BF16 : DT_TYPE_F32;
}


const char *dt_optimizer_name(enum dt_optimizer o)
{
    static const char *const n[] = {"adam", "sgd", "momentum"};
    return o < DT_OPTIM_COUNT ? n[o] : "?";
}

int dt_optimizer_moments(enum dt_optimizer o)
{
    return o == DT_OPTIM_ADAM ? 2 : o == DT_OPTIM_MOMENTUM ? 1 : 0;
}

static int bad(struct dt_error *err, const char *flag, const char *fmt, const char *value)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, value);
    return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--%s: %s", flag, msg);
}

static int parse_precision(struct dt_plan_options *o, const char *s, struct dt_error *err)
{
    for (int p = 0; p < DT_PREC_COUNT; p++)
        if (p != DT_FP64 && strcmp(s, dt_precision_name((enum dt_precision)p)) == 0) {
            o->precision = (enum dt_precision)p;
            return DT_OK;
        }
    return bad(err, "precision", "expected fp32, tf32, bf16, fp16 or fp8, got '%s'", s);
}

static int parse_grad_precision(struct dt_plan_options *o, const char *s,
                                struct dt_error *err)
{
    static const enum dt_precision choices[] = {DT_FP32, DT_BF16, DT_FP16};
    for (size_t i = 0; i < sizeof choices / sizeof choices[0]; i++)
        if (strcmp(s, dt_precision_name(choices[i])) == 0) {
            o->grad_precision = choices[i];
            o->grad_precision_given = true;
            return DT_OK;
        }
    return bad(err, "grad-precision", "expected fp32, bf16 or fp16, got '%s'", s);
}

static int parse_recompute(struct dt_plan_options *o, const char *s, struct dt_error *err)
{
    for (int r = 0; r < DT_RECOMPUTE_COUNT; r++)
        if (strcmp(s, dt_recompute_name((enum dt_recompute)r)) == 0) {
            o->recompute = (enum dt_recompute)r;
            return DT_OK;
        }
    return bad(err, "recompute", "expected none, full or selective, got '%s'", s);
}

static int parse_on_off(const char *flag, const char *s, bool *out, struct dt_error *err)
{
    if (strcmp(s, "on") == 0 || strcmp(s, "off") == 0) {
        *out = s[1] == 'n';
        return DT_OK;
    }
    return bad(err, flag, "expected on or off, got '%s'", s);
}

/* A whole number in [lo, hi]. */
static int count(const char *flag, const char *s, long lo, long hi, int *out,
                 struct dt_error *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        char fmt[128];
        snprintf(fmt, sizeof fmt, "expected a whole number from %ld to %ld, got '%%s'", lo, hi);
        return bad(err, flag, fmt, s);
    }
    *out = (int)v;
    return DT_OK;
}

/* "0-4,5-11,12-20": contiguous ranges from layer 0; keeps the first layer of each stage after
 * the first (the last range's end is checked against the model when the plan is built). */
static int parse_stages(struct dt_plan_options *o, const char *s, struct dt_error *err)
{
    const char *p = s;
    long expect = 0;
    o->n_stage_cuts = 0;
    for (int k = 0;; k++) {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10), b;
        if (end == p || *end != '-' || errno)
            return bad(err, "stages", "expected ranges of layers such as '0-4,5-11', got '%s'", s);
        p = end + 1;
        b = strtol(p, &end, 10);
        if (end == p || errno || b < a)
            return bad(err, "stages", "expected ranges of layers such as '0-4,5-11', got '%s'", s);
        if (a != expect)
            return bad(err, "stages", "ranges must start at layer 0 and follow each other "
                       "without gaps or overlaps: '%s'", s);
        if (k > 0) {
            if (o->n_stage_cuts == DT_MAX_STAGES - 1)
                return bad(err, "stages", "more than 256 stages in '%s'", s);
            o->stage_cuts[o->n_stage_cuts++] = (int)a;
        }
        expect = b + 1;
        if (b > DT_MODEL_MAX_LAYERS)
            return bad(err, "stages", "layer index too large in '%s'", s);
        o->stage_cuts[DT_MAX_STAGES - 1] = (int)b; /* the last layer named, checked later */
        if (*end == 0)
            break;
        if (*end != ',')
            return bad(err, "stages", "expected ranges of layers such as '0-4,5-11', got '%s'", s);
        p = end + 1;
    }
    return DT_OK;
}

static int parse_grad_alg(struct dt_plan_options *o, const char *s, struct dt_error *err)
{
    static const struct { const char *name; enum dt_coll_alg alg; } algs[] = {
        {"ring", DT_ALG_RING}, {"recursive-doubling", DT_ALG_RECURSIVE_DOUBLING},
        {"rabenseifner", DT_ALG_RABENSEIFNER}, {"mpi-allreduce", DT_ALG_LIBRARY},
        {"library", DT_ALG_LIBRARY}, {"tree", DT_ALG_TREE}};
    for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++)
        if (strcmp(s, algs[i].name) == 0) {
            o->grad_alg = algs[i].alg;
            o->grad_alg_given = true;
            return DT_OK;
        }
    return bad(err, "grad-alg", "expected ring, recursive-doubling, rabenseifner, tree or "
               "mpi-allreduce, got '%s'", s);
}

static int parse_optimizer(struct dt_plan_options *o, const char *s, struct dt_error *err)
{
    if (strcmp(s, "adam") == 0 || strcmp(s, "adam-torch") == 0)
        o->optimizer = DT_OPTIM_ADAM;
    else if (strcmp(s, "sgd") == 0)
        o->optimizer = DT_OPTIM_SGD;
    else if (strcmp(s, "momentum") == 0)
        o->optimizer = DT_OPTIM_MOMENTUM;
    else
        return bad(err, "optimizer", "expected adam, adam-torch, sgd or momentum, got '%s'", s);
    return DT_OK;
}

int dt_parallel_set(struct dt_plan_options *o, const char *flag, const char *value,
                    struct dt_error *err)
{
    while (*flag == '-')
        flag++;
    int f = 0;
    while (f < F_COUNT && strcmp(longopts[f].name, flag) != 0)
        f++;
    switch (f) {
    case F_BATCH: return count("batch", value, 1, 1 << 24, &o->batch, err);
    case F_SCALING:
        if (strcmp(value, "weak") == 0)
            o->scaling = DT_SCALING_WEAK;
        else if (strcmp(value, "strong") == 0)
            o->scaling = DT_SCALING_STRONG;
        else
            return bad(err, "scaling", "expected weak or strong, got '%s'", value);
        return DT_OK;
    case F_BUCKET: {
        char why[256] = "";
        if (dt_parse_quantity(value, DT_UNIT_BYTES, &o->bucket_bytes, why, sizeof why) ||
            !(o->bucket_bytes >= 4)) {
            char fmt[384];
            snprintf(fmt, sizeof fmt, "expected a size of at least 4 B such as '25 MiB': %s",
                     why[0] ? why : "%s");
            return bad(err, "bucket", fmt, value);
        }
        return DT_OK;
    }
    case F_ACCUMULATE: return count("accumulate", value, 1, 1 << 16, &o->accumulate, err);
    case F_PP: return count("pp", value, 1, DT_MAX_STAGES, &o->pp, err);
    case F_DP: return count("dp", value, 1, 1 << 20, &o->dp, err);
    case F_CHUNKS: return count("chunks", value, 1, 64, &o->chunks, err);
    case F_MICRO: return count("micro-batches", value, 1, 1 << 16, &o->micro_batches, err);
    case F_STAGES: return parse_stages(o, value, err);
    case F_GRAD_ALG: return parse_grad_alg(o, value, err);
    case F_OPTIMIZER: return parse_optimizer(o, value, err);
    case F_PRECISION: return parse_precision(o, value, err);
    case F_TP: return count("tp", value, 1, 1 << 12, &o->tp, err);
    case F_ZERO: return count("zero", value, 0, 3, &o->zero, err);
    case F_SEQ_PARALLEL: return parse_on_off("sequence-parallel", value, &o->sequence_parallel, err);
    case F_RECOMPUTE: return parse_recompute(o, value, err);
    case F_GRAD_PRECISION: return parse_grad_precision(o, value, err);
    default: return 1;
    }
}

void dt_parallel_format(const struct dt_plan_options *o, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
#define PUT(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__))
    if (o->accumulate > 1)
        PUT("%saccumulate=%d", n ? " " : "", o->accumulate);
    if (o->pp)
        PUT("%spp=%d", n ? " " : "", o->pp);
    if (o->dp)
        PUT("%sdp=%d", n ? " " : "", o->dp);
    if (o->micro_batches)
        PUT("%smicro-batches=%d", n ? " " : "", o->micro_batches);
    if (o->chunks)
        PUT("%schunks=%d", n ? " " : "", o->chunks);
    if (o->grad_alg_given)
        PUT("%sgrad-alg=%s", n ? " " : "",
            o->grad_alg == DT_ALG_LIBRARY ? "mpi-allreduce" : dt_coll_alg_name(o->grad_alg));
    if (o->n_stage_cuts) {
        PUT("%sstages=", n ? " " : "");
        int first = 0;
        for (int k = 0; k <= o->n_stage_cuts; k++) {
            int last = k < o->n_stage_cuts ? o->stage_cuts[k] - 1
                                           : o->stage_cuts[DT_MAX_STAGES - 1];
            PUT("%s%d-%d", k ? "," : "", first, last);
            first = last + 1;
        }
    }
    if (o->optimizer != DT_OPTIM_ADAM)
        PUT("%soptimizer=%s", n ? " " : "", dt_optimizer_name(o->optimizer));
    if (o->precision != DT_FP32)
        PUT("%sprecision=%s", n ? " " : "", dt_precision_name(o->precision));
    if (o->grad_precision_given)
        PUT("%sgrad-precision=%s", n ? " " : "", dt_precision_name(o->grad_precision));
    if (o->tp > 1)
        PUT("%stp=%d", n ? " " : "", o->tp);
    if (o->zero)
        PUT("%szero=%d", n ? " " : "", o->zero);
    if (o->sequence_parallel)
        PUT("%ssequence-parallel=on", n ? " " : "");
    if (o->recompute)
        PUT("%srecompute=%s", n ? " " : "", dt_recompute_name(o->recompute));
#undef PUT
    if (n >= len && len > 0)
        buf[len - 1] = 0;
}

int dt_parallel_set_pairs(struct dt_plan_options *o, const char *text, int *at,
                          struct dt_error *err)
{
    size_t i = 0;
    *at = 0;
    for (;;) {
        while (text[i] == ' ' || text[i] == '\t')
            i++;
        if (!text[i])
            return DT_OK;
        size_t start = i;
        while (text[i] && text[i] != ' ' && text[i] != '\t')
            i++;
        *at = (int)start;
        char pair[256];
        if (i - start >= sizeof pair)
            return dt_fail(err, DT_EINPUT, NULL, 0, 0, "a pair longer than %zu bytes",
                           sizeof pair - 1);
        snprintf(pair, sizeof pair, "%.*s", (int)(i - start), text + start);
        char *eq = strchr(pair, '=');
        if (!eq || eq == pair || !eq[1])
            return dt_fail(err, DT_EINPUT, NULL, 0, 0, "expected key=value pairs such as "
                           "'pp=2 micro-batches=4', found '%s'", pair);
        *eq = 0;
        int rc = dt_parallel_set(o, pair, eq + 1, err);
        if (rc == 1) {
            char keys[512];
            size_t n = 0;
            keys[0] = 0;
            for (int f = 0; f < F_COUNT && n < sizeof keys; f++)
                n += (size_t)snprintf(keys + n, sizeof keys - n, "%s%s", f ? " " : "",
                                      longopts[f].name);
            return dt_fail(err, DT_EINPUT, NULL, 0, 0, "unknown key '%s' (keys: %s)", pair, keys);
        }
        if (rc)
            return rc;
    }
}

long dt_epoch_iterations(long samples, long global_batch)
{
    return global_batch > 0 && samples > 0 ? samples / global_batch : 0;
}

/* Reading NVIDIA's published throughput table into measured runs (see published.h). */
#include "published.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt/datafile.h"

#define N_COLS 11
enum { P_SOURCE, P_SYSTEM, P_GPU, P_GPUS, P_MODEL, P_PRECISION, P_BATCH, P_SEQ, P_ACCUM,
       P_THROUGHPUT, P_UNIT };
static const char *const header[N_COLS] = {"source", "system", "gpu", "gpus", "model",
                                           "precision", "batch_per_gpu", "seq_len",
                                           "accum_steps", "throughput", "unit"};

/* One row's fields and their columns. */
struct prow {
    const char *path;
    int line;
    char **f;
    const int *col;
};

/* A whole number in [lo, hi] (empty: *out = 0 when allowed). */
static int row_int(const struct prow *r, int k, int lo, int hi, bool empty_ok, int *out,
                   struct dt_error *err)
{
    const char *s = r->f[k];
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s && empty_ok) {
        *out = 0;
        return DT_OK;
    }
    if (!*s || *end || errno || v < lo || v > hi)
        return dt_fail(err, DT_EINPUT, r->path, r->line, r->col[k],
                       "%s: expected a whole number from %d to %d, found '%s'", header[k], lo, hi,
                       s);
    *out = (int)v;
    return DT_OK;
}

/* The index of s in words (NULL-terminated), or an error naming the choices. */
static int row_word(const struct prow *r, int k, const char *const *words, int *out,
                    struct dt_error *err)
{
    char list[256] = "";
    size_t n = 0;
    for (int i = 0; words[i]; i++) {
        if (strcmp(r->f[k], words[i]) == 0) {
            *out = i;
            return DT_OK;
        }
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", words[i]);
    }
    return dt_fail(err, DT_EINPUT, r->path, r->line, r->col[k], "%s: '%s' is not one of %s",
                   header[k], r->f[k], list);
}

/* "DGX A100 xN": N nodes of a DGX A100 (0 when the system is not one). */
static int system_nodes(const char *system)
{
    if (strncmp(system, "DGX A100 x", 10) != 0)
        return 0;
    char *end;
    long n = strtol(system + 10, &end, 10);
    return *end || n < 2 || n > 64 ? -1 : (int)n;
}

/* The topology of a row: system and GPU -> file name, and its nodes. */
static int row_topology(const struct prow *r, int gpus, char *name, size_t len, int *nodes,
                        struct dt_error *err)
{
    const char *sys = r->f[P_SYSTEM], *gpu = r->f[P_GPU];
    int multi = system_nodes(sys);
    bool a100 = strncmp(gpu, "A100", 4) == 0;
    *nodes = multi > 0 ? multi : 1;
    if (multi < 0)
        return dt_fail(err, DT_EINPUT, r->path, r->line, r->col[P_SYSTEM],
                       "system: '%s' is not 'DGX A100 xN' with N from 2 to 64", sys);
    if (multi > 0 && strcmp(gpu, "A100-80GB") == 0)
        snprintf(name, len, "dgx-a100-32n");
    else if (strcmp(sys, "DGX A100") == 0 && a100)
        snprintf(name, len, strcmp(gpu, "A100-40GB") == 0 ? "dgx-a100-40gb" : "dgx-a100");
    else if (strcmp(sys, "DGX-1") == 0 && !a100)
        snprintf(name, len, "dgx1-v100");
    else if (strcmp(sys, "DGX-2") == 0 && !a100)
        snprintf(name, len, "dgx2-v100");
    else
        return dt_fail(err, DT_EINPUT, r->path, r->line, r->col[P_SYSTEM],
                       "system '%s' with GPU '%s': no topology (validate/README.md maps DGX "
                       "A100 [xN], DGX-1 and DGX-2)", sys, gpu);
    int per_node = strcmp(sys, "DGX-2") == 0 ? 16 : 8;
    if (gpus > per_node * *nodes || (multi > 0 && gpus != per_node * *nodes))
        return dt_fail(err, DT_EINPUT, r->path, r->line, r->col[P_GPUS],
                       "gpus: %d GPUs do not fill '%s' (%d per node)", gpus, sys, per_node);
    return DT_OK;
}

static const char *framework_of(const char *source)
{
    return strstr(source, "-PT-") ? "pytorch" : strstr(source, "-MX-") ? "mxnet"
         : strstr(source, "-TF-") ? "tensorflow" : "";
}

/* The model of a BERT row: phase 1 (128 tokens, unbinned) or phase 2, whose 512-token
 * sequences NVIDIA's runs bin by length and pad per batch (models/bert-large-phase2.yaml);
 * another length names a model the zoo does not have (the row is then left out). */
static void bert_model(int seq, char *name, size_t len)
{
    if (seq == 128 || seq == 512)
        snprintf(name, len, "%s", seq == 128 ? "bert-large" : "bert-large-phase2");
    else
        snprintf(name, len, "bert-large-%d", seq);
}

/* Fills row (the table's words) and checks every field; the run's configuration too. */
static int read_fields(const struct prow *r, struct dtv_pubrow *row, struct dtv_run *run,
                       int *seq, struct dt_error *err)
{
    static const char *const precisions[] = {"fp32", "tf32", "amp", NULL};
    static const enum dt_precision prec_of[] = {DT_FP32, DT_TF32, DT_FP16};
    static const char *const models[] = {"resnet50", "bert-large", NULL};
    static const char *const units[] = {"img/s", "seq/s", NULL};
    int prec, model, unit, rc;
    if (!*framework_of(r->f[P_SOURCE]))
        return dt_fail(err, DT_EINPUT, r->path, r->line, r->col[P_SOURCE],
                       "source: '%s' names no framework (-PT-, -MX-, -TF-)", r->f[P_SOURCE]);
    if ((rc = row_int(r, P_GPUS, 1, 4096, false, &row->gpus, err)) ||
        (rc = row_word(r, P_MODEL, models, &model, err)) ||
        (rc = row_word(r, P_PRECISION, precisions, &prec, err)) ||
        (rc = row_int(r, P_BATCH, 1, 1 << 20, true, &run->batch, err)) ||
        (rc = row_int(r, P_SEQ, 1, 1 << 20, true, seq, err)) ||
        (rc = row_int(r, P_ACCUM, 1, 1 << 16, false, &run->opt.accumulate, err)) ||
        (rc = row_word(r, P_UNIT, units, &unit, err)))
        return rc;
    char *end;
    errno = 0;
    row->throughput = strtod(r->f[P_THROUGHPUT], &end);
    if (!*r->f[P_THROUGHPUT] || *end || errno || !(row->throughput > 0) ||
        !isfinite(row->throughput))
        return dt_fail(err, DT_EINPUT, r->path, r->line, r->col[P_THROUGHPUT],
                       "throughput: expected a positive number (the unit is its own column), "
                       "found '%s'", r->f[P_THROUGHPUT]);
    if (unit != model)
        return dt_fail(err, DT_EINPUT, r->path, r->line, r->col[P_UNIT],
                       "unit: %s is measured in %s", models[model], units[model]);
    run->opt.precision = prec_of[prec];
    snprintf(row->source, sizeof row->source, "%.23s", r->f[P_SOURCE]);
    snprintf(row->framework, sizeof row->framework, "%s", framework_of(r->f[P_SOURCE]));
    snprintf(row->system, sizeof row->system, "%.31s", r->f[P_SYSTEM]);
    snprintf(row->gpu, sizeof row->gpu, "%.15s", r->f[P_GPU]);
    snprintf(row->device, sizeof row->device, "%s",
             strncmp(row->gpu, "A100", 4) == 0 ? "a100" : "v100");
    snprintf(row->precision, sizeof row->precision, "%s", precisions[prec]);
    snprintf(row->unit, sizeof row->unit, "%s", units[unit]);
    if (model == 0)
        snprintf(run->model_name, sizeof run->model_name, "resnet50-imagenet");
    else
        bert_model(*seq, run->model_name, sizeof run->model_name);
    return DT_OK;
}

/* Why a well-formed row cannot be simulated, or "" when it can (its plan is then built). */
static int simulable(struct dtv_runset *set, const struct prow *r, struct dtv_run *run, int seq,
                     int nodes, char *why, size_t len, struct dt_error *err)
{
    char path[1024];
    why[0] = '\0';
    if (!run->batch) {
        snprintf(why, len, "no batch per GPU given");
        return DT_OK;
    }
    if (strcmp(r->f[P_MODEL], "bert-large") == 0 && seq != 128 &&
        dt_find_data_file("models", run->model_name, path, sizeof path)) {
        snprintf(why, len, "%d-token sequences: no model file %s", seq, run->model_name);
        return DT_OK;
    }
    int rc = dtv_runset_model(set, run->model_name, r->path, r->line, r->col[P_MODEL],
                              &run->model, err);
    if (!rc)
        rc = dtv_runset_topo(set, run->topo_name, nodes, run->ranks / nodes, r->path, r->line,
                             r->col[P_SYSTEM], &run->topo, err);
    if (rc)
        return rc;
    struct dt_error perr;
    dt_error_clear(&perr);
    if (dtv_run_finish(run, 0, &perr)) { /* the simulator's limit, not the table's fault */
        snprintf(why, len, "%.390s", perr.msg);
        dt_plan_destroy(run->plan);
        run->plan = NULL;
    }
    return DT_OK;
}

/* The gradient allreduce as NVIDIA's scripts for each row run it (README "Per-framework
 * gradient buckets"): ResNet-50 in PyTorch under DistributedDataParallel, whose default
 * bucket_cap_mb = 25 (MiB in its code) starts a bucket's allreduce as soon as backward has
 * filled it; MXNet and TensorFlow under Horovod, whose Tensor Fusion batches the ready
 * gradients into its fusion buffer, 64 MB by default (HOROVOD_FUSION_THRESHOLD, docs
 * "Tensor Fusion"; DLE's TensorFlow runtime/runner.py imports horovod.tensorflow), taken as
 * the bucket (the fullest a fused allreduce gets). BERT (run_pretraining.py with
 * allreduce_post_accumulation, on in run_pretraining.sh) allreduces all gradients once after
 * the accumulated step: no buckets. One GPU: nothing to allreduce. */
static double framework_bucket_bytes(const struct dtv_pubrow *row, int seq)
{
    if (row->gpus <= 1 || seq)
        return 0;
    return strcmp(row->framework, "pytorch") == 0 ? 25.0 * 1024 * 1024 : 64.0 * 1024 * 1024;
}

/* Whether a row's gradients are fp32 on the wire although its compute is amp (fp16): where
 * the framework's mixed precision keeps the parameters in fp32, so that their gradients and
 * the allreduce of them are fp32. PyTorch ResNet-50 (DLE-PT-RN50 at 5843f4e5): the forward
 * runs under torch.cuda.amp.autocast and main.py builds a GradScaler, the model is never
 * cast (PyTorch's AMP docs: "You should not call .half() on your model(s) ... when using
 * autocasting", the model is created "in default precision"), so each .grad is fp32 and DDP
 * allreduces fp32. TensorFlow ResNet-50 (DLE-TF-RN50 at 9de48bc9): --amp sets
 * TF_ENABLE_AUTO_MIXED_PRECISION_GRAPH_REWRITE, whose rewrite casts ops to fp16 and keeps the
 * variables fp32 (NVIDIA's "Training With Mixed Precision" guide: the automatic mixed
 * precision graph rewrite keeps fp32 master weights as the variables); Horovod's
 * DistributedOptimizer there has no fp16 compression, so it allreduces the fp32 gradients.
 * Not MXNet: DLE's MxNet runner passes --dtype float16 without --amp, so models.py casts the
 * network to float16 (net.cast) and the multi_precision optimizer holds the fp32 masters:
 * Horovod allreduces fp16 gradients. Not BERT: run_pretraining.sh (DLE-PT-BERT at a07d20a1)
 * passes --allreduce_post_accumulation_fp16 by default, with which run_pretraining.py calls
 * model.half() under --fp16 (FusedLAMBAMP keeps the fp32 masters): DDP allreduces fp16. */
static bool framework_grads_fp32(const struct dtv_pubrow *row, const struct dtv_run *run,
                                 int seq)
{
    return run->opt.precision == DT_FP16 && !seq &&
           (strcmp(row->framework, "pytorch") == 0 || strcmp(row->framework, "tensorflow") == 0);
}

/* Whether a row's framework runs each ReLU as its own kernel, a pass over the activation
 * forward and another backward, where dtsim's GPU default fuses it into the kernel before it
 * (dt_op_fused). PyTorch ResNet-50 (DLE-PT-RN50, image_classification/models/resnet.py): the
 * bottleneck calls self.bn1, then self.relu, a separate nn.ReLU module, and "out +=
 * residual" before the last relu, in eager mode (no script or compiler between them): each
 * is its own kernel. MXNet ResNet-50 (DLE-MX-RN50 at 1bd98ac3, runner): for --dtype float16
 * it passes "--fuse-bn-relu 1 --fuse-bn-add-relu 1" (models.py: the batch norm's cuDNN
 * kernel applies the ReLU, BatchNormAddRelu the residual add and the ReLU), for float32
 * neither, so models.py's batchnorm_relu is a BatchNorm then an Activation. TensorFlow
 * ResNet-50 (DLE-TF-RN50) runs under XLA, which fuses elementwise ops into their producer's
 * kernel: fused. BERT's activations stay fused (not checked here). */
static bool framework_unfused_activations(const struct dtv_pubrow *row, const struct dtv_run *run,
                                          int seq)
{
    if (seq)
        return false;
    if (strcmp(row->framework, "pytorch") == 0)
        return true;
    return strcmp(row->framework, "mxnet") == 0 && run->opt.precision != DT_FP16;
}

/* Whether a row's framework keeps ResNet-50's activations in NCHW, so that a tensor-core
 * convolution transposes them (dt_op_layout_bytes; on fp32 units, the V100's fp32 rows, cuDNN
 * runs NCHW natively). PyTorch (DLE-PT-RN50, configs.yml): "memory_format: nhwc" for the AMP
 * configurations only, the TF32 and FP32 ones keep main.py's default, nchw. MXNet
 * (DLE-MX-RN50 at 1bd98ac3, runner): "--conv-layout NHWC --batchnorm-layout NHWC
 * --pooling-layout NHWC" for --dtype float16 only; float32 (the A100's tf32 rows) keeps
 * train.py's defaults, NCHW. TensorFlow (DLE-TF-RN50, utils/cmdline_helper.py): data_format
 * NCHW, under XLA, whose GPU layout assignment (gpu_layout_assignment.cc, TensorFlow 1.15)
 * picks NHWC for fp16 convolutions on Volta and later and NCHW otherwise. So every amp row
 * runs NHWC and every fp32 and tf32 row NCHW. BERT has no convolutions. */
static bool framework_conv_nchw(const struct dtv_run *run, int seq)
{
    return !seq && run->opt.precision != DT_FP16;
}

static int read_row(struct dtv_runset *set, const struct prow *r, struct dtv_published *pub,
                    struct dt_error *err)
{
    if (set->n >= DTV_PUB_MAX_ROWS || pub->n_skipped >= DTV_PUB_MAX_ROWS)
        return dt_fail(err, DT_EINPUT, r->path, r->line, 0, "more than %d rows",
                       DTV_PUB_MAX_ROWS);
    struct dtv_run *run = dtv_runset_new_run(set, r->path, r->line);
    if (!run)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    struct dtv_pubrow *row = &pub->row[set->n];
    memset(row, 0, sizeof *row);
    int seq = 0, nodes = 1, rc;
    if ((rc = read_fields(r, row, run, &seq, err)) ||
        (rc = row_topology(r, row->gpus, run->topo_name, sizeof run->topo_name, &nodes, err)))
        return rc;
    /* NCCL's allreduce (sequential on 1 GPU). Across nodes NCCL runs one ring per channel,
     * each crossing a node boundary on another GPU's NIC, so every NIC of a DGX carries a
     * share; a flat ring would cross on one. rail-ring moves the same bytes per NIC (each
     * NIC 2 (n - 1) / n of the gradients / g over n nodes) with every NIC busy. */
    run->strategy = nodes > 1 ? DT_STRAT_ALLREDUCE_RAIL_RING : DT_STRAT_ALLREDUCE_RING;
    run->ranks = row->gpus;
    run->opt.bucket_bytes = framework_bucket_bytes(row, seq);
    if (framework_grads_fp32(row, run, seq)) {
        run->opt.grad_precision = DT_FP32;
        run->opt.grad_precision_given = true;
    }
    run->unfused_activations = framework_unfused_activations(row, run, seq);
    run->conv_nchw = framework_conv_nchw(run, seq);
    snprintf(run->host, sizeof run->host, "NVIDIA %s, %s (%s)", r->f[P_SYSTEM], row->gpu,
             row->source);
    struct dtv_pubskip *skip = &pub->skipped[pub->n_skipped];
    if ((rc = simulable(set, r, run, seq, nodes, skip->why, sizeof skip->why, err)))
        return rc;
    if (skip->why[0]) {
        skip->line = r->line;
        pub->n_skipped++;
        return DT_OK;
    }
    /* the measured step: its samples at the published rate; an epoch of the model's dataset
     * (ImageNet for ResNet-50), one step for BERT (pre-training is counted in steps) */
    run->iter_s = run->global_batch / row->throughput;
    long samples = run->model->dataset_samples;
    run->iters_per_epoch = strcmp(row->unit, "img/s") == 0 && samples > 0
                               ? (samples + run->global_batch - 1) / run->global_batch : 1;
    run->epoch_s = run->iter_s * run->iters_per_epoch;
    /* "mxnet DGX-2 V100-32GB x16 fp32 b128", BERT: "... b256x32 bert-128" */
    char accum[32] = "", bert[32] = "";
    if (run->opt.accumulate > 1)
        snprintf(accum, sizeof accum, "x%d", run->opt.accumulate);
    if (seq)
        snprintf(bert, sizeof bert, " bert-%d", seq);
    snprintf(run->label, sizeof run->label, "%s %s %s x%d %s b%d%s%s", row->framework,
             row->system, row->gpu, row->gpus, row->precision, run->batch, accum, bert);
    set->n++;
    return DT_OK;
}

static int read_header(char **f, const int *col, int n, const char *path, int line,
                       struct dt_error *err)
{
    if (n != N_COLS)
        return dt_fail(err, DT_EINPUT, path, line, 0, "%d columns where the table has %d",
                       n, N_COLS);
    for (int k = 0; k < N_COLS; k++)
        if (strcmp(f[k], header[k]) != 0)
            return dt_fail(err, DT_EINPUT, path, line, col[k], "column %d is '%s', expected "
                           "'%s'", k + 1, f[k], header[k]);
    return DT_OK;
}

bool dtv_published_is(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    bool is = false;
    while (f && fgets(line, sizeof line, f))
        if (line[0] != '#') {
            is = strncmp(line, "source,system,gpu,", 18) == 0;
            break;
        }
    if (f)
        fclose(f);
    return is;
}

int dtv_published_load(struct dtv_runset *set, const char *path, struct dtv_published *pub,
                       struct dt_error *err)
{
    char found[1024];
    if (dt_find_data_file("validate/data", path, found, sizeof found))
        snprintf(found, sizeof found, "%s", path);
    FILE *f = dtv_open_input(found, "the published GPU table (gpu-published.csv)", err);
    if (!f)
        return DT_EINPUT;
    memset(pub, 0, sizeof *pub);
    char line[4096], *fields[64];
    int cols[64], lineno = 0, rc = DT_OK;
    bool header_seen = false;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\r\n")] = '\0';
        int bad = 0, n = dtv_split_csv(line, fields, cols, 64, &bad);
        if (n < 0)
            rc = dt_fail(err, DT_EINPUT, found, lineno, bad, "%s", dtv_csv_why(n));
        else if (!header_seen)
            rc = read_header(fields, cols, n, found, lineno, err), header_seen = true;
        else if (n != N_COLS)
            rc = dt_fail(err, DT_EINPUT, found, lineno, 0, "%d fields where the header has "
                         "%d", n, N_COLS);
        else
            rc = read_row(set, &(struct prow){found, lineno, fields, cols}, pub, err);
    }
    fclose(f);
    if (!rc && set->n == 0)
        rc = dt_fail(err, DT_EINPUT, found, 0, 0, "no row the simulator can run");
    return rc;
}

double dtv_published_rate(const struct dtv_run *run, double iter_s)
{
    return iter_s > 0 ? run->global_batch / iter_s : 0;
}

/* NVIDIA's published training throughput (validate/data/gpu-published.csv) as measured runs:
 * each row becomes a run of the project's files (system -> topology, reshaped to the row's
 * GPUs; resnet50 -> resnet50-imagenet, bert-large at 128 tokens -> bert-large; amp -> fp16
 * mixed precision; ring allreduce, the frameworks' NCCL data parallelism; the row's batch per
 * GPU and gradient-accumulation steps), whose measured iteration is the step's samples over
 * the published throughput. The mapping is validate/README.md's.
 *
 * A row the file gets wrong (a field that is not what the header says) is an error at its
 * file:line:column. A well-formed row that the simulator cannot run today (a precision the
 * plans do not honour yet, a sequence length without a model file, no batch given) is kept
 * out of the set and listed with the reason, so that every report says what it left out. */
#ifndef DTV_PUBLISHED_H
#define DTV_PUBLISHED_H

#include "runs.h"

#define DTV_PUB_MAX_ROWS 512

/* What a run of the set is, besides its configuration. */
struct dtv_pubrow {
    char source[24];        /* DLE-PT-RN50, DLE-MX-RN50, DLE-TF-RN50, DLE-PT-BERT */
    char framework[16];     /* pytorch, mxnet, tensorflow */
    char device[8];         /* v100, a100: the calibration it belongs to */
    char system[32], gpu[16], precision[8];
    int gpus;
    double throughput;      /* published, samples/s */
    char unit[8];           /* img/s, seq/s */
};

struct dtv_pubskip {
    int line;
    char why[400];
};

struct dtv_published {
    struct dtv_pubrow row[DTV_PUB_MAX_ROWS];    /* row[i] describes set->runs[i] */
    int n_skipped;
    struct dtv_pubskip skipped[DTV_PUB_MAX_ROWS];
};

/* Whether path's header is the published table's (source,system,gpu,...). */
bool dtv_published_is(const char *path);

/* Loads the table into an empty set; DT_EINPUT at file:line:column for a malformed row. */
int dtv_published_load(struct dtv_runset *set, const char *path, struct dtv_published *pub,
                       struct dt_error *err);

/* The throughput a prediction of run's iteration gives (samples per step / iteration). */
double dtv_published_rate(const struct dtv_run *run, double iter_s);

#endif

/* A trainable network built from a struct dt_model, on the CPU kernels of layers.h.
 *
 * Memory, allocated once by dtk_net_create:
 *   params   model->total_params floats, laid out by each layer's param_offset (dt/model.h);
 *   grads    the same size and layout;
 *   opt      2 x total_params: Adam's m then v (SGD's momentum buffer is m);
 *   state    model->total_state_floats: batchnorm running mean then running variance per layer;
 *   acts     every layer's output and output gradient for max_batch samples, plus what each
 *            layer keeps for backward (argmax, dropout mask, normalisation statistics, caches);
 *   work     scratch for the largest layer (im2col columns and the like).
 * A flatten layer is a view: its output and gradient share its input's memory.
 *
 * Whole-batch use: dtk_net_forward, then dtk_net_loss_backward, then an optimizer step over
 * dtk_net_params/dtk_net_grads. Layer-by-layer use (the distributed executor walks its plan):
 *   dtk_net_begin_forward, dtk_net_forward_layer for i = 0..n-1,
 *   dtk_net_zero_grads (once per step, or once per accumulation of micro-batches),
 *   dtk_net_begin_backward, dtk_net_backward_layer for i = n-1..0.
 * Every layer-by-layer call takes a row range [b0, b0 + nb) of the batch, so that micro-batches
 * (GPipe, 1F1B, gradient accumulation) keep their own activations side by side; the
 * whole-batch calls use b0 = 0. Layer i's backward may run once every layer that reads its
 * output has run its own backward for those rows (reverse order guarantees it); parameter
 * gradients of layer i are final after dtk_net_backward_layer(i) for every micro-batch, which
 * is when its slice [param_offset, param_offset + params) of the gradients can be reduced.
 *
 * Loss: the classifier's last layer is normally softmax, fused with cross-entropy in training
 * (the gradient (p - onehot)/denom goes straight to the softmax's input; over the channels of a
 * (C,H,W) output, per pixel). A last sigmoid is fused with binary cross-entropy (Keras' single
 * sigmoid output for 2 classes). Any other last layer gives logits for softmax cross-entropy
 * (from_logits = True). Labels are class indices, dtk_net_labels_per_sample per sample. */
#ifndef DTK_NET_H
#define DTK_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "dt/error.h"
#include "dt/model.h"
#include "dt/plan.h"
#include "init.h"
#include "layers.h"
#include "optim.h"
#include "rng.h"

struct dtk_net;

/* Builds the network for batches of up to max_batch samples, initialises its parameters with
 * `init` from `seed` (init.h), running variances to 1 and means to 0. The model must outlive
 * the net. On failure *out is NULL and err says which layer (DT_EINPUT) or DT_ENOMEM. */
int dtk_net_create(const struct dt_model *model, int max_batch, enum dtk_init init,
                   uint64_t seed, struct dtk_net **out, struct dt_error *err);
void dtk_net_destroy(struct dtk_net *net);

/* What one rank of a plan holds (a pipeline stage): the plan's layer view of it. */
struct dtk_net_view {
    int rows;                           /* activation rows: slots x slot rows */
    const struct dt_layer_view *layers; /* NULL: every layer, parameters at the model's offsets */
    long n_params;                      /* with layers: the rank's packed parameters */
    long n_grads;                       /* with layers: its gradients when not n_params
                                           (ZeRO-2: a layer's grad_offset says where) */
    const struct dt_param_range *owned; /* with layers: ZeRO-3's ranges of the view's
                                           packed parameters the rank owns, the only ones it
                                           initialises (the layers' staging is gathered) */
    int n_owned;
    int opt_moments;                    /* optimizer floats per parameter the net allocates
                                           (dtk_net_create: 2; a plan's executor allocates its
                                           own: 0) */
    enum dt_dtype dtype;                /* storage of parameters, gradients, outputs and what
                                           layers keep: DT_TYPE_F32 (0), or DT_TYPE_BF16 /
                                           DT_TYPE_F16 for mixed precision */
    bool grads_f32;                     /* mixed precision: the gradients stay float32
                                           (--grad-precision fp32, dt_plan_grad_dtype) */
    const struct dt_recompute_layout *recompute; /* --recompute: the layers whose outputs and
                                           kept state share the workspace (NULL: none) */
    const struct dt_dact_layout *dact;  /* the output gradients that share one slot's pool
                                           (dt/plan.h; NULL: each layer its own, all rows) */
    int slot_rows;                      /* with dact: the rows of one slot */
    int ws_rows;                        /* with recompute: the workspace's rows (row b0 of
                                           a layer there at b0 mod ws_rows) */
};
/* Builds the network of one rank: parameters and gradients of the layers it runs (packed at
 * the view's offsets, initialised as the whole model would be, so that stages start from the
 * one-rank weights), outputs and gradients of the layers it holds, what its layers keep for
 * backward, for v->rows rows. Sizes are the core's (dt_layer_keep, dt_layer_act_floats), so
 * dtk_net_bytes equals the plan's buffer table for these buffers. A layer whose gradient is
 * received (dact_received) is never zeroed by its readers: the plan zeroes it (ZERO). */
int dtk_net_create_view(const struct dt_model *model, const struct dtk_net_view *v,
                        enum dtk_init init, uint64_t seed, struct dtk_net **out,
                        struct dt_error *err);
/* Selects training (dropout, batch statistics) or inference for the layers that follow. */
void dtk_net_set_train(struct dtk_net *net, bool train);

const struct dt_model *dtk_net_model(const struct dtk_net *net);
int dtk_net_max_batch(const struct dtk_net *net);
long dtk_net_n_params(const struct dtk_net *net);
long dtk_net_n_grads(const struct dtk_net *net);
float *dtk_net_params(struct dtk_net *net);
float *dtk_net_grads(struct dtk_net *net);
float *dtk_net_opt_m(struct dtk_net *net);
float *dtk_net_opt_v(struct dtk_net *net);
float *dtk_net_state(struct dtk_net *net);
/* Mixed precision (a view's dtype of 2 bytes): parameters and gradients are 2-byte storage,
 * dtk_net_params/grads/act/dact are NULL, and each layer op converts what it touches into a
 * float32 stage (kernel scratch, in dtk_net_work_bytes), runs the float32 kernels and rounds
 * its results back to nearest even (exec/cpu/half.h). */
enum dt_dtype dtk_net_dtype(const struct dtk_net *net);
uint16_t *dtk_net_params16(struct dtk_net *net);
/* The 2-byte gradients; under mixed precision with the view's grads_f32 NULL, the float32
 * ones at dtk_net_grads (the kernels then accumulate into them directly). */
uint16_t *dtk_net_grads16(struct dtk_net *net);
/* Layer i's 2-byte output and its gradient (what tensor-parallel sums and pipeline stages
 * send and receive under mixed precision; NULL as dtk_net_dact is). */
uint16_t *dtk_net_act16(struct dtk_net *net, int i);
uint16_t *dtk_net_dact16(struct dtk_net *net, int i);
/* Floats per sample of layer i's output; layer -1 is the model's input. */
long dtk_net_out_floats(const struct dtk_net *net, int i);
/* Layer i's output (max_batch x dtk_net_out_floats) and its gradient (NULL when no layer
 * before or at i is trainable: nothing needs it). A pipeline stage receives into these. */
float *dtk_net_act(struct dtk_net *net, int i);
float *dtk_net_dact(struct dtk_net *net, int i);
/* Where element elem of layer i's gradient rows (row b0 of the batch at b0 x its output
 * floats) is in dtk_net_dact's storage: a pooled gradient holds one slot (dt/plan.h). */
long dtk_net_dact_offset(const struct dtk_net *net, int i, long elem);
/* Where element elem of layer i's output (as rows of the batch) is in its storage: an output
 * in the recomputation workspace holds ws_rows rows. */
long dtk_net_act_offset(const struct dtk_net *net, int i, long elem);
/* Dropout masks are counter-based: the mask of an element is a function of (seed, step, layer,
 * the sample's row in the global batch, the element's place in the layer's output), so every
 * strategy draws the one-rank run's masks whatever rank, micro-batch or recomputation draws
 * them. first_row: this replica's first row in the global batch (set once, default 0); step:
 * the training step (set before each). The creation seed is the default seed. */
void dtk_net_set_dropout(struct dtk_net *net, uint64_t seed, long first_row);
void dtk_net_set_step(struct dtk_net *net, long step);
/* The forwards that follow run rows b0.. of the buffers, which are rows row0.. of the step's
 * batch (a micro-batch in its slot): dropout draws by the batch's rows. Default: the same. */
void dtk_net_set_batch_rows(struct dtk_net *net, int b0, int row0);
/* Batchnorm running-statistics momentum, PyTorch's convention (weight of the new batch).
 * Default: 0.01 with DTK_INIT_GLOROT (Keras' momentum 0.99), 0.1 with DTK_INIT_KAIMING. */
void dtk_net_set_bn_momentum(struct dtk_net *net, float momentum);
/* Bytes of the allocations above but the kernels' scratch, all together. */
double dtk_net_bytes(const struct dtk_net *net);
/* Bytes of the kernels' scratch (im2col columns and the like: not a buffer of the plan; it
 * depends on the kernels' thread count). */
double dtk_net_work_bytes(const struct dtk_net *net);

/* Starts the forward pass of rows [b0, b0 + nb) of the batch. x is the batch's input from row
 * 0 (each row dtk_net_out_floats(net, -1) floats; token models give token ids as floats); rows
 * [b0, b0 + nb) of it are read, by the forward and by the first layer's backward, so x must
 * stay valid until that backward is done. train selects dropout and batch statistics. A
 * pipeline stage that does not run the first layer may pass x = NULL.
 * DT_EINPUT when b0 + nb exceeds max_batch or a token id is outside the vocabulary. */
int dtk_net_begin_forward(struct dtk_net *net, const float *x, int b0, int nb, bool train,
                          struct dt_error *err);
void dtk_net_forward_layer(struct dtk_net *net, int i, int b0, int nb);
/* Runs layer i's forward again for rows [b0, b0 + nb), before the backward that needs what it
 * did not keep (--recompute): a dropout layer draws the mask it drew the first time for these
 * rows (the stream's state then is saved per layer and first row), batchnorm leaves its
 * running statistics alone, so that the outputs are the first forward's, bit for bit. */
void dtk_net_recompute_layer(struct dtk_net *net, int i, int b0, int nb);
/* Whole batch: begin_forward(x, 0, B) and every layer. */
int dtk_net_forward(struct dtk_net *net, const float *x, int B, bool train, struct dt_error *err);

/* Zeroes the parameter gradients. */
void dtk_net_zero_grads(struct dtk_net *net);
/* Starts the backward pass of rows [b0, b0 + nb) on the rank that holds the last layer:
 * computes the mean cross-entropy of those rows (into *loss, may be NULL) and sets the gradient
 * of the logits to (p - onehot) / denom (denom = nb for the mean over this batch, the full
 * batch size when micro-batches add up to one step). DT_EINPUT on a bad label.
 * Activation gradients need no explicit zeroing: dtk_net_backward_layer(i) zeroes the rows of
 * each input gradient of which layer i is the last reader (the first to write it in reverse
 * order), just before accumulating into it. A pipeline stage that receives the gradient of a
 * boundary layer from another rank writes it into dtk_net_dact rows (overwriting) before
 * running its own backward, and does not call this function. */
int dtk_net_begin_backward(struct dtk_net *net, const int *labels, int b0, int nb, double denom,
                           double *loss, struct dt_error *err);
void dtk_net_backward_layer(struct dtk_net *net, int i, int b0, int nb);
/* The vocabulary-parallel loss's first two parts on rows [b0, b0 + nb) (plan.h's
 * DT_LOSS_MAX, sums false: each token's largest logit of this shard; DT_LOSS_SUMS: its
 * target's logit and sum of exponentials) into the last layer's kept statistics, which the
 * tensor group allreduces before the next part; dtk_net_begin_backward is the third. Labels
 * from row b0 on, as dtk_net_begin_backward reads them. */
void dtk_net_vocab_stats(struct dtk_net *net, bool sums, const int *labels, int b0, int nb);
/* What layer i keeps (float32, or its 2-byte storage under mixed precision): a KEEP region's
 * buffer. */
void *dtk_net_keep(struct dtk_net *net, int i);
/* The mean loss of rows [b0, b0 + nb) after their forward, with no gradient: evaluation,
 * whose rows may be more than a pooled gradient holds. DT_EINPUT on a bad label. */
int dtk_net_eval_loss(struct dtk_net *net, const int *labels, int b0, int nb, double *loss,
                      struct dt_error *err);
/* Whole batch after dtk_net_forward: zero grads, begin_backward(labels, 0, B, B) and every
 * layer in reverse. Returns the mean loss, or NaN (and no gradient) on a label out of range. */
double dtk_net_loss_backward(struct dtk_net *net, const int *labels, int B);

/* Labels per sample: 1 for a (classes) output, T for (T, classes), H*W for a per-pixel
 * (classes, H, W) softmax, the output size for a sigmoid output (labels 0 or 1). */
long dtk_net_labels_per_sample(const struct dtk_net *net);
/* Correct predictions (arg max of the last output) among rows [0, B) after a forward pass;
 * dtk_net_accuracy is that count over the number of labelled rows. */
long dtk_net_correct(const struct dtk_net *net, const int *labels, int B);
/* The same for rows [b0, b0 + B) (labels from row 0, as dtk_net_begin_backward reads them). */
long dtk_net_correct_rows(const struct dtk_net *net, const int *labels, int b0, int B);
double dtk_net_accuracy(const struct dtk_net *net, const int *labels, int B);

/* Optimizer steps over the whole flat buffer (step t, 1-based). */
void dtk_net_adam_step(struct dtk_net *net, const struct dtk_adam *cfg, long t);
void dtk_net_sgd_step(struct dtk_net *net, const struct dtk_sgd *cfg, long t);

/* ---- the layout, for a backend that keeps the same buffers elsewhere (exec/cuda_net.c
 * mirrors them in GPU memory and translates these host addresses into its own) ---- */

/* The net's allocations: parameters, gradients, the float arena (outputs, their gradients,
 * what layers keep), the int arena (argmax, token ids), state, optimizer moments. */
struct dtk_net_block {
    void *host;
    size_t bytes;
};
#define DTK_NET_BLOCKS 6
void dtk_net_blocks(const struct dtk_net *net, struct dtk_net_block b[DTK_NET_BLOCKS]);

/* Layer i as the CPU kernels see it (full-batch pointers: rows from b0 are at + b0 x row). */
struct dtk_net_layer {
    bool runs, holds, alias, need;   /* alias: a flatten view of its input's buffers */
    long out_sz, aux_row, iaux_row;  /* floats per sample: output, kept; ints kept */
    float *act, *dact, *aux;         /* dact NULL when no gradient is needed */
    int *iaux;
    const float *w;                  /* its parameters (a tied layer: its table's) */
    float *dw;                       /* their gradients */
    struct dtk_conv_dims cd;         /* conv/pool geometry (B = the net's rows) */
    int rows, cols, units;           /* dense: rows x cols inputs per sample, units outputs */
    int shard_kind, shard_index;     /* tensor parallelism (dt/tensor.h) */
};
void dtk_net_layer_info(struct dtk_net *net, int i, struct dtk_net_layer *out);
/* dtk_net_begin_backward's checks of its rows, denominator and labels (DT_EINPUT). */
int dtk_net_check_loss(const struct dtk_net *net, const int *labels, int b0, int nb,
                       double denom, struct dt_error *err);
/* Which output gradients a backend zeroes before its kernels add into them, each at its
 * first writer in the backward order: layer i's backward (the owners of the gradient rows it
 * writes first, each once, into owners; returns how many), or the loss (whether
 * dtk_net_begin_backward zeroes layer i's rows). */
int dtk_net_first_writes(const struct dtk_net *net, int i, int owners[DT_MAX_INPUTS]);
bool dtk_net_loss_zeroes(const struct dtk_net *net, int i);

/* The loss on the last output (see the head of this file). */
enum dtk_loss_kind { DTK_LOSS_SOFTMAX, DTK_LOSS_SIGMOID, DTK_LOSS_LOGITS };
struct dtk_net_loss {
    enum dtk_loss_kind kind;
    int classes, groups;  /* classes per softmax group, groups per sample (T tokens) */
    long spread;          /* classes lie this far apart (H*W per pixel; 1: the last axis) */
    float *probs;         /* DTK_LOSS_LOGITS: the probabilities' rows (else the last output) */
};
void dtk_net_loss_info(const struct dtk_net *net, struct dtk_net_loss *out);

#endif

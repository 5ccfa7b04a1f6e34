/* A neural network read from a models/ YAML file: layers with inferred shapes, parameter counts,
 * FLOPs and activation memory per sample. dtsim costs it; dtexec allocates and trains it,
 * from the same numbers (one flat parameter buffer laid out by param_offset).
 *
 * Conventions (shared with exec/ kernels):
 * - shapes exclude the batch; images are (C,H,W), sequences (T,D), flat vectors (N).
 * - layers are in execution order and only read earlier layers (in[k] < own index).
 * - FLOPs count a multiply-add as 2. Backward = backward-data + backward-weights; the first
 *   trainable layer (and anything before it) needs no backward-data.
 * - parameters per layer, in this order in the flat buffer (floats):
 *     dense      W[units][in] (row-major), b[units]
 *     conv2d     W[filters][in_c/groups][kh][kw], b[filters]
 *     batchnorm  gamma[C], beta[C]   (running mean/var are state, not parameters; counted in
 *                                     state_floats, as PyTorch does: they are not trained)
 *     layernorm  gamma[D], beta[D]
 *     embedding  table[vocab][dim], then pos[positions][dim] and type[token_types][dim] when
 *                present (BERT: the three lookups are summed)
 *     conv2d_transpose  W[in_c][filters/groups][kh][kw], b[filters]  (PyTorch layout)
 *     lstm       W_x[4H][in], W_h[4H][H], b[4H] (Keras layout: gates i,f,c,o; one bias)
 *     attention  Wq,Wk,Wv,Wo each [D][D] then bq,bk,bv,bo each [D]
 *     attention_core  none (its q|k|v input comes from a dense layer of 3D units, its output
 *                goes to a dense output projection, as llm.c and Megatron-LM cut them)
 *     dense tied to an embedding  none: W is the embedding's token table [vocab][dim]
 *                (GPT-2's LM head); its gradient is added to the table's
 */
#ifndef DT_MODEL_H
#define DT_MODEL_H

#include <stdbool.h>
#include <stdio.h>

#include "dt/error.h"

enum dt_layer_kind {
    DT_L_CONV2D,
    DT_L_MAXPOOL,
    DT_L_AVGPOOL,
    DT_L_GLOBALPOOL,   /* global average pool: (C,H,W) -> (C) */
    DT_L_DENSE,        /* on (N) or on the last axis of (T,D) */
    DT_L_FLATTEN,
    DT_L_DROPOUT,
    DT_L_RELU,
    DT_L_TANH,
    DT_L_SIGMOID,
    DT_L_GELU,
    DT_L_SOFTMAX,      /* last layer of a classifier: fused with cross-entropy in training;
                          over the channels of (C,H,W) (per pixel), the last axis otherwise */
    DT_L_BATCHNORM,
    DT_L_LAYERNORM,
    DT_L_ADD,          /* residual: elementwise sum of 2+ inputs of equal shape */
    DT_L_CONCAT,       /* channel concat of 2+ (C,H,W) inputs of equal H,W; on (T,D) and (N)
                          along the last axis */
    DT_L_UPSAMPLE,     /* nearest-neighbour upsampling by an integer factor */
    DT_L_CONV2D_TRANSPOSE, /* U-Net's up-convolution */
    DT_L_EMBEDDING,    /* (T) token ids -> (T,D) */
    DT_L_LSTM,         /* (T,D) -> (T,H) or (H) */
    DT_L_ATTENTION,    /* multi-head self-attention (T,D) -> (T,D) */
    DT_L_SEQPOOL,      /* (T,D) -> (D): take the first token (BERT's [CLS]) */
    DT_L_ATTENTION_CORE, /* (T,3D) q|k|v -> (T,D): softmax(q k^T / sqrt(D/heads)) v per head,
                            optionally causal; no parameters */
    DT_L_KIND_COUNT
};

/* Name used in YAML ("conv2d", "maxpool", ...). */
const char *dt_layer_kind_name(enum dt_layer_kind kind);

struct dt_shape {
    int rank;    /* 1, 2 or 3 */
    long d[3];   /* (N) | (T,D) | (C,H,W) */
};
long dt_shape_size(const struct dt_shape *s);
void dt_shape_format(const struct dt_shape *s, char *buf, size_t len); /* "(32, 26, 26)" */

#define DT_MAX_INPUTS 4

/* Limits the loader enforces, so that no file can overflow a count or exhaust memory. */
#define DT_MODEL_MAX_LAYERS 65536L      /* after activation expansion */
#define DT_MODEL_MAX_ELEMS (1L << 31)   /* floats in one tensor of one sample */
#define DT_MODEL_MAX_PARAMS (1L << 40)  /* trainable floats, whole model */
#define DT_MODEL_MAX_UNITS (1L << 24)   /* units, filters, dim, vocab, input extents */
#define DT_MODEL_MAX_SAMPLES (1L << 40) /* dataset samples (dtsim's --dataset-size limit) */

struct dt_layer {
    enum dt_layer_kind kind;
    char name[64];
    int line, col;              /* where the layer was written */
    int n_in;
    int in[DT_MAX_INPUTS];      /* indices of input layers; -1 = the model's input */

    /* attributes (those that apply to the kind) */
    long units;                 /* dense units, conv filters, lstm hidden, embedding dim */
    int kh, kw, sh, sw;         /* kernel and stride (conv, pool) */
    int pad_t, pad_l, pad_b, pad_r; /* explicit padding resolved from valid/same */
    int groups;                 /* conv2d */
    bool bias;                  /* dense, conv2d (default true) */
    double rate;                /* dropout */
    int heads;                  /* attention, attention_core */
    bool causal;                /* attention_core: position t attends to positions <= t */
    bool tied;                  /* dense: W is layer tied_layer's token table (no params) */
    int tied_layer;             /* dense with tied: the embedding it reads W from */
    long vocab;                 /* embedding */
    bool return_sequences;      /* lstm */
    double eps;                 /* batchnorm, layernorm */
    int scale;                  /* upsample */
    long positions;             /* embedding: learned position table rows (0 = none) */
    long token_types;           /* embedding: token-type (segment) table rows (0 = none) */

    struct dt_shape in_shape;   /* of in[0] */
    struct dt_shape out_shape;

    long params;                /* trainable floats */
    long param_offset;          /* first float in the model's flat parameter buffer */
    long state_floats;          /* non-trained state (batchnorm running stats) */
    double fwd_flops;           /* per sample */
    double bwd_data_flops;      /* per sample; 0 where no input gradient is needed */
    double bwd_weight_flops;    /* per sample */
    double act_bytes;           /* per sample: what training keeps for backward (fp32) */
    bool needs_input_grad;
    double fwd_io_bytes;        /* per sample: activations read + written by forward */
    double bwd_io_bytes;        /* per sample: activations read + written by backward (0 if none) */
};

struct dt_model {
    char name[64];
    char path[512];
    char source[512];           /* the `source:` citation of the file */
    struct dt_shape input;
    int input_is_tokens;        /* input holds token ids (embedding first) */
    long vocab;                 /* token input: ids are < vocab (0 otherwise) */
    long classes;
    enum dt_loss {
        DT_LOSS_CLASSIFY,       /* labels come with the data (default) */
        DT_LOSS_NEXT_TOKEN      /* `loss: language_model`: per-token cross-entropy of the
                                   (T, vocab) output against the next tokens of the input */
    } loss;
    int n_layers;
    struct dt_layer *layers;
    long total_params;
    long total_state_floats;
    double fwd_flops, bwd_flops; /* per sample, totals */
    double act_bytes;            /* per sample, total */
    char dataset[64];            /* `dataset: {name: ...}`: what it trains on ("" if not given) */
    long dataset_samples;        /* its training samples (dtsim's default epoch); 0 if not given */
    double dataset_bytes;        /* its training set's size as stored and read; 0 if not given */
};

/* Loads, checks and infers the model. On failure *out is NULL and err says where. */
int dt_model_load(const char *path, struct dt_model **out, struct dt_error *err);
int dt_model_load_string(const char *name, const char *text, struct dt_model **out,
                         struct dt_error *err);
void dt_model_destroy(struct dt_model *model);

/* Whether the layer produces parameter gradients: it has parameters, or it is tied to
 * another layer's (its gradient goes there). */
bool dt_layer_trains(const struct dt_layer *l);
/* Floats of weights the layer reads: its parameters, or the tied table (vocab x dim). */
long dt_layer_weight_floats(const struct dt_model *m, const struct dt_layer *l);

/* Index of the layer called name, or -1. */
int dt_model_find_layer(const struct dt_model *model, const char *name);

/* Keras-like summary table: layer, kind, output shape, params, forward FLOPs; totals. */
/* "25557032 parameters + 53120 running statistics" (the second part only when the model
 * keeps running statistics, which are not trained but are saved and averaged). */
void dt_model_describe_params(const struct dt_model *m, char *buf, size_t len);
void dt_model_print_summary(const struct dt_model *model, FILE *out);

#endif

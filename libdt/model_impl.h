/* Internal to the model loader: the per-kind part (model_layers.c) that model.c calls for
 * each layer it reads. Not a public header. */
#ifndef DT_MODEL_IMPL_H
#define DT_MODEL_IMPL_H

#include "dt/model.h"
#include "dt/yamldoc.h"

/* What a per-kind setup needs: the layer to fill, its YAML mapping (NULL for a layer
 * expanded from `activation:`, which has no attributes) and its input shapes. */
struct dt_layer_setup {
    const struct dt_ydoc *doc;
    const struct dt_ynode *node;    /* the layer's mapping, or NULL */
    const struct dt_model *model;   /* input description (shape, tokens, vocab) */
    struct dt_layer *layer;         /* kind, name, inputs, line/col already set */
    const struct dt_shape *in[DT_MAX_INPUTS];
    const char *in_names[DT_MAX_INPUTS];
    struct dt_error *err;
};

/* Keys a layer of this kind may have (NULL-terminated), common ones included. */
const char *const *dt_layer_keys(enum dt_layer_kind kind);
/* True when the kind takes `inputs: [a, b, ...]` rather than `input: a`. */
bool dt_layer_multi_input(enum dt_layer_kind kind);
/* True when `activation:` is allowed on the kind. */
bool dt_layer_takes_activation(enum dt_layer_kind kind);

/* Reads the kind's attributes, checks them against the input shapes, and fills the output
 * shape, parameter and state counts, FLOPs (backward-data as if needed) and activation
 * bytes. Errors are located at the offending key, else at the layer. */
int dt_layer_setup(struct dt_layer_setup *s);

#endif

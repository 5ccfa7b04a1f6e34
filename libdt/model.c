/* Model loader: reads a models/ YAML file into a checked struct dt_model (format in
 * models/README.md). The per-kind shape and cost rules are in model_layers.c; this file reads
 * the top level, resolves layer names and inputs, expands `activation:` into its own layer,
 * and derives what needs a whole-model view (input gradients, parameter offsets, totals). */
#include "model_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[DT_L_KIND_COUNT + 1] = {
    [DT_L_CONV2D] = "conv2d",
    [DT_L_MAXPOOL] = "maxpool",
    [DT_L_AVGPOOL] = "avgpool",
    [DT_L_GLOBALPOOL] = "globalpool",
    [DT_L_DENSE] = "dense",
    [DT_L_FLATTEN] = "flatten",
    [DT_L_DROPOUT] = "dropout",
    [DT_L_RELU] = "relu",
    [DT_L_TANH] = "tanh",
    [DT_L_SIGMOID] = "sigmoid",
    [DT_L_GELU] = "gelu",
    [DT_L_SOFTMAX] = "softmax",
    [DT_L_BATCHNORM] = "batchnorm",
    [DT_L_LAYERNORM] = "layernorm",
    [DT_L_ADD] = "add",
    [DT_L_CONCAT] = "concat",
    [DT_L_UPSAMPLE] = "upsample",
    [DT_L_CONV2D_TRANSPOSE] = "conv2d_transpose",
    [DT_L_EMBEDDING] = "embedding",
    [DT_L_LSTM] = "lstm",
    [DT_L_ATTENTION] = "attention",
    [DT_L_SEQPOOL] = "seqpool",
    [DT_L_ATTENTION_CORE] = "attention_core",
    [DT_L_KIND_COUNT] = NULL,
};

const char *dt_layer_kind_name(enum dt_layer_kind kind)
{
    return (unsigned)kind < DT_L_KIND_COUNT ? kind_names[kind] : "?";
}

long dt_shape_size(const struct dt_shape *s)
{
    long n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->d[i];
    return n;
}

void dt_shape_format(const struct dt_shape *s, char *buf, size_t len)
{
    size_t used = 0;
    if (len == 0)
        return;
    buf[0] = '\0';
    for (int i = 0; i < s->rank && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%ld", i ? ", " : "(", s->d[i]);
    if (used < len)
        snprintf(buf + used, len - used, s->rank ? ")" : "()");
}

/* `activation:` values; "linear" adds no layer. */
static const char *const act_names[] = {"relu", "tanh", "sigmoid", "gelu", "softmax", "linear",
                                        NULL};
static const enum dt_layer_kind act_kinds[] = {DT_L_RELU, DT_L_TANH, DT_L_SIGMOID, DT_L_GELU,
                                               DT_L_SOFTMAX};

/* ---- names: an open-addressing hash table, so that 60k layers stay linear ---- */

struct name_slot {
    char name[64];
    int idx;  /* layer the name refers to */
    int line; /* where it was given */
    bool used;
};

struct names {
    struct name_slot *slots;
    size_t cap; /* a power of two, at least twice the names */
};

static size_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)h;
}

static struct name_slot *names_find(const struct names *t, const char *name)
{
    for (size_t i = name_hash(name) & (t->cap - 1);; i = (i + 1) & (t->cap - 1))
        if (!t->slots[i].used || strcmp(t->slots[i].name, name) == 0)
            return &t->slots[i];
}

/* ---- the loader ---- */

struct loader {
    const struct dt_ydoc *doc;
    struct dt_error *err;
    struct dt_model *m;
    int cap_layers;
    struct names names;
    int auto_count[DT_L_KIND_COUNT];
};

static const char *const top_keys[] = {"name", "source", "description", "input", "classes",
                                       "dataset", "loss", "layers", NULL};
static const char *const loss_names[] = {"classification", "language_model", NULL};
static const char *const input_keys[] = {"shape", "tokens", "vocab", NULL};

static int nomem(struct loader *L)
{
    return dt_fail(L->err, DT_ENOMEM, dt_ydoc_name(L->doc), 0, 0, "out of memory");
}

/* Reads a required or optional string into a fixed buffer, rejecting what does not fit. */
static int get_text(struct loader *L, const struct dt_ynode *map, const char *key, bool required,
                    char *buf, size_t len)
{
    const char *v = NULL;
    int rc = dt_yget_str(L->doc, map, key, required, &v, L->err);
    if (rc || !v)
        return rc;
    if (strlen(v) >= len)
        return dt_yfail(L->doc, dt_ymap_get(map, key), L->err, "'%s' is longer than %zu characters",
                        key, len - 1);
    snprintf(buf, len, "%s", v);
    return DT_OK;
}

static int read_input(struct loader *L, const struct dt_ynode *node)
{
    struct dt_model *m = L->m;
    int rc = dt_ycheck_map(L->doc, node, "input", input_keys, L->err);
    if (rc)
        return rc;
    const struct dt_ynode *shape = dt_ymap_get(node, "shape");
    const struct dt_ynode *tokens = dt_ymap_get(node, "tokens");
    if (!shape == !tokens)
        return dt_yfail(L->doc, shape ? tokens : node, L->err,
                        "input needs exactly one of 'shape: [C, H, W]' (or [N], [T, D]) and "
                        "'tokens: T'");
    if (tokens) {
        long t = 0;
        if ((rc = dt_ynode_long(L->doc, tokens, 1, DT_MODEL_MAX_UNITS, &t, L->err)) ||
            (rc = dt_yget_long(L->doc, node, "vocab", true, 2, DT_MODEL_MAX_UNITS, &m->vocab,
                               L->err)))
            return rc;
        m->input = (struct dt_shape){.rank = 1, .d = {t}};
        m->input_is_tokens = 1;
        return DT_OK;
    }
    if (dt_ymap_get(node, "vocab"))
        return dt_yfail(L->doc, dt_ymap_get(node, "vocab"), L->err,
                        "vocab only goes with a token input (tokens: T)");
    if ((rc = dt_ycheck_seq(L->doc, shape, "input shape", L->err)))
        return rc;
    if (shape->n < 1 || shape->n > 3)
        return dt_yfail(L->doc, shape, L->err,
                        "input shape must have 1 to 3 extents: [N], [T, D] or [C, H, W]");
    long n = 1;
    m->input.rank = (int)shape->n;
    for (size_t i = 0; i < shape->n; i++) {
        if ((rc = dt_ynode_long(L->doc, shape->items[i], 1, DT_MODEL_MAX_UNITS, &m->input.d[i],
                                L->err)))
            return rc;
        if (__builtin_mul_overflow(n, m->input.d[i], &n) || n > DT_MODEL_MAX_ELEMS)
            return dt_yfail(L->doc, shape, L->err, "input has more than %ld values per sample",
                            DT_MODEL_MAX_ELEMS);
    }
    return DT_OK;
}

/* `dataset: {name: imagenet, samples: 1281167, bytes: 147.9 GB}`: what the model trains on,
 * for dtsim's default epoch and data reading (bytes optional). */
static int read_dataset(struct loader *L, const struct dt_ynode *node)
{
    static const char *const keys[] = {"name", "samples", "bytes", NULL};
    int rc = dt_ycheck_map(L->doc, node, "dataset", keys, L->err);
    if (!rc)
        rc = get_text(L, node, "name", true, L->m->dataset, sizeof L->m->dataset);
    if (!rc)
        rc = dt_yget_long(L->doc, node, "samples", true, 1, DT_MODEL_MAX_SAMPLES,
                          &L->m->dataset_samples, L->err);
    if (!rc)
        rc = dt_yget_quantity(L->doc, node, "bytes", false, DT_UNIT_BYTES, 0, 1e18,
                              &L->m->dataset_bytes, L->err);
    return rc;
}

/* Layer names: letters, digits and _ . - /, not "input" (that is the model's input). */
static int check_name(struct loader *L, const struct dt_ynode *node, const char *name)
{
    size_t len = strlen(name);
    if (len >= sizeof L->m->layers[0].name)
        return dt_yfail(L->doc, node, L->err, "layer name is longer than %zu characters",
                        sizeof L->m->layers[0].name - 1);
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-' || c == '/'))
            return dt_yfail(L->doc, node, L->err,
                            "layer name '%s' may only use letters, digits and _ . - /", name);
    }
    if (strcmp(name, "input") == 0)
        return dt_yfail(L->doc, node, L->err,
                        "'input' names the model's input; choose another layer name");
    return DT_OK;
}

/* Makes sure name is free; where is the node to blame. */
static int name_free(struct loader *L, const struct dt_ynode *where, int line, int col,
                     const char *name)
{
    struct name_slot *slot = names_find(&L->names, name);
    if (!slot->used)
        return DT_OK;
    if (where)
        return dt_yfail(L->doc, where, L->err, "duplicate layer name '%s' (first at line %d)",
                        name, slot->line);
    return dt_fail(L->err, DT_EINPUT, dt_ydoc_name(L->doc), line, col,
                   "duplicate layer name '%s' (first at line %d)", name, slot->line);
}

static void name_add(struct loader *L, const char *name, int idx, int line)
{
    struct name_slot *slot = names_find(&L->names, name);
    snprintf(slot->name, sizeof slot->name, "%s", name);
    slot->idx = idx;
    slot->line = line;
    slot->used = true;
}

/* Resolves a reference to an earlier layer (or "input"): index, or -1 for the input. */
static int resolve(struct loader *L, const struct dt_ynode *ref, int *idx)
{
    if (ref->type != DT_Y_SCALAR)
        return dt_yfail(L->doc, ref, L->err, "expected a layer name, found a %s",
                        ref->type == DT_Y_MAP ? "mapping" : "list");
    if (strcmp(ref->value, "input") == 0) {
        *idx = -1;
        return DT_OK;
    }
    struct name_slot *slot = names_find(&L->names, ref->value);
    if (!slot->used)
        return dt_yfail(L->doc, ref, L->err,
                        "no layer named '%s' before this one (a layer may only read layers "
                        "written above it, or 'input')",
                        ref->value);
    *idx = slot->idx;
    return DT_OK;
}

static struct dt_layer *new_layer(struct loader *L)
{
    struct dt_model *m = L->m;
    if (m->n_layers == L->cap_layers) {
        int cap = L->cap_layers ? 2 * L->cap_layers : 64;
        struct dt_layer *p = realloc(m->layers, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        m->layers = p;
        L->cap_layers = cap;
    }
    struct dt_layer *l = &m->layers[m->n_layers];
    memset(l, 0, sizeof *l);
    return l;
}

static const struct dt_shape *shape_of(const struct dt_model *m, int idx)
{
    return idx < 0 ? &m->input : &m->layers[idx].out_shape;
}

/* Runs the per-kind setup of the layer just filled in (m->layers[m->n_layers]). */
static int setup(struct loader *L, const struct dt_ynode *node, struct dt_layer *l)
{
    struct dt_layer_setup s = {.doc = L->doc, .node = node, .model = L->m, .layer = l,
                               .err = L->err};
    for (int k = 0; k < l->n_in; k++) {
        s.in[k] = shape_of(L->m, l->in[k]);
        s.in_names[k] = l->in[k] < 0 ? "input" : L->m->layers[l->in[k]].name;
    }
    return dt_layer_setup(&s);
}

/* Reads the inputs of a layer entry into l. */
static int read_inputs(struct loader *L, const struct dt_ynode *node, struct dt_layer *l)
{
    int rc;
    if (dt_layer_multi_input(l->kind)) {
        const struct dt_ynode *list = dt_ymap_get(node, "inputs");
        if (!list)
            return dt_yfail(L->doc, node, L->err,
                            "missing required key 'inputs' (the layers to %s)",
                            dt_layer_kind_name(l->kind));
        if ((rc = dt_ycheck_seq(L->doc, list, "inputs", L->err)))
            return rc;
        if (list->n < 2 || list->n > DT_MAX_INPUTS)
            return dt_yfail(L->doc, list, L->err, "%s takes 2 to %d inputs, found %zu",
                            dt_layer_kind_name(l->kind), DT_MAX_INPUTS, list->n);
        l->n_in = (int)list->n;
        for (size_t k = 0; k < list->n; k++)
            if ((rc = resolve(L, list->items[k], &l->in[k])))
                return rc;
    } else {
        const struct dt_ynode *ref = dt_ymap_get(node, "input");
        l->n_in = 1;
        l->in[0] = L->m->n_layers - 1; /* the previous layer, or the input */
        if (ref && (rc = resolve(L, ref, &l->in[0])))
            return rc;
    }
    /* Token ids are integers: only an embedding can read them. */
    for (int k = 0; k < l->n_in; k++)
        if (l->in[k] < 0 && L->m->input_is_tokens && l->kind != DT_L_EMBEDDING)
            return dt_yfail(L->doc, node, L->err,
                            "the input holds token ids: only an embedding layer can read it");
    return DT_OK;
}

/* Keras-style default name: "dense", then "dense_1", "dense_2", ... */
static void auto_name(struct loader *L, enum dt_layer_kind kind, char *buf, size_t len)
{
    do {
        int n = L->auto_count[kind]++;
        if (n == 0)
            snprintf(buf, len, "%s", dt_layer_kind_name(kind));
        else
            snprintf(buf, len, "%s_%d", dt_layer_kind_name(kind), n);
    } while (names_find(&L->names, buf)->used);
}

static int read_layer(struct loader *L, const struct dt_ynode *node)
{
    struct dt_model *m = L->m;
    int rc, kind = 0;
    if (node->type != DT_Y_MAP)
        return dt_yfail(L->doc, node, L->err,
                        "each layer must be a mapping such as {kind: dense, units: 10}");
    if ((rc = dt_yget_enum(L->doc, node, "kind", true, kind_names, &kind, L->err)))
        return rc;
    char what[64];
    snprintf(what, sizeof what, "a %s layer", kind_names[kind]);
    if ((rc = dt_ycheck_map(L->doc, node, what, dt_layer_keys(kind), L->err)))
        return rc;
    if (m->n_layers + 2 > DT_MODEL_MAX_LAYERS)
        return dt_yfail(L->doc, node, L->err, "more than %ld layers", DT_MODEL_MAX_LAYERS);

    struct dt_layer *l = new_layer(L);
    if (!l)
        return nomem(L);
    l->kind = (enum dt_layer_kind)kind;
    l->line = node->line;
    l->col = node->col;
    const struct dt_ynode *name_node = dt_ymap_get(node, "name");
    if (name_node) {
        const char *name = NULL;
        if ((rc = dt_yget_str(L->doc, node, "name", true, &name, L->err)) ||
            (rc = check_name(L, name_node, name)) ||
            (rc = name_free(L, name_node, 0, 0, name)))
            return rc;
        snprintf(l->name, sizeof l->name, "%s", name);
    } else {
        auto_name(L, l->kind, l->name, sizeof l->name);
    }
    if ((rc = read_inputs(L, node, l)) || (rc = setup(L, node, l)))
        return rc;
    int idx = m->n_layers++;
    name_add(L, l->name, idx, l->line);

    /* activation: adds its own layer, named <name>_<activation>; the entry's name then
     * refers to the activation's output, as in Keras. */
    int act = 5; /* linear */
    const struct dt_ynode *act_node = dt_ymap_get(node, "activation");
    if (act_node && (rc = dt_yget_enum(L->doc, node, "activation", true, act_names, &act, L->err)))
        return rc;
    if (act == 5)
        return DT_OK;
    struct dt_layer *a = new_layer(L);
    if (!a)
        return nomem(L);
    a->kind = act_kinds[act];
    a->line = act_node->line;
    a->col = act_node->col;
    a->n_in = 1;
    a->in[0] = idx;
    char an[80];
    snprintf(an, sizeof an, "%s_%s", m->layers[idx].name, act_names[act]);
    if (strlen(an) >= sizeof a->name)
        return dt_yfail(L->doc, act_node, L->err, "layer name '%s' is too long", an);
    memcpy(a->name, an, strlen(an) + 1);
    if ((rc = name_free(L, act_node, 0, 0, a->name)) || (rc = setup(L, NULL, a)))
        return rc;
    int aidx = m->n_layers++;
    name_add(L, a->name, aidx, a->line);
    names_find(&L->names, m->layers[idx].name)->idx = aidx;
    return DT_OK;
}

/* Whole-model pass: who needs an input gradient, parameter offsets, totals. */
static int finish(struct loader *L)
{
    struct dt_model *m = L->m;
    bool *trainable_above = calloc((size_t)m->n_layers, sizeof *trainable_above);
    bool *consumed = calloc((size_t)m->n_layers, sizeof *consumed);
    if (!trainable_above || !consumed) {
        free(trainable_above);
        free(consumed);
        return nomem(L);
    }
    long offset = 0;
    for (int i = 0; i < m->n_layers; i++) {
        struct dt_layer *l = &m->layers[i];
        double in_total = 0;
        l->needs_input_grad = false;
        for (int k = 0; k < l->n_in; k++) {
            int j = l->in[k];
            in_total += (double)dt_shape_size(shape_of(m, j));
            if (j < 0)
                continue;
            consumed[j] = true;
            if (dt_layer_trains(&m->layers[j]) || trainable_above[j])
                l->needs_input_grad = true;
        }
        trainable_above[i] = l->needs_input_grad;
        if (!l->needs_input_grad)
            l->bwd_data_flops = 0;
        double out = (double)dt_shape_size(&l->out_shape);
        bool view = l->kind == DT_L_FLATTEN;
        l->fwd_io_bytes = view ? 0 : 4 * (in_total + out);
        /* dY in, the saved input for the weights, dX out */
        bool trains = dt_layer_trains(l);
        bool any_bwd = trains || l->needs_input_grad;
        l->bwd_io_bytes = view || !any_bwd
                              ? 0
                              : 4 * (out + (trains ? in_total : 0) +
                                     (l->needs_input_grad ? in_total : 0));
        l->param_offset = offset;
        if (__builtin_add_overflow(offset, l->params, &offset) || offset > DT_MODEL_MAX_PARAMS) {
            free(trainable_above);
            free(consumed);
            return dt_fail(L->err, DT_EINPUT, dt_ydoc_name(L->doc), l->line, l->col,
                           "the model has more than %ld parameters (at layer '%s')",
                           DT_MODEL_MAX_PARAMS, l->name);
        }
        m->total_state_floats += l->state_floats;
        m->fwd_flops += l->fwd_flops;
        m->bwd_flops += l->bwd_data_flops + l->bwd_weight_flops;
        m->act_bytes += l->act_bytes;
    }
    m->total_params = offset;
    int dangling = -1;
    for (int i = 0; i + 1 < m->n_layers && dangling < 0; i++)
        if (!consumed[i])
            dangling = i;
    free(trainable_above);
    free(consumed);
    if (dangling >= 0) {
        const struct dt_layer *l = &m->layers[dangling];
        return dt_fail(L->err, DT_EINPUT, dt_ydoc_name(L->doc), l->line, l->col,
                       "the output of layer '%s' is never used (only the last layer may be an "
                       "output)",
                       l->name);
    }
    return DT_OK;
}

/* classes must match what the last layer produces: its size for (N), the channels of a
 * per-pixel (C,H,W) output, the last axis of a per-token (T,D) output; a single sigmoid
 * output stands for two classes (binary cross-entropy). */
static int check_classes(struct loader *L, const struct dt_ynode *classes_node)
{
    const struct dt_model *m = L->m;
    const struct dt_layer *last = &m->layers[m->n_layers - 1];
    const struct dt_shape *o = &last->out_shape;
    long outputs = o->rank == 2 ? o->d[1] : o->d[0];
    if (outputs == m->classes || (m->classes == 2 && outputs == 1 && last->kind == DT_L_SIGMOID))
        return DT_OK;
    char buf[64];
    dt_shape_format(o, buf, sizeof buf);
    return dt_yfail(L->doc, classes_node, L->err,
                    "classes is %ld but the last layer '%s' outputs %s", m->classes, last->name,
                    buf);
}

/* Layer sequences that train nothing sensible but would otherwise run: a softmax of a
 * softmax (gradients flattened to near zero) and a dropout after the output (the loss would
 * see randomly zeroed probabilities). */
static int check_output_head(struct loader *L)
{
    const struct dt_model *m = L->m;
    for (int i = 0; i < m->n_layers; i++) {
        const struct dt_layer *l = &m->layers[i];
        int j = l->n_in == 1 ? l->in[0] : -1;
        if (l->kind == DT_L_SOFTMAX && j >= 0 && m->layers[j].kind == DT_L_SOFTMAX)
            return dt_fail(L->err, DT_EINPUT, dt_ydoc_name(L->doc), l->line, l->col,
                           "layer '%s' is a softmax of softmax '%s': one softmax is enough",
                           l->name, m->layers[j].name);
    }
    const struct dt_layer *last = &m->layers[m->n_layers - 1];
    if (last->kind == DT_L_DROPOUT)
        return dt_fail(L->err, DT_EINPUT, dt_ydoc_name(L->doc), last->line, last->col,
                       "dropout '%s' is the last layer: it would drop the outputs the loss "
                       "reads (put dropout before the output layer)",
                       last->name);
    return DT_OK;
}

/* loss: language_model: targets are the input's next tokens, so the input must be tokens,
 * the output a (T, V) distribution per position over a vocabulary covering the ids, and no
 * position may see the token it predicts (every attention causal). */
static int check_lm(struct loader *L, const struct dt_ynode *loss_node)
{
    const struct dt_model *m = L->m;
    const struct dt_layer *last = &m->layers[m->n_layers - 1];
    const struct dt_shape *o = &last->out_shape;
    if (!m->input_is_tokens)
        return dt_yfail(L->doc, loss_node, L->err,
                        "loss: language_model needs a token input (input: {tokens: T, vocab: V})");
    if (o->rank != 2 || o->d[0] != m->input.d[0]) {
        char buf[64];
        dt_shape_format(o, buf, sizeof buf);
        return dt_yfail(L->doc, loss_node, L->err,
                        "loss: language_model needs one output row per token, (%ld, V), but the "
                        "last layer '%s' outputs %s",
                        m->input.d[0], last->name, buf);
    }
    if (m->classes < m->vocab)
        return dt_yfail(L->doc, loss_node, L->err,
                        "loss: language_model predicts the next token, but classes %ld do not "
                        "cover the input's vocab %ld",
                        m->classes, m->vocab);
    for (int i = 0; i < m->n_layers; i++) {
        const struct dt_layer *l = &m->layers[i];
        if (l->kind == DT_L_ATTENTION || (l->kind == DT_L_ATTENTION_CORE && !l->causal))
            return dt_fail(L->err, DT_EINPUT, dt_ydoc_name(L->doc), l->line, l->col,
                           "layer '%s' lets every position see the tokens after it, the ones "
                           "loss: language_model asks it to predict (use attention_core with "
                           "causal: true)",
                           l->name);
    }
    return DT_OK;
}

static int load_doc(const struct dt_ydoc *doc, struct dt_model *m, struct dt_error *err)
{
    const struct dt_ynode *root = dt_ydoc_root(doc);
    struct loader L = {.doc = doc, .err = err, .m = m};
    int rc = dt_ycheck_map(doc, root, "a model file", top_keys, err);
    if (rc)
        return rc;
    const char *desc = NULL;
    if ((rc = get_text(&L, root, "name", true, m->name, sizeof m->name)) ||
        (rc = get_text(&L, root, "source", true, m->source, sizeof m->source)) ||
        (rc = dt_yget_str(doc, root, "description", false, &desc, err)))
        return rc;
    const struct dt_ynode *input = dt_ymap_get(root, "input");
    if (!input)
        return dt_yfail(doc, root, err,
                        "missing required key 'input' (e.g. input: {shape: [1, 28, 28]})");
    int loss = DT_LOSS_CLASSIFY;
    if ((rc = read_input(&L, input)) ||
        (rc = dt_yget_long(doc, root, "classes", true, 1, DT_MODEL_MAX_UNITS, &m->classes, err)) ||
        (rc = dt_yget_enum(doc, root, "loss", false, loss_names, &loss, err)))
        return rc;
    const struct dt_ynode *dataset = dt_ymap_get(root, "dataset");
    if (dataset && (rc = read_dataset(&L, dataset)))
        return rc;
    m->loss = (enum dt_loss)loss;
    if (m->classes < 2)
        return dt_yfail(doc, dt_ymap_get(root, "classes"), err,
                        "classes is 1: one class leaves nothing to learn (a yes/no output is "
                        "classes: 2 with one sigmoid unit)");
    const struct dt_ynode *layers = dt_ymap_get(root, "layers");
    if (!layers)
        return dt_yfail(doc, root, err, "missing required key 'layers'");
    if ((rc = dt_ycheck_seq(doc, layers, "layers", err)))
        return rc;
    if (layers->n == 0)
        return dt_yfail(doc, layers, err, "a model needs at least one layer");
    if (layers->n > (size_t)DT_MODEL_MAX_LAYERS)
        return dt_yfail(doc, layers, err, "more than %ld layers", DT_MODEL_MAX_LAYERS);
    /* Each entry adds at most two layers, hence 4 slots per entry keep the table half empty. */
    L.names.cap = 16;
    while (L.names.cap < 4 * layers->n + 4)
        L.names.cap *= 2;
    L.names.slots = calloc(L.names.cap, sizeof *L.names.slots);
    if (!L.names.slots)
        return nomem(&L);
    for (size_t i = 0; i < layers->n && rc == DT_OK; i++)
        rc = read_layer(&L, layers->items[i]);
    free(L.names.slots);
    if (rc == DT_OK)
        rc = finish(&L);
    if (rc == DT_OK)
        rc = check_output_head(&L);
    if (rc == DT_OK)
        rc = check_classes(&L, dt_ymap_get(root, "classes"));
    if (rc == DT_OK && m->loss == DT_LOSS_NEXT_TOKEN)
        rc = check_lm(&L, dt_ymap_get(root, "loss"));
    return rc;
}

static int load(struct dt_ydoc *doc, const char *path, struct dt_model **out,
                struct dt_error *err)
{
    struct dt_model *m = calloc(1, sizeof *m);
    if (!m) {
        dt_ydoc_destroy(doc);
        return dt_fail(err, DT_ENOMEM, path, 0, 0, "out of memory");
    }
    snprintf(m->path, sizeof m->path, "%s", path);
    int rc = load_doc(doc, m, err);
    dt_ydoc_destroy(doc);
    if (rc) {
        dt_model_destroy(m);
        return rc;
    }
    *out = m;
    return DT_OK;
}

int dt_model_load(const char *path, struct dt_model **out, struct dt_error *err)
{
    struct dt_ydoc *doc;
    *out = NULL;
    int rc = dt_ydoc_load_file(path, &doc, err);
    if (rc)
        return rc;
    return load(doc, path, out, err);
}

int dt_model_load_string(const char *name, const char *text, struct dt_model **out,
                         struct dt_error *err)
{
    struct dt_ydoc *doc;
    *out = NULL;
    int rc = dt_ydoc_load_string(name, text, strlen(text), &doc, err);
    if (rc)
        return rc;
    return load(doc, name, out, err);
}

void dt_model_destroy(struct dt_model *model)
{
    if (!model)
        return;
    free(model->layers);
    free(model);
}

bool dt_layer_trains(const struct dt_layer *l)
{
    return l->params > 0 || l->tied;
}

long dt_layer_weight_floats(const struct dt_model *m, const struct dt_layer *l)
{
    if (!l->tied)
        return l->params;
    const struct dt_layer *t = &m->layers[l->tied_layer];
    return t->vocab * t->units;
}

int dt_model_find_layer(const struct dt_model *model, const char *name)
{
    for (int i = 0; i < model->n_layers; i++)
        if (strcmp(model->layers[i].name, name) == 0)
            return i;
    return -1;
}

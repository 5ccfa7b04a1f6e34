/* Keras-like model summary: one row per layer, then the totals. */
#include "dt/model.h"

#include <stdio.h>
#include <string.h>

/* 1234567 -> "1,234,567" */
static void with_commas(long v, char *buf, size_t len)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%ld", v < 0 ? -v : v);
    size_t o = 0;
    if (v < 0 && o + 1 < len)
        buf[o++] = '-';
    for (int i = 0; i < n && o + 1 < len; i++) {
        buf[o++] = digits[i];
        int left = n - i - 1;
        if (left > 0 && left % 3 == 0 && o + 1 < len)
            buf[o++] = ',';
    }
    buf[o] = '\0';
}

/* 3.2e9 -> "3.20 G" (SI prefix, 3 significant digits). */
static void si(double v, const char *unit, char *buf, size_t len)
{
    static const char *const prefix[] = {"", "k", "M", "G", "T", "P", "E"};
    int p = 0;
    while (v >= 999.5 && p < 6) {
        v /= 1000;
        p++;
    }
    const char *sep = unit[0] ? " " : "";
    if (p == 0)
        snprintf(buf, len, "%.0f%s%s", v, sep, unit);
    else
        snprintf(buf, len, "%.3g%s%s%s", v, sep, prefix[p], unit);
}

static void rule(FILE *out, char c, int width)
{
    for (int i = 0; i < width; i++)
        fputc(c, out);
    fputc('\n', out);
}

void dt_model_print_summary(const struct dt_model *model, FILE *out)
{
    char label[160], shape[64], params[32], flops[32];
    int name_w = 28;
    for (int i = 0; i < model->n_layers; i++) {
        const struct dt_layer *l = &model->layers[i];
        int w = (int)(strlen(l->name) + strlen(dt_layer_kind_name(l->kind)) + 3);
        if (w > name_w)
            name_w = w;
    }
    int width = name_w + 2 + 20 + 2 + 14 + 2 + 12;
    fprintf(out, "Model: \"%s\"\n", model->name);
    if (model->source[0])
        fprintf(out, "Source: %s\n", model->source);
    dt_shape_format(&model->input, shape, sizeof shape);
    fprintf(out, "Input: %s%s\n", shape, model->input_is_tokens ? " token ids" : "");
    char what[96];
    dt_model_describe_params(model, what, sizeof what);
    fprintf(out, "Parameters: %s\n", what);
    rule(out, '_', width);
    fprintf(out, "%-*s  %-20s  %14s  %12s\n", name_w, "Layer (type)", "Output Shape", "Param #",
            "FLOPs fwd");
    rule(out, '=', width);
    for (int i = 0; i < model->n_layers; i++) {
        const struct dt_layer *l = &model->layers[i];
        snprintf(label, sizeof label, "%s (%s)", l->name, dt_layer_kind_name(l->kind));
        dt_shape_format(&l->out_shape, shape, sizeof shape);
        with_commas(l->params + l->state_floats, params, sizeof params);
        si(l->fwd_flops, "", flops, sizeof flops);
        fprintf(out, "%-*s  %-20s  %14s  %12s\n", name_w, label, shape, params, flops);
    }
    rule(out, '=', width);
    char total[32], trainable[32], state[32], buf[32];
    with_commas(model->total_params + model->total_state_floats, total, sizeof total);
    with_commas(model->total_params, trainable, sizeof trainable);
    with_commas(model->total_state_floats, state, sizeof state);
    fprintf(out, "Total params: %s\n", total);
    fprintf(out, "Trainable params: %s\n", trainable);
    fprintf(out, "Non-trainable params: %s%s\n", state,
            model->total_state_floats ? " (running statistics of batch normalisation)" : "");
    si(model->fwd_flops, "FLOP", buf, sizeof buf);
    fprintf(out, "Forward FLOPs per sample: %s\n", buf);
    si(model->bwd_flops, "FLOP", buf, sizeof buf);
    fprintf(out, "Backward FLOPs per sample: %s\n", buf);
    si(model->act_bytes, "B", buf, sizeof buf);
    fprintf(out, "Activation memory per sample (training): %s\n", buf);
    si(4.0 * (double)model->total_params, "B", buf, sizeof buf);
    fprintf(out, "Parameter memory (fp32): %s\n", buf);
    rule(out, '_', width);
}

void dt_model_describe_params(const struct dt_model *m, char *buf, size_t len)
{
    if (m->total_state_floats)
        snprintf(buf, len, "%ld trainable + %ld running statistics", m->total_params,
                 m->total_state_floats);
    else
        snprintf(buf, len, "%ld trainable", m->total_params);
}

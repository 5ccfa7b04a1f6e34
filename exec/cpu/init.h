/* Parameter initialisation of a dt_model's flat buffer, following the two frameworks' defaults.
 *
 * DTK_INIT_GLOROT (Keras defaults): kernels Glorot-uniform U(-l, l), l = sqrt(6/(fan_in +
 *   fan_out)) with Keras' fans (conv: kh*kw*in/groups and kh*kw*filters); biases 0; norm
 *   gamma 1, beta 0; embedding U(-0.05, 0.05); LSTM W_x Glorot, W_h orthogonal, bias 0 but 1 for
 *   the forget gate (unit_forget_bias); attention kernels Glorot with the fans of Keras'
 *   MultiHeadAttention einsum kernels ((D, heads, D/heads) and (heads, D/heads, D)), biases 0.
 * DTK_INIT_KAIMING (PyTorch's reset_parameters): Linear and Conv2d weight
 *   kaiming_uniform_(a = sqrt(5)), which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), bias
 *   U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in (Linear) or in/groups*kh*kw (Conv2d);
 *   ConvTranspose2d the same with PyTorch's fan_in taken from its weight (C, F, kh, kw), i.e.
 *   F*kh*kw; norm gamma 1, beta 0; Embedding N(0, 1); LSTM every tensor U(-1/sqrt(H),
 *   1/sqrt(H)); MultiheadAttention in_proj xavier_uniform_ over the stacked (3D, D) matrix,
 *   out_proj U(-1/sqrt(D), 1/sqrt(D)), all biases 0.
 * Values are drawn layer by layer in model order, weights before biases, from one stream
 * seeded with `seed`: the same seed gives the same network on every rank. */
#ifndef DTK_INIT_H
#define DTK_INIT_H

#include <stdint.h>

#include "dt/model.h"
#include "rng.h"

enum dtk_init {
    DTK_INIT_GLOROT,
    DTK_INIT_KAIMING
};

/* Fills the layer's params (model->total_params floats from params + L->param_offset). */
void dtk_init_layer(float *params, const struct dt_layer *L, enum dtk_init init,
                    struct dtk_rng *rng);
/* Every layer of the model. */
void dtk_init_model(float *params, const struct dt_model *model, enum dtk_init init,
                    uint64_t seed);
/* n floats uniform in [-limit, limit). */
void dtk_init_uniform(float *p, long n, float limit, struct dtk_rng *rng);

#endif

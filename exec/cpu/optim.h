/* Optimizers over one flat float buffer (or any contiguous slice of it: a ZeRO shard is just
 * an offset and a length). params, grads and the state arrays have n floats each. */
#ifndef DTK_OPTIM_H
#define DTK_OPTIM_H

#include <stdbool.h>

enum dtk_adam_flavor {
    /* Keras (tf.keras and Keras 3): lr 0.001, beta1 0.9, beta2 0.999, eps 1e-7, with
     *   alpha_t = lr sqrt(1 - beta2^t) / (1 - beta1^t),  p -= alpha_t m / (sqrt(v) + eps):
     * eps is the paper's "epsilon hat", added to sqrt(v) before bias correction. */
    DTK_ADAM_KERAS,
    /* PyTorch torch.optim.Adam: lr 0.001, beta1 0.9, beta2 0.999, eps 1e-8, with
     *   p -= lr m_hat / (sqrt(v_hat) + eps),  m_hat = m/(1 - beta1^t), v_hat = v/(1 - beta2^t). */
    DTK_ADAM_PYTORCH
};

struct dtk_adam {
    enum dtk_adam_flavor flavor;
    float lr, beta1, beta2, eps;
};

/* The framework's default hyper-parameters for that flavor. */
struct dtk_adam dtk_adam_defaults(enum dtk_adam_flavor flavor);
/* Step t (1-based: the first call passes t = 1). m and v start at zero. */
void dtk_adam_step(float *params, const float *grads, float *m, float *v, long n, long t,
                   const struct dtk_adam *cfg);

/* torch.optim.SGD semantics: g' = g + weight_decay p; buf = g' on the first step, afterwards
 * buf = momentum buf + (1 - dampening) g'; the step uses g' + momentum buf with nesterov,
 * else buf; p -= lr step. momentum = 0 is plain SGD (buf is then not touched, may be NULL). */
struct dtk_sgd {
    float lr, momentum, dampening, weight_decay;
    bool nesterov;
};
void dtk_sgd_step(float *params, const float *grads, float *buf, long n, long t,
                  const struct dtk_sgd *cfg);

#endif

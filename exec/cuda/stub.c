/* The CUDA backend when configure found no CUDA toolkit (or was given --without-cuda): there
 * is no device, and every call that would need one fails with "no CUDA backend built". The
 * NCCL part is nccl_stub.c. Callers need no #ifdef (the pattern of pmodels/yaksa). */
#include "cuda_kernels.h"
#include "kernel_math.h"

static int no_cuda(struct dt_error *err)
{
    return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                   "no CUDA backend built (configure found no nvcc, or --without-cuda)");
}

bool dtcuda_built(void)
{
    return false;
}

int dtcuda_device_count(void)
{
    return 0;
}

int dtcuda_create(struct dtcuda **out, int device, struct dt_error *err)
{
    *out = NULL;
    return no_cuda(err);
}

void dtcuda_destroy(struct dtcuda *cx)
{
}

int dtcuda_describe(const struct dtcuda *cx, char *buf, size_t len, struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_sync(struct dtcuda *cx, struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_malloc(void **dptr, size_t bytes, struct dt_error *err)
{
    *dptr = NULL;
    return no_cuda(err);
}

void dtcuda_free(void *dptr)
{
}

int dtcuda_zero(struct dtcuda *cx, void *dptr, size_t bytes, struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_to_device(struct dtcuda *cx, void *dst, const void *host_src, size_t bytes,
                     struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_to_host(struct dtcuda *cx, void *host_dst, const void *src, size_t bytes,
                   struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_dense_forward(struct dtcuda *cx, float *out, const float *inp, const float *weight,
                         const float *bias, int N, int in, int outd, struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_dense_backward(struct dtcuda *cx, float *dinp, float *dweight, float *dbias,
                          const float *dout, const float *inp, const float *weight, int N,
                          int in, int outd, struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_relu_forward(struct dtcuda *cx, float *out, const float *inp, long n,
                        struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_relu_backward(struct dtcuda *cx, float *dinp, const float *dout, const float *inp,
                         long n, struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_softmax_xent_forward(struct dtcuda *cx, float *probs, float *losses,
                                const float *logits, const int *labels, int B, int V,
                                struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_softmax_xent_backward(struct dtcuda *cx, float *dlogits, const float *probs,
                                 const int *labels, int B, int V, float scale,
                                 struct dt_error *err)
{
    return no_cuda(err);
}

/* A pure size function: it answers the same with or without a GPU. */
long dtcuda_conv2d_workspace_floats(const struct dtk_conv_dims *d)
{
    return dtcuda_conv_workspace(d);
}

int dtcuda_conv2d_forward(struct dtcuda *cx, float *out, float *work, const float *inp,
                          const float *weight, const float *bias, const struct dtk_conv_dims *d,
                          struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_conv2d_backward(struct dtcuda *cx, float *dinp, float *dweight, float *dbias,
                           float *work, const float *dout, const float *inp, const float *weight,
                           const struct dtk_conv_dims *d, struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_maxpool_forward(struct dtcuda *cx, float *out, int *argmax, const float *inp,
                           const struct dtk_conv_dims *d, struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_maxpool_backward(struct dtcuda *cx, float *dinp, const float *dout, const int *argmax,
                            const struct dtk_conv_dims *d, struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_adam_step(struct dtcuda *cx, float *params, const float *grads, float *m, float *v,
                     long n, long t, const struct dtk_adam *cfg, struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_sgd_step(struct dtcuda *cx, float *params, const float *grads, float *buf, long n,
                    long t, const struct dtk_sgd *cfg, struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_copy(struct dtcuda *cx, void *dst, const void *src, size_t bytes,
                struct dt_error *err)
{
    return no_cuda(err);
}

int dtcuda_accumulate(struct dtcuda *cx, float *dst, const float *src, long n,
                      struct dt_error *err)
{
    return no_cuda(err);
}

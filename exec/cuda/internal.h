/* What the files of the CUDA backend share: the context, and the error, launch and GEMM
 * helpers. Not part of the interface (cuda_kernels.h is). Included from C (runtime.c, nccl.c:
 * host code only, compiled by gcc with the project's warnings) and from CUDA (layers.cu). */
#ifndef DTCUDA_INTERNAL_H
#define DTCUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cuda_kernels.h"
#include "kernel_math.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dtcuda {
    int device;
    cudaStream_t stream; /* every kernel, copy and cuBLAS call of the context goes here */
    cublasHandle_t blas;  /* bound to stream */
};

/* The cuBLAS functions the backend calls, opened on first use (cublas_dl.c). */
struct dtcuda_blas_api {
    cublasStatus_t (*create)(cublasHandle_t *handle);
    cublasStatus_t (*destroy)(cublasHandle_t handle);
    cublasStatus_t (*set_stream)(cublasHandle_t handle, cudaStream_t stream);
    cublasStatus_t (*set_math_mode)(cublasHandle_t handle, cublasMath_t mode);
    cublasStatus_t (*sgemm)(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                            int m, int n, int k, const float *alpha, const float *a, int lda,
                            const float *b, int ldb, const float *beta, float *c, int ldc);
    const char *(*status_string)(cublasStatus_t status);
};
/* The API, or NULL (err filled) when the library cannot be opened. */
const struct dtcuda_blas_api *dtcuda_blas(struct dt_error *err);

/* Threads per block of the elementwise kernels. */
#define DTCUDA_THREADS 256

/* Fill err with "what: CUDA's message" and return DT_EINTERNAL. */
int dtcuda_cuda_fail(struct dt_error *err, cudaError_t e, const char *what);
int dtcuda_blas_fail(struct dt_error *err, cublasStatus_t s, const char *what);
/* After a kernel launch: DT_OK, or the launch's configuration error. */
int dtcuda_launched(struct dt_error *err, const char *what);
/* Blocks for a grid-stride loop over n > 0 elements. */
unsigned dtcuda_blocks(long n);
/* Row-major C (M x N) = alpha op(A) op(B) + beta C on the context's stream, arguments as
 * cblas_sgemm(CblasRowMajor, ...) takes them (see dtcuda_gemm_rm in kernel_math.h). */
int dtcuda_sgemm_rm(struct dtcuda *cx, bool ta, bool tb, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C,
                    int ldc, struct dt_error *err);

#ifdef __cplusplus
}
#endif

#endif

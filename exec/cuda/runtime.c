/* The CUDA backend's context, device query, memory and the row-major GEMM on cuBLAS: host
 * code only, so plain C. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

int dtcuda_cuda_fail(struct dt_error *err, cudaError_t e, const char *what)
{
    return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "%s: CUDA error %d: %s", what, (int)e,
                   cudaGetErrorString(e));
}

int dtcuda_blas_fail(struct dt_error *err, cublasStatus_t s, const char *what)
{
    const struct dtcuda_blas_api *b = dtcuda_blas(NULL);
    return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "%s: cuBLAS error %d: %s", what, (int)s,
                   b ? b->status_string(s) : "?");
}

int dtcuda_launched(struct dt_error *err, const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? DT_OK : dtcuda_cuda_fail(err, e, what);
}

unsigned dtcuda_blocks(long n)
{
    /* Enough blocks to fill any current GPU several times over; the loops stride beyond. */
    long b = (n + DTCUDA_THREADS - 1) / DTCUDA_THREADS;
    return b > 65536 ? 65536u : (unsigned)b;
}

bool dtcuda_built(void)
{
    return true;
}

int dtcuda_device_count(void)
{
    int n = 0;
    /* No driver, no device, or a driver older than the runtime all come back as an error:
     * for this backend they all mean "no GPU here". */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

int dtcuda_create(struct dtcuda **out, int device, struct dt_error *err)
{
    *out = NULL;
    int n = dtcuda_device_count();
    if (device < 0 || device >= n)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "no CUDA device %d (this machine has %d)",
                       device, n);
    const struct dtcuda_blas_api *blas = dtcuda_blas(err);
    if (!blas)
        return DT_EINPUT;
    struct dtcuda *cx = calloc(1, sizeof *cx);
    if (!cx)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    cx->device = device;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&cx->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(cx);
        return dtcuda_cuda_fail(err, e, "creating the CUDA context");
    }
    cublasStatus_t s = blas->create(&cx->blas);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = blas->set_stream(cx->blas, cx->stream);
    /* Plain FP32 (no TF32), so that results compare with the CPU oracle. */
    if (s == CUBLAS_STATUS_SUCCESS)
        s = blas->set_math_mode(cx->blas, CUBLAS_DEFAULT_MATH);
    if (s != CUBLAS_STATUS_SUCCESS) {
        if (cx->blas)
            blas->destroy(cx->blas);
        cudaStreamDestroy(cx->stream);
        free(cx);
        return dtcuda_blas_fail(err, s, "creating the cuBLAS handle");
    }
    *out = cx;
    return DT_OK;
}

void dtcuda_destroy(struct dtcuda *cx)
{
    if (!cx)
        return;
    cudaStreamSynchronize(cx->stream);
    dtcuda_blas(NULL)->destroy(cx->blas); /* opened: the context exists */
    cudaStreamDestroy(cx->stream);
    free(cx);
}

int dtcuda_describe(const struct dtcuda *cx, char *buf, size_t len, struct dt_error *err)
{
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, cx->device);
    if (e != cudaSuccess)
        return dtcuda_cuda_fail(err, e, "reading the device properties");
    snprintf(buf, len, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    return DT_OK;
}

int dtcuda_sync(struct dtcuda *cx, struct dt_error *err)
{
    cudaError_t e = cudaStreamSynchronize(cx->stream);
    return e == cudaSuccess ? DT_OK : dtcuda_cuda_fail(err, e, "waiting for the GPU");
}

int dtcuda_malloc(void **dptr, size_t bytes, struct dt_error *err)
{
    *dptr = NULL;
    cudaError_t e = cudaMalloc(dptr, bytes);
    if (e == cudaSuccess)
        return DT_OK;
    (void)cudaGetLastError(); /* a failed allocation is not sticky: clear it */
    if (e == cudaErrorMemoryAllocation)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "cannot allocate %zu bytes on the GPU", bytes);
    return dtcuda_cuda_fail(err, e, "cudaMalloc");
}

void dtcuda_free(void *dptr)
{
    if (dptr)
        cudaFree(dptr);
}

int dtcuda_zero(struct dtcuda *cx, void *dptr, size_t bytes, struct dt_error *err)
{
    cudaError_t e = cudaMemsetAsync(dptr, 0, bytes, cx->stream);
    return e == cudaSuccess ? DT_OK : dtcuda_cuda_fail(err, e, "zeroing device memory");
}

int dtcuda_copy(struct dtcuda *cx, void *dst, const void *src, size_t bytes,
                struct dt_error *err)
{
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cx->stream);
    return e == cudaSuccess ? DT_OK : dtcuda_cuda_fail(err, e, "copying on the GPU");
}

int dtcuda_to_device(struct dtcuda *cx, void *dst, const void *host_src, size_t bytes,
                     struct dt_error *err)
{
    /* The stream is non-blocking, so the copy must go on it to be ordered with the kernels;
     * waiting for it makes the host buffer reusable whether or not it is pinned. */
    cudaError_t e = cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, cx->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cx->stream);
    return e == cudaSuccess ? DT_OK : dtcuda_cuda_fail(err, e, "copying to the GPU");
}

int dtcuda_to_host(struct dtcuda *cx, void *host_dst, const void *src, size_t bytes,
                   struct dt_error *err)
{
    cudaError_t e = cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, cx->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cx->stream);
    return e == cudaSuccess ? DT_OK : dtcuda_cuda_fail(err, e, "copying from the GPU");
}

int dtcuda_sgemm_rm(struct dtcuda *cx, bool ta, bool tb, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C,
                    int ldc, struct dt_error *err)
{
    if (M <= 0 || N <= 0)
        return DT_OK;
    struct dtcuda_gemm_cm g = dtcuda_gemm_rm(ta, tb, M, N, K, A, lda, B, ldb, ldc);
    cublasStatus_t s = dtcuda_blas(NULL)->sgemm(cx->blas, g.ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &alpha, g.a,
                                   g.lda, g.b, g.ldb, &beta, C, g.ldc);
    return s == CUBLAS_STATUS_SUCCESS ? DT_OK : dtcuda_blas_fail(err, s, "cublasSgemm");
}

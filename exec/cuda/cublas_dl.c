/* cuBLAS opened on first use (dlopen) instead of linked: dtexec links the CUDA backend, and a
 * linked libcublas costs every run, on the CPU too, its load (measured here: 0.4 s and 217 MB
 * of resident memory for a program that never calls it). The runtime (libcudart) is linked:
 * it is small. The library is the one of the toolkit the backend was compiled with, found by
 * the rpath configure put into the program. */
#include "internal.h"

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#define STR2(x) #x
#define STR(x) STR2(x)
#define CUBLAS_SONAME "libcublas.so." STR(CUBLAS_VER_MAJOR)

static struct dtcuda_blas_api api;
static bool opened;

/* Looks up one symbol; false when missing. */
static bool find(void *lib, const char *name, void **fn)
{
    *fn = dlsym(lib, name);
    return *fn != NULL;
}

const struct dtcuda_blas_api *dtcuda_blas(struct dt_error *err)
{
    if (opened)
        return &api;
    void *lib = dlopen(CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        dt_fail(err, DT_EINPUT, NULL, 0, 0, "cannot open %s: %s", CUBLAS_SONAME,
                why ? why : "unknown reason");
        return NULL;
    }
    /* dlsym gives data pointers; POSIX guarantees they convert to the functions' pointers
     * (memcpy: C11 has no cast between the two) */
    void *f[6];
    bool ok = find(lib, "cublasCreate_v2", &f[0]) && find(lib, "cublasDestroy_v2", &f[1]) &&
              find(lib, "cublasSetStream_v2", &f[2]) && find(lib, "cublasSetMathMode", &f[3]) &&
              find(lib, "cublasSgemm_v2", &f[4]) && find(lib, "cublasGetStatusString", &f[5]);
    if (!ok) {
        dt_fail(err, DT_EINPUT, NULL, 0, 0, "%s lacks a function the backend calls: %s",
                CUBLAS_SONAME, dlerror());
        dlclose(lib);
        return NULL;
    }
    memcpy(&api.create, &f[0], sizeof(void *));
    memcpy(&api.destroy, &f[1], sizeof(void *));
    memcpy(&api.set_stream, &f[2], sizeof(void *));
    memcpy(&api.set_math_mode, &f[3], sizeof(void *));
    memcpy(&api.sgemm, &f[4], sizeof(void *));
    memcpy(&api.status_string, &f[5], sizeof(void *));
    opened = true; /* kept open for the life of the process */
    return &api;
}

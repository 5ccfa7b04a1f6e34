/* Allreduce across ranks with NCCL, one GPU per rank, on the context's stream. */
#include "internal.h"

#include <nccl.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(ncclUniqueId) == DTCUDA_NCCL_ID_BYTES, "NCCL unique id size changed");

struct dtcuda_comm {
    ncclComm_t comm;
    struct dtcuda *cx; /* not owned */
};

static int nccl_fail(struct dt_error *err, ncclResult_t r, const char *what)
{
    return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "%s: NCCL error %d: %s", what, (int)r,
                   ncclGetErrorString(r));
}

bool dtcuda_nccl_built(void)
{
    return true;
}

int dtcuda_nccl_unique_id(unsigned char id[DTCUDA_NCCL_ID_BYTES], struct dt_error *err)
{
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess)
        return nccl_fail(err, r, "ncclGetUniqueId");
    memcpy(id, &u, sizeof u);
    return DT_OK;
}

int dtcuda_comm_create(struct dtcuda_comm **out, struct dtcuda *cx,
                       const unsigned char id[DTCUDA_NCCL_ID_BYTES], int nranks, int rank,
                       struct dt_error *err)
{
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "NCCL rank %d of %d", rank, nranks);
    struct dtcuda_comm *c = calloc(1, sizeof *c);
    if (!c)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    c->cx = cx;
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    cudaError_t e = cudaSetDevice(cx->device);
    if (e != cudaSuccess) {
        free(c);
        return dtcuda_cuda_fail(err, e, "selecting the GPU for NCCL");
    }
    ncclResult_t r = ncclCommInitRank(&c->comm, nranks, u, rank);
    if (r != ncclSuccess) {
        free(c);
        return nccl_fail(err, r, "ncclCommInitRank");
    }
    *out = c;
    return DT_OK;
}

void dtcuda_comm_destroy(struct dtcuda_comm *comm)
{
    if (!comm)
        return;
    ncclCommDestroy(comm->comm);
    free(comm);
}

int dtcuda_allreduce_sum(struct dtcuda_comm *comm, float *buf, long n, struct dt_error *err)
{
    if (n <= 0)
        return DT_OK;
    ncclResult_t r = ncclAllReduce(buf, buf, (size_t)n, ncclFloat, ncclSum, comm->comm,
                                   comm->cx->stream);
    return r == ncclSuccess ? DT_OK : nccl_fail(err, r, "ncclAllReduce");
}

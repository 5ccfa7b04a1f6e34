/* The NCCL part of the CUDA backend when it is not built (no CUDA, or no nccl.h): every call
 * fails and says why, so callers need no #ifdef. */
#include "cuda_kernels.h"

static int no_nccl(struct dt_error *err)
{
    return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                   "no NCCL in this build (configure found no CUDA toolkit or no nccl.h)");
}

bool dtcuda_nccl_built(void)
{
    return false;
}

int dtcuda_nccl_unique_id(unsigned char id[DTCUDA_NCCL_ID_BYTES], struct dt_error *err)
{
    return no_nccl(err);
}

int dtcuda_comm_create(struct dtcuda_comm **out, struct dtcuda *cx,
                       const unsigned char id[DTCUDA_NCCL_ID_BYTES], int nranks, int rank,
                       struct dt_error *err)
{
    *out = NULL;
    return no_nccl(err);
}

void dtcuda_comm_destroy(struct dtcuda_comm *comm)
{
}

int dtcuda_allreduce_sum(struct dtcuda_comm *comm, float *buf, long n, struct dt_error *err)
{
    return no_nccl(err);
}

# exec/cuda: the optional CUDA backend (kernels, device memory, NCCL allreduce) behind the plain
# C interface exec/cuda/cuda_kernels.h. Without CUDA the library is the stub (stub.c and
# nccl_stub.c: every call fails with "no CUDA backend built"), so users link $(DTCUDA_LIBS) and
# call it unconditionally. Users add $(DTCUDA_CPPFLAGS).
noinst_LIBRARIES += exec/libdtcuda.a
DTCUDA_HDRS = exec/cuda/cuda_kernels.h exec/cuda/kernel_math.h exec/cuda/internal.h
DTCUDA_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/exec/cuda
exec_libdtcuda_a_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS)
if HAVE_CUDA
# Only layers.cu holds device code; the host side (runtime.c, nccl.c) is C under our warnings.
exec_libdtcuda_a_SOURCES = $(DTCUDA_HDRS) exec/cuda/runtime.c exec/cuda/cublas_dl.c \
	exec/cuda/layers.cu
if HAVE_NCCL
exec_libdtcuda_a_SOURCES += exec/cuda/nccl.c
else
exec_libdtcuda_a_SOURCES += exec/cuda/nccl_stub.c
endif
# nvcc's host objects want the C++ runtime when linked by the C compiler.
DTCUDA_LIBS = exec/libdtcuda.a $(CUDA_LIBS) -lstdc++
else
exec_libdtcuda_a_SOURCES = $(DTCUDA_HDRS) exec/cuda/stub.c exec/cuda/nccl_stub.c
DTCUDA_LIBS = exec/libdtcuda.a
endif
# Whatever was configured, `make dist` ships every backend file.
EXTRA_DIST += exec/cuda/layers.cu exec/cuda/runtime.c exec/cuda/cublas_dl.c exec/cuda/nccl.c \
	exec/cuda/stub.c exec/cuda/nccl_stub.c

# nvcc: cubins for A100 (sm_80) and H100 (sm_90), plus sm_90 PTX that the driver compiles for
# newer GPUs. No sanitizer or coverage flags: device code is not instrumented (host code is).
DTCUDA_NVCC_WERROR = $(if $(findstring -Werror,$(WARN_CFLAGS)),-Werror all-warnings)
DTCUDA_NVCCFLAGS = -O2 -std=c++17 \
	-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90] \
	-Xcompiler -fPIC,-Wall,-Wextra,-Wno-unused-parameter $(DTCUDA_NVCC_WERROR)
SUFFIXES = .cu
.cu.o:
	$(AM_V_GEN)$(NVCC) $(DTCUDA_NVCCFLAGS) -I$(top_srcdir)/include -I$(top_builddir) \
		-I$(top_srcdir)/exec/cuda $(NVCCFLAGS) -c -o $@ $<
# No automatic dependency tracking for .cu: list what layers.cu includes.
exec/cuda/layers.o: $(DTCUDA_HDRS) $(top_srcdir)/include/dt/error.h \
	$(top_srcdir)/exec/cpu/layers.h $(top_srcdir)/exec/cpu/optim.h

# test_cuda_math: the kernels' index arithmetic and GEMM restatement against the CPU kernels,
# on the host (runs everywhere). test_cuda_kernels: the kernels themselves on a GPU against the
# CPU kernels; exits 77 (skipped) when there is no GPU or no CUDA backend.
check_PROGRAMS += tests/test_cuda_math tests/test_cuda_kernels
TESTS += tests/test_cuda_math tests/test_cuda_kernels
tests_test_cuda_math_SOURCES = tests/test_cuda_math.c
tests_test_cuda_math_CPPFLAGS = $(DTCUDA_CPPFLAGS) $(DTCPU_CPPFLAGS)
tests_test_cuda_math_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_cuda_math_LDADD = $(DTCUDA_LIBS) $(DTCPU_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)
tests_test_cuda_kernels_SOURCES = tests/test_cuda_kernels.c
tests_test_cuda_kernels_CPPFLAGS = $(DTCUDA_CPPFLAGS) $(DTCPU_CPPFLAGS)
tests_test_cuda_kernels_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_cuda_kernels_LDADD = $(DTCUDA_LIBS) $(DTCPU_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)

# GFLOP/s of the CUDA conv and dense kernels on bench_kernels' shapes (says so without a GPU).
noinst_PROGRAMS += exec/bench_cuda
exec_bench_cuda_SOURCES = exec/cuda/bench_cuda.c
exec_bench_cuda_CPPFLAGS = $(DTCUDA_CPPFLAGS) $(DTCPU_CPPFLAGS)
exec_bench_cuda_LDADD = $(DTCUDA_LIBS) $(DTCPU_LIBS) $(DTCORE_LIBS)
BENCH_TARGETS += bench-cuda
bench-cuda: exec/bench_cuda$(EXEEXT)
	./exec/bench_cuda$(EXEEXT)
.PHONY: bench-cuda

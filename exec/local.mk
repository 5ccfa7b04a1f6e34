# exec: see README
include exec/cpu.mk

# dtexec: walks the plan with the CPU kernels and MPI (compiled with MPICH's flags).
bin_PROGRAMS += dtexec
dtexec_SOURCES = exec/dtexec.c exec/bind.c exec/bind.h \
	exec/data.c exec/data.h exec/data_text.c \
	exec/executor.c exec/executor.h \
	exec/cuda_net.c exec/cuda_net.h exec/cuda_supports.c \
	exec/checkpoint.c exec/checkpoint.h \
	exec/record.c exec/record.h \
	exec/progress.c exec/progress.h \
	exec/watchdog.c exec/watchdog.h exec/idle.c exec/idle.h exec/san_mpi.c \
	exec/exit_status.c exec/exit_status.h
# The git revision, for the run record (GNU make; "unknown" outside a git checkout).
DTEXEC_GIT = $(shell cd $(srcdir) && git describe --always --dirty --abbrev=12 2>/dev/null)
dtexec_CPPFLAGS = $(DTCUDA_CPPFLAGS) $(DTCPU_CPPFLAGS) -DDTEXEC_GIT_REVISION='"$(or $(DTEXEC_GIT),unknown)"'
dtexec_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS) $(ZLIB_CFLAGS) $(BLAS_CFLAGS)
dtexec_LDADD = $(DTCUDA_LIBS) $(DTCPU_LIBS) $(DTCORE_LIBS) $(MPI_LIBS) $(ZLIB_LIBS) $(BLAS_LIBS) -lm
dist_man_MANS += man/dtexec.1

# Dataset readers (no MPI).
check_PROGRAMS += tests/test_data
TESTS += tests/test_data
tests_test_data_SOURCES = tests/test_data.c exec/data.c exec/data.h exec/data_text.c
tests_test_data_CPPFLAGS = $(DTCPU_CPPFLAGS) -I$(top_srcdir)/exec
tests_test_data_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(ZLIB_CFLAGS)
tests_test_data_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS) $(ZLIB_LIBS) $(CMOCKA_LIBS)

# Pinning ranks to CPUs (dtexec --bind).
check_PROGRAMS += tests/test_bind
TESTS += tests/test_bind
tests_test_bind_SOURCES = tests/test_bind.c exec/bind.c exec/bind.h
tests_test_bind_CPPFLAGS = -I$(top_srcdir)/exec
tests_test_bind_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) -pthread
tests_test_bind_LDADD = $(CMOCKA_LIBS)
tests_test_bind_LDFLAGS = -pthread

# Progress bar and record formatting (no MPI).
check_PROGRAMS += tests/test_record
TESTS += tests/test_record
tests_test_record_SOURCES = tests/test_record.c exec/record.c exec/record.h \
	exec/progress.c exec/progress.h
tests_test_record_CPPFLAGS = $(DTCPU_CPPFLAGS) -I$(top_srcdir)/exec
tests_test_record_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(MPI_CFLAGS)
tests_test_record_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)

# When waiting ranks sleep between polls (no MPI).
check_PROGRAMS += tests/test_idle
TESTS += tests/test_idle
tests_test_idle_SOURCES = tests/test_idle.c exec/idle.c exec/idle.h
tests_test_idle_CPPFLAGS = -I$(top_srcdir)/exec
tests_test_idle_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_idle_LDADD = $(CMOCKA_LIBS)

# The executor's communication ops on 2 and 3 ranks (an MPI program run by the .sh).
check_PROGRAMS += tests/test_exec_collectives
tests_test_exec_collectives_SOURCES = tests/test_exec_collectives.c exec/executor.c exec/executor.h \
	exec/cuda_net.c exec/cuda_net.h exec/cuda_supports.c exec/watchdog.c exec/watchdog.h \
	exec/idle.c exec/idle.h exec/san_mpi.c
tests_test_exec_collectives_CPPFLAGS = $(DTCPU_CPPFLAGS) -I$(top_srcdir)/exec
tests_test_exec_collectives_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS) $(BLAS_CFLAGS)
tests_test_exec_collectives_LDADD = $(DTCUDA_LIBS) $(DTCPU_LIBS) $(DTCORE_LIBS) $(MPI_LIBS) $(BLAS_LIBS) -lm

# dtexec under mpiexec: equivalence of the strategies, learning, errors.
check_PROGRAMS += tests/params_diff
tests_params_diff_SOURCES = tests/params_diff.c
tests_params_diff_LDADD = -lm
TESTS += tests/test_exec_collectives.sh tests/test_exec_equivalence.sh tests/test_exec_pipeline.sh tests/test_exec_mnist.sh \
	tests/test_dtexec_errors.sh tests/test_exec_watchdog.sh
EXTRA_DIST += tests/test_exec_collectives.sh tests/test_exec_equivalence.sh tests/test_exec_pipeline.sh \
	tests/test_exec_mnist.sh tests/test_dtexec_errors.sh tests/test_exec_watchdog.sh
# checkpoint and resume: SIGKILL mid-epoch, bit-identical resume, corrupt files, errors
TESTS += tests/test_exec_checkpoint.sh
EXTRA_DIST += tests/test_exec_checkpoint.sh
# GPT models: tiny-gpt (synthetic tokens) and tiny-gpt-bytes (the shipped text) learn at 1 and
# 2 ranks, 2 ranks reach the 1-rank weights, bad text files (DT_LONG_TESTS=1: gpt2-124m too)
TESTS += tests/test_exec_gpt.sh
EXTRA_DIST += tests/test_exec_gpt.sh tests/data/tiny-text.txt

# samples/s of the seed 002 CNN (batch 128 per rank) on 1 and 2 ranks, synthetic data so that
# no data set is needed (README figures).
BENCH_TARGETS += bench-dtexec
bench-dtexec: dtexec$(EXEEXT)
	for n in 1 2; do \
	  OPENBLAS_NUM_THREADS=1 $(MPIEXEC) -n $$n ./dtexec$(EXEEXT) \
	    --model $(srcdir)/models/cnn690k.yaml --synthetic 25600 --max-iters 40 \
	    --strategy $$(test $$n = 1 && echo sequential || echo mpi-allreduce) | tail -n 1; \
	done
.PHONY: bench-dtexec

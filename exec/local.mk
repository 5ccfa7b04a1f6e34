# exec: see README
include exec/cpu.mk

# dtexec: walks the plan with the CPU kernels and MPI (compiled with MPICH's flags).
bin_PROGRAMS += dtexec
dtexec_SOURCES = exec/dtexec.c \
	exec/data.c exec/data.h \
	exec/executor.c exec/executor.h \
	exec/record.c exec/record.h \
	exec/progress.c exec/progress.h
dtexec_CPPFLAGS = $(DTCPU_CPPFLAGS)
dtexec_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS) $(ZLIB_CFLAGS) $(BLAS_CFLAGS)
dtexec_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS) $(MPI_LIBS) $(ZLIB_LIBS) $(BLAS_LIBS) -lm
dist_man_MANS += man/dtexec.1

# Dataset readers (no MPI).
check_PROGRAMS += tests/test_data
TESTS += tests/test_data
tests_test_data_SOURCES = tests/test_data.c exec/data.c exec/data.h
tests_test_data_CPPFLAGS = $(DTCPU_CPPFLAGS) -I$(top_srcdir)/exec
tests_test_data_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(ZLIB_CFLAGS)
tests_test_data_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS) $(ZLIB_LIBS) $(CMOCKA_LIBS)

# Progress bar and record formatting (no MPI).
check_PROGRAMS += tests/test_record
TESTS += tests/test_record
tests_test_record_SOURCES = tests/test_record.c exec/record.c exec/record.h \
	exec/progress.c exec/progress.h
tests_test_record_CPPFLAGS = $(DTCPU_CPPFLAGS) -I$(top_srcdir)/exec
tests_test_record_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(MPI_CFLAGS)
tests_test_record_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)

# dtexec under mpiexec: equivalence of the strategies, learning, errors.
check_PROGRAMS += tests/params_diff
tests_params_diff_SOURCES = tests/params_diff.c
TESTS += tests/test_exec_equivalence.sh tests/test_exec_mnist.sh tests/test_dtexec_errors.sh
EXTRA_DIST += tests/test_exec_equivalence.sh tests/test_exec_mnist.sh tests/test_dtexec_errors.sh

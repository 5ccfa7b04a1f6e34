# exec/cluster: an emulated cluster on one Linux host (network namespaces + tc) and the glue
# to launch on real clusters. See exec/CLUSTER.md. dtcluster finds the two helpers below in
# $(top_builddir)/exec when run from a build, in $(pkglibexecdir) once installed.
dist_bin_SCRIPTS = exec/dtcluster
EXTRA_DIST += exec/CLUSTER.md

# A bandwidth probe that any MPI launch can run (allreduce, streaming, ping-pong).
pkglibexec_PROGRAMS = exec/mpi_bw
exec_mpi_bw_SOURCES = exec/mpi_bw.c exec/exit_status.c exec/exit_status.h
exec_mpi_bw_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
exec_mpi_bw_LDADD = $(MPI_LIBS)

# A PMPI shim preloaded into each rank: MPI_Finalize exits after a grace period instead of
# hanging (MPICH 4.0 + UCX over TCP). A shared object built as a program (no libtool here),
# without sanitizer flags: it is preloaded into programs that may or may not carry them.
pkglibexec_PROGRAMS += exec/finalize_guard.so
exec_finalize_guard_so_SOURCES = exec/finalize_guard.c
exec_finalize_guard_so_CFLAGS = -std=gnu11 $(WARN_CFLAGS) $(MPI_CFLAGS) -fPIC
exec_finalize_guard_so_LDFLAGS = -shared
exec_finalize_guard_so_LDADD = $(MPI_LIBS)

# Needs root, namespaces and tc; skips (exit 77) and says why otherwise.
TESTS += tests/test_cluster.sh
EXTRA_DIST += tests/test_cluster.sh

# The finalize guard's paths, driven without a cluster: a tiny MPI program (tests/guard_prog)
# and shims whose PMPI_Finalize never returns (tests/finalize_hang.so) or returns at once
# without finalizing (tests/finalize_return.so), built as the guard.
check_PROGRAMS += tests/guard_prog tests/finalize_hang.so tests/finalize_return.so
tests_guard_prog_SOURCES = tests/guard_prog.c exec/exit_status.c exec/exit_status.h
tests_guard_prog_CPPFLAGS = -I$(top_srcdir)/exec
tests_guard_prog_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_guard_prog_LDADD = $(MPI_LIBS)
tests_finalize_hang_so_SOURCES = tests/finalize_hang.c
tests_finalize_hang_so_CFLAGS = -std=gnu11 $(WARN_CFLAGS) -fPIC
tests_finalize_hang_so_LDFLAGS = -shared
tests_finalize_return_so_SOURCES = tests/finalize_return.c
tests_finalize_return_so_CFLAGS = -std=gnu11 $(WARN_CFLAGS) -fPIC
tests_finalize_return_so_LDFLAGS = -shared
TESTS += tests/test_finalize_guard.sh
EXTRA_DIST += tests/test_finalize_guard.sh

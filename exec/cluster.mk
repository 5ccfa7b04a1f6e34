# exec/cluster: an emulated cluster on one Linux host (network namespaces + tc) and the
# glue to launch on real ones. See exec/CLUSTER.md.
dist_bin_SCRIPTS = exec/dtcluster
EXTRA_DIST += exec/CLUSTER.md

# A bandwidth probe that any MPI launch can run (allreduce, streaming, ping-pong).
noinst_PROGRAMS += exec/mpi_bw
exec_mpi_bw_SOURCES = exec/mpi_bw.c
exec_mpi_bw_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
exec_mpi_bw_LDADD = $(MPI_LIBS)

# Needs root, namespaces and tc; skips (exit 77) and says why otherwise.
TESTS += tests/test_cluster.sh
EXTRA_DIST += tests/test_cluster.sh

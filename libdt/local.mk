# The shared core: errors, units, YAML, models, topologies, plans, strategies, collectives.
noinst_LIBRARIES += libdt/libdtcore.a
libdt_libdtcore_a_CFLAGS = $(AM_CFLAGS) $(YAML_CFLAGS) $(GSL_CFLAGS) $(HWLOC_CFLAGS)
libdt_libdtcore_a_SOURCES = \
	libdt/error.c \
	libdt/yamldoc.c \
	libdt/units.c \
	libdt/topology.c \
	libdt/topology_print.c \
	libdt/table.c \
	libdt/topology_detect.c \
	libdt/model.c \
	libdt/model_layers.c \
	libdt/model_summary.c \
	libdt/model_impl.h \
	libdt/plan.c \
	libdt/plan_share.c \
	libdt/strategy.c \
	libdt/pipeline.c \
	libdt/probe_floor.c \
	libdt/probe_replica.c \
	libdt/probe_tensor.c \
	libdt/zero.c \
	libdt/tensor.c \
	libdt/seqpar.c \
	libdt/partition.c \
	libdt/parallel.c \
	libdt/memory.c \
	libdt/precision.c \
	libdt/recompute.c \
	libdt/dact.c \
	libdt/commpool.c \
	libdt/plan_check.c \
	libdt/compile.h \
	libdt/collective.c \
	libdt/costmodel.c \
	libdt/costmodel_gpu.c \
	libdt/calibration.c \
	libdt/datafile.c
noinst_HEADERS += include/dt/error.h include/dt/yamldoc.h include/dt/units.h
noinst_HEADERS += include/dt/model.h include/dt/topology.h include/dt/plan.h include/dt/collective.h include/dt/costmodel.h include/dt/datafile.h include/dt/calibration.h include/dt/partition.h include/dt/table.h include/dt/tensor.h include/dt/commpool.h
DTCORE_LIBS = libdt/libdtcore.a $(YAML_LIBS) $(GSL_LIBS) $(BLAS_LIBS) $(HWLOC_LIBS) -lm

# The shared core: errors, units, YAML, models, topologies, plans, strategies, collectives.
noinst_LIBRARIES += libdt/libdtcore.a
libdt_libdtcore_a_CFLAGS = $(AM_CFLAGS) $(YAML_CFLAGS) $(GSL_CFLAGS)
libdt_libdtcore_a_SOURCES = \
	libdt/error.c \
	libdt/yamldoc.c \
	libdt/units.c \
	libdt/plan.c \
	libdt/strategy.c \
	libdt/collective.c
noinst_HEADERS += include/dt/error.h include/dt/yamldoc.h include/dt/units.h
noinst_HEADERS += include/dt/model.h include/dt/topology.h include/dt/plan.h include/dt/collective.h
DTCORE_LIBS = libdt/libdtcore.a $(YAML_LIBS) $(GSL_LIBS) $(BLAS_LIBS) -lm

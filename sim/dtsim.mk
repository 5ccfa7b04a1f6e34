# The dtsim program: plan player, network routes, CLI and reports.
bin_PROGRAMS += dtsim
dtsim_SOURCES = sim/dtsim.c sim/player.c sim/player.h sim/network.c sim/network.h
dtsim_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim
dtsim_LDADD = sim/libdtsimengine.a $(DTCORE_LIBS)
dist_man_MANS += man/dtsim.1

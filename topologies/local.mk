# Topology zoo, installed under $(pkgdatadir)/topologies.
dist_topologies_DATA += $(wildcard $(srcdir)/topologies/*.yaml)

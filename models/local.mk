# Model zoo, installed under $(pkgdatadir)/models.
dist_models_DATA += $(wildcard $(srcdir)/models/*.yaml)

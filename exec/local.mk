# exec: see README
include exec/cpu.mk

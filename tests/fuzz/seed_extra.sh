#!/bin/sh
# Seeds the test suite does not write (called by seed-corpus.sh with the directory of raw
# seeds): IDX pairs for the harness's shapes (plain: fuzz_idx.c gzips them on option bits 3
# and 4), including an (H, W, C) file read as (C, H, W), and two CIFAR-10 batch files.
set -eu
raw=$1
mkdir -p "$raw/idx" "$raw/cifar"
# options byte, images length (2 bytes, little-endian), images, labels
# shape 0, (4): 3 items of 4 pixels, labels 0 1 9
{ printf '\000\030\000'
  printf '\000\000\010\002\000\000\000\003\000\000\000\004'
  printf '\000\001\002\003\100\101\102\103\377\376\375\374'
  printf '\000\000\010\001\000\000\000\003\000\001\011'; } >"$raw/idx/extra-flat"
# shape 1, (2, 3): 3 items, second half only (bit 5)
{ printf '\041\042\000'
  printf '\000\000\010\003\000\000\000\003\000\000\000\002\000\000\000\003'
  printf '\001\002\003\004\005\006\007\010\011\012\013\014\015\016\017\020\021\022'
  printf '\000\000\010\001\000\000\000\003\002\003\004'; } >"$raw/idx/extra-seq"
# shape 4, (C, H, W) = (2, 1, 3) from a (1, 3, 2) file: 2 items, gzip both (bits 3, 4)
{ printf '\034\040\000'
  printf '\000\000\010\004\000\000\000\002\000\000\000\001\000\000\000\003\000\000\000\002'
  printf '\001\002\003\004\005\006\007\010\011\012\013\014'
  printf '\000\000\010\001\000\000\000\002\001\000'; } >"$raw/idx/extra-hwc"
# two CIFAR-10 files of one record each (bit 3; first file 3073 = 0x0c01 bytes)
{ printf '\010\001\014\003'; head -c 3072 /dev/zero
  printf '\007'; head -c 3072 /dev/zero | tr '\000' '\200'; } >"$raw/cifar/extra-two-files"

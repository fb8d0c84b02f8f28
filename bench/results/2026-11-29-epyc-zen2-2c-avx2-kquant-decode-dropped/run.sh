#!/bin/bash
# Alternating rounds of kquant_decode_hot.cpp (../2026-11-29-epyc-zen2-2c-avx2-int8-16bit-sums)
# built four ways against the kernels library: base (c1455d9), sb (superblock-activations.patch),
# pf (per-block prefetch unrolled), pf2 (exact record lines per block). One core.
# usage: run.sh OUTDIR  (binaries kq_base kq_sb kq_new kq_new2 in the current directory)
out=$1; mkdir -p "$out"
for round in 1 2 3; do
  for b in base sb new new2; do
    for cfg in "256 4 1" "4096 4 1" "32768 4 1" "256 5 1" "256 6 1" "4096 6 1" "32768 6 1" "1024 4 4" "32768 4 4"; do
      set -- $cfg
      taskset -c 0 ./kq_$b $1 $2 $3 | tail -1 | sed "s/^/$b r$round: /" >> "$out/kq_hot.log"
    done
  done
done

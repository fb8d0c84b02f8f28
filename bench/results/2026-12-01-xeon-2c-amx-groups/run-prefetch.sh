#!/bin/sh
# The AMX panel prefetch (--blocking amxpf=BYTES; 0 = the hardware prefetcher alone) on the
# batched decode rows, alternated in rounds: bench_linear_bf16 --isa amx, TinyLlama, 32 and 64
# rows (MS overrides), weights cycled from memory, the Intel entry's blocking otherwise.
# BIN: the bench folder (default build-bench/bench); THREADS (default 2); ROUNDS (default 2).
set -eu
BIN=${BIN:-build-bench/bench}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
INTEL="k=512,tile=6x64,prefetch=on,amx=0,split=dynamic,dpf=8192,products=fma"
r=1
while [ "$r" -le "$ROUNDS" ]; do
  for pf in 0 4096 16384; do
    echo "== round $r amxpf=$pf"
    "$BIN/bench_linear_bf16" --quick --threads "$THREADS" --isa amx --model tinyllama --m "${MS:-32,64}" \
      --blocking "$INTEL,amxpf=$pf"
  done
  r=$((r + 1))
done

#!/bin/sh
# The AMX panel prefetch (--blocking amxpf=BYTES; 0 = the hardware prefetcher alone) on the
# batched decode rows, alternated in rounds: bench_linear_bf16 --isa amx, TinyLlama, 32 and 64
# rows (MS overrides), weights cycled from memory, the Intel entry's blocking otherwise.
# BIN, THREADS, ROUNDS: common.sh.
set -eu
. "$(dirname "$0")/common.sh"
linears() {
  "$BIN/bench_linear_bf16" --quick --threads "$THREADS" --isa amx --model tinyllama --m "${MS:-32,64}" \
    --blocking "$INTEL,$1"
}
alternate "" linears amxpf=0 amxpf=4096 amxpf=16384

#!/bin/sh
# The AMX work split before and after 2026-12-01, alternated in rounds on the same cores:
# amxprefill=64 is the rule before (two-panel groups, a group's rows cut over threads when there
# are under ~8 tasks a thread, from 64 rows), amxprefill=128 the default after (below 128 rows
# one-panel groups over every row). Both otherwise the Intel entry's blocking, the AMX panel
# prefetch off (amxpf=0: run.log was made before it existed; it is on by default since, see
# run-prefetch.sh).
#   1. bench_linear_bf16 --isa amx at 64 and 512 rows, weights cycled from memory at 64;
#   2. bench_engine at c = 64 (128 in / 64 out) on QWEN, a random Qwen2.5-0.5B-shaped folder
#      (bench/make_random_checkpoint.py --shape qwen2.5-0.5b DIR), whose O and down projections
#      (14 two-panel groups) the rule before cut on two threads.
# BIN, THREADS, ROUNDS: common.sh.
set -eu
. "$(dirname "$0")/common.sh"
linears() { "$BIN/bench_linear_bf16" --quick --threads "$THREADS" --isa amx --m 64,512 --blocking "$INTEL,amxpf=0,$1"; }
engine() {
  "$BIN/bench_engine" --model "$QWEN" --threads "$THREADS" --concurrency 64 --prompt-len 128 --output-len 64 \
    --prefix-len 0 --blocking "$INTEL,amxpf=0,$1"
}
alternate "" linears amxprefill=64 amxprefill=128
if [ -n "${QWEN:-}" ]; then alternate "engine " engine amxprefill=64 amxprefill=128; fi

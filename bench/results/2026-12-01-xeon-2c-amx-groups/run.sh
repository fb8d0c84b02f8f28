#!/bin/sh
# The AMX work split before and after 2026-12-01, alternated in rounds on the same cores:
# amxprefill=64 is the rule before (two-panel groups, a group's rows cut over threads when there
# are under ~8 tasks a thread, from 64 rows), amxprefill=128 the default after (below 128 rows
# one-panel groups over every row). Both otherwise the Intel entry's blocking.
#   1. bench_linear_bf16 --isa amx at 64 and 512 rows, weights cycled from memory at 64;
#   2. bench_engine at c = 64 (128 in / 64 out) on QWEN, a random Qwen2.5-0.5B-shaped folder
#      (bench/make_random_checkpoint.py --shape qwen2.5-0.5b DIR), whose O and down projections
#      (14 two-panel groups) the rule before cut on two threads.
# BIN: the bench folder (default build-bench/bench); THREADS (default 2); ROUNDS (default 2).
set -eu
BIN=${BIN:-build-bench/bench}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
INTEL="k=512,tile=6x64,prefetch=on,amx=0,split=dynamic,dpf=8192,products=fma,amxpf=0"
r=1
while [ "$r" -le "$ROUNDS" ]; do
  for p in 64 128; do
    echo "== round $r amxprefill=$p"
    "$BIN/bench_linear_bf16" --quick --threads "$THREADS" --isa amx --m 64,512 --blocking "$INTEL,amxprefill=$p"
  done
  r=$((r + 1))
done
if [ -n "${QWEN:-}" ]; then
  r=1
  while [ "$r" -le "$ROUNDS" ]; do
    for p in 64 128; do
      echo "== engine round $r amxprefill=$p"
      "$BIN/bench_engine" --model "$QWEN" --threads "$THREADS" --concurrency 64 --prompt-len 128 --output-len 64 \
        --prefix-len 0 --blocking "$INTEL,amxprefill=$p"
    done
    r=$((r + 1))
  done
fi

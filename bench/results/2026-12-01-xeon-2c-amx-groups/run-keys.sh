#!/bin/sh
# AMX column groups of one or two panels, and the rows from which a group's rows split over
# threads, alternated in rounds on the same cores. BENCH: bench_linear_bf16 (default
# build-bench/bench/bench_linear_bf16); THREADS (default 2); ROUNDS (default 2).
set -eu
BENCH=${BENCH:-build-bench/bench/bench_linear_bf16}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
# The Intel entry's blocking; only the AMX keys differ between the rows.
BASE="k=512,tile=6x64,prefetch=on,amx=0,split=dynamic,dpf=8192,products=fma"
r=1
while [ "$r" -le "$ROUNDS" ]; do
  for v in amxgroup=2,amxsplit=64 amxgroup=1,amxsplit=64 amxgroup=1,amxsplit=128; do
    echo "== round $r $v"
    "$BENCH" --quick --threads "$THREADS" --isa amx --m 16,64,512 --blocking "$BASE,$v"
  done
  r=$((r + 1))
done

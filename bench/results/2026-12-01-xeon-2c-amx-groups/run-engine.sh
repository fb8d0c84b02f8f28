#!/bin/sh
# The c = 64 engine (bench_engine, 128 in / 64 out) on MODEL before 2026-12-01's AMX changes
# (amxprefill=64,amxpf=0) and with them (amxprefill=128,amxpf=16384, the defaults), the Intel
# entry's blocking otherwise, alternating. BIN (default build-bench/bench); THREADS (default 2);
# ROUNDS (default 2).
set -eu
BIN=${BIN:-build-bench/bench}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
: "${MODEL:?MODEL=a checkpoint folder or GGUF file}"
INTEL="k=512,tile=6x64,prefetch=on,amx=0,split=dynamic,dpf=8192,products=fma"
r=1
while [ "$r" -le "$ROUNDS" ]; do
  for v in amxprefill=64,amxpf=0 amxprefill=128,amxpf=16384; do
    echo "== engine round $r $v"
    "$BIN/bench_engine" --model "$MODEL" --threads "$THREADS" --concurrency 64 --prompt-len 128 --output-len 64 \
      --prefix-len 0 --blocking "$INTEL,$v"
  done
  r=$((r + 1))
done

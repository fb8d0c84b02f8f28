#!/bin/sh
# The c = 64 engine (bench_engine, 128 in / 64 out) on MODEL before 2026-12-01's AMX changes
# (amxprefill=64,amxpf=0) and with them (amxprefill=128,amxpf=16384, the defaults), the Intel
# entry's blocking otherwise, alternating. BIN, THREADS, ROUNDS: common.sh.
set -eu
: "${MODEL:?MODEL=a checkpoint folder or GGUF file}"
. "$(dirname "$0")/common.sh"
engine() {
  "$BIN/bench_engine" --model "$MODEL" --threads "$THREADS" --concurrency 64 --prompt-len 128 --output-len 64 \
    --prefix-len 0 --blocking "$INTEL,$1"
}
alternate "engine " engine amxprefill=64,amxpf=0 amxprefill=128,amxpf=16384

#!/bin/bash
# Served comparison on one GGUF file: slabserve against llama-server on cpus 0-1, alternating,
# bench/bench_serve.py as the load (128 in / 64 out, ignore_eos, 2c prompts a level).
#   SLAB=build-bench/slabserve LLAMA=TREE/build-native/bin/llama-server \
#     bench/results/2026-11-29-epyc-zen2-2c-scaling/serve_ab.sh MODEL.gguf OUTDIR [ROUNDS] ["1 4 16"]
set -u
MODEL=$1; OUT=$2; ROUNDS=${3:-2}; CONCS=${4:-"1 4 16"}
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
SLAB=${SLAB:-$REPO/build-bench/slabserve}
LLAMA=${LLAMA:?LLAMA: the llama-server binary}
mkdir -p $OUT
wait_ready() { for i in $(seq 1 240); do curl -sf http://127.0.0.1:$1/health > /dev/null && return 0; sleep 0.5; done; return 1; }
for r in $(seq 1 $ROUNDS); do
  for s in slabserve llama.cpp; do
    if [ $s = slabserve ]; then
      taskset -c 0,1 $SLAB serve --model $MODEL --threads 2 --port 8101 --max-num-seqs 64 > $OUT/$s-r$r.server.log 2>&1 &
    else
      taskset -c 0,1 $LLAMA -m $MODEL -t 2 -tb 2 --parallel 16 -c 8192 -ngl 0 --cont-batching --port 8101 > $OUT/$s-r$r.server.log 2>&1 &
    fi
    pid=$!
    wait_ready 8101 || { echo "$s not ready"; kill $pid; continue; }
    python3 $REPO/bench/bench_serve.py --base-url http://127.0.0.1:8101 --random-input-len 8 --random-output-len 4 --num-prompts 1 --max-concurrency 1 --vocab-size 32000 --quiet > /dev/null 2>&1
    for c in $CONCS; do
      n=$(( c * 2 )); [ $n -lt 4 ] && n=4
      python3 $REPO/bench/bench_serve.py --base-url http://127.0.0.1:8101 --random-input-len 128 --random-output-len 64 \
        --num-prompts $n --max-concurrency $c --vocab-size 32000 --seed $((r * 100 + c)) --ignore-eos --save-result \
        --result-dir $OUT --result-filename $s-c$c-r$r.json > $OUT/$s-c$c-r$r.txt 2>&1
      echo "$s r$r c$c: $(grep -E 'Output token throughput|Median TPOT' $OUT/$s-c$c-r$r.txt | tr -s ' ' | tr '\n' ' ')"
    done
    kill -TERM $pid; wait $pid 2>/dev/null
  done
done

#!/bin/sh
# Old engine (sampling on the loop thread; 7b25b01 with this bench_engine.cpp, serial columns
# zeroed) and new (65d263e: sampling on the pool), alternating, then the new one greedy.
# Usage from the repo root: OLD=/path/to/old/bench_engine sh bench/results/.../measure.sh
MODEL=${MODEL:-/tmp/slab-quant/tinyllama-random}
NEW=${NEW:-build-dev/bench/bench_engine}
ARGS="--model $MODEL --concurrency 64 --prompt-len 16 --output-len 24 --prefix-len 64 --suffix-len 8"
lscpu | grep -E "Model name|^CPU\(s\)"
grep -m2 -E "^(cpu family|model)\s" /proc/cpuinfo
for round in 1 2; do
  for b in "$OLD" "$NEW"; do
    echo "== $b, round $round, T 0.8 top_p 0.95"
    $b $ARGS --temperature 0.8 --top-p 0.95 | grep -E "^(concurrency|64)"
  done
done
echo "== $NEW, greedy"
$NEW $ARGS | grep -E "^(concurrency|64)"

#!/bin/bash
# Base (942fd73, BASE=its build-bench) against this commit (NEW=build-bench), alternating, three
# rounds: the W4 g32 hot loop (../2026-11-29-epyc-zen2-2c-avx2-int8-16bit-sums/kquant_decode_hot.cpp with a group argument, linked against each
# build's kernels: W_BASE, W_NEW), the W4 g32 linears at M = 1 and Q4_0 decode on 1 and 2 cores.
# usage: run.sh OUTDIR MODEL_Q4_0
out=$1; model=$2; mkdir -p "$out"
for round in 1 2 3; do
  for b in base new; do
    if [ $b = base ]; then B=$BASE; W=$W_BASE; else B=$NEW; W=$W_NEW; fi
    for cfg in "32768 4 1 32" "256 4 1 32"; do
      set -- $cfg
      taskset -c 0 $W $1 $2 $3 $4 | tail -1 | sed "s/^/$b r$round: /" >> "$out/w4_hot.log"
    done
    for t in 1 2; do
      c=$([ $t = 1 ] && echo 0 || echo 0,1)
      taskset -c $c $B/bench/bench_linear_quant --quick --threads $t --kinds w4g32 --m 1 > "$out/linear-$b-${t}t-r$round.log" 2>&1
      taskset -c $c $B/bench/bench_model --model "$model" --prompt-len 16 --decode-tokens 64 --reps 1 --threads $t > "$out/model-$b-${t}t-r$round.log" 2>&1
    done
  done
done

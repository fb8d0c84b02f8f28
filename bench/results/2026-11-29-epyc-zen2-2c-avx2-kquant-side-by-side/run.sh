#!/bin/bash
# Base (c1455d9, BASE=its build-bench) against this commit (NEW=build-bench), alternating,
# three rounds: the hot loop (kquant_decode_hot.cpp of ../2026-11-29-epyc-zen2-2c-avx2-int8-16bit-sums,
# linked against each build's kernels: KQ_BASE, KQ_NEW), the K-quant linears at M = 1 and
# Q4_K_M decode on 1 and 2 cores. usage: run.sh OUTDIR MODEL_Q4_K_M
out=$1; model=$2; mkdir -p "$out"
for round in 1 2 3; do
  for b in base new; do
    if [ $b = base ]; then B=$BASE; KQ=$KQ_BASE; else B=$NEW; KQ=$KQ_NEW; fi
    for cfg in "32768 4 1" "32768 5 1" "32768 6 1" "256 4 1" "256 6 1"; do
      set -- $cfg
      taskset -c 0 $KQ $1 $2 $3 | tail -1 | sed "s/^/$b r$round: /" >> "$out/kq_hot.log"
    done
    for t in 1 2; do
      c=$([ $t = 1 ] && echo 0 || echo 0,1)
      taskset -c $c $B/bench/bench_linear_quant --quick --threads $t --kinds q4k,q6k --m 1 > "$out/linear-$b-${t}t-r$round.log" 2>&1
      taskset -c $c $B/bench/bench_model --model "$model" --prompt-len 16 --decode-tokens 64 --reps 1 --threads $t > "$out/model-$b-${t}t-r$round.log" 2>&1
    done
  done
done

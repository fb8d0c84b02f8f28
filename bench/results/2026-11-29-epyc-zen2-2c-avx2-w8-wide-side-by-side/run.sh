#!/bin/bash
# Base (5fef2a4, BASE=its build-bench) against this commit (NEW=build-bench), alternating, three
# rounds: the W8 decode hot loop (../2026-11-29-epyc-zen2-2c-avx2-int8-16bit-sums/kquant_decode_hot.cpp: N BITS M GROUP, linked against
# each build's kernels: W_BASE, W_NEW), the W8 per-channel and g128 linears at M = 1, and decode
# of the BF16 GGUF under --quantization w8 (per-channel) on 1 and 2 cores.
# usage: run.sh OUTDIR MODEL_BF16_GGUF
out=$1; model=$2; mkdir -p "$out"
for round in 1 2 3; do
  for b in base new; do
    if [ $b = base ]; then B=$BASE; W=$W_BASE; else B=$NEW; W=$W_NEW; fi
    for cfg in "32768 8 1 0" "32768 8 1 128" "256 8 1 0"; do
      set -- $cfg
      taskset -c 0 $W $1 $2 $3 $4 | tail -1 | sed "s/^/$b r$round group $4: /" >> "$out/w8_hot.log"
    done
    for t in 1 2; do
      c=$([ $t = 1 ] && echo 0 || echo 0,1)
      taskset -c $c $B/bench/bench_linear_quant --quick --threads $t --kinds w8,w8g128 --m 1 > "$out/linear-$b-${t}t-r$round.log" 2>&1
      taskset -c $c $B/bench/bench_model --model "$model" --quantization w8 --prompt-len 16 --decode-tokens 48 --reps 1 --threads $t > "$out/model-$b-${t}t-r$round.log" 2>&1
    done
  done
done

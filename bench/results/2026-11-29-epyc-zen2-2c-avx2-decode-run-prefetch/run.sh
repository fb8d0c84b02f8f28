#!/bin/sh
# Base (3ff1395, BASE = its build-bench) against this commit (NEW = build-bench), alternating,
# four rounds: the quantized linears at M = 1 (bench_linear_quant) and Q4_K_M decode
# (bench_model), on 1 and 2 threads. usage: run.sh OUTDIR MODEL_Q4_K_M
out=$1; model=$2; mkdir -p "$out"
for i in 1 2 3 4; do
  for t in 1 2; do
    for b in base new; do
      if [ $b = base ]; then B=$BASE; else B=$NEW; fi
      $B/bench/bench_linear_quant --threads $t --m 1 --kinds q4k,q6k,w4g32 --isa avx2 > "$out/linear-t$t-$b-$i.log" 2>&1
      echo "$i t$t $b $(grep -E '^(o|up|down) ' "$out/linear-t$t-$b-$i.log" | awk '{printf "%s/%s %s  ", $1,$2,$9}')"
    done
  done
done | tee "$out/linear-summary.log"
for i in 1 2 3 4; do
  for t in 1 2; do
    for b in base new; do
      if [ $b = base ]; then B=$BASE; else B=$NEW; fi
      $B/bench/bench_model -m "$model" --prompt-len 16 --decode-tokens 48 --reps 1 --threads $t > "$out/model-t$t-$b-$i.log" 2>&1
      echo "$i t$t $b $(grep -E '^decode: |^decode at' "$out/model-t$t-$b-$i.log" | sed -E 's/decode: batch 1, 48 steps: //; s/ \(median step.*//; s/ \(median over.*//' | tr '\n' ' ')"
    done
  done
done | tee "$out/model-summary.log"

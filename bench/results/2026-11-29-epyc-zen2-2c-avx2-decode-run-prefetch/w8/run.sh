#!/bin/sh
# Base (737d584, BASE = its build-bench) against 737d584 + w8_next_tile_prefetch.patch (NEW),
# alternating, four rounds: the W8 linears at M = 1 (bench_linear_quant) and decode of a Q8_0 GGUF and of BF16
# weights quantized at load (--quantization w8), on 1 and 2 threads.
# usage: run.sh OUTDIR MODEL_Q8_0 MODEL_BF16
out=$1; q8=$2; bf16=$3; mkdir -p "$out"
for i in 1 2 3 4; do
  for t in 1 2; do
    for b in base new; do
      if [ $b = base ]; then B=$BASE; else B=$NEW; fi
      $B/bench/bench_linear_quant --threads $t --m 1 --kinds w8,w8g32 --isa avx2 > "$out/linear-t$t-$b-$i.log" 2>&1
      echo "$i t$t $b $(grep -E '^(o|up|down) ' "$out/linear-t$t-$b-$i.log" | awk '{printf "%s/%s %s  ", $1,$2,$9}')"
    done
  done
done | tee "$out/linear-summary.log"
for i in 1 2 3; do
  for t in 1 2; do
    for m in q8_0 w8; do
      for b in base new; do
        if [ $b = base ]; then B=$BASE; else B=$NEW; fi
        if [ $m = q8_0 ]; then args="-m $q8"; else args="-m $bf16 --quantization w8"; fi
        $B/bench/bench_model $args --prompt-len 16 --decode-tokens 48 --reps 1 --threads $t > "$out/model-$m-t$t-$b-$i.log" 2>&1
        echo "$i $m t$t $b $(grep -E '^decode: |^decode at' "$out/model-$m-t$t-$b-$i.log" | sed -E 's/decode: batch 1, 48 steps: //; s/ \(median step.*//; s/ \(median over.*//' | tr '\n' ' ')"
      done
    done
  done
done | tee "$out/model-summary.log"

#!/bin/bash
BM=/work/main/build-dev/bench/bench_model
for rep in 1 2 3 4; do
  for cfg in "X=0" "W4T1=1"; do
    s=$(env $cfg $BM -m /tmp/slab-quant/tinyllama-random-Q4_0.gguf --prompt-len 16 --decode-tokens 64 --batch 1 --reps 1 2>&1 | grep -E "^decode:|^roofline" | sed -E 's/.*64 steps: ([0-9.]+) tokens.*/\1/; s/.*read bandwidth ([0-9.]+) GB.*/bw \1/' | tr '\n' ' ')
    echo "model rep $rep [$cfg] Q4_0 $s"
  done
done

#!/bin/bash
B=/work/main/build-dev/bench/bench_linear_quant
BM=/work/main/build-dev/bench/bench_model
for rep in 1 2 3 4; do
  for cfg in "KQV=0" "KQV=2" "KQV=2 KQNP1=1"; do
    out=$(env $cfg $B --m 1,4 --kinds q4k,q6k --ops up,down --reps 5 2>&1 | grep -E "^(up|down)" | awk '{printf "%s/%s/m%s %s; ", $1,$2,$3,$7}')
    echo "rep $rep [$cfg] $out"
  done
done
for rep in 1 2 3; do
  for cfg in "KQV=0" "KQV=2" "KQV=2 KQNP1=1"; do
    s=$(env $cfg $BM -m /tmp/slab-quant/tinyllama-random-Q4_K_M.gguf --prompt-len 16 --decode-tokens 64 --batch 1 --reps 1 2>&1 | grep -E "^decode:|^roofline" | sed -E 's/.*64 steps: ([0-9.]+) tokens.*/\1/; s/.*read bandwidth ([0-9.]+) GB.*/bw \1/' | tr '\n' ' ')
    echo "model rep $rep [$cfg] $s"
  done
done

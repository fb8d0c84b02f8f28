#!/bin/bash
# Batched quantized linears on the 2-core Xeon, base against new, alternating:
#  1. bench_linear_quant, one core, --no-amx: the first row tile of a batched call streaming its
#     panels from memory (all formats) against streaming at M <= 8 only;
#  2. bench_model batch-16 decode on two cores with AMX on: the AMX minimum of 32 rows for W4 and
#     K-quant weights (quant_amx_min_m) against 16 for every format.
# BASE_LQ/NEW_LQ and BASE_BM/NEW_BM are the two builds' bench_linear_quant and bench_model.
set -u
M=${MODELS:-/work/models}
O=${OUT:-$(dirname "$0")}
for r in 1 2 3; do
  for b in BASE NEW; do
    bin=$(eval echo "\$${b}_LQ")
    taskset -c 0 "$bin" --quick --threads 1 --no-amx --m 16,32,128 --kinds q4k,q6k,w4g32,w8g32 --ops up --cycle-x 4 \
      > "$O/linear-$b-$r.log" 2>&1
  done
done
for r in 1 2; do
  for q in Q4_K_M Q4_0 Q8_0; do
    for b in BASE NEW; do
      bin=$(eval echo "\$${b}_BM")
      taskset -c 0,1 "$bin" --model "$M/tl-$q.gguf" --threads 2 --prompt-len 16 --decode-tokens 12 --batch 16 --reps 1 \
        > "$O/$q-$b-$r.log" 2>&1
    done
  done
done

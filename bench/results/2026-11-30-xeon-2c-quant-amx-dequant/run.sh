#!/bin/bash
# The AMX-BF16 quantized prefill's dequantization (integer rounding; W4 and Q4_K nibbles read in
# place) on a 2-core Xeon with AMX: the +amxbf16 linears and batch-64 decode / prefill-512 of
# GGUF TinyLlama, the build before against this one, alternating.
#   BASE=OLD/build-bench/bench MODELS=DIR bench/results/2026-11-30-xeon-2c-quant-amx-dequant/run.sh
# BASE: bench_linear_quant and bench_model built at 39bf6a2. MODELS: tl-Q4_K_M.gguf, tl-Q4_0.gguf
# and tl-Q8_0.gguf as in ../2026-11-30-xeon-2c-quant-amx-bf16/run.sh.
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
B=${BASE:?BASE: the bench folder of the build before}
M=${MODELS:-/work/models}
O=${OUT:-bench/results/2026-11-30-xeon-2c-quant-amx-dequant}
mkdir -p $O/raw
lscpu > $O/raw/lscpu.txt
for r in 1 2 3; do
  for b in base new; do
    bin=$B/bench_linear_quant; [ $b = new ] && bin=build-bench/bench/bench_linear_quant
    $bin --threads 2 --m 64,128,512 --kinds w8g32,w4g32,q4k,q6k --ops up,down --reps 5 --one-copy --quick \
      > $O/raw/linears-$b-r$r.txt 2>&1
  done
done
for r in 1 2; do
  for q in Q4_K_M Q4_0 Q8_0; do
    for b in base new; do
      bin=$B/bench_model; [ $b = new ] && bin=build-bench/bench/bench_model
      $bin --model $M/tl-$q.gguf --threads 2 --prompt-len 32 --batch 64 --decode-tokens 16 --reps 1 \
        > $O/raw/batch64-$q-$b-r$r.txt 2>&1
      $bin --model $M/tl-$q.gguf --threads 2 --prompt-len 512 --decode-tokens 4 --reps 3 \
        > $O/raw/prefill-$q-$b-r$r.txt 2>&1
    done
  done
done
grep -H -E '^(prefill|decode)' $O/raw/batch64-*.txt $O/raw/prefill-*.txt

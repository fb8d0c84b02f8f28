#!/bin/bash
# The AMX-BF16 quantized path's fewest rows (quant_amx_bf16_min_m) on a 2-core Xeon with AMX:
# batched decode of 24-48 GGUF TinyLlama sequences, the build before (minimum 64) against this
# one, alternating (Q8_0's minimum stayed 64: a control).
#   BASE=OLD/build/bench MODELS=DIR bench/results/2026-11-30-xeon-2c-quant-amx-bf16-rows/run.sh
# BASE: bench_model built at 0b3f2dd. MODELS: tl-Q4_K_M.gguf, tl-Q4_0.gguf and tl-Q8_0.gguf as in
# ../2026-11-30-xeon-2c-quant-amx-bf16/run.sh.
# The linears in raw/linears-min16-*.txt came from bench_linear_quant of a build whose minimum
# was lowered to 16 for the run (so that every row count printed a +amxbf16 row), weights in
# L2/L3:
#   bench_linear_quant --threads 2 --m 16,32,48,64 --kinds w8g32,w4g32,q4k,q5k,q6k --ops up,down \
#     --reps 5 --one-copy --quick            (twice; then --m 20,24,28 once)
# raw/linears-dram-*.txt: weights streaming from memory, with the build at the first minimums
# (W8 32, the others 20), which print +amxbf16 rows from there:
#   bench_linear_quant --threads 2 --m 24,32 --kinds w8g32,w4g32,q4k,q6k --ops up,down --reps 5 \
#     --cycle-x 1 --quick;  --m 24,32,48,64 --kinds w8g32,q4k,q5k (twice);  --m 36,40,44 --kinds q4k
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
B=${BASE:?BASE: the bench folder of the build before}
M=${MODELS:-/work/models}
O=${OUT:-bench/results/2026-11-30-xeon-2c-quant-amx-bf16-rows}
mkdir -p $O/raw
lscpu > $O/raw/lscpu.txt
for r in 1 2; do
  for q in Q4_K_M Q4_0 Q8_0; do
    batches="24 32 48"; [ $q = Q4_0 ] && batches="24 32"; [ $q = Q8_0 ] && batches="32"
    for batch in $batches; do
      order="base new"; [ $r = 2 ] && order="new base"
      for b in $order; do
        bin=$B/bench_model; [ $b = new ] && bin=build-bench/bench/bench_model
        $bin --model $M/tl-$q.gguf --threads 2 --prompt-len 32 --batch $batch --decode-tokens 16 --reps 1 \
          > $O/raw/batch$batch-$q-$b-r$r.txt 2>&1
      done
    done
  done
done

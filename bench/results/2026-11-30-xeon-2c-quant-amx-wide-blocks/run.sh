#!/bin/bash
# Quantized weights with 128-element activation blocks (per channel, g128) on a 2-core Xeon with
# AMX: the INT8 tiles against the AMX-BF16 prefill path per linear (from the build before the
# change, the last that runs both for these formats), then prefill-512 and batch-64 decode of
# TinyLlama quantized at load, the build before against this one, alternating.
#   BASE=OLD/build-bench/bench MODEL=tl-bf16.gguf bench/results/2026-11-30-xeon-2c-quant-amx-wide-blocks/run.sh
# BASE: bench_linear_quant and bench_model built at 610029c. MODEL: a TinyLlama-shaped BF16 GGUF
# (bench/make_random_checkpoint.py --gguf, as in ../2026-11-30-xeon-2c-fp32-products/run.sh).
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
B=${BASE:?BASE: the bench folder of the build before}
MODEL=${MODEL:-/work/models/tl-bf16.gguf}
O=${OUT:-bench/results/2026-11-30-xeon-2c-quant-amx-wide-blocks}
mkdir -p $O/raw/prefill $O/raw/batch64
lscpu > $O/raw/lscpu.txt
$B/bench_linear_quant --threads 2 --m 64,128,512 --kinds w8,w8g128,w4g128,w4g128z,w8g32 --ops up,down --reps 5 \
  --one-copy --quick > $O/raw/linears.txt 2>&1
python3 $O/compare_paths.py $O/raw/linears.txt
for r in 1 2; do
  for q in w8 w4g128 w4; do
    for b in old new; do
      bin=$B/bench_model; [ $b = new ] && bin=build-bench/bench/bench_model
      $bin --model $MODEL --quantization $q --threads 2 --prompt-len 512 --decode-tokens 4 --reps 3 \
        > $O/raw/prefill/$q-$b-r$r.txt 2>&1
    done
  done
done
for r in 1 2; do
  for q in w8 w4g128; do
    for b in old new; do
      bin=$B/bench_model; [ $b = new ] && bin=build-bench/bench/bench_model
      $bin --model $MODEL --quantization $q --threads 2 --prompt-len 32 --batch 64 --decode-tokens 16 --reps 1 \
        > $O/raw/batch64/$q-$b-r$r.txt 2>&1
    done
  done
done
grep -H -E '^(prefill|decode)' $O/raw/prefill/*.txt $O/raw/batch64/*.txt

#!/bin/bash
# BF16 linears of 9-15 rows on the AMX tiles against the AVX-512 large-M tiles, and batch-12 decode
# of BF16 TinyLlama before (AMX from 16 rows) and after (from 9), on a 2-core Xeon with AMX.
#   BASE=OLD/build-bench/bench MODEL=tl-bf16.gguf bench/results/2026-11-30-xeon-2c-amx-rows/run.sh
# BASE: bench_model built at eb6eb8d. The linears: this build's bench_linear_bf16 (--isa amx runs
# the AMX path for every M it takes; without it, AVX-512 only), weights cycled through 16x the L3,
# alternating, round 2 in the reverse order. raw/bfm-*.txt: the same at M = 16..64 (AMX took those
# already); the runs at M = 2..12 in the README came from a build with the minimum lowered to 1.
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
B=${BASE:?BASE: the bench folder of the build before}
MODEL=${MODEL:-/work/models/tl-bf16.gguf}
O=${OUT:-bench/results/2026-11-30-xeon-2c-amx-rows}
mkdir -p $O/raw
lscpu > $O/raw/lscpu.txt
for r in 1 2; do
  order="amx avx"; [ $r = 2 ] && order="avx amx"
  for isa in $order; do
    a=""; [ $isa = amx ] && a="--isa amx"
    build-bench/bench/bench_linear_bf16 --threads 2 --m 9,12,15 --model tinyllama --reps 5 $a --quick 2>&1 |
      grep -E "^tinyllama" > $O/raw/bfs-$isa-r$r.txt
  done
done
for r in 1 2; do
  order="base new"; [ $r = 2 ] && order="new base"
  for b in $order; do
    bin=$B/bench_model; [ $b = new ] && bin=build-bench/bench/bench_model
    $bin --model $MODEL --threads 2 --prompt-len 32 --batch 12 --decode-tokens 16 --reps 1 > $O/raw/batch12-bf16-$b-r$r.txt 2>&1
  done
done

#!/bin/sh
# run_ab.sh [ROUNDS]: base (BASE, default /tmp/base/build/bench) against this change, alternating
# rounds: the W4 g32 / g128 and W8 g32 linears at M = 1, 16 and 128 from memory; Q4_0 decode at
# 1 and 2 threads, its decode of 16 sequences and its prefill-512 at 2 threads; Q8_0 prefill-512
# at 2 threads.
. "$(dirname "$0")/../../2026-11-30-epyc-zen2-2c-q5k-fifth-bits/raw/ab_lib.sh"
for round in $(seq 1 "${1:-3}"); do
  for build in base new; do
    linears $build "round $round $build linears from memory" --m 1,16,128 --kinds w4g32,w4g128,w8g32 --ops o,up
    for th in 1 2; do
      model $build "round $round $build Q4_0 decode threads $th" Q4_0 $th 16 48 "^decode:|decode at"
    done
    model $build "round $round $build Q4_0 decode batch 16 threads 2" Q4_0 2 16 16 "^decode:" --batch 16 --reps 1
    model $build "round $round $build Q4_0 prefill-512 threads 2" Q4_0 2 512 1 "^prefill:" --reps 2
    model $build "round $round $build Q8_0 prefill-512 threads 2" Q8_0 2 512 1 "^prefill:" --reps 2
  done
done

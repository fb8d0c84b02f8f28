#!/bin/sh
# run_ab.sh [ROUNDS]: base against this change, alternating rounds: the q4k and w4g32 linears at
# M = 16, 32 and 128 with the weights cycling through DRAM copies (bench_linear_quant as of this
# change); Q4_K_M and Q4_0 decode of 16 sequences at 1 and 2 threads, and Q4_K_M prefill-512 at 2.
. "$(dirname "$0")/../../2026-11-30-epyc-zen2-2c-q5k-fifth-bits/raw/ab_lib.sh"
# The base's bench_linear_quant kept batched weights in cache: both sides run this checkout's
# bench program, linked against each side's kernels (LINEARS_BASE, LINEARS_NEW).
LINEARS_BASE=${LINEARS_BASE:-/tmp/bl_base_mem}
LINEARS_NEW=${LINEARS_NEW:-$NEW/bench_linear_quant}
for round in $(seq 1 "${1:-3}"); do
  for build in base new; do
    if [ $build = base ]; then lq=$LINEARS_BASE; else lq=$LINEARS_NEW; fi
    echo "== round $round $build linears from memory"
    "$lq" --quick --threads 1 --m 16,32,128 --kinds q4k,w4g32 --ops o,up 2>&1 | grep -E "^(o|up|down) "
    for file in Q4_K_M Q4_0; do
      for th in 1 2; do
        model $build "round $round $build $file decode batch 16 threads $th" $file $th 16 16 "^decode:|decode phases" \
          --batch 16 --reps 1
      done
    done
    model $build "round $round $build Q4_K_M prefill-512 threads 2" Q4_K_M 2 512 1 "^prefill:" --reps 2
  done
done

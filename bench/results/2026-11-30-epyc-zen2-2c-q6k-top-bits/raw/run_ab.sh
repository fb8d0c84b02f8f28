#!/bin/sh
# run_ab.sh [ROUNDS]: base (BASE, default /tmp/base/build/bench) against this change, alternating
# rounds: the q6k linears at M = 1 from cache (--one-copy) and at M = 1, 16 and 128 from memory;
# the Q6_K file's decode at 1 and 2 threads and its prefill-512 at 2; Q4_K_M prefill-512 at 2.
. "$(dirname "$0")/../../2026-11-30-epyc-zen2-2c-q5k-fifth-bits/raw/ab_lib.sh"
for round in $(seq 1 "${1:-3}"); do
  for build in base new; do
    linears $build "round $round $build linears one-copy M=1" --one-copy --m 1 --kinds q6k --ops o,up
    linears $build "round $round $build linears from memory" --m 1,16,128 --kinds q6k --ops o,up
    for th in 1 2; do
      model $build "round $round $build Q6_K decode threads $th" Q6_K $th 16 48 "^decode:"
    done
    model $build "round $round $build Q6_K prefill-512 threads 2" Q6_K 2 512 1 "^prefill:" --reps 2
    model $build "round $round $build Q4_K_M prefill-512 threads 2" Q4_K_M 2 512 1 "^prefill:" --reps 2
  done
done

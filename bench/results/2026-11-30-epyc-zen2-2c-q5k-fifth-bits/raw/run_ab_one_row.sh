#!/bin/sh
# Base (d0fb4d7) against the one-row unit order, three alternating rounds: the K-quant linears at
# M = 1 from cache and from memory, the Q4_K_M, Q5_K_M and Q6_K files' decode at 1 and 2 threads
# (raw/ab-one-row-3-rounds.txt).
. "$(dirname "$0")/ab_lib.sh"
for round in 1 2 3; do
  for build in base new; do
    linears $build "round $round $build linears one-copy M=1" --one-copy --m 1 --kinds q4k,q5k,q6k --ops o,up
    linears $build "round $round $build linears from memory M=1" --m 1 --kinds q4k,q5k,q6k --ops o,up
    for f in Q4_K_M Q5_K_M Q6_K; do
      for th in 1 2; do model $build "round $round $build $f decode threads $th" $f $th 16 48 "^decode:|decode at"; done
    done
  done
done

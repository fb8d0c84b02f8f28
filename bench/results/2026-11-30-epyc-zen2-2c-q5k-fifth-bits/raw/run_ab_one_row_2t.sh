#!/bin/sh
# Three more alternating rounds of the two-thread decodes, base (d0fb4d7) against the one-row
# unit order (raw/ab-one-row-2-threads-3-rounds.txt printed each as one line: "== ... : N tokens/s").
. "$(dirname "$0")/ab_lib.sh"
for round in 1 2 3; do
  for f in Q4_K_M Q5_K_M Q6_K; do
    for build in base new; do model $build "round $round $build $f decode threads 2" $f 2 16 48 "^decode:"; done
  done
done

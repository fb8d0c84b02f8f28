#!/bin/sh
# run_ab.sh [KIND FILE]: base against this change, three alternating rounds: the KIND linears
# (default q5k) at M = 1 from cache (--one-copy) and from memory, and at M = 64; FILE's decode
# (default Q5_K_M) at 1 and 2 threads and its prefill-512 at 2 threads. The first commit's runs
# (raw/ab-3-rounds.txt, base ad1fc79) used the defaults; the Q6_K trial's
# (raw/trial-q6k-top-bits.txt, base d0fb4d7) used `run_ab.sh q6k Q6_K`.
. "$(dirname "$0")/ab_lib.sh"
kind=${1:-q5k}
file=${2:-Q5_K_M}
for round in 1 2 3; do
  for build in base new; do
    linears $build "round $round $build linears one-copy M=1" --one-copy --m 1 --kinds "$kind" --ops o,up,down
    linears $build "round $round $build linears from memory M=1, M=64" --m 1,64 --kinds "$kind" --ops o,up,down
    for th in 1 2; do
      model $build "round $round $build decode threads $th" "$file" $th 16 48 "^decode:|decode at"
    done
    model $build "round $round $build prefill-512 threads 2" "$file" 2 512 1 "^prefill:" --reps 2
  done
done

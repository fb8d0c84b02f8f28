#!/bin/sh
# Two more alternating rounds of the two-thread decodes (base d0fb4d7 against the one-row unit order).
for round in 1 2 3; do
  for f in Q4_K_M Q5_K_M Q6_K; do
    for build in base new; do
      if [ $build = base ]; then B=/tmp/base/build/bench; else B=/work/main/build-bench/bench; fi
      echo "== round $round $build $f decode threads 2: $($B/bench_model -m /work/models/tl-$f.gguf --prompt-len 16 --decode-tokens 48 --threads 2 2>&1 | grep -E '^decode:' | sed 's/.*steps: //; s/ (.*//')"
    done
  done
done

#!/bin/sh
# Alternates base (ce866bf: Q4_K quads, the old record layout; /tmp/base/build) and the block
# layout with every K-quant width as quads (build-bench): decode of the three K-quant files at 1
# and 2 threads, then the Q5_K and Q6_K linears at M = 1.
for round in 1 2 3; do
  for build in base new; do
    if [ $build = base ]; then B=/tmp/base/build/bench; else B=/work/main/build-bench/bench; fi
    for m in Q4_K_M Q5_K_M Q6_K; do
      for th in 1 2; do
        echo "== round $round $build $m decode threads $th"
        $B/bench_model -m /work/models/tl-$m.gguf --prompt-len 16 --decode-tokens 48 --threads $th 2>&1 | grep -E "^decode:|decode phases|roofline"
      done
    done
    echo "== round $round $build linears"
    $B/bench_linear_quant --quick --threads 1 --m 1 --kinds q5k,q6k --ops o,up,down 2>&1 | grep -E "^(o|up|down) |read bandwidth"
  done
done

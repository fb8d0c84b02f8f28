#!/bin/sh
# Alternates base (34bd398, /tmp/base/build) and this commit (build-bench): Q4_K_M decode at 1
# and 2 threads, then the Q4_K linears at M = 1.
for round in 1 2 3; do
  for build in base new; do
    if [ $build = base ]; then B=/tmp/base/build/bench; else B=/work/main/build-bench/bench; fi
    for th in 1 2; do
      echo "== round $round $build decode threads $th"
      $B/bench_model -m /work/models/tl-Q4_K_M.gguf --prompt-len 16 --decode-tokens 64 --threads $th 2>&1 | grep -E "^decode:|decode phases|roofline"
    done
    echo "== round $round $build linears"
    $B/bench_linear_quant --quick --threads 1 --m 1 --kinds q4k --ops o,up,down 2>&1 | grep -E "^(o|up|down) |read bandwidth"
  done
done

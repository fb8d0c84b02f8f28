#!/bin/sh
# base (d0fb4d7, /tmp/base/build) against the one-row unit order (/work/main/build-bench),
# alternating: K-quant linears at M = 1 from cache and from memory, M = 64 (its code is the
# same), decode of the Q4_K_M, Q5_K_M and Q6_K files at 1 and 2 threads.
for round in 1 2 3; do
  for build in base new; do
    if [ $build = base ]; then B=/tmp/base/build/bench; else B=/work/main/build-bench/bench; fi
    echo "== round $round $build linears one-copy M=1"
    $B/bench_linear_quant --quick --one-copy --threads 1 --m 1 --kinds q4k,q5k,q6k --ops o,up 2>&1 | grep -E "^(o|up|down) "
    echo "== round $round $build linears from memory M=1"
    $B/bench_linear_quant --quick --threads 1 --m 1 --kinds q4k,q5k,q6k --ops o,up 2>&1 | grep -E "^(o|up|down) "
    for f in Q4_K_M Q5_K_M Q6_K; do
      for th in 1 2; do
        echo "== round $round $build $f decode threads $th"
        $B/bench_model -m /work/models/tl-$f.gguf --prompt-len 16 --decode-tokens 48 --threads $th 2>&1 | grep -E "^decode:|decode at"
      done
    done
  done
done

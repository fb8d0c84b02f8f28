#!/bin/sh
# base (d0fb4d7, /tmp/base/build) against this change (/work/main/build-bench), alternating:
# Q6_K linears at M = 1 from cache (--one-copy) and from memory, at M = 64; the Q6_K_M file's
# decode at 1 and 2 threads and its prefill-512 at 2 threads.
for round in 1 2 3; do
  for build in base new; do
    if [ $build = base ]; then B=/tmp/base/build/bench; else B=/work/main/build-bench/bench; fi
    echo "== round $round $build linears one-copy M=1"
    $B/bench_linear_quant --quick --one-copy --threads 1 --m 1 --kinds q6k --ops o,up,down 2>&1 | grep -E "^(o|up|down) "
    echo "== round $round $build linears from memory M=1, M=64"
    $B/bench_linear_quant --quick --threads 1 --m 1,64 --kinds q6k --ops o,up,down 2>&1 | grep -E "^(o|up|down) "
    for th in 1 2; do
      echo "== round $round $build decode threads $th"
      $B/bench_model -m /work/models/tl-Q6_K.gguf --prompt-len 16 --decode-tokens 48 --threads $th 2>&1 | grep -E "^decode:|decode at"
    done
    echo "== round $round $build prefill-512 threads 2"
    $B/bench_model -m /work/models/tl-Q6_K.gguf --prompt-len 512 --decode-tokens 1 --reps 2 --threads 2 2>&1 | grep -E "^prefill:"
  done
done

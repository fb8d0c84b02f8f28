#!/bin/bash
# slabserve (this session's kernels) against llama.cpp 0c1e570 (GGML_NATIVE), Zen 2, 1 and 2
# threads, one pass each of Q4_K_M, Q4_0 and Q8_0; then served Q4_K_M (128 in / 64 out), one round.
#   LLAMA=TREE/build-native/bin OUT=DIR bench/results/2026-11-30-epyc-zen2-2c-scaling-5/run.sh
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
L=${LLAMA:-/work/peers/llama_cpp_python-0.3.36/vendor/llama.cpp/build-native/bin}
M=${MODELS:-/work/models}
O=${OUT:-bench/results/2026-11-30-epyc-zen2-2c-scaling-5}
for q in Q4_K_M Q4_0 Q8_0; do
  python3 bench/scaling.py --model $M/tl-$q.gguf --threads 1,2 --decode 32 --bench-model build-bench/bench/bench_model \
    --llama-bench $L/llama-bench --out $O/scaling-$q > $O/scaling-$q.out 2>&1
done
SLAB=build-bench/slabserve LLAMA=$L/llama-server \
  bench/results/2026-11-29-epyc-zen2-2c-scaling/serve_ab.sh $M/tl-Q4_K_M.gguf $O/serve-Q4_K_M 1 "1 4 16" > $O/serve-Q4_K_M.out 2>&1
echo done > $O/DONE

#!/bin/bash
# Quantized prefill on the AMX-BF16 tiles (kernels/linear_quant_amx_bf16.cpp) on a 2-core Xeon
# with AMX: the linears' rows (+amx: INT8 tiles, +amxbf16: the new path), prefill-512 against the
# build before it (alternating), the thread scaling against llama.cpp 0c1e570, and Q4_K_M served
# against llama-server.
#   BASE_BM=OLD/bench_model LLAMA=TREE MODELS=DIR bench/results/2026-11-30-xeon-2c-quant-amx-bf16/run.sh
# BASE_BM: bench_model built at 88eb6c6 (the INT8 tiles from 16/32 rows). TREE and MODELS as in
# ../2026-11-30-xeon-2c-fp32-products/run.sh (build-noamx: llama.cpp's AMX build crashes on
# quantized files here).
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
L=${LLAMA:-/work/peers/llama_cpp_python-0.3.36/vendor/llama.cpp}
M=${MODELS:-/work/models}
BASE=${BASE_BM:?BASE_BM: bench_model of the build before}
O=${OUT:-bench/results/2026-11-30-xeon-2c-quant-amx-bf16}
mkdir -p $O/raw
lscpu > $O/raw/lscpu.txt
for q in Q4_K_M Q8_0 Q4_0; do
  for round in 1 2 3; do
    for b in base new; do
      bin=$BASE; [ $b = new ] && bin=build-bench/bench/bench_model
      taskset -c 0,1 $bin --model $M/tl-$q.gguf --threads 2 --prompt-len 512 --decode-tokens 4 --reps 3 \
        > $O/raw/prefill-$q-$b-$round.log 2>&1
    done
  done
done
taskset -c 0 build-bench/bench/bench_linear_quant --quick --threads 1 --m 32,64,128,512 --ops up,down \
  --kinds bf16,w8g32,w4g32,q4k,q6k --cycle-x 1 > $O/raw/linear-quant.log 2>&1
for q in Q4_K_M Q8_0 Q4_0; do
  python3 bench/scaling.py --model $M/tl-$q.gguf --threads 1,2 --decode 32 --bench-model build-bench/bench/bench_model \
    --llama-bench $L/build-noamx/bin/llama-bench --out $O/scaling-$q > $O/scaling-$q.out 2>&1
done
SLAB=build-bench/slabserve LLAMA=$L/build-noamx/bin/llama-server \
  bench/results/2026-11-29-epyc-zen2-2c-scaling/serve_ab.sh $M/tl-Q4_K_M.gguf $O/serve-Q4_K_M 1 "1 4 16"

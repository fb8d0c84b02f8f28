#!/bin/bash
# AVX-512 BF16 linears on a 2-core Xeon (AVX-512 BF16, AMX): vdpbf16ps ("dot") against FP32
# products ("fma", LinearBlocking::fp32_products), alternating in one run; then the thread
# scaling of every weight type against llama.cpp 0c1e570.
#   LLAMA=TREE MODELS=DIR bench/results/2026-11-30-xeon-2c-fp32-products/run.sh
# TREE holds build-native (GGML_NATIVE: AVX-512 + AMX) and build-noamx (the same ISA flags less
# AMX: the native build's AMX matmul crashed on every quantized file here, SIGSEGV in
# ggml_backend_amx_mul_mat). MODELS holds tl-bf16.gguf (make_random_checkpoint.py --gguf) and
# tl-{Q4_K_M,Q8_0,Q4_0}.gguf made from it by llama-quantize.
set -u
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
L=${LLAMA:-/work/peers/llama_cpp_python-0.3.36/vendor/llama.cpp}
M=${MODELS:-/work/models}
O=${OUT:-bench/results/2026-11-30-xeon-2c-fp32-products}
mkdir -p $O/raw
lscpu > $O/raw/lscpu.txt
for round in 1 2; do
  for b in dot fma; do
    taskset -c 0 build-bench/bench/bench_linear_bf16 --quick --threads 1 --m 16,128,512 --model tinyllama \
      --cycle-x 1 --blocking products=$b > $O/raw/linear-$b-$round.log 2>&1
  done
done
for round in 1 2 3; do
  for b in dot fma; do
    taskset -c 0,1 build-bench/bench/bench_model --model $M/tl-bf16.gguf --threads 2 --prompt-len 512 \
      --decode-tokens 4 --reps 1 --no-amx --blocking products=$b > $O/raw/prefill-$b-$round.log 2>&1
  done
done
python3 bench/scaling.py --model $M/tl-bf16.gguf --threads 1,2 --decode 32 --bench-model build-bench/bench/bench_model \
  --llama-bench $L/build-native/bin/llama-bench --out $O/scaling-bf16 > $O/scaling-bf16.out 2>&1
for q in Q4_K_M Q8_0 Q4_0; do
  python3 bench/scaling.py --model $M/tl-$q.gguf --threads 1,2 --decode 32 --bench-model build-bench/bench/bench_model \
    --llama-bench $L/build-noamx/bin/llama-bench --out $O/scaling-$q > $O/scaling-$q.out 2>&1
done


#!/bin/bash
# Attention (kernels/attention.h) on the 2-core Zen 4: the kernel alone in its three prefill
# configurations, alternating, then prefill and deep-context decode of the whole model against
# llama.cpp (flash attention on and off) in the same run.
# Run from the repository root after a Release build in build-dev; llama.cpp from llama-cpp-python
# 0.3.36's vendored tree, the GGUF from bench/make_random_checkpoint.py --shape tinyllama plus
# llama.cpp's convert_hf_to_gguf.py (see ../2026-11-26-epyc-zen4-2c-scaling).
set -u
LLB=${LLB:-/tmp/slab-quant/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin}
# llama.cpp built with GGML_NATIVE=OFF GGML_AVX2=ON GGML_FMA=ON GGML_F16C=ON GGML_AVX512=OFF
LLB2=${LLB2:-/tmp/slab-quant/llama_cpp_python-0.3.36/vendor/llama.cpp/build-avx2/bin}
GGUF=${GGUF:-/tmp/slab-quant/tinyllama-random-bf16.gguf}
export LD_LIBRARY_PATH=$LLB
BA=build-dev/bench/bench_attention
BM=build-dev/bench/bench_model
lscpu | grep -E "Model name|CPU family|^Model:|Flags" | cut -c1-200
echo "== kernel: 512- and 2048-token prefill, one layer (us/call wall, cpu us, GFLOP/s, %peak)"
for round in 1 2 3 4; do
  echo "-- round $round (load $(cut -d' ' -f1 /proc/loadavg))"
  for cfg in "" "--no-lanes" "--no-lanes --split-p"; do
    $BA --only prefill --reps 5 $cfg 2>&1 | awk -v c="${cfg:-lanes, P rounded}" '$1==512||$1==2048{printf "%-26s %5d tokens: %9.1f us %9.1f cpu-us %7.1f GFLOP/s %5s\n", c, $1, $3, $4, $5, $6}'
  done
done
echo "== kernel, AVX2 kernels (--isa avx2): 512- and 2048-token prefill, one layer"
for round in 1 2 3; do
  echo "-- round $round (load $(cut -d' ' -f1 /proc/loadavg))"
  for cfg in "" "--no-lanes"; do
    $BA --isa avx2 --only prefill --reps 5 $cfg 2>&1 | awk -v c="avx2 ${cfg:-lanes}" '$1==512||$1==2048{printf "%-26s %5d tokens: %9.1f us %9.1f cpu-us %7.1f GFLOP/s %5s of FMA peak\n", c, $1, $3, $4, $5, $6}'
  done
done
echo "== kernel: decode steps (22 layers), P rounded"
$BA --only decode --reps 5 2>&1 | grep -A8 "^batch"
echo "== model: prefill tokens/s and decode after the prompt, slabserve vs llama.cpp"
for round in 1 2; do
  for n in 512 2048 4096; do
    s=$($BM -m $GGUF --prompt-len $n --decode-tokens 16 --reps 1 2>&1)
    echo "slabserve n=$n: $(echo "$s" | grep '^prefill:' | cut -c1-60) | $(echo "$s" | grep '^decode:' | cut -c1-60)"
    for fa in on off; do
      l=$($LLB/llama-bench -m $GGUF -t 2 -p $n -n 0 -r 1 -fa $fa 2>&1 | grep "pp$n" | awk -F'|' '{print $(NF-1)}')
      d=$($LLB/llama-bench -m $GGUF -t 2 -p 0 -n 16 -d $n -r 1 -fa $fa 2>&1 | grep "tg16" | awk -F'|' '{print $(NF-1)}')
      echo "llama.cpp -fa $fa n=$n: pp$n $l | tg16 at depth $n $d"
    done
  done
done
echo "== model, AVX2 kernels against llama.cpp's AVX2 build: prefill"
for round in 1 2; do
  for n in 512 4096; do
    s=$($BM -m $GGUF --kernels avx2 --prompt-len $n --decode-tokens 2 --reps 1 2>&1)
    echo "slabserve --kernels avx2 n=$n: $(echo "$s" | grep '^prefill:' | cut -c1-60)"
    l=$(LD_LIBRARY_PATH=$LLB2 $LLB2/llama-bench -m $GGUF -t 2 -p $n -n 0 -r 1 -fa on 2>&1 | grep "pp$n" | awk -F'|' '{print $(NF-1)}')
    echo "llama.cpp avx2 -fa on n=$n: pp$n $l"
  done
done

#!/bin/bash
# After the prefetch change: decode against llama-bench again, alternating, three rounds; one AVX2 round.
LLB=/tmp/slab-quant/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin
LLB2=/tmp/slab-quant/llama_cpp_python-0.3.36/vendor/llama.cpp/build-avx2/bin
BM=/work/main/build-dev/bench/bench_model
D=/tmp/slab-quant
uptime
for round in 1 2 3; do
  for f in Q4_K_M Q5_K_M Q4_0; do
    g=$D/tinyllama-random-$f.gguf
    l=$(LD_LIBRARY_PATH=$LLB taskset -c 0-1 $LLB/llama-bench -m $g -t 2 -p 0 -n 64 -r 2 2>&1 | grep tg64 | awk -F'|' '{print $(NF-1)}')
    s=$($BM -m $g --prompt-len 16 --decode-tokens 64 --batch 1 --reps 1 2>&1 | grep -E "^decode:|^roofline" | sed -E 's/.*64 steps: ([0-9.]+) tokens.*/\1/; s/.*read bandwidth ([0-9.]+) GB.*/bw \1/' | tr '\n' ' ')
    echo "round $round $f | llama tg64 $l | slab $s | load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
echo "## AVX2: llama.cpp build-avx2 and bench_model --kernels avx2"
for f in Q4_K_M Q5_K_M; do
  g=$D/tinyllama-random-$f.gguf
  l=$(LD_LIBRARY_PATH=$LLB2 taskset -c 0-1 $LLB2/llama-bench -m $g -t 2 -p 0 -n 64 -r 2 2>&1 | grep tg64 | awk -F'|' '{print $(NF-1)}')
  s=$($BM -m $g --kernels avx2 --prompt-len 16 --decode-tokens 64 --batch 1 --reps 1 2>&1 | grep -E "^decode:|^roofline" | sed -E 's/.*64 steps: ([0-9.]+) tokens.*/\1/; s/.*read bandwidth ([0-9.]+) GB.*/bw \1/' | tr '\n' ' ')
  echo "avx2 $f | llama tg64 $l | slab $s | load $(cut -d' ' -f1 /proc/loadavg)"
done
uptime

#!/bin/bash
# Q4_K_M decode only, five alternating rounds (final tree), for the ratio at equal bandwidth phase.
LLB=/tmp/slab-quant/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin
BM=/work/main/build-dev/bench/bench_model
g=/tmp/slab-quant/tinyllama-random-Q4_K_M.gguf
uptime
for round in 1 2 3 4 5; do
  l=$(LD_LIBRARY_PATH=$LLB taskset -c 0-1 $LLB/llama-bench -m $g -t 2 -p 0 -n 64 -r 2 2>&1 | grep tg64 | awk -F'|' '{print $(NF-1)}')
  s=$($BM -m $g --prompt-len 16 --decode-tokens 64 --batch 1 --reps 1 2>&1 | grep -E "^decode:|^roofline" | sed -E 's/.*64 steps: ([0-9.]+) tokens.*/\1/; s/.*read bandwidth ([0-9.]+) GB.*/bw \1/' | tr '\n' ' ')
  echo "round $round Q4_K_M | llama tg64 $l | slab $s | load $(cut -d' ' -f1 /proc/loadavg)"
done

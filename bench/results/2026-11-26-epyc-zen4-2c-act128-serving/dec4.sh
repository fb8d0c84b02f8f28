#!/bin/bash
# batch-1 decode: slabserve load-time INT4/INT8 modes vs llama-bench on llama.cpp's files, alternating
LLB=/tmp/slab-quant/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin
export LD_LIBRARY_PATH=$LLB
BM=/work/main/build-dev/bench/bench_model
HF=/tmp/slab-quant/tinyllama-random
for round in 1 2 3; do
  echo "== round $round (load $(cut -d' ' -f1 /proc/loadavg))"
  for t in Q4_K_M Q4_0 Q8_0; do
    l=$(taskset -c 0-1 $LLB/llama-bench -m /tmp/slab-quant/tinyllama-random-$t.gguf -t 2 -p 0 -n 64 -r 2 2>&1 | grep tg64 | awk -F'|' '{print $(NF-1)}')
    echo "llama.cpp $t tg64: $l"
  done
  for q in "w4g128 --quantize-lm-head" "w4 --quantize-lm-head" "w8 --quantize-lm-head"; do
    out=$($BM -m $HF --prompt-len 16 --decode-tokens 64 --batch 1 --reps 1 --quantization $q 2>&1)
    echo "slabserve $q: $(echo "$out" | grep '^decode:' | cut -c1-70) | $(echo "$out" | grep '^roofline' | cut -c1-120)"
  done
done

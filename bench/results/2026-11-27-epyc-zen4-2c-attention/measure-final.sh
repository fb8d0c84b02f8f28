#!/bin/bash
# After the AVX-512 vectors-in-lanes block was removed (see README): the kernel's prefill with
# P rounded against P split, and the whole model's prefill against llama.cpp (-fa on), the code
# main runs. Same setup as measure.sh.
set -u
LLB=${LLB:-/tmp/slab-quant/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin}
GGUF=${GGUF:-/tmp/slab-quant/tinyllama-random-bf16.gguf}
export LD_LIBRARY_PATH=$LLB
BA=build-dev/bench/bench_attention
BM=build-dev/bench/bench_model
echo "== kernel: 512- and 2048-token prefill, one layer"
for round in 1 2 3; do
  echo "-- round $round (load $(cut -d' ' -f1 /proc/loadavg))"
  for cfg in "" "--split-p"; do
    $BA --only prefill --reps 5 $cfg 2>&1 | awk -v c="${cfg:-P rounded}" '$1==512||$1==2048{printf "%-12s %5d tokens: %9.1f us %9.1f cpu-us %7.1f GFLOP/s %5s\n", c, $1, $3, $4, $5, $6}'
  done
done
echo "== model: prefill tokens/s, slabserve vs llama.cpp -fa on"
for round in 1 2; do
  for n in 512 2048 4096; do
    s=$($BM -m $GGUF --prompt-len $n --decode-tokens 2 --reps 1 2>&1)
    echo "slabserve n=$n: $(echo "$s" | grep '^prefill:' | cut -c1-60)"
    l=$($LLB/llama-bench -m $GGUF -t 2 -p $n -n 0 -r 1 -fa on 2>&1 | grep "pp$n" | awk -F'|' '{print $(NF-1)}')
    echo "llama.cpp -fa on n=$n: pp$n $l"
  done
done

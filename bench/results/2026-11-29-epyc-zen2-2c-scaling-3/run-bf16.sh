#!/bin/bash
# BF16 at 1 and 2 threads, two passes (c42db33: the kernels of 6252ea0).
cd /work/main
L=/work/peers/llama_cpp_python-0.3.36/vendor/llama.cpp/build-native/bin
O=/work/runs/s3
for r in 1 2; do
  python3 bench/scaling.py --model /work/models/tl-bf16.gguf --threads 1,2 --decode 32 --bench-model build-bench/bench/bench_model --llama-bench $L/llama-bench --out $O/scaling-bf16-r$r > $O/scaling-bf16-r$r.out 2>&1
done
echo done > $O/DONE

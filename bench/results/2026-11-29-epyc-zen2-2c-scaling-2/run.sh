#!/bin/bash
# slabserve at 55f1c75 against llama.cpp 0c1e570 (GGML_NATIVE), Zen 2, 1 and 2 threads.
cd /work/main
L=/work/peers/llama_cpp_python-0.3.36/vendor/llama.cpp/build-native/bin
O=/work/runs/final2
for q in bf16 Q8_0 Q4_K_M; do
  python3 bench/scaling.py --model /work/models/tl-$q.gguf --threads 1,2 --decode 32 --bench-model build-bench/bench/bench_model --llama-bench $L/llama-bench --out $O/scaling-$q > $O/scaling-$q.out 2>&1
done
SLAB=build-bench/slabserve LLAMA=$L/llama-server bench/results/2026-11-29-epyc-zen2-2c-scaling/serve_ab.sh /work/models/tl-bf16.gguf $O/serve-bf16 2 "1 4 16" > $O/serve-bf16.out 2>&1
echo done > $O/DONE

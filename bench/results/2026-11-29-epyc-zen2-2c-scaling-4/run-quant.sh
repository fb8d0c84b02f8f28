#!/bin/bash
# slabserve at 1aa3d69 against llama.cpp 0c1e570 (GGML_NATIVE), Zen 2, 1 and 2 threads, two passes.
cd /work/main
L=/work/peers/llama_cpp_python-0.3.36/vendor/llama.cpp/build-native/bin
O=${OUT:-/work/runs/s5}
for r in 1 2; do
  for q in Q4_K_M; do
    python3 bench/scaling.py --model /work/models/tl-$q.gguf --threads 1,2 --decode 32 --bench-model build-bench/bench/bench_model --llama-bench $L/llama-bench --out $O/scaling-$q-r$r > $O/scaling-$q-r$r.out 2>&1
  done
done
echo done > $O/DONE

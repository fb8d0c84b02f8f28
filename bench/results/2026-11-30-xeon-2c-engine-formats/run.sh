#!/bin/sh
# The engine alone (bench_engine, no HTTP) on each weight format at c = 16 and 64, 128 in / 64
# out, two threads; then the same c = 64 load served over HTTP (bench_serve.py) on BF16.
# MODELS: a folder holding tl-bf16.gguf, tl-Q8_0.gguf, tl-Q4_K_M.gguf, tl-Q4_0.gguf.
set -u
grep -m1 "model name" /proc/cpuinfo
for m in bf16 Q8_0 Q4_K_M Q4_0; do
  echo "### bench_engine tl-$m.gguf"
  ./build-bench/bench/bench_engine --model "$MODELS/tl-$m.gguf" --threads 2 --concurrency 16,64 --prompt-len 128 \
    --output-len 64 --prefix-len 0
done
echo "### slabserve serve tl-bf16.gguf --threads 2, bench_serve.py c = 64"
./build-bench/slabserve serve --model "$MODELS/tl-bf16.gguf" --threads 2 --port 8011 > /tmp/engine-formats-serve.log 2>&1 &
pid=$!
until curl -sf localhost:8011/health > /dev/null; do sleep 0.5; done
python3 bench/bench_serve.py --base-url http://127.0.0.1:8011 --random-input-len 128 --random-output-len 64 \
  --num-prompts 64 --max-concurrency 64 --label c64-2t
kill "$pid"; wait "$pid"

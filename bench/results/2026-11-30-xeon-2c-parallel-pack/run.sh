#!/bin/sh
# Load time of `slabserve serve` ("loaded in X s" on its log) with the checkpoint packed on one
# thread (--threads 1) and on two (--threads 2), alternating, in one build. MODELS: a folder with
# tl-bf16.gguf and tl-Q4_K_M.gguf (random TinyLlama-shaped GGUFs).
set -u
. "$(dirname "$0")/load.sh"
for r in 1 2 3 4; do
  for t in 1 2; do load $r --model "$MODELS/tl-bf16.gguf" --threads $t; done
done
for r in 1 2 3; do
  for t in 1 2; do load $r --model "$MODELS/tl-bf16.gguf" --quantization w4 --threads $t; done
done
for r in 1 2; do
  for t in 1 2; do load $r --model "$MODELS/tl-Q4_K_M.gguf" --threads $t; done
done
